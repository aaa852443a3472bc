// Runs one hand-written kernel on the CPU through the host emulation (cuda_shim.h), for the CPU
// tests: main, the block scheduler and the fibers, apart from any kernel. tests/test_cuda_kernels.py
// compiles it once per set of flags,
//   g++ -std=c++20 -pthread -fsanitize=address -DGEMMLAB_HOST_EMULATION -include cuda_shim.h
//       -I<this folder> -c driver.cpp -o driver.o
// and links driver.o (with hopper_emu.o, the Hopper emulation's out-of-line part) into each kernel's launch.cpp build (its TIN, TOUT, defines, KERNEL_SOURCE,
// KERNEL_ENTRY and KERNEL_ARGS: driver.h says what launch.cpp defines for this file). The
// emulator then runs as
//   ./emulator M N K grid.x grid.y grid.z block.x block.y block.z smem_bytes A.bin B.bin C.bin
// A.bin and B.bin hold the row-major inputs in TIN; C.bin receives C in TOUT. C starts as NaN
// (all bits set) and the dynamic shared memory is refilled with NaN before every block, so an
// output the grid never covers, or a read of shared memory nobody wrote, shows up as NaN.
// Exit status 3: the launch rule gives less dynamic shared memory than the kernel declares.
// With GEMMLAB_EMU_B_OUT=<path> in the environment, B as the kernel left it is written there too
// (a kernel must not change its inputs: tests/test_conduct_controls.py).
// GEMMLAB_EMU_WORKSPACE_BYTES=n: a zeroed workspace of n bytes for kernels that take one
// (gemm_host::emu_workspace() in KERNEL_ARGS; the launcher's cuda.workspace_bytes), allocated once;
// GEMMLAB_EMU_LAUNCHES=n: the grid runs n times on the same inputs and workspace, C poisoned again
// before each, so a kernel that leaves its workspace dirty for the next launch fails the check.
// GEMMLAB_EMU_WORKSPACE_OUT=<path>: the workspace as the last launch left it is written there (the counters a kernel
// keeps between launches, stage 17's TRACE stamps).
// GEMMLAB_EMU_REVERSE_BLOCKS=1: the blocks run last to first, so a kernel whose CTAs meet through
// global memory (stage 12's stream-K) is seen with the other arrival order too ("0" or unset: first to last).
// GEMMLAB_EMU_CLUSTER=c: thread-block clusters of c blocks along x (the kernel's __cluster_dims__(c, 1, 1)):
// a cluster's blocks run together, their threads' fibers in one scheduler, each block with its own shared
// memory and barriers (the driver sets blockIdx, the shared memory and the barriers to the running thread's
// block before it resumes it), so that a block's multicast copies and remote mbarrier arrivals reach the
// other's (hopper_emu.h) and cluster_sync meets all of them; clusters run one after another.
// Hopper stages (hopper_emu.h) take more arguments: launch.cpp passes them (KERNEL_ARGS);
// B.bin then holds B as the stage reads it (N x K for layout nt: the same element count).
// The block's threads are fibers (fibers.h) run by this one thread: each in turn until it waits
// (wait_turn), in passes over the block that alternate direction, so that of two threads that race
// for a shared word neither always goes first; a block ends when every thread has returned. A pass
// in which no thread got past a wait is a deadlock: the driver aborts and names the waits.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "driver.h"
#include "fibers.h"

