// Thin wrappers over the Hopper (sm_90 / sm_90a) PTX the wgmma stages use: mbarriers, TMA (bulk
// tensor copies), wgmma descriptors and fences, setmaxnreg, clusters. One instruction per function,
// named after it, so the kernels read like the PTX ISA and each wrapper can be checked against it.
//
// Element types: TIN (A, B) and TOUT (C) come from the launcher as -D defines (__nv_bfloat16 or
// __half); the defaults let a file compile alone.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

#ifndef TIN
#define TIN __nv_bfloat16
#endif
#ifndef TOUT
#define TOUT TIN
#endif
// GEMMLAB_DEBUG=1: a barrier wait that spins for more than ~2^34 cycles (about 9 s) prints which
// block, thread, barrier and parity it was waiting on and traps, so a wrong byte count or phase
// ends the launch with an error (and a clue) instead of hanging the GPU.
#ifndef GEMMLAB_DEBUG
#define GEMMLAB_DEBUG 0
#endif
#if GEMMLAB_DEBUG
#include <cstdio>
#endif

#if defined(GEMMLAB_HOST_EMULATION)
// The CPU tests run the Hopper stages through the host emulation of everything below
// (common/host_emulation/hopper_emu.h, on the emulation build's include path).
#include "hopper_emu.h"
#else

// The kernel's dynamic shared memory (the host emulation points it at its own buffer).
#define HOPPER_DYNAMIC_SMEM(name) extern __shared__ unsigned char name[]
// A static shared array (the host emulation keeps one per block: a cluster's blocks run together there)
#define HOPPER_BLOCK_SHARED(type, name, count) __shared__ type name[count]

// The dynamic shared memory a kernel needs with its defines, readable by the launcher
// (gemmlab/backends/cuda_kernels.py) so that a YAML `smem_bytes` rule that gives less is refused
// before launch instead of corrupting memory. Same symbol as common/gemm_common.cuh declares.
#define HOPPER_DECLARE_DYNAMIC_SMEM(bytes) \
  extern "C" {                             \
  __device__ int gemmlab_dynamic_smem_bytes = (bytes); \
  }

