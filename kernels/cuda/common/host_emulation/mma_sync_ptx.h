// Host emulation of the PTX that kernels/cuda/10_mma_sync.cu uses (mma.sync, ldmatrix, cp.async),
// for the CPU tests (tests/test_hopper_kernels.py). Included at the end of that file, after the
// declarations its kernel code calls, when GEMMLAB_HOST_EMULATION is defined. Stage 14 (through
// decode_ptx.h) also takes the e4m3 m16n8k32 MMA and the warp shuffles from here.
#pragma once
// ---- host emulation of the PTX above (tests/test_hopper_kernels.py) ----------------------------------
// Warp-collective instructions exchange operands through a per-warp table, one __syncwarp() each:
// lanes write, sync, read. The table is double-buffered (consecutive collectives alternate), so no
// second sync is needed before the next write: a lane reaches collective i only after every lane of
// its warp passed collective i-1's sync, which each did after reading collective i-2's buffer.
// cp.async copies are queued per thread and land when cp.async.wait_group retires their group (the
// latest moment the hardware allows), so a read of a k-tile the thread has not waited for sees the
// NaN the emulation fills shared memory with; -DGEMMLAB_EMU_EAGER_COPIES=1 lands them at issue.
#if defined(GEMMLAB_HOST_EMULATION)
#include <cuda_fp8.h>  // the host stand-in: e4m3 decoding for the k32 MMA
#ifndef GEMMLAB_EMU_EAGER_COPIES
#define GEMMLAB_EMU_EAGER_COPIES 0
#endif
namespace {
namespace emu {
inline int lane() { return static_cast<int>(gemm_host::linear_tid() % 32); }
inline int next_buffer() {  // which of the two tables this thread's next collective uses
  static int collectives[gemm_host::kMaxThreads];
  return collectives[gemm_host::linear_tid()]++ & 1;
}
inline uint32_t* published(int buffer, int lane) {  // six words per lane, one table per warp (<= 32 warps)
  static uint32_t table[2][32][32][6];
  return table[buffer][gemm_host::linear_tid() / 32][lane];
}
inline uint16_t smem_half(uint32_t addr) {
  uint16_t v;
  std::memcpy(&v, gemm_host::dynamic_smem + addr, 2);
  return v;
}
template <class T>
inline float to_float(uint16_t bits) {
  T x;
  std::memcpy(&x, &bits, 2);
  if constexpr (std::is_same<T, __half>::value)
    return __half2float(x);
  else
    return __bfloat162float(x);
}
struct Copy {
  unsigned char* dst;
  const void* src;
  int bytes;
};
inline void land(const Copy& c) {
  if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
  std::memset(c.dst + c.bytes, 0, 16 - c.bytes);
}
inline std::vector<Copy>& open_group() {  // per thread
  static std::vector<Copy> group[gemm_host::kMaxThreads];
  return group[gemm_host::linear_tid()];
}
inline std::deque<std::vector<Copy>>& committed() {
  static std::deque<std::vector<Copy>> groups[gemm_host::kMaxThreads];
  return groups[gemm_host::linear_tid()];
}
template <bool kTrans>
inline void ldmatrix(uint32_t (&r)[4], uint32_t addr) {
  if (addr % 16) gemm_host::fail("ldmatrix row address not 16-byte aligned", gemm_host::dynamic_smem + addr);
  const int l = lane(), t = next_buffer();
  published(t, l)[0] = addr;
  __syncwarp();
  const int g = l / 4, c = l % 4;
  for (int q = 0; q < 4; ++q) {
    uint16_t lo, hi;
    if (!kTrans) {  // thread l holds row l/4, elements 2(l%4) and 2(l%4)+1 of matrix q
      lo = smem_half(published(t, 8 * q + g)[0] + 4 * c);
      hi = smem_half(published(t, 8 * q + g)[0] + 4 * c + 2);
    } else {  // ... of the transposed matrix: rows 2(l%4), 2(l%4)+1, element l/4
      lo = smem_half(published(t, 8 * q + 2 * c)[0] + 2 * g);
      hi = smem_half(published(t, 8 * q + 2 * c + 1)[0] + 2 * g);
    }
    r[q] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
}
}  // namespace emu

uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - gemm_host::dynamic_smem);
}
void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  if (dst % 16 || (src_bytes && reinterpret_cast<uintptr_t>(src) % 16))
    gemm_host::fail("cp.async with a misaligned address", gemm_host::dynamic_smem + dst);
  const emu::Copy c{gemm_host::dynamic_smem + dst, src, src_bytes};
  if (GEMMLAB_EMU_EAGER_COPIES)
    emu::land(c);
  else
    emu::open_group().push_back(c);
}
void cp_async_commit() {
  emu::committed().push_back(std::move(emu::open_group()));
  emu::open_group().clear();
}
template <int Pending>
void cp_async_wait() {
  while (emu::committed().size() > static_cast<size_t>(Pending)) {
    for (const emu::Copy& c : emu::committed().front()) emu::land(c);
    emu::committed().pop_front();
  }
}
void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix<false>(r, addr); }
void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix<true>(r, addr); }