uint3 threadIdx, blockIdx, blockDim, gridDim;
namespace gemm_host {
unsigned char* dynamic_smem = nullptr;
std::size_t dynamic_smem_size = 0;
static std::vector<unsigned char>& workspace_buffer() {
    static std::vector<unsigned char> w;
    return w;
}
int* emu_workspace() {  // 256-byte aligned, as CuPy's allocations; null without a workspace
    auto& w = workspace_buffer();
    if (w.empty()) return nullptr;
    const std::size_t pad = (256 - reinterpret_cast<std::uintptr_t>(w.data()) % 256) % 256;
    return reinterpret_cast<int*>(w.data() + pad);
}
Barrier* block_barrier = nullptr;
std::vector<std::unique_ptr<Barrier>>* warp_barriers = nullptr;

// The running cluster's blocks (one without GEMMLAB_EMU_CLUSTER): what the driver switches to before it resumes
// one of a block's threads, and what a block reaches of another's (cluster_block_smem, cluster_sync)
struct BlockContext {
  uint3 idx;
  unsigned char* smem = nullptr;
  std::unique_ptr<Barrier> bar;
  std::vector<std::unique_ptr<Barrier>> warps;
};
static std::vector<BlockContext> cluster_blocks;
static std::unique_ptr<Barrier> cluster_bar;
unsigned cluster_size = 1;
unsigned cluster_rank() { return blockIdx.x % cluster_size; }
unsigned char* cluster_block_smem(unsigned rank) {
  if (rank >= cluster_blocks.size()) fail("a cluster rank past the cluster's blocks", nullptr);
  return cluster_blocks[rank].smem;
}
void cluster_sync() {
  if (cluster_size == 1) block_barrier->arrive_and_wait();
  else cluster_bar->arrive_and_wait();
}
static unsigned block_threads = 0;  // threads of one block (the fibers: cluster_size x block_threads)
static void enter_block(unsigned rank) {
  const BlockContext& b = cluster_blocks[rank];
  blockIdx = b.idx;
  dynamic_smem = b.smem;
  block_barrier = b.bar.get();
  warp_barriers = &cluster_blocks[rank].warps;
}

// The scheduler's state: the block's fibers, the one running, and the kernel call each one makes.
static std::vector<std::unique_ptr<Fiber>> fibers;
static std::vector<const char*> waiting_on;  // per thread: the wait it last yielded from
static void* kernel_abc[3];  // A, B, C of the kernel call every thread makes (emu_call_kernel)
static int kernel_mnk[3];
static unsigned running = 0;
static bool finished = false;  // the running thread's kernel has returned
static bool idle = false;      // the running thread only found its wait unsatisfied again
static bool napped = false;    // ... or slept (__nanosleep)

void wait_turn(const char* what, bool again) {
    waiting_on[running] = what;
    idle = again;
    fibers[running]->suspend();
}
void nap_turn() {
    waiting_on[running] = "__nanosleep";
    idle = napped = true;
    fibers[running]->suspend();
}

static void thread_entry() {
    Fiber& self = *fibers[running];
    self.entered();
    const unsigned t = running;
    emu_call_kernel(kernel_abc[0], kernel_abc[1], kernel_abc[2], kernel_mnk[0], kernel_mnk[1], kernel_mnk[2]);
    // a thread that has returned no longer holds up the barriers, as on the GPU (its block's: the driver set them)
    block_barrier->arrive_and_drop();
    (*warp_barriers)[(t % block_threads) / 32]->arrive_and_drop();
    if (cluster_size > 1) cluster_bar->arrive_and_drop();
    finished = true;
    self.finish();
}

[[noreturn]] static void deadlock(const std::vector<unsigned char>& live) {
    std::fprintf(stderr, "host emulation: deadlock in block (%u, %u, %u)%s: every live thread waits and none can go on\n",
                 blockIdx.x, blockIdx.y, blockIdx.z, cluster_size > 1 ? " and its cluster" : "");
    unsigned shown = 0;
    for (unsigned t = 0; t < live.size(); ++t)
        if (live[t] && shown++ < 16)
            std::fprintf(stderr, "  block %u thread %u waits on %s\n", cluster_blocks[t / block_threads].idx.x,
                         t % block_threads, waiting_on[t]);
    std::abort();
}

// Runs the cluster's blocks' threads (`threads`: all of them, cluster_blocks set) until every one has returned.
static void run_block(unsigned threads) {
    std::vector<unsigned char> live(threads, 1);
    for (unsigned t = 0; t < threads; ++t) fibers[t]->start(thread_entry);
    unsigned left = threads;
    for (bool forward = true; left; forward = !forward) {
        bool moved = false, slept = false;
        for (unsigned i = 0; i < threads; ++i) {
            const unsigned t = forward ? i : threads - 1 - i;
            if (!live[t]) continue;
            running = t;
            enter_block(t / block_threads);
            const unsigned l = t % block_threads;
            threadIdx = {l % blockDim.x, (l / blockDim.x) % blockDim.y, l / (blockDim.x * blockDim.y)};
            finished = idle = napped = false;
            fibers[t]->resume();
            moved |= !idle;
            slept |= napped;
            if (finished) {
                live[t] = 0;
                --left;
            }
        }
        if (left && !moved) {
            if (!slept) deadlock(live);
            usleep(1000);
        }
    }
}
}  // namespace gemm_host

