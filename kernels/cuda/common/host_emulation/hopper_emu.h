// Host emulation of kernels/cuda/hopper/{ptx.cuh,wgmma.cuh} (mbarriers, TMA, wgmma, stmatrix,
// named barriers), so the CPU tests (tests/test_hopper_kernels.py) run a Hopper stage's own code:
// its tile schedule, descriptors, swizzles, pipeline protocol, epilogue and scaling, checked against
// FP64 with no GPU. ptx.cuh and wgmma.cuh include this file instead of their PTX when
// GEMMLAB_HOST_EMULATION is defined (launch.cpp's build, with cuda_shim.h force-included). The
// functions declared without a body here are defined in hopper_emu.cpp, compiled once and linked in.
//
// What it models, and how strictly:
// * mbarrier: a table of (expected arrivals, pending arrivals, transaction bytes, phase) per shared
//   address; a phase completes when no arrival and no byte is pending. try_wait.parity as the PTX
//   ISA says (waiting on the parity of a completed phase returns at once). A wait that lasts more
//   than GEMMLAB_EMU_WAIT_S seconds (default 60) aborts, naming the barrier: a deadlock fails, not hangs.
//   A waiting thread yields to the block's others (cuda_shim.h: the threads are fibers); where none
//   of them can go on, the driver aborts at once (a deadlock).
// * TMA: 1D bulk copies (cp.async.bulk) are a memcpy that completes its bytes on the barrier;
//   tensor maps are the driver's (gemm_host::emu_tensor_maps, from the launcher's resolved
//   specs); a load copies the box (zeros outside the matrix), applies the 128-byte swizzle on the
//   shared address bits as the hardware does, and completes the box's full byte count on the
//   barrier; a store writes the box back, clipped at the matrix. Both are synchronous.
// * wgmma: deferred, like cp.async in mma_sync_ptx.h: an instruction is queued and only executed
//   (reading shared memory then) when wgmma.wait_group retires its group, the latest moment the
//   hardware allows, so a slot released before its wgmma group is retired shows up as wrong data.
//   Each thread computes its own accumulator fragment (row 16w + l/4 + 8(r/2), column 8j + 2(l%4) +
//   r%2 of d[4j + r]) from the operands the descriptors address (K-major or MN-major, 128B swizzle).
//   wgmma.wait_group is also where the warpgroup's threads meet (it is .sync.aligned).
// * setmaxnreg, fences, tensormap acquire, bulk-group waits: no-ops.
// * Clusters along x (the driver's GEMMLAB_EMU_CLUSTER): the cluster's blocks run together; a multicast TMA load
//   writes its box into every masked block's shared memory at the same address and completes its bytes on each one's
//   barrier there, a remote mbarrier arrival arrives on the addressed block's, cluster_sync meets all their threads.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

using std::max;
using std::min;

#define HOPPER_DECLARE_DYNAMIC_SMEM(bytes) \
  extern "C" {                             \
  int gemmlab_dynamic_smem_bytes = (bytes); \
  }
#define HOPPER_DYNAMIC_SMEM(name) unsigned char* name = gemm_host::dynamic_smem
// a static __shared__ array, one per block (the blocks of a cluster run together here)
#define HOPPER_BLOCK_SHARED(type, name, count) type* name = gemm_host::block_static<type>(__LINE__, (count))

namespace hopper {

// Emulation's own fields (the device's 128 bytes are opaque): see gemm_host::emu_tensor_maps.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];  // base, rows, cols, row stride B, box rows, box cols, elem B, swizzle B
};

