// Host emulation of the decode stages' PTX wrappers (kernels/cuda/common/decode_ptx.cuh), for the CPU
// tests (tests/test_decode_emulation.py, tests/test_decode_rows.py). Included at the end of that file when GEMMLAB_HOST_EMULATION is
// defined: the warp-collective parts (mma.sync bf16 and e4m3, shuffles) come from mma_sync_ptx.h;
// loads are 16-byte copies that check the alignment the hardware requires and read nothing when
// predicated off (AddressSanitizer sees any read past a matrix); the mbarriers and bulk copies are
// hopper_emu.h's.
#pragma once
#if defined(GEMMLAB_HOST_EMULATION)
#include <array>

#include "mma_sync_ptx.h"

inline decode::U4 emu_load16(const void* p, bool pred, const char* what) {
  decode::U4 r{0, 0, 0, 0};
  if (!pred) return r;
  if (reinterpret_cast<uintptr_t>(p) % 16) gemm_host::fail(what, p);
  std::memcpy(&r, p, 16);
  return r;
}
decode::U4 ldg_stream(const void* p, bool pred) { return emu_load16(p, pred, "16-byte weight load misaligned"); }
decode::U4 ldg_cached(const void* p, bool pred) { return emu_load16(p, pred, "16-byte activation load misaligned"); }
decode::U4 lds16(uint32_t addr) {
  return emu_load16(gemm_host::dynamic_smem + addr, true, "ld.shared.v4 misaligned");
}
uint32_t dynamic_smem_size() { return static_cast<uint32_t>(gemm_host::dynamic_smem_size); }
void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const uint32_t a[4] = {a0, a1, a2, a3};
  mma_m16n8k16<__nv_bfloat16>(d, a, b0, b1);
}
void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const uint32_t a[4] = {a0, a1, a2, a3};
  mma_m16n8k32_e4m3(d, a, b0, b1);
}
void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const uint32_t a[4] = {a0, a1, a2, a3};
  mma_m16n8k16<__half>(d, a, b0, b1);
}
uint32_t e4m3x2_to_f16x2(uint32_t two) {  // exact: every e4m3 value is an f16 value (a table of all 256)
  static const std::array<uint16_t, 256> f16 = [] {
    std::array<uint16_t, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = __float2half_rn(gemm_host_e4m3_to_float(static_cast<uint8_t>(i))).bits;
    return t;
  }();
  return static_cast<uint32_t>(f16[two & 0xFF]) | (static_cast<uint32_t>(f16[(two >> 8) & 0xFF]) << 16);
}
uint32_t e4m3x2_lo_to_f16x2(uint32_t four) { return e4m3x2_to_f16x2(four & 0xFFFFu); }
uint32_t e4m3x2_hi_to_f16x2(uint32_t four) { return e4m3x2_to_f16x2(four >> 16); }
float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float shfl_xor(float v, int mask) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return bits_to_float(shfl_bits(u, mask, -1));
}
int shfl_lane0(int v) { return static_cast<int>(shfl_bits(static_cast<uint32_t>(v), 0, 0)); }
int shfl_idx(int v, int lane) { return static_cast<int>(shfl_bits(static_cast<uint32_t>(v), 0, lane)); }
void e4m3x2_to_float2(uint32_t two, float& lo, float& hi) {
  lo = gemm_host_e4m3_to_float(static_cast<uint8_t>(two));
  hi = gemm_host_e4m3_to_float(static_cast<uint8_t>(two >> 8));
}
float4 ldcg_f4(const float4* p) { return *p; }
int atomic_add_acq_rel_gpu(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
void st_f4(float4* p, float4 v) { *p = v; }
void sts16(uint32_t addr, decode::U4 v) {
  if (addr % 16 || addr + 16 > gemm_host::dynamic_smem_size) gemm_host::fail("st.shared.v4 misaligned or past the dynamic shared memory", gemm_host::dynamic_smem + addr);
  std::memcpy(gemm_host::dynamic_smem + addr, &v, 16);
}
#endif
