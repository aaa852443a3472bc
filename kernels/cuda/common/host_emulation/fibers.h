// The emulated CUDA threads of a block as fibers: each has its own stack, and driver.cpp's one OS
// thread switches between them (resume() from the scheduler, suspend() back to it). A switch is a
// dozen instructions (x86-64 below: the callee-saved registers pushed, the stack pointer swapped),
// where a wait of hundreds of OS threads was the kernel's scheduler's work. Other architectures
// switch with POSIX ucontext (slower, correct). AddressSanitizer is told of every switch
// (__sanitizer_start/finish_switch_fiber), so that it knows which stack is live.
// Included by driver.cpp only.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define GEMMLAB_ASAN_FIBERS 1
#else
#define GEMMLAB_ASAN_FIBERS 0
#endif

#if defined(__x86_64__) && !defined(GEMMLAB_EMU_UCONTEXT)
// gemm_host_switch(&save, load): pushes the callee-saved registers (and MXCSR, the x87 control
// word) on the current stack, stores its stack pointer in *save, loads `load` and pops the same.
extern "C" void gemm_host_switch(void** save, void* load);
asm(R"(
  .text
  .globl gemm_host_switch
  .type gemm_host_switch, @function
gemm_host_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gemm_host_switch, .-gemm_host_switch
)");
#else
#include <ucontext.h>
#endif

namespace gemm_host {

class Fiber {
 public:
  static constexpr std::size_t kStackBytes = std::size_t(1) << 20;  // reserved, touched as used

  Fiber() {
    // a guard page below the stack: an overflow faults instead of writing over another fiber's
    mem_ = static_cast<unsigned char*>(
        mmap(nullptr, kStackBytes + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (mem_ == MAP_FAILED || mprotect(mem_, kGuard, PROT_NONE) != 0) {
      std::perror("host emulation: fiber stack");
      std::exit(2);
    }
  }
  ~Fiber() { munmap(mem_, kStackBytes + kGuard); }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // The next resume() starts entry() at the top of the stack (entry never returns: it ends with
  // finish()). The scheduler's thread calls it between runs, never from inside a fiber.
  void start(void (*entry)()) {
    unsigned char* top = mem_ + kGuard + kStackBytes;  // 4096-aligned
#if defined(__x86_64__) && !defined(GEMMLAB_EMU_UCONTEXT)
    // what gemm_host_switch pops, then entry's frame as if called (rsp = 8 mod 16 at entry)
    auto* slot = reinterpret_cast<std::uint64_t*>(top) - 9;
    std::uint32_t csr[2];
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
    slot[0] = csr[0] | (static_cast<std::uint64_t>(csr[1] & 0xFFFF) << 32);
    for (int i = 1; i <= 6; ++i) slot[i] = 0;  // r15 r14 r13 r12 rbx rbp
    slot[7] = reinterpret_cast<std::uint64_t>(entry);
    slot[8] = 0;  // entry's return address: none
    sp_ = slot;
#else
    getcontext(&ctx_);
    ctx_.uc_stack.ss_sp = mem_ + kGuard;
    ctx_.uc_stack.ss_size = kStackBytes;
    ctx_.uc_link = nullptr;
    makecontext(&ctx_, entry, 0);
#endif
  }

  // From the scheduler: run this fiber until it suspends or finishes.
  void resume() {
#if GEMMLAB_ASAN_FIBERS
    __sanitizer_start_switch_fiber(&scheduler_fake_stack_, mem_ + kGuard, kStackBytes);
#endif
#if defined(__x86_64__) && !defined(GEMMLAB_EMU_UCONTEXT)
    gemm_host_switch(&scheduler_sp_, sp_);
#else
    swapcontext(&scheduler_ctx_, &ctx_);
#endif
#if GEMMLAB_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(scheduler_fake_stack_, nullptr, nullptr);
#endif
  }

  // From inside this fiber: back to the scheduler; returns at the next resume().
  void suspend() { to_scheduler(false); }
  // The first thing entry() does: tells AddressSanitizer the switch into this stack is done.
  void entered() {
#if GEMMLAB_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_, &scheduler_stack_bytes_);
#endif
  }
  // From inside this fiber, its last act: back to the scheduler for good (until start() again).
  [[noreturn]] void finish() {
    to_scheduler(true);
    std::abort();  // never resumed without a start()
  }

 private:
  static constexpr std::size_t kGuard = 4096;

  void to_scheduler(bool last) {
#if GEMMLAB_ASAN_FIBERS
    __sanitizer_start_switch_fiber(last ? nullptr : &fake_stack_, scheduler_stack_, scheduler_stack_bytes_);
#endif
#if defined(__x86_64__) && !defined(GEMMLAB_EMU_UCONTEXT)
    gemm_host_switch(&sp_, scheduler_sp_);
#else
    swapcontext(&ctx_, &scheduler_ctx_);
#endif
#if GEMMLAB_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(fake_stack_, &scheduler_stack_, &scheduler_stack_bytes_);
#endif
    (void)last;
  }

  unsigned char* mem_;
#if defined(__x86_64__) && !defined(GEMMLAB_EMU_UCONTEXT)
  void* sp_ = nullptr;
  static inline void* scheduler_sp_ = nullptr;
#else
  ucontext_t ctx_;
  static inline ucontext_t scheduler_ctx_;
#endif
  void* fake_stack_ = nullptr;
  static inline void* scheduler_fake_stack_ = nullptr;
  static inline const void* scheduler_stack_ = nullptr;
  static inline std::size_t scheduler_stack_bytes_ = 0;
};

}  // namespace gemm_host