namespace emu {
inline unsigned tid() { return gemm_host::linear_tid(); }
inline unsigned char* smem(uint32_t addr) { return gemm_host::dynamic_smem + addr; }
inline uint32_t swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

struct Bar {
  uint32_t expected = 0, pending = 0, phase = 0;
  int64_t tx = 0;
};
std::mutex& lock();
std::unordered_map<uint32_t, Bar>& bars();
Bar& bar_at(uint32_t addr);
void maybe_complete(Bar& b);  // with lock() held
double wait_limit_s();

// Warp-collective exchange (stmatrix): one row address per lane, one table per warp.
uint32_t* published(unsigned lane);

template <class T>
inline float to_float(const unsigned char* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  if constexpr (std::is_same<T, __nv_bfloat16>::value) return __bfloat162float(x);
  else if constexpr (std::is_same<T, __half>::value) return __half2float(x);
  else if constexpr (std::is_same<T, __nv_fp8_e4m3>::value) return gemm_host_e4m3_to_float(x.__x);
  else return gemm_host_e5m2_to_float(x.__x);
}

// Descriptor fields (ptx.cuh's make_desc_sw128 encoding).
struct Desc {
  uint32_t start, lbo, sbo;
};
inline Desc decode(uint64_t d) {
  if ((d >> 62) != 1) gemm_host::fail("wgmma descriptor without the 128B swizzle mode", nullptr);
  return {static_cast<uint32_t>(d & 0x3FFF) << 4, static_cast<uint32_t>((d >> 16) & 0x3FFF) << 4,
          static_cast<uint32_t>((d >> 32) & 0x3FFF) << 4};
}
// Element (mn, k) of a K-major operand: rows of 128 bytes, 8-row atoms SBO apart.
template <class T>
inline float k_major(const Desc& d, int mn, int k) {
  return to_float<T>(smem(swizzle128(d.start + (mn / 8) * d.sbo + (mn % 8) * 128 + k * sizeof(T))));
}
// Element (k, n) of an MN-major operand: 64-element column chunks LBO apart, 8-row K groups SBO apart.
template <class T>
inline float mn_major(const Desc& d, int k, int n) {
  constexpr int per_row = 128 / sizeof(T);
  return to_float<T>(smem(swizzle128(d.start + (n / per_row) * d.lbo + (k / 8) * d.sbo + (k % 8) * 128 +
                                     (n % per_row) * sizeof(T))));
}

// A thread's N/2 accumulators lie in two rows of A (16w + l/4 and 8 below) and N/4 columns of B: each
// of those operands is read from shared memory (swizzled, checked by AddressSanitizer) and decoded
// once, not once per product (a quarter of the reads); the sums run in the same order as before.
template <class T, int N, int KI>
inline void wgmma_now(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d, int trans_b) {
  const Desc a = decode(desc_a), b = decode(desc_b);
  const unsigned t = tid() % 128, w = t / 32, l = t % 32;
  float av[2][KI], bv[N / 4][KI];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < KI; ++k) av[h][k] = k_major<T>(a, 16 * w + l / 4 + 8 * h, k);
  for (int c = 0; c < N / 4; ++c) {
    const int col = 8 * (c / 2) + 2 * (l % 4) + c % 2;
    for (int k = 0; k < KI; ++k) bv[c][k] = trans_b ? mn_major<T>(b, k, col) : k_major<T>(b, col, k);
  }
  for (int i = 0; i < N / 2; ++i) {
    const int j = i / 4, r = i % 4;  // row 16w + l/4 + 8(r/2), column 8j + 2(l%4) + r%2
    const float* x = av[r / 2];
    const float* y = bv[2 * j + r % 2];
    float s = 0.0f;
    for (int k = 0; k < KI; ++k) s += x[k] * y[k];
    d[i] = scale_d ? d[i] + s : s;
  }
}
using Group = std::vector<std::function<void()>>;
Group& open_group();  // per thread
std::deque<Group>& committed();
void retire_groups(size_t pending);  // runs the oldest committed groups until `pending` are left
}  // namespace emu

inline unsigned long long globaltimer_ns() {  // the host's steady clock (TRACE builds)
  return static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
}
inline unsigned sm_id() { return blockIdx.x; }  // one block per SM, as the decode stages' grids are sized
inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - gemm_host::dynamic_smem);
}

template <class T>
inline uint32_t pack2(float lo, float hi) {
  T l, h;
  if constexpr (std::is_same<T, __half>::value) {
    l = __float2half_rn(lo);
    h = __float2half_rn(hi);
  } else {
    l = __float2bfloat16_rn(lo);
    h = __float2bfloat16_rn(hi);
  }
  return static_cast<uint32_t>(l.bits) | (static_cast<uint32_t>(h.bits) << 16);
}

// ---- mbarrier --------------------------------------------------------------------------------------
void mbar_init(uint64_t* bar, uint32_t arrivals);
inline void fence_mbar_init() {}
void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes);
void mbar_arrive(uint64_t* bar);
// a plain arrival on the same shared address in the cluster's block of rank cta_rank
void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank);
template <bool ClusterScope = false>
inline void mbar_arrive_remote(uint64_t* bar, uint32_t cta_rank) {
  mbar_arrive_cluster(bar, cta_rank);
}
void mbar_wait(uint64_t* bar, uint32_t parity);
inline void mbar_wait_cluster(uint64_t* bar, uint32_t parity) { mbar_wait(bar, parity); }

// ---- TMA ---------------------------------------------------------------------------------------------
inline void tensormap_acquire(const TensorMap*) {}
inline void tensormap_prefetch(const TensorMap*) {}
inline void tensormap_ready(const TensorMap*) {}
inline void prefetch_l2(const void*) {}  // where a line sits changes no value

