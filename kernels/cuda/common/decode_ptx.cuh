// Stages 14 and 16 (the decode GEMMs): their PTX wrappers, for the device; under
// GEMMLAB_HOST_EMULATION only the declarations (common/host_emulation/decode_ptx.h defines them on the
// host, included at the end of the stage's source). The including stage defines decode::U4 (four
// 32-bit words) and W_HINT (1: weight loads skip L1 and ask the L2 for the whole 256-byte line) first.
#pragma once
// ---- PTX wrappers (their host emulation: common/host_emulation/mma_sync_ptx.h, hopper_emu.h) --------
#if !defined(GEMMLAB_HOST_EMULATION)
// 16 weight bytes, streamed: not kept in L1, the L2 asked to fetch the whole 256-byte line (W_HINT);
// zeros when !pred (rows past the CTA's, k past K), and no memory access then.
__device__ __forceinline__ decode::U4 ldg_stream(const void* p, bool pred) {
  decode::U4 r;
#if W_HINT
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
      "@p ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p), "r"(static_cast<int>(pred)));
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
      "@p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p), "r"(static_cast<int>(pred)));
#endif
  return r;
}
// 16 activation bytes through L1 (X_SMEM 0: every warp of the CTA reads them).
__device__ __forceinline__ decode::U4 ldg_cached(const void* p, bool pred) {
  decode::U4 r;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
      "@p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p), "r"(static_cast<int>(pred)));
  return r;
}
__device__ __forceinline__ decode::U4 lds16(uint32_t addr) {
  decode::U4 r;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(addr));
  return r;
}
__device__ __forceinline__ uint32_t dynamic_smem_size() {
  uint32_t r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
// D += A B, A 16 x 16 bf16 (row), B 16 x 8 bf16 (col), fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// D += A B, A 16 x 32 e4m3 (row), B 32 x 8 e4m3 (col), fp32 accumulators (sm_89+).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// D += A B, A 16 x 16 f16 (row), B 16 x 8 f16 (col), fp32 accumulators (FP8_F16_MMA: e4m3 converted).
__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Two e4m3 (the low 16 bits, first in the low byte) -> f16x2 (first in the low half), exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(static_cast<unsigned short>(two)));
  return h;
}
// The low / high two e4m3 of a word -> f16x2, the halves taken as a register pair (mov.b32 {lo, hi}): ptxas
// reads the high half as F2FP's .H1 operand instead of shifting it down first (stage 16's CVT_H1)
__device__ __forceinline__ uint32_t e4m3x2_lo_to_f16x2(uint32_t four) {
  uint32_t h;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(h) : "r"(four));
  return h;
}
__device__ __forceinline__ uint32_t e4m3x2_hi_to_f16x2(uint32_t four) {
  uint32_t h;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(h) : "r"(four));
  return h;
}
__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
__device__ __forceinline__ int shfl_lane0(int v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ int shfl_idx(int v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }
// Two e4m3 (the low 16 bits) -> two floats, exactly (through f16x2).
__device__ __forceinline__ void e4m3x2_to_float2(uint32_t two, float& lo, float& hi) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(static_cast<unsigned short>(two)));
  const __half2 v = *reinterpret_cast<const __half2*>(&h);
  lo = __low2float(v);
  hi = __high2float(v);
}
__device__ __forceinline__ float bits_to_float(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ float4 ldcg_f4(const float4* p) { return __ldcg(p); }
// The split-K counter: release this warp's partial (ordered before by __syncwarp), acquire the others'.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* p, int v) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void st_f4(float4* p, float4 v) { *p = v; }
// 16 bytes global -> shared without a register round trip (stage 16's RING): L2 only (.cg), the L2 asked
// for the whole 256-byte line (W_HINT); src_bytes 0 fills the 16 bytes with zeros and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
#if W_HINT
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ void sts16(uint32_t addr, decode::U4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
#else
decode::U4 ldg_stream(const void* p, bool pred);
decode::U4 ldg_cached(const void* p, bool pred);
decode::U4 lds16(uint32_t addr);
uint32_t dynamic_smem_size();
void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1);
void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1);
void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1);
uint32_t e4m3x2_to_f16x2(uint32_t two);
uint32_t e4m3x2_lo_to_f16x2(uint32_t four);
uint32_t e4m3x2_hi_to_f16x2(uint32_t four);
float shfl_xor(float v, int mask);
int shfl_lane0(int v);
int shfl_idx(int v, int lane);
void e4m3x2_to_float2(uint32_t two, float& lo, float& hi);
float bits_to_float(uint32_t u);
float4 ldcg_f4(const float4* p);
int atomic_add_acq_rel_gpu(int* p, int v);
void st_f4(float4* p, float4 v);
namespace {  // mma_sync_ptx.h's emulation of cp.async (deferred to the wait) is in the unnamed namespace
void cp_async_16(uint32_t dst, const void* src, int src_bytes);
void cp_async_commit();
template <int Pending>
void cp_async_wait();
}  // namespace
void sts16(uint32_t addr, decode::U4 v);
#endif
