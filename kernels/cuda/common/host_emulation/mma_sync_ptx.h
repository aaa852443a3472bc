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
// The per-thread cp.async queues live in cp_async_emu.cpp (compiled once, linked into every
// emulator: their std::deque code was a quarter of what a stage-16 emulation build generated).
namespace gemm_host {
void emu_cp_async_16(uint32_t dst, const void* src, int src_bytes, bool eager);  // queued, or landed now
void emu_cp_async_commit();
void emu_cp_async_wait(size_t pending);  // lands the oldest groups until `pending` are left
}  // namespace gemm_host
namespace {
namespace emu {
inline int lane() { return static_cast<int>(gemm_host::linear_tid() % 32); }
inline int next_buffer() {  // which of the two tables this thread's next collective uses
  static int collectives[gemm_host::kMaxThreads];
  return collectives[gemm_host::linear_tid()]++ & 1;
}
inline uint32_t (*warp_table(int buffer))[6] {  // six words per lane, one table per warp (<= 32 warps)
  static uint32_t table[2][32][32][6];
  return table[buffer][gemm_host::linear_tid() / 32];
}
inline uint32_t* published(int buffer, int lane) { return warp_table(buffer)[lane]; }
inline uint16_t smem_half(uint32_t addr) {
  uint16_t v;
  std::memcpy(&v, gemm_host::dynamic_smem + addr, 2);
  return v;
}
inline const float* half_table() {  // all 65536 halves as floats (__half2float's, exact): one load each
  static const std::vector<float> table = [] {
    std::vector<float> v(65536);
    for (uint32_t i = 0; i < 65536; ++i) v[i] = __half2float(__half{static_cast<uint16_t>(i)});
    return v;
  }();
  return table.data();
}
// A 16-bit operand as a float: f16 through ``halves`` (half_table()), bf16 as the top half of a float
template <class T>
__attribute__((always_inline)) inline float to_float(uint16_t bits, const float* halves) {
  if constexpr (std::is_same<T, __half>::value) {
    return halves[bits];
  } else {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
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
  gemm_host::emu_cp_async_16(dst, src, src_bytes, GEMMLAB_EMU_EAGER_COPIES);
}
void cp_async_commit() { gemm_host::emu_cp_async_commit(); }
template <int Pending>
void cp_async_wait() {
  gemm_host::emu_cp_async_wait(static_cast<size_t>(Pending));
}
void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix<false>(r, addr); }
void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix<true>(r, addr); }

// A fragment: a[(row/8) + 2*(k/8)] of lane (row%8)*4 + (k%8)/2, half k%2. B: b[k/8] of lane
// n*4 + (k%8)/2, half k%2. D: d[2*(row/8) + col%2] of lane (row%8)*4 + (col%8)/2.
// Each lane decodes the 32 A and 32 B operands its four outputs read once (not once per product:
// the MMAs were 80% of a decode emulation's time), then sums in the same order as before.
// The MMAs read only the warp's exchange table and their own arrays, nothing of the kernel's (its loads
// and stores are checked where the kernel makes them), so AddressSanitizer is left out of them.
#define GEMMLAB_EMU_HOT __attribute__((no_sanitize_address))
template <class T>
GEMMLAB_EMU_HOT void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int l = emu::lane(), t = emu::next_buffer();
  uint32_t (*table)[6] = emu::warp_table(t);
  for (int q = 0; q < 4; ++q) table[l][q] = a[q];
  table[l][4] = b0;
  table[l][5] = b1;
  __syncwarp();
  const float* halves = std::is_same<T, __half>::value ? emu::half_table() : nullptr;
  float x[2][16], y[2][16];  // rows l/4 and l/4 + 8; columns 2(l%4) and 2(l%4) + 1
  for (int i = 0; i < 2; ++i) {
    const int row = l / 4 + 8 * i, col = 2 * (l % 4) + i;
    for (int k = 0; k < 16; ++k) {  // half k%2 of each word
      const uint32_t wa = table[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)];
      const uint32_t wb = table[col * 4 + (k % 8) / 2][4 + k / 8];
      x[i][k] = emu::to_float<T>(static_cast<uint16_t>(wa >> (16 * (k % 2))), halves);
      y[i][k] = emu::to_float<T>(static_cast<uint16_t>(wb >> (16 * (k % 2))), halves);
    }
  }
  for (int e = 0; e < 4; ++e) {
    const float* xr = x[e / 2];
    const float* yc = y[e % 2];
    float s = d[e];
    for (int k = 0; k < 16; ++k) s += xr[k] * yc[k];
    d[e] = s;
  }
}

// e4m3 m16n8k32 (stage 14's fp8 MMA): A fragment byte k%4 of a[(row/8) + 2*(k/16)] of lane
// (row%8)*4 + (k%16)/4; B: byte k%4 of b[k/16] of lane n*4 + (k%16)/4; D as m16n8k16's.
GEMMLAB_EMU_HOT void mma_m16n8k32_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int l = emu::lane(), t = emu::next_buffer();
  uint32_t (*table)[6] = emu::warp_table(t);
  for (int q = 0; q < 4; ++q) table[l][q] = a[q];
  table[l][4] = b0;
  table[l][5] = b1;
  __syncwarp();
  float x[2][32], y[2][32];
  for (int i = 0; i < 2; ++i) {
    const int row = l / 4 + 8 * i, col = 2 * (l % 4) + i;
    for (int k = 0; k < 32; ++k) {  // byte k%4 of each word
      const uint32_t wa = table[(row % 8) * 4 + (k % 16) / 4][row / 8 + 2 * (k / 16)];
      const uint32_t wb = table[col * 4 + (k % 16) / 4][4 + k / 16];
      x[i][k] = gemm_host_e4m3_to_float(static_cast<uint8_t>(wa >> (8 * (k % 4))));
      y[i][k] = gemm_host_e4m3_to_float(static_cast<uint8_t>(wb >> (8 * (k % 4))));
    }
  }
  for (int e = 0; e < 4; ++e) {
    const float* xr = x[e / 2];
    const float* yc = y[e % 2];
    float s = d[e];
    for (int k = 0; k < 32; ++k) s += xr[k] * yc[k];
    d[e] = s;
  }
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