// Kernels with dynamic shared memory define it (GEMMLAB_DECLARE_DYNAMIC_SMEM); the others don't.
extern "C" __attribute__((weak)) int gemmlab_dynamic_smem_bytes;

// count elements of elem_bytes each (TIN's size), in a heap buffer of exactly their bytes
static std::vector<unsigned char> read_file(const char* path, std::size_t elem_bytes, std::size_t count) {
    std::vector<unsigned char> v(elem_bytes * count);
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(v.data(), elem_bytes, count, f) != count) {
        std::fprintf(stderr, "cannot read %zu elements from %s\n", count, path);
        std::exit(2);
    }
    std::fclose(f);
    return v;
}

int main(int argc, char** argv) {
    if (argc != 14) {
        std::fprintf(stderr, "usage: %s M N K gx gy gz bx by bz smem_bytes A.bin B.bin C.bin\n", argv[0]);
        return 2;
    }
    const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
    gridDim = {unsigned(std::atoi(argv[4])), unsigned(std::atoi(argv[5])), unsigned(std::atoi(argv[6]))};
    blockDim = {unsigned(std::atoi(argv[7])), unsigned(std::atoi(argv[8])), unsigned(std::atoi(argv[9]))};
    const std::size_t smem = std::strtoull(argv[10], nullptr, 10);
    if (&gemmlab_dynamic_smem_bytes && smem < std::size_t(gemmlab_dynamic_smem_bytes)) {
        std::fprintf(stderr, "launch gives %zu bytes of dynamic shared memory, the kernel needs %d\n", smem,
                     gemmlab_dynamic_smem_bytes);
        return 3;
    }
    // Exactly sized heap buffers, so AddressSanitizer reports any access past the matrices.
    const std::size_t tin = gemm_host::emu_tin_bytes, tout = gemm_host::emu_tout_bytes;
    std::vector<unsigned char> a = read_file(argv[11], tin, std::size_t(M) * K);
    std::vector<unsigned char> b = read_file(argv[12], tin, std::size_t(K) * N);
    std::vector<unsigned char> c(std::size_t(M) * N * tout);
    std::memset(c.data(), 0xff, c.size());
    const char* ws_env = std::getenv("GEMMLAB_EMU_WORKSPACE_BYTES");
    const std::size_t ws_bytes = ws_env ? std::strtoull(ws_env, nullptr, 10) : 0;
    if (ws_env) gemm_host::workspace_buffer().assign(ws_bytes + 256, 0);  // zeroed, 256-byte aligned as CuPy's
    const char* launches_env = std::getenv("GEMMLAB_EMU_LAUNCHES");
    const unsigned long launches = launches_env ? std::strtoul(launches_env, nullptr, 10) : 1;
    const char* reverse_env = std::getenv("GEMMLAB_EMU_REVERSE_BLOCKS");
    const bool reverse = reverse_env != nullptr && std::strcmp(reverse_env, "0") != 0 && *reverse_env != '\0';
    if (const char* cl = std::getenv("GEMMLAB_EMU_CLUSTER")) gemm_host::cluster_size = unsigned(std::strtoul(cl, nullptr, 10));
    const unsigned csize = gemm_host::cluster_size;
    if (csize < 1 || (csize > 1 && (gridDim.x % csize || gridDim.y != 1 || gridDim.z != 1))) {
        std::fprintf(stderr, "a grid of (%u, %u, %u) does not split into clusters of %u blocks along x\n", gridDim.x,
                     gridDim.y, gridDim.z, csize);
        return 2;
    }
    gemm_host::dynamic_smem_size = smem;
    std::vector<std::vector<unsigned char>> smem_bufs(csize, std::vector<unsigned char>(smem + 128));
    gemm_host::cluster_blocks.resize(csize);
    for (unsigned r = 0; r < csize; ++r)  // 128-byte aligned, as the device declares it
        gemm_host::cluster_blocks[r].smem =
            smem_bufs[r].data() + (128 - reinterpret_cast<std::uintptr_t>(smem_bufs[r].data()) % 128) % 128;

    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    if (threads == 0 || threads > gemm_host::kMaxThreads) {
        std::fprintf(stderr, "a block of %u threads: the device takes 1 to %u\n", threads, gemm_host::kMaxThreads);
        return 2;
    }
    const unsigned long blocks = std::size_t(gridDim.x) * gridDim.y * gridDim.z;
    gemm_host::block_threads = threads;
    for (unsigned t = 0; t < csize * threads; ++t) gemm_host::fibers.push_back(std::make_unique<gemm_host::Fiber>());
    gemm_host::waiting_on.assign(csize * threads, "");
    gemm_host::kernel_abc[0] = a.data(), gemm_host::kernel_abc[1] = b.data(), gemm_host::kernel_abc[2] = c.data();
    gemm_host::kernel_mnk[0] = M, gemm_host::kernel_mnk[1] = N, gemm_host::kernel_mnk[2] = K;
    const unsigned long clusters = blocks / csize;
    for (unsigned long i = 0; i < launches * clusters; ++i) {
        if (i % clusters == 0) std::memset(c.data(), 0xff, c.size());  // each launch poisons C
        const unsigned long q = reverse ? clusters - 1 - i % clusters : i % clusters;
        for (unsigned r = 0; r < csize; ++r) {  // the cluster's blocks: q x csize + r, with their own barriers
            gemm_host::BlockContext& b = gemm_host::cluster_blocks[r];
            const unsigned long j = q * csize + r;
            b.idx = {unsigned(j % gridDim.x), unsigned((j / gridDim.x) % gridDim.y), unsigned(j / (std::size_t(gridDim.x) * gridDim.y))};
            std::memset(b.smem, 0xff, smem);
            b.bar = std::make_unique<gemm_host::Barrier>(threads, "__syncthreads");
            b.warps.clear();
            for (unsigned w = 0; w * 32 < threads; ++w)
                b.warps.push_back(std::make_unique<gemm_host::Barrier>(std::min(32u, threads - 32 * w), "__syncwarp (a warp collective)"));
        }
        if (csize > 1) gemm_host::cluster_bar = std::make_unique<gemm_host::Barrier>(csize * threads, "barrier.cluster (cluster_sync)");
        gemm_host::run_block(csize * threads);
    }

    FILE* f = std::fopen(argv[13], "wb");
    if (!f || std::fwrite(c.data(), tout, c.size() / tout, f) != c.size() / tout) {
        std::fprintf(stderr, "cannot write %s\n", argv[13]);
        return 2;
    }
    std::fclose(f);
    if (const char* ws_out = std::getenv("GEMMLAB_EMU_WORKSPACE_OUT")) {
        FILE* g = std::fopen(ws_out, "wb");
        if (!g || (ws_bytes && std::fwrite(gemm_host::emu_workspace(), 1, ws_bytes, g) != ws_bytes)) return 2;
        std::fclose(g);
    }
    if (const char* b_out = std::getenv("GEMMLAB_EMU_B_OUT")) {
        FILE* g = std::fopen(b_out, "wb");
        if (!g || std::fwrite(b.data(), tin, b.size() / tin, g) != b.size() / tin) return 2;
        std::fclose(g);
    }
    return 0;
}
