// Runs one hand-written kernel on the CPU through the host emulation (cuda_shim.h), for the CPU
// tests: tests/test_cuda_kernels.py builds it with
//   g++ -std=c++20 -pthread -fsanitize=address -DGEMMLAB_HOST_EMULATION -include cuda_shim.h
//       -I<this folder> -I<kernels/cuda> -DTIN=.. -DTOUT=.. -D<defines> -DKERNEL_SOURCE='"<file.cu>"'
//       -DKERNEL_ENTRY=<entry> driver.cpp
// and runs it as
//   ./driver M N K grid.x grid.y grid.z block.x block.y block.z smem_bytes A.bin B.bin C.bin
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
// GEMMLAB_EMU_REVERSE_BLOCKS=1: the blocks run last to first, so a kernel whose CTAs meet through
// global memory (stage 12's stream-K) is seen with the other arrival order too.
// Hopper stages (hopper_emu.h) take more arguments: the build passes them as -DKERNEL_ARGS=...,
// e.g. the tensor maps (gemm_host::emu_tensor_maps) and FP8 scales (gemm_host::emu_scale); B.bin
// then holds B as the stage reads it (N x K for layout nt: the same element count).
#include <cstdio>
#include <cstdlib>
#include <thread>

#include KERNEL_SOURCE

#ifndef KERNEL_ARGS
#define KERNEL_ARGS a.data(), b.data(), c.data(), M, N, K
#endif

thread_local uint3 threadIdx;
uint3 blockIdx, blockDim, gridDim;
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
std::barrier<>* block_barrier = nullptr;
std::vector<std::unique_ptr<std::barrier<>>>* warp_barriers = nullptr;
}  // namespace gemm_host

// Kernels with dynamic shared memory define it (GEMMLAB_DECLARE_DYNAMIC_SMEM); the others don't.
extern "C" __attribute__((weak)) int gemmlab_dynamic_smem_bytes;

template <typename T>
static std::vector<T> read_file(const char* path, std::size_t count) {
    std::vector<T> v(count);
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(v.data(), sizeof(T), count, f) != count) {
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
    std::vector<TIN> a = read_file<TIN>(argv[11], std::size_t(M) * K);
    std::vector<TIN> b = read_file<TIN>(argv[12], std::size_t(K) * N);
    std::vector<TOUT> c(std::size_t(M) * N);
    std::memset(c.data(), 0xff, c.size() * sizeof(TOUT));
    if (const char* ws = std::getenv("GEMMLAB_EMU_WORKSPACE_BYTES"))  // zeroed, 256-byte aligned as CuPy's
        gemm_host::workspace_buffer().assign(std::strtoull(ws, nullptr, 10) + 256, 0);
    const char* launches_env = std::getenv("GEMMLAB_EMU_LAUNCHES");
    const unsigned long launches = launches_env ? std::strtoul(launches_env, nullptr, 10) : 1;
    const bool reverse = std::getenv("GEMMLAB_EMU_REVERSE_BLOCKS") != nullptr;
    gemm_host::dynamic_smem_size = smem;
    std::vector<unsigned char> smem_buf(smem + 128);  // 128-byte aligned, as the device declares it
    gemm_host::dynamic_smem = smem_buf.data() + (128 - reinterpret_cast<std::uintptr_t>(smem_buf.data()) % 128) % 128;

    // One pool of threads for the whole grid (creating them per block is what costs time):
    // `start` releases them into a block, `done` tells the main thread the block is over.
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned long blocks = std::size_t(gridDim.x) * gridDim.y * gridDim.z;
    std::barrier<> start(threads + 1), done(threads + 1);
    std::unique_ptr<std::barrier<>> block_bar;
    std::vector<std::unique_ptr<std::barrier<>>> warp_bars;
    gemm_host::warp_barriers = &warp_bars;
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            threadIdx = {t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
            for (unsigned long i = 0; i < launches * blocks; ++i) {
                start.arrive_and_wait();
                KERNEL_ENTRY(KERNEL_ARGS);
                // a thread that has returned no longer holds up the barriers, as on the GPU
                block_bar->arrive_and_drop();
                warp_bars[t / 32]->arrive_and_drop();
                done.arrive_and_wait();
            }
        });
    for (unsigned long i = 0; i < launches * blocks; ++i) {
        if (i % blocks == 0) std::memset(c.data(), 0xff, c.size() * sizeof(TOUT));  // each launch poisons C
        const unsigned long j = reverse ? blocks - 1 - i % blocks : i % blocks;
        blockIdx = {unsigned(j % gridDim.x), unsigned((j / gridDim.x) % gridDim.y), unsigned(j / (std::size_t(gridDim.x) * gridDim.y))};
        std::memset(gemm_host::dynamic_smem, 0xff, smem);
        block_bar = std::make_unique<std::barrier<>>(threads);
        warp_bars.clear();
        for (unsigned w = 0; w * 32 < threads; ++w)
            warp_bars.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads - 32 * w)));
        gemm_host::block_barrier = block_bar.get();
        start.arrive_and_wait();
        done.arrive_and_wait();
    }
    for (auto& th : pool) th.join();

    FILE* f = std::fopen(argv[13], "wb");
    if (!f || std::fwrite(c.data(), sizeof(TOUT), c.size(), f) != c.size()) {
        std::fprintf(stderr, "cannot write %s\n", argv[13]);
        return 2;
    }
    std::fclose(f);
    if (const char* b_out = std::getenv("GEMMLAB_EMU_B_OUT")) {
        FILE* g = std::fopen(b_out, "wb");
        if (!g || std::fwrite(b.data(), sizeof(TIN), b.size(), g) != b.size()) return 2;
        std::fclose(g);
    }
    return 0;
}
