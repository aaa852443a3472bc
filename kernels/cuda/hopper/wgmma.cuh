// Written by gen_wgmma.py beside this file (do not edit by hand): wgmma.mma_async wrappers.
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
#include <cstdint>
#include <type_traits>

#define GEMMLAB_WGMMA_M64N8K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n8k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3}, "                                                                      \
      "%4, %5, p, 1, 1, 0, %7;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n8k16(float (&d)[4], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N8K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N8K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N8K16

#define GEMMLAB_WGMMA_M64N16K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "                                                                      \
      "%8, %9, p, 1, 1, 0, %11;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n16k16(float (&d)[8], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N16K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N16K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N16K16

#define GEMMLAB_WGMMA_M64N24K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n24k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, "                                                                      \
      "%12, %13, p, 1, 1, 0, %15;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n24k16(float (&d)[12], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N24K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N24K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N24K16

#define GEMMLAB_WGMMA_M64N32K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "                                                                      \
      "%16, %17, p, 1, 1, 0, %19;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N32K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N32K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N32K16

#define GEMMLAB_WGMMA_M64N40K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %22, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n40k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19}, "                                                                      \
      "%20, %21, p, 1, 1, 0, %23;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n40k16(float (&d)[20], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N40K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N40K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N40K16

#define GEMMLAB_WGMMA_M64N48K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n48k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, "                                                                      \
      "%24, %25, p, 1, 1, 0, %27;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n48k16(float (&d)[24], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N48K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N48K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N48K16

#define GEMMLAB_WGMMA_M64N56K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %30, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n56k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27}, "                                                                      \
      "%28, %29, p, 1, 1, 0, %31;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n56k16(float (&d)[28], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N56K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N56K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N56K16

#define GEMMLAB_WGMMA_M64N64K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                                                                      \
      "%32, %33, p, 1, 1, 0, %35;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N64K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N64K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N64K16

#define GEMMLAB_WGMMA_M64N128K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                                                                      \
      "%64, %65, p, 1, 1, 0, %67;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N128K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N128K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N128K16

#define GEMMLAB_WGMMA_M64N160K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n160k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, "                                                                      \
      "%80, %81, p, 1, 1, 0, %83;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n160k16(float (&d)[80], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N160K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N160K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N160K16

#define GEMMLAB_WGMMA_M64N192K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n192k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "                                                                      \
      "%96, %97, p, 1, 1, 0, %99;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N192K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N192K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N192K16

#define GEMMLAB_WGMMA_M64N256K16(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "                                                                      \
      "%128, %129, p, 1, 1, 0, %131;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB))

template <int TransB, class T>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                 int scale_d) {
  if constexpr (std::is_same<T, __half>::value) {
    GEMMLAB_WGMMA_M64N256K16("f16");
  } else {
    static_assert(std::is_same<T, __nv_bfloat16>::value, "wgmma wrappers take bf16 or f16 inputs");
    GEMMLAB_WGMMA_M64N256K16("bf16");
  }
}
#undef GEMMLAB_WGMMA_M64N256K16

// Pick the wrapper by N at compile time (the tile's N is a define of the kernel).
template <int N, int TransB, class T>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert((N % 8 == 0 && N <= 64) || N == 128 || N == 160 || N == 192 || N == 256, "wgmma N must be 8..64 (a multiple of 8), 128, 160, 192 or 256 here");
  if constexpr (N == 8) wgmma_m64n8k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 16) wgmma_m64n16k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 24) wgmma_m64n24k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 32) wgmma_m64n32k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 40) wgmma_m64n40k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 48) wgmma_m64n48k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 56) wgmma_m64n56k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 64) wgmma_m64n64k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 128) wgmma_m64n128k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 160) wgmma_m64n160k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 192) wgmma_m64n192k16<TransB, T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 256) wgmma_m64n256k16<TransB, T>(d, desc_a, desc_b, scale_d);
}

// ---- FP8: K = 32 per instruction, both operands K-major ------------------------------------------
#include <cuda_fp8.h>

#define GEMMLAB_WGMMA_M64N8K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n8k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3}, "                                                                      \
      "%4, %5, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n8k32(float (&d)[4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N8K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N8K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N8K32

#define GEMMLAB_WGMMA_M64N16K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n16k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "                                                                      \
      "%8, %9, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n16k32(float (&d)[8], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N16K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N16K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N16K32

#define GEMMLAB_WGMMA_M64N24K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n24k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, "                                                                      \
      "%12, %13, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n24k32(float (&d)[12], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N24K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N24K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N24K32

#define GEMMLAB_WGMMA_M64N32K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n32k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "                                                                      \
      "%16, %17, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n32k32(float (&d)[16], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N32K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N32K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N32K32

#define GEMMLAB_WGMMA_M64N40K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %22, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n40k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19}, "                                                                      \
      "%20, %21, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n40k32(float (&d)[20], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N40K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N40K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N40K32

#define GEMMLAB_WGMMA_M64N48K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n48k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, "                                                                      \
      "%24, %25, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n48k32(float (&d)[24], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N48K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N48K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N48K32

#define GEMMLAB_WGMMA_M64N56K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %30, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n56k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27}, "                                                                      \
      "%28, %29, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n56k32(float (&d)[28], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N56K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N56K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N56K32

#define GEMMLAB_WGMMA_M64N64K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n64k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                                                                      \
      "%32, %33, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n64k32(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N64K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N64K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N64K32

#define GEMMLAB_WGMMA_M64N128K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n128k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                                                                      \
      "%64, %65, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N128K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N128K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N128K32

#define GEMMLAB_WGMMA_M64N160K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n160k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, "                                                                      \
      "%80, %81, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n160k32(float (&d)[80], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N160K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N160K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N160K32

#define GEMMLAB_WGMMA_M64N192K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n192k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "                                                                      \
      "%96, %97, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n192k32(float (&d)[96], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N192K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N192K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N192K32

#define GEMMLAB_WGMMA_M64N256K32(TYPE)                                                       \
  asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n256k32.f32." TYPE "." TYPE " "                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "                                                                      \
      "%128, %129, p, 1, 1;\n}\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])                                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n256k32(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __nv_fp8_e5m2>::value) {
    GEMMLAB_WGMMA_M64N256K32("e5m2");
  } else {
    static_assert(std::is_same<T, __nv_fp8_e4m3>::value, "k32 wgmma wrappers take e4m3 or e5m2 inputs");
    GEMMLAB_WGMMA_M64N256K32("e4m3");
  }
}
#undef GEMMLAB_WGMMA_M64N256K32

template <int N, class T>
__device__ __forceinline__ void wgmma_m64k32(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert((N % 8 == 0 && N <= 64) || N == 128 || N == 160 || N == 192 || N == 256, "wgmma N must be 8..64 (a multiple of 8), 128, 160, 192 or 256 here");
  if constexpr (N == 8) wgmma_m64n8k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 16) wgmma_m64n16k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 24) wgmma_m64n24k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 32) wgmma_m64n32k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 40) wgmma_m64n40k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 48) wgmma_m64n48k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 56) wgmma_m64n56k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 64) wgmma_m64n64k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 128) wgmma_m64n128k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 160) wgmma_m64n160k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 192) wgmma_m64n192k32<T>(d, desc_a, desc_b, scale_d);
  if constexpr (N == 256) wgmma_m64n256k32<T>(d, desc_a, desc_b, scale_d);
}
#endif  // GEMMLAB_HOST_EMULATION