// A fragment: a[(row/8) + 2*(k/8)] of lane (row%8)*4 + (k%8)/2, half k%2. B: b[k/8] of lane
// n*4 + (k%8)/2, half k%2. D: d[2*(row/8) + col%2] of lane (row%8)*4 + (col%8)/2.
template <class T>
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int l = emu::lane(), t = emu::next_buffer();
  uint32_t* mine = emu::published(t, l);
  for (int q = 0; q < 4; ++q) mine[q] = a[q];
  mine[4] = b0;
  mine[5] = b1;
  __syncwarp();
  auto half_of = [](uint32_t w, int k) { return static_cast<uint16_t>(w >> (16 * (k % 2))); };
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int row = l / 4 + 8 * (e / 2), col = 2 * (l % 4) + e % 2;
    float s = d[e];
    for (int k = 0; k < 16; ++k) {
      const float x = emu::to_float<T>(half_of(emu::published(t, (row % 8) * 4 + (k % 8) / 2)[row / 8 + 2 * (k / 8)], k));
      const float y = emu::to_float<T>(half_of(emu::published(t, col * 4 + (k % 8) / 2)[4 + k / 8], k));
      s += x * y;
    }
    out[e] = s;
  }
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// e4m3 m16n8k32 (stage 14's fp8 MMA): A fragment byte k%4 of a[(row/8) + 2*(k/16)] of lane
// (row%8)*4 + (k%16)/4; B: byte k%4 of b[k/16] of lane n*4 + (k%16)/4; D as m16n8k16's.
void mma_m16n8k32_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int l = emu::lane(), t = emu::next_buffer();
  uint32_t* mine = emu::published(t, l);
  for (int q = 0; q < 4; ++q) mine[q] = a[q];
  mine[4] = b0;
  mine[5] = b1;
  __syncwarp();
  auto byte_of = [](uint32_t w, int k) { return static_cast<uint8_t>(w >> (8 * (k % 4))); };
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int row = l / 4 + 8 * (e / 2), col = 2 * (l % 4) + e % 2;
    float s = d[e];
    for (int k = 0; k < 32; ++k) {
      const float x = gemm_host_e4m3_to_float(byte_of(emu::published(t, (row % 8) * 4 + (k % 16) / 4)[row / 8 + 2 * (k / 16)], k));
      const float y = gemm_host_e4m3_to_float(byte_of(emu::published(t, col * 4 + (k % 16) / 4)[4 + k / 16], k));
      s += x * y;
    }
    out[e] = s;
  }
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// __shfl_xor_sync / __shfl_sync(..., 0) over the whole warp, through the same exchange table.
uint32_t shfl_bits(uint32_t v, int src_xor, int src_lane) {
  const int l = emu::lane(), t = emu::next_buffer();
  emu::published(t, l)[0] = v;
  __syncwarp();
  return emu::published(t, src_lane >= 0 ? src_lane : (l ^ src_xor))[0];
}

template <class T>
uint32_t pack2(float lo, float hi) {
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
void store_16(unsigned char* dst, const uint32_t (&w)[4]) { std::memcpy(dst, w, 16); }
}  // namespace
#endif
