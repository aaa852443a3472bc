// Host emulation of the small part of CUDA that the hand-written GEMM kernels use, so that
// tests/test_cuda_kernels.py can run them on a machine without a GPU and catch indexing, guard
// and launch-rule mistakes before any GPU time is spent. Not a simulator: every CUDA thread is
// a fiber (its own stack) that driver.cpp's one OS thread runs in turn, each until it waits
// (gemm_host::wait_turn: a barrier, an mbarrier, __nanosleep); blocks run one after another (the
// blocks of a thread-block cluster together, driver.cpp's GEMMLAB_EMU_CLUSTER),
// __syncthreads() is a gemm_host::Barrier, cp.async is a synchronous copy, and WMMA fragments
// hold whole tiles (see mma.h beside this file). Fibers, not OS threads: a warp collective is a
// barrier, and with hundreds of OS threads on two cores the kernel's scheduler was most of an
// emulation's CPU time (perf: 70%, in sched_yield under mma.sync's warp barriers). So a thread only
// gives way where it waits: a kernel that spins on shared memory without __nanosleep or a barrier
// in its loop would spin forever here, where the device lets the other threads run (none does).
// Force-included (g++ -include cuda_shim.h) with -DGEMMLAB_HOST_EMULATION by the emulators' builds
// (launch.cpp per kernel, driver.cpp once).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>
// Not needed here: the standard headers of the rest of the emulation (hopper_emu.h, mma_sync_ptx.h,
// driver.cpp), so that the tests' precompiled cuda_shim.h holds them (a tenth of each build).
#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)  // the driver runs a cluster's blocks together (GEMMLAB_EMU_CLUSTER)
#define __grid_constant__  // a by-value parameter: each emulated thread's call gets its copy
#define __align__(n) __attribute__((aligned(n)))
// Static shared arrays become function statics: one copy shared by the block's threads (blocks
// run one at a time; a cluster's run together, so a kernel run in clusters declares its static
// shared arrays with HOPPER_BLOCK_SHARED: one per block). Dynamic shared memory goes through
// GEMMLAB_DYNAMIC_SMEM.
#define __shared__ static

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
using dim3 = uint3;
// No alignas(16): the kernels reinterpret register arrays as float4, which only the device
// keeps aligned; shared and global alignment is checked where it matters (copy_or_zero, WMMA).
struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// threadIdx is the running fiber's: the driver sets it before it resumes one
extern uint3 threadIdx, blockIdx, blockDim, gridDim;

namespace gemm_host {
constexpr unsigned kMaxThreads = 1024;  // per block, as on the device
// What every wait of the emulation does while its condition does not hold: back to the driver's
// scheduler, which runs the block's other threads and returns here at this thread's next turn.
// `what` names the wait; `again`: the condition still did not hold when checked after the last
// wait_turn (a pass over the block in which every thread only found that is a deadlock: nothing
// can change any more, so the driver aborts, naming the waits, where the device would hang).
void wait_turn(const char* what, bool again);
// __nanosleep: the kernel's own spin-wait, whose condition the driver cannot see. A pass in which
// every thread only slept or waited again sleeps a millisecond (a hang then hangs, idle).
void nap_turn();

// std::barrier's arrive_and_wait and arrive_and_drop, for fibers: a waiting thread yields until the
// last arrival of its phase has come.
class Barrier {
 public:
  Barrier(unsigned count, const char* what) : expected_(count), left_(count), what_(what) {}
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;
  void arrive_and_wait() {
    const unsigned phase = phase_;
    if (arrive()) return;
    for (bool again = false; phase_ == phase; again = true) wait_turn(what_, again);
  }
  void arrive_only() { arrive(); }  // bar.arrive: counts in the phase, does not wait for it
  void arrive_and_drop() {  // arrives, and is not expected in later phases (a thread that has returned)
    --expected_;
    arrive();
  }

 private:
  bool arrive() {  // whether this arrival was the last of its phase
    if (--left_ != 0) return false;
    left_ = expected_;
    ++phase_;
    return true;
  }
  unsigned expected_, left_, phase_ = 0;
  const char* what_;
};

extern unsigned char* dynamic_smem;
extern std::size_t dynamic_smem_size;  // the launch's dynamic shared memory (%dynamic_smem_size)
extern Barrier* block_barrier;
extern std::vector<std::unique_ptr<Barrier>>* warp_barriers;
// Thread-block clusters (driver.cpp, GEMMLAB_EMU_CLUSTER): the blocks a cluster has, the running block's rank in its
// cluster, the dynamic shared memory of the cluster's block of rank `rank`, and the barrier all its threads meet at
extern unsigned cluster_size;
unsigned cluster_rank();
unsigned char* cluster_block_smem(unsigned rank);
void cluster_sync();
// A static __shared__ array of `count` T, one per block (HOPPER_BLOCK_SHARED: the blocks of a cluster run together
// here, where a function-static array would be one for all of them), known by the declaring line
template <class T>
T* block_static(int line, std::size_t count) {
  static std::map<std::pair<unsigned char*, int>, std::vector<T>> arrays;
  auto& v = arrays[{dynamic_smem, line}];
  if (v.size() < count) v.resize(count);
  return v.data();
}

[[noreturn]] inline void fail(const char* what, const void* p) {
    std::fprintf(stderr, "host emulation: %s (address %p)\n", what, p);
    std::abort();
}

inline void copy_or_zero(void* dst, const void* src, std::size_t bytes, bool in_bounds) {
    if ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % bytes)
        fail("cp.async with a misaligned address", dst);
    if (in_bounds)
        std::memcpy(dst, src, bytes);
    else
        std::memset(dst, 0, bytes);
}

inline unsigned linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
}  // namespace gemm_host

inline void __syncthreads() { gemm_host::block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { (*gemm_host::warp_barriers)[gemm_host::linear_tid() / 32]->arrive_and_wait(); }
[[noreturn]] inline void __trap() { std::abort(); }
inline void __nanosleep(unsigned) { gemm_host::nap_turn(); }
// Blocks run one after another, so a fence has nothing to order; the atomic is a real one all the same.
inline void __threadfence() {}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
