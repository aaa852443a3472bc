// The per-kernel half of an emulator (driver.cpp, hopper_emu.cpp and cp_async_emu.cpp are the rest,
// compiled once and linked in): the kernel's source and its call. tests/test_cuda_kernels.py builds it with
//   g++ -std=c++20 -pthread -fsanitize=address -DGEMMLAB_HOST_EMULATION -include cuda_shim.h
//       -I<this folder> -I<kernels/cuda> -DTIN=.. -DTOUT=.. -D<defines> -DKERNEL_SOURCE='"<file.cu>"'
//       -DKERNEL_ENTRY=<entry> launch.cpp driver.o hopper_emu.o cp_async_emu.o
// where the objects are those .cpp files compiled with the same flags (no kernel's defines: they
// have none of its macros). See driver.cpp for how the result is run.
// Hopper stages (hopper_emu.h) take more arguments: the build passes them as -DKERNEL_ARGS=...,
// e.g. the tensor maps (gemm_host::emu_tensor_maps) and FP8 scales (gemm_host::emu_scale), in
// terms of a, b, c (whose data() are the TIN, TIN and TOUT arrays) and M, N, K.
#include KERNEL_SOURCE
#include "driver.h"

#ifndef KERNEL_ARGS
#define KERNEL_ARGS a.data(), b.data(), c.data(), M, N, K
#endif

namespace gemm_host_launch {  // a name no kernel uses: nothing here hides the kernel's names
template <typename T>
struct Matrix {  // what KERNEL_ARGS reads of the driver's buffers
  T* p;
  T* data() const { return p; }
};

static void call_kernel(void* a_bytes, void* b_bytes, void* c_bytes, const int M, const int N, const int K) {
  const Matrix<TIN> a{static_cast<TIN*>(a_bytes)}, b{static_cast<TIN*>(b_bytes)};
  const Matrix<TOUT> c{static_cast<TOUT*>(c_bytes)};
  (void)a, (void)b, (void)c, (void)M, (void)N, (void)K;
  KERNEL_ENTRY(KERNEL_ARGS);
}
}  // namespace gemm_host_launch

const std::size_t gemm_host::emu_tin_bytes = sizeof(TIN);
const std::size_t gemm_host::emu_tout_bytes = sizeof(TOUT);
void gemm_host::emu_call_kernel(void* a, void* b, void* c, int M, int N, int K) {
  gemm_host_launch::call_kernel(a, b, c, M, N, K);
}
