# Writes kernels/cuda/hopper/wgmma.cuh (the wgmma operand lists are long and mechanical).
# Run from the project root after changing it: python kernels/cuda/hopper/gen_wgmma.py
# 8..56: stage 17's (the decode GEMM's) token tiles, N = the tokens rounded up to 8
NS = [8, 16, 24, 32, 40, 48, 56, 64, 128, 160, 192, 256]
out = []
out.append('''// Written by gen_wgmma.py beside this file (do not edit by hand): wgmma.mma_async wrappers.
//
// wgmma_m64nNk16<TransB, T>(d, desc_a, desc_b, scale_d): D(64xN, fp32 regs) (+)= A(64x16) * B(16xN),
// A and B both from shared memory through 64-bit matrix descriptors (see hopper/ptx.cuh).
//   T       : __nv_bfloat16 or __half (selects .bf16 / .f16)
//   TransB  : 0 = B is K-major, 1 = B is N-major ("transposed"; allowed for 16-bit types only)
//   scale_d : 0 = D = A*B (ignore the old accumulators), 1 = D += A*B
// The accumulator fragment d[4*j + r] of thread t (warp w = t/32 of the warpgroup, lane l) holds
// row 16*w + l/4 + 8*(r/2), column 8*j + 2*(l%4) + (r%2): the mma.sync m16n8 C layout per 8 columns.
#pragma once
#if defined(GEMMLAB_HOST_EMULATION)
#include "hopper_emu.h"  // the CPU tests' emulation of these wrappers (common/host_emulation/)
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>\n#include <type_traits>
''')
for n in NS:
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    a, b, s, t = nreg, nreg + 1, nreg + 2, nreg + 3
    out.append(f'''
#define GEMMLAB_WGMMA_M64N{n}K16(TYPE)                                                       \\
  asm volatile(                                                                            \\
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"                                         \\
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE " "                       \\
      "{{{regs}}}, "                                                                      \\
      "%{a}, %{b}, p, 1, 1, 0, %{t};\\n}}\\n"                                                  \\
      : {cons}                                                                             \\
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n{n}k16(float (&d)[{nreg}], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {{
  if constexpr (std::is_same<T, __half>::value) {{
    GEMMLAB_WGMMA_M64N{n}K16("f16");
  }} else {{
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N{n}K16("bf16");
  }}
}}
#undef GEMMLAB_WGMMA_M64N{n}K16
''')
out.append('''
// Pick the wrapper by N at compile time (the tile's N is a define of the kernel).
template <int N, int TransB, class T>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert((N % 8 == 0 && N <= 64) || N == 128 || N == 160 || N == 192 || N == 256, "wgmma N must be 8..64 (a multiple of 8), 128, 160, 192 or 256 here");
''' + ''.join(f'  if constexpr (N == {n}) wgmma_m64n{n}k16<TransB, T>(d, desc_a, desc_b, scale_d);\n' for n in NS) + '''}
''')

# FP8 (stage 13): wgmma_m64nNk32<T>(d, desc_a, desc_b, scale_d) with T = __nv_fp8_e4m3 or
# __nv_fp8_e5m2 (.e4m3 / .e5m2, the same type for A and B). 8-bit wgmma reads both operands K-major
# from shared memory: the PTX form has no transpose immediates (imm-trans-a/b exist for .f16/.bf16
# only), just imm-scale-a and imm-scale-b (1: no negation). One k32 step is 32 bytes of a K-major
# row, as a k16 step of a 16-bit type.
out.append('''
// ---- FP8: K = 32 per instruction, both operands K-major ------------------------------------------
#include <cuda_fp8.h>
''')
for n in NS:
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    a, b, s = nreg, nreg + 1, nreg + 2
    out.append(f'''
#define GEMMLAB_WGMMA_M64N{n}K32(TYPE)                                                       \\
  asm volatile(                                                                            \\
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"                                         \\
      "wgmma.mma_async.sync.aligned.m64n{n}k32.f32." TYPE "." TYPE " "                       \\
      "{{{regs}}}, "                                                                      \\
      "%{a}, %{b}, p, 1, 1;\\n}}\\n"                                                  \\
      : {cons}                                                                             \\
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n{n}k32(float (&d)[{nreg}], uint64_t desc_a, uint64_t desc_b, int scale_d) {{
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {{
    GEMMLAB_WGMMA_M64N{n}K32("e5m2");
  }} else {{
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N{n}K32("e4m3");
  }}
}}
#undef GEMMLAB_WGMMA_M64N{n}K32
''')
out.append('''
template <int N, class T>
__device__ __forceinline__ void wgmma_m64k32(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert((N % 8 == 0 && N <= 64) || N == 128 || N == 160 || N == 192 || N == 256, "wgmma N must be 8..64 (a multiple of 8), 128, 160, 192 or 256 here");
''' + ''.join(f'  if constexpr (N == {n}) wgmma_m64n{n}k32<T>(d, desc_a, desc_b, scale_d);\n' for n in NS) + '''}
''')
out.append("#endif  // GEMMLAB_HOST_EMULATION\n")
import pathlib
pathlib.Path(__file__).with_name('wgmma.cuh').open('w').write("".join(out))
