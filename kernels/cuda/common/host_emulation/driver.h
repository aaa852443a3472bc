// What the two halves of an emulator share: driver.cpp (main, the block scheduler and the fibers,
// compiled once per set of flags) and launch.cpp (the kernel and its call, compiled per build).
#pragma once

#include <cstddef>

namespace gemm_host {
// Defined by launch.cpp, for the kernel built into it: the sizes of TIN and TOUT, and one
// thread's call of the kernel on A, B, C (M x K, K x N, M x N, exactly sized heap buffers).
extern const std::size_t emu_tin_bytes, emu_tout_bytes;
void emu_call_kernel(void* a, void* b, void* c, int M, int N, int K);
// Defined by driver.cpp: the workspace of GEMMLAB_EMU_WORKSPACE_BYTES (KERNEL_ARGS may pass it).
int* emu_workspace();
}  // namespace gemm_host