namespace hopper {

// A CUtensorMap as the driver encodes it (cuTensorMapEncodeTiled): 128 opaque bytes, 64-byte aligned.
// The launcher (gemmlab/gpu/tma.py) passes a kernel built with MAP_PARAMS 1 each map by value (a
// __grid_constant__ parameter: HOPPER_MAPS_ABC_PARAMS below); else it copies the maps into device memory
// and passes their address (PTX allows .param, .const or .global tensor maps).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// the GPU's nanosecond clock (one clock for every SM: stamps of different warps and CTAs compare), and the SM
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned sm_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

// Two floats -> two 16-bit values in one 32-bit register (low half = first), rounded to nearest.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, __half>::value) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// ---------------------------------------------------------------------------------------------
// mbarrier (shared memory barrier with a transaction count; the TMA unit completes bytes on it)
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the other threads of the cluster and to the async proxy
// (TMA); follow with __syncthreads() or a cluster barrier.
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` more to come from the TMA unit in the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrive on the barrier at the same shared-memory offset in CTA `cta_rank` of this cluster. By default
// with the default semantics (release at CTA scope), as CUTLASS's PipelineTmaAsync releases a slot to
// its peers: the reads being released are wgmma's, already complete (wgmma.wait_group) when the thread
// arrives. ClusterScope = true: release at cluster scope, for which ptxas puts MEMBAR.ALL.CTA +
// MEMBAR.ALL.GPU + ERRBAR + CGAERRBAR before the arrive (a full memory fence per call); measured in
// stage 12 (MBAR_CLUSTER_SCOPE).
template <bool ClusterScope = false>
__device__ __forceinline__ void mbar_arrive_remote(uint64_t* bar, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(cta_rank));
  if constexpr (ClusterScope) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  } else {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  }
}

#if GEMMLAB_DEBUG
__device__ __forceinline__ void debug_check_timeout(long long start, uint32_t addr, uint32_t parity) {
  if (clock64() - start > (1ll << 34)) {
    printf("gemmlab: barrier wait timed out: block (%d,%d,%d) thread %d smem 0x%x parity %u\n", blockIdx.x,
           blockIdx.y, blockIdx.z, threadIdx.x, addr, parity);
    __trap();
  }
}
#endif

// Spin until the phase with parity `parity` has completed. A fresh barrier is in phase 0, so waiting
// for parity 1 returns at once (the "previous" phase counts as complete): producers start there.
// try_wait (unlike test_wait) lets the hardware suspend the thread for a while before it returns.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_u32(bar);
  uint32_t done;
#if GEMMLAB_DEBUG
  const long long start = clock64();
#endif
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
#if GEMMLAB_DEBUG
    if (!done) debug_check_timeout(start, addr, parity);
#endif
  } while (!done);
}

// The same with cluster-scope acquire (ptxas adds an L1 invalidate, CCTL.IVALL, after it). CUTLASS
// waits on barriers that peers arrive on with the plain (CTA-scope) mbar_wait.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_u32(bar);
  uint32_t done;
#if GEMMLAB_DEBUG
  const long long start = clock64();
#endif
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
#if GEMMLAB_DEBUG
    if (!done) debug_check_timeout(start, addr, parity);
#endif
  } while (!done);
}

// ---------------------------------------------------------------------------------------------
// TMA: bulk tensor copies described by a tensor map (box coordinates: innermost first)
// ---------------------------------------------------------------------------------------------
// The maps live in global memory, written before the launch by a host copy: order those writes
// before the tensor-map proxy reads them (once per thread that issues copies), and warm the cache.
__device__ __forceinline__ void tensormap_acquire(const TensorMap* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// A map passed as a __grid_constant__ kernel parameter: the driver wrote it with the launch, no proxy fence; only its
// prefetch into the copy engine's descriptor cache.
__device__ __forceinline__ void tensormap_prefetch(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// A kernel's maps made ready for the copy engine. MAP_PARAMS (a kernel's define; 0 when not given) 1: the maps are
// __grid_constant__ parameters (the launcher passes them by value, gemmlab/gpu/tma.py): tensormap_prefetch; 0: in a
// device buffer the host wrote: tensormap_acquire.
__device__ __forceinline__ void tensormap_ready(const TensorMap* map) {
#if defined(MAP_PARAMS) && MAP_PARAMS
  tensormap_prefetch(map);
#else
  tensormap_acquire(map);
#endif
}

// The 128-byte line at p brought into the L2 (no register written): a later atomic on it finds it there.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p) : "memory");
}

// Global -> shared, completing `bytes` on `bar` in this CTA.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const TensorMap* map, uint64_t* bar, int col,
                                            int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(smem_dst)),
      "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar))
      : "memory");
}

// L2 cache policies for the copies that take one (createpolicy; the hint is the whole access): evict_first for data
// read once (a decode's weights, stage 17), evict_last for data every CTA reads again (its activations)
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// tma_load_2d with an L2 cache policy (l2_evict_first, l2_evict_last)
__device__ __forceinline__ void tma_load_2d_hint(void* smem_dst, const TensorMap* map, uint64_t* bar, int col,
                                                 int row, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(smem_dst)),
      "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}

// Global -> shared of every CTA in `cta_mask` (same offsets), completing on each one's `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const TensorMap* map, uint64_t* bar,
                                                      int col, int row, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(smem_dst)),
      "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)), "h"(cta_mask)
      : "memory");
}

// tma_load_2d_multicast with an L2 cache policy
__device__ __forceinline__ void tma_load_2d_multicast_hint(void* smem_dst, const TensorMap* map, uint64_t* bar, int col,
                                                           int row, uint16_t cta_mask, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;" ::"r"(smem_u32(smem_dst)),
      "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)), "h"(cta_mask), "l"(policy)
      : "memory");
}

// Global -> shared without a tensor map (1D bulk copy): `bytes` (a multiple of 16, both addresses
// 16-byte aligned), completing them on `bar` in this CTA. Stage 14 fetches activation rows with it.
__device__ __forceinline__ void bulk_load_1d(void* smem_dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(smem_dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

// Global -> shared, 16 bytes, by the load/store unit (cp.async: no register round trip, not the TMA
// engine); both addresses 16-byte aligned. Stage 15's SCALE_SMEM 3 copies the scales with it.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(smem_dst)), "l"(src) : "memory");
}

// An arrival on `bar` once this thread's earlier cp.async copies have landed (.noinc: it counts against
// the count the barrier was initialised with).
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Shared -> global; the box parts outside the tensor are not written (partial tiles for free).
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* smem_src, int col, int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map),
               "r"(col), "r"(row), "r"(smem_u32(smem_src))
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait until the committed bulk stores have finished reading shared memory (the buffer is free).
__device__ __forceinline__ void bulk_wait_group_read0() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Wait until the committed bulk stores are complete (before the CTA exits).
__device__ __forceinline__ void bulk_wait_group0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Four 8x8 16-bit matrices -> shared memory (stmatrix .x4): lane l gives the row address of row
// l%8 of matrix l/8; register r[q] of lane l holds row l/4, columns 2(l%4), 2(l%4)+1 of matrix q
// (the mma/wgmma accumulator layout of 8 columns). Stage 12 writes the same instruction inline.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// Ordinary shared-memory writes (st.shared, stmatrix) -> visible to the async proxy (TMA, wgmma).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// wgmma: shared-memory matrix descriptors and the async group protocol
// ---------------------------------------------------------------------------------------------
// Descriptor of a 128B-swizzled operand tile (PTX ISA "Matrix Descriptor Format"):
//   bits  0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
//   49-51 base offset (0: every tile starts on a 1024-byte boundary), 62-63 swizzle (1 = 128B).
// K-major (A here): rows of 64 elements (128 B), 8-row swizzle atoms 1024 B apart -> SBO = 1024,
//   LBO unused (1). Stepping K by 16 inside the 128-byte row adds 32 B to the start address.
// MN-major (B here, N contiguous; CUTLASS canonical ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte
//   units): 64-element column chunks LBO apart, 8-row K groups SBO = 1024 apart. Stepping K by 16
//   adds 2 * 1024 B.
__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  desc |= 1ull << 62;
  return desc;
}