void tma_load_2d(void* smem_dst, const TensorMap* map, uint64_t* bar, int col, int row);
// L2 cache policies change where data stays in the L2, not what a copy writes: the emulation's copies ignore them
inline uint64_t l2_evict_first() { return 1; }
inline uint64_t l2_evict_last() { return 2; }
inline void tma_load_2d_hint(void* smem_dst, const TensorMap* map, uint64_t* bar, int col, int row, uint64_t) {
  tma_load_2d(smem_dst, map, bar, col, row);
}
// 1D bulk copy: synchronous, its bytes completed on the barrier (the hardware's alignment rules checked).
void bulk_load_1d(void* smem_dst, const void* src, uint32_t bytes, uint64_t* bar);
// cp.async of 16 bytes lands at once here; its mbarrier arrival (after the thread's copies) is then a
// plain arrival: what the emulation checks is that the barrier counts it and that the slot was free
void cp_async_16(void* smem_dst, const void* src);
inline void cp_async_mbar_arrive_noinc(uint64_t* bar) { mbar_arrive(bar); }
void tma_load_2d_multicast(void* smem_dst, const TensorMap* map, uint64_t* bar, int col, int row, uint16_t mask);
inline void tma_load_2d_multicast_hint(void* smem_dst, const TensorMap* map, uint64_t* bar, int col, int row,
                                       uint16_t mask, uint64_t) {
  tma_load_2d_multicast(smem_dst, map, bar, col, row, mask);
}
void tma_store_2d(const TensorMap* map, const void* smem_src, int col, int row);
inline void bulk_commit_group() {}
inline void bulk_wait_group_read0() {}
inline void bulk_wait_group0() {}
inline void fence_proxy_async_smem() {}

// ---- stmatrix ------------------------------------------------------------------------------------------
void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3);

// ---- wgmma ---------------------------------------------------------------------------------------------
inline uint64_t make_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  desc |= 1ull << 62;
  return desc;
}
inline void wgmma_fence() {}
void wgmma_commit();
// wait_group is .sync.aligned: the warpgroup's 128 threads pass it together, and a retired group's
// shared-memory reads are done for all of them; the emulation's threads each retire their own
// fragment's share, then meet, so one thread cannot release a slot another still has to read.
void warpgroup_sync();
template <int Pending>
inline void wgmma_wait() {
  emu::retire_groups(static_cast<size_t>(Pending));
  warpgroup_sync();
}
template <int N>
inline void fence_accumulators(float (&)[N]) {}

template <int N, int TransB, class T>
inline void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(sizeof(T) == 2, "k16 wgmma takes 16-bit inputs");
  float* acc = d;
  emu::open_group().push_back([=] { emu::wgmma_now<T, N, 16>(acc, desc_a, desc_b, scale_d, TransB); });
}
template <int N, class T>
inline void wgmma_m64k32(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(sizeof(T) == 1, "k32 wgmma takes 8-bit inputs, both K-major");
  float* acc = d;
  emu::open_group().push_back([=] { emu::wgmma_now<T, N, 32>(acc, desc_a, desc_b, scale_d, 0); });
}

// ---- partial sums in global memory (stage 12's stream-K) ------------------------------------------------
// A real atomic; blocks run one after another, so the ordering it gives on the GPU is there anyway.
inline int atom_add_acq_rel_gpu(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
inline float4 ld_cg_f4(const float4* p) { return *p; }
inline void red_add_release_gpu(int* p, int v) { __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
inline int ld_acquire_gpu(const int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void st_release_cta_shared(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline int ld_acquire_cta_shared(const int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// ---- warp specialisation, clusters, named barriers -------------------------------------------------------
template <int Regs>
inline void setmaxnreg_inc() {}
template <int Regs>
inline void setmaxnreg_dec() {}
inline uint32_t cluster_cta_rank() { return gemm_host::cluster_rank(); }
inline uint32_t cluster_id_x() { return blockIdx.x / gemm_host::cluster_size; }
inline uint32_t cluster_count_x() { return gridDim.x / gemm_host::cluster_size; }
inline void cluster_sync() { gemm_host::cluster_sync(); }
void named_barrier_sync(int id, int threads);
// every lane already agrees on `v` (the device's shuffle from lane 0 only tells ptxas so)
inline bool warp_uniform(bool v) { return v; }
inline int warp_uniform(int v) { return v; }
void named_barrier_arrive(int id, int threads);

}  // namespace hopper

namespace gemm_host {
// The tensor maps of the launch, from GEMMLAB_EMU_MAPS ("A|B|C,rows,cols,row_stride_bytes,box_rows,
// box_cols,elem_bytes,swizzle_bytes" per map, ';' between maps, in the YAML's order): what
// gemmlab.gpu.tma.resolve makes of the variant's tensor_maps for the point.
const hopper::TensorMap* emu_tensor_maps(const void* a, const void* b, void* c);
// The scale arrays of a block-scaled FP8 launch (stage 15): scale_a (i = 0) and scale_b (i = 1), float32
// files named by GEMMLAB_EMU_SCALE_FILES ("a.bin;b.bin"), each read whole into a heap buffer of exactly
// its size, so that AddressSanitizer reports a read past either array.
const float* emu_scale_array(int i);
// scale_a (i = 0) and scale_b (i = 1) of an FP8 launch, from GEMMLAB_EMU_SCALES ("sa,sb"; default 1,1).
float emu_scale(int i);
}  // namespace gemm_host
