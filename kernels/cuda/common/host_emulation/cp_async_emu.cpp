// cp.async for mma_sync_ptx.h (stages 10, 14, 16): each thread's copies are queued in its open group,
// a commit closes the group, and a wait lands the oldest groups until `pending` are left: a copy lands
// only when cp.async.wait_group retires it (the latest moment the hardware allows), so a read of a
// tile the thread has not waited for sees the NaN the emulation fills shared memory with. A copy of
// fewer than 16 source bytes zero-fills the rest. Compiled once and linked into every emulator
// (tests/test_cuda_kernels.py: EMULATION_OBJECTS); no kernel macro reaches it (eager: the kernel's
// GEMMLAB_EMU_EAGER_COPIES, passed by mma_sync_ptx.h).
#include <deque>
#include <vector>

namespace {
struct Copy {
  unsigned char* dst;
  const void* src;
  int bytes;
};
void land(const Copy& c) {
  if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
  std::memset(c.dst + c.bytes, 0, 16 - c.bytes);
}
std::vector<Copy>& open_group() {  // per thread
  static std::vector<Copy> group[gemm_host::kMaxThreads];
  return group[gemm_host::linear_tid()];
}
std::deque<std::vector<Copy>>& committed() {
  static std::deque<std::vector<Copy>> groups[gemm_host::kMaxThreads];
  return groups[gemm_host::linear_tid()];
}
}  // namespace

namespace gemm_host {
void emu_cp_async_16(uint32_t dst, const void* src, int src_bytes, bool eager) {
  if (dst % 16 || (src_bytes && reinterpret_cast<uintptr_t>(src) % 16))
    fail("cp.async with a misaligned address", dynamic_smem + dst);
  const Copy c{dynamic_smem + dst, src, src_bytes};
  if (eager)
    land(c);
  else
    open_group().push_back(c);
}
void emu_cp_async_commit() {
  committed().push_back(std::move(open_group()));
  open_group().clear();
}
void emu_cp_async_wait(size_t pending) {
  while (committed().size() > pending) {
    for (const Copy& c : committed().front()) land(c);
    committed().pop_front();
  }
}
}  // namespace gemm_host