// Registers written by ordinary instructions (zeroing) -> safe for the next wgmma to read/write.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

// Keeps the compiler from moving accumulator reads/writes across the async wgmma window.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---------------------------------------------------------------------------------------------
// Partial sums in global memory (stage 12's stream-K): a counter per split tile, the partials read
// past L1 (another SM wrote them)
// ---------------------------------------------------------------------------------------------
// Release what this thread saw written before (the warpgroup's partial, ordered by a barrier), and
// acquire what the other part's threads wrote, in one atomic (CUTLASS's split-K semaphore).
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* p, int v) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ float4 ld_cg_f4(const float4* p) { return __ldcg(p); }
// Stage 17's FIXED_SUM: a part counts itself in without waiting for the count (a release reduction: no round trip),
// and the tile's fixed summer reads the count with an acquire load until every other part is in
__device__ __forceinline__ void red_add_release_gpu(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// A count in shared memory one warp writes and another reads (stage 17's DYN_PUB: a consumer warpgroup's pieces
// stored, the producer's to count): the writer releases what its warpgroup stored before (ordered by a barrier), the
// reader acquires it before its own release at GPU scope (the tile counter's atomic)
__device__ __forceinline__ void st_release_cta_shared(int* p, int v) {
  asm volatile("st.release.cta.shared::cta.s32 [%0], %1;" ::"r"(smem_u32(p)), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire_cta_shared(const int* p) {
  int v;
  asm volatile("ld.acquire.cta.shared::cta.s32 %0, [%1];" : "=r"(v) : "r"(smem_u32(p)) : "memory");
  return v;
}

// ---------------------------------------------------------------------------------------------
// Warp specialisation and clusters
// ---------------------------------------------------------------------------------------------
template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_count_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
// All threads of all CTAs of the cluster (not .aligned: callers may arrive from divergent roles).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// `v` as lane 0 of the warp has it, for a value every lane already agrees on (one per warpgroup, as a
// split's hand-over verdict): then ptxas knows it is warp-uniform (CUTLASS's canonical_warp_idx_sync), and a
// loop that branches on it keeps its counters in uniform registers (stage 15's split-K, session22: a
// `continue` on a value it took for per-thread put the ring's descriptor arithmetic in per-thread registers)
__device__ __forceinline__ bool warp_uniform(bool v) { return __shfl_sync(0xffffffffu, static_cast<int>(v), 0) != 0; }
__device__ __forceinline__ int warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// Named barrier among `threads` threads (ids 1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Arrive on a named barrier without waiting: the `threads` count both these arrivals and the waiters' bar.sync.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace hopper
#endif  // GEMMLAB_HOST_EMULATION

// A GEMM stage's three tensor maps (A, B, C), however the launcher passes them (gemmlab/gpu/tma.py): in the kernel's
// signature HOPPER_MAPS_ABC_PARAMS, at the top of its body HOPPER_MAPS_ABC, which names them map_a, map_b, map_c.
// MAP_PARAMS (a kernel's define; 0 when not given) 1: three __grid_constant__ parameters the driver writes with the
// launch, A's and B's prefetched into the descriptor cache by thread 0 at once (while the barriers are set up);
// 0: a device buffer holding them, whose address is the parameter `maps` (tensormap_ready fences them later).
#if defined(MAP_PARAMS) && MAP_PARAMS
#define HOPPER_MAPS_ABC_PARAMS                                                                                 \
  const __grid_constant__ hopper::TensorMap map_a_param, const __grid_constant__ hopper::TensorMap map_b_param, \
      const __grid_constant__ hopper::TensorMap map_c_param
#define HOPPER_MAPS_ABC                                                                \
  const hopper::TensorMap* map_a = &map_a_param;                                       \
  const hopper::TensorMap* map_b = &map_b_param;                                       \
  [[maybe_unused]] const hopper::TensorMap* map_c = &map_c_param; /* the TMA store's */ \
  if (threadIdx.x == 0) {                                                              \
    hopper::tensormap_prefetch(map_a);                                                 \
    hopper::tensormap_prefetch(map_b);                                                 \
  }
#else
#define HOPPER_MAPS_ABC_PARAMS const hopper::TensorMap* __restrict__ maps
#define HOPPER_MAPS_ABC                        \
  const hopper::TensorMap* map_a = maps + 0;   \
  const hopper::TensorMap* map_b = maps + 1;   \
  [[maybe_unused]] const hopper::TensorMap* map_c = maps + 2;
#endif

namespace hopper {
// A wgmma descriptor `bytes` further on in shared memory (the next k-step of a swizzled row, or the next N-major
// chunk): its start address field counts 16-byte units in its low 14 bits, and shared addresses stay below 256 KB,
// so the add never carries out of the field (DESC_STEP; on the device and in the host emulation)
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// The split-K / stream-K fixup's hand-over (stages 12 and 15; on the device and in the host emulation):
// this thread's FP32 accumulators stored to its float4s of the warpgroup's partial (`mine`: 128 x 16 bytes
// apart, coalesced), the warpgroup's stores ordered before thread 0's acq_rel arrival on `counter` by a
// named barrier (CUTLASS's split-K semaphore), that acquire before every thread's later reads by a second.
// Returns the arrivals before this one, the same in every thread of the warpgroup (`arrived`: its shared word).
template <int kAccum>
__device__ __forceinline__ int hand_over_partial(float4* mine, const float (&acc)[kAccum], int* counter,
                                                 int barrier_id, int local_tid, int* arrived) {
#pragma unroll
  for (int j = 0; j < kAccum / 4; ++j)
    mine[j * 128] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  named_barrier_sync(barrier_id, 128);  // every thread's partial before the release
  if (local_tid == 0) *arrived = atom_add_acq_rel_gpu(counter, 1);
  named_barrier_sync(barrier_id, 128);  // the acquire before every thread's reads
  return *arrived;
}

// A consumer warpgroup's TMA-store epilogue (stages 13 and 15; stage 12 writes the same inline): its 64 x (Boxes x 64)
// output, accumulator element i (the wgmma fragment layout: 8 a stmatrix.x4) as `value(i)` gives it, through the
// 128B-swizzled 64 x 64 staging boxes at `staging` (stmatrix: bank-conflict free) to one TMA store a box at
// (n0 + 64 b, m0), which clips at C's edges; RoundBoxes boxes a round, each round after the last store has read the
// buffer. `barrier_id`: the warpgroup's own named barrier.
template <int Boxes, int RoundBoxes, typename TOUT, typename Value>
__device__ __forceinline__ void store_boxes_tma(Value value, unsigned char* staging, const TensorMap* map_c, int n0,
                                                int m0, int barrier_id, int local_tid, int warp, int lane) {
  static_assert(RoundBoxes >= 1 && Boxes % RoundBoxes == 0, "whole rounds of boxes");
  constexpr int kBoxBytes = 64 * 64 * static_cast<int>(sizeof(TOUT));
#pragma unroll
  for (int r = 0; r < Boxes / RoundBoxes; ++r) {
    if (local_tid == 0) bulk_wait_group_read0();  // the last store has read the buffer
    named_barrier_sync(barrier_id, 128);
    const int row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;  // row this lane addresses
    const uint32_t staging_base = smem_u32(staging);
#pragma unroll
    for (int j2 = r * RoundBoxes * 4; j2 < (r + 1) * RoundBoxes * 4; ++j2) {
      const int col = 16 * j2 + (lane / 16) * 8;  // in the tile's box col / 64, the round's col / 64 - r x RoundBoxes
      const uint32_t addr =
          staging_base + (col / 64 - r * RoundBoxes) * kBoxBytes + row * 128 + ((((col % 64) / 8) ^ (row % 8)) * 16);
      stmatrix_x4(addr, pack2<TOUT>(value(8 * j2 + 0), value(8 * j2 + 1)), pack2<TOUT>(value(8 * j2 + 2), value(8 * j2 + 3)),
                  pack2<TOUT>(value(8 * j2 + 4), value(8 * j2 + 5)), pack2<TOUT>(value(8 * j2 + 6), value(8 * j2 + 7)));
    }
    fence_proxy_async_smem();  // stmatrix writes -> visible to the TMA engine
    named_barrier_sync(barrier_id, 128);
    if (local_tid == 0) {
#pragma unroll
      for (int b = 0; b < RoundBoxes; ++b) tma_store_2d(map_c, staging + b * kBoxBytes, n0 + 64 * (r * RoundBoxes + b), m0);
      bulk_commit_group();
    }
  }
}
}  // namespace hopper
