// Probes: shared-memory bandwidth, bank conflicts and latency (chapter 5.3 and 5.7, claims C5, C14b).
//
// What they are:
//   smem_read_vec4     every thread streams 16-byte loads (LDS.128) from a 32 KB shared array;
//                      a warp reads 512 consecutive bytes, no bank conflicts: the shared-memory
//                      bandwidth (bytes requested / time) to compare with the device-memory roof.
//   smem_read_strided  every lane reads the 4-byte word lane * stride + i: stride 1 and 33 hit 32
//                      distinct banks, stride 32 puts all 32 lanes in one bank (a 32-way
//                      conflict, the chapter's `As[k][threadIdx.y]` column read); the time ratio
//                      stride 32 / stride 33 is the serialisation the padding removes.
//   smem_latency       one thread chases a pointer chain through shared memory, each load's
//                      address being the previous load's value, between two clock64() reads:
//                      SM cycles per dependent load.
// The loads are inline PTX (`asm volatile`) so the compiler can neither drop nor hoist them; a
// load is one instruction with its offset in it, and several accumulators keep the add chains
// short, so the shared-memory pipe, not instruction issue, sets the pace.
// Constraints: blockDim.x a multiple of 32 and at most 1024; `out` holds one value per thread
//   (it only keeps the loads alive); iters a multiple of 8 (vec4) or 32 (strided); stride at most
//   33. smem_latency runs with one warp, only lane 0 chases; hops a multiple of 16.
// Run alone: python run.py +experiment=claims_smem

#define SMEM_BYTES 32768
#define SMEM_WORDS (SMEM_BYTES / 4)
#define SMEM_VEC4 (SMEM_BYTES / 16)

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Loads at a register address plus a literal byte offset: the offset sits in the instruction
// (LDS [R+imm]), so a load costs one instruction and no address arithmetic.
#define LDS128_ADD(acc, addr, off)                                                          \
    {                                                                                       \
        float4 v_;                                                                          \
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4+" #off "];"                   \
                     : "=f"(v_.x), "=f"(v_.y), "=f"(v_.z), "=f"(v_.w) : "r"(addr));       \
        acc.x += v_.x; acc.y += v_.y; acc.z += v_.z; acc.w += v_.w;                         \
    }
#define LDS32_ADD(acc, addr, off)                                                           \
    {                                                                                       \
        float v_;                                                                           \
        asm volatile("ld.shared.f32 %0, [%1+" #off "];" : "=f"(v_) : "r"(addr));           \
        acc += v_;                                                                          \
    }

extern "C" __global__ void __launch_bounds__(1024) smem_read_vec4(float* __restrict__ out, int iters) {
    __shared__ float4 buf[SMEM_VEC4];
    for (int i = threadIdx.x; i < SMEM_VEC4; i += blockDim.x)
        buf[i] = make_float4(float(i & 7), 1.0f, 2.0f, 3.0f);
    __syncthreads();
    // Lane j reads the float4 at byte 16 j + 512 u + off: 32 consecutive float4 per request,
    // the conflict-free pattern (4 wavefronts of 128 bytes). 8 loads per step, then the window
    // moves 4 KB on, wrapping within the 32 KB array.
    const unsigned lane_addr = smem_addr(buf) + 16u * (threadIdx.x & 31u);
    unsigned off = 0;
    float4 acc0 = make_float4(0.f, 0.f, 0.f, 0.f), acc1 = acc0;
    for (int it = 0; it < iters; it += 8) {
        const unsigned a = lane_addr + off;
        LDS128_ADD(acc0, a, 0)    LDS128_ADD(acc1, a, 512)
        LDS128_ADD(acc0, a, 1024) LDS128_ADD(acc1, a, 1536)
        LDS128_ADD(acc0, a, 2048) LDS128_ADD(acc1, a, 2560)
        LDS128_ADD(acc0, a, 3072) LDS128_ADD(acc1, a, 3584)
        off = (off + 4096u) & (SMEM_BYTES - 1);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] =
        acc0.x + acc0.y + acc0.z + acc0.w + acc1.x + acc1.y + acc1.z + acc1.w;
}

extern "C" __global__ void __launch_bounds__(1024) smem_read_strided(float* __restrict__ out, int iters, int stride) {
    __shared__ float buf[SMEM_WORDS];
    for (int i = threadIdx.x; i < SMEM_WORDS; i += blockDim.x) buf[i] = float(i & 7);
    __syncthreads();
    // Lane j reads word j * stride + i: its bank is (j * stride + i) mod 32, so the bank pattern
    // of the warp is the same at every i. 32 loads per step at literal offsets i = 0..31, then
    // the window moves 32 words on; it wraps every 1024 words, so with stride <= 33 every word
    // read lies below j * stride + 2048 < SMEM_WORDS.
    const unsigned lane_addr = smem_addr(buf) + 4u * (threadIdx.x & 31u) * static_cast<unsigned>(stride);
    unsigned off = 0;
    float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f, acc3 = 0.f;
    for (int it = 0; it < iters; it += 32) {
        const unsigned a = lane_addr + off;
        LDS32_ADD(acc0, a, 0)   LDS32_ADD(acc1, a, 4)   LDS32_ADD(acc2, a, 8)   LDS32_ADD(acc3, a, 12)
        LDS32_ADD(acc0, a, 16)  LDS32_ADD(acc1, a, 20)  LDS32_ADD(acc2, a, 24)  LDS32_ADD(acc3, a, 28)
        LDS32_ADD(acc0, a, 32)  LDS32_ADD(acc1, a, 36)  LDS32_ADD(acc2, a, 40)  LDS32_ADD(acc3, a, 44)
        LDS32_ADD(acc0, a, 48)  LDS32_ADD(acc1, a, 52)  LDS32_ADD(acc2, a, 56)  LDS32_ADD(acc3, a, 60)
        LDS32_ADD(acc0, a, 64)  LDS32_ADD(acc1, a, 68)  LDS32_ADD(acc2, a, 72)  LDS32_ADD(acc3, a, 76)
        LDS32_ADD(acc0, a, 80)  LDS32_ADD(acc1, a, 84)  LDS32_ADD(acc2, a, 88)  LDS32_ADD(acc3, a, 92)
        LDS32_ADD(acc0, a, 96)  LDS32_ADD(acc1, a, 100) LDS32_ADD(acc2, a, 104) LDS32_ADD(acc3, a, 108)
        LDS32_ADD(acc0, a, 112) LDS32_ADD(acc1, a, 116) LDS32_ADD(acc2, a, 120) LDS32_ADD(acc3, a, 124)
        off = (off + 128u) & 4095u;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc0 + acc1 + acc2 + acc3;
}

// chain[i] holds the shared-window address of chain[(i + hop_words) mod SMEM_WORDS], so each
// load's result is the next load's address: no arithmetic between two loads.
extern "C" __global__ void smem_latency(unsigned long long* __restrict__ cycles, unsigned* __restrict__ sink,
                                        int hops, int hop_words) {
    __shared__ unsigned chain[SMEM_WORDS];
    for (int i = threadIdx.x; i < SMEM_WORDS; i += blockDim.x)
        chain[i] = smem_addr(&chain[(i + hop_words) % SMEM_WORDS]);
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned p = smem_addr(&chain[0]);
    for (int i = 0; i < 256; ++i) asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));  // warm up
    const long long t0 = clock64();
    for (int i = 0; i < hops; i += 16) {
#pragma unroll
        for (int u = 0; u < 16; ++u) asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));
    }
    const long long t1 = clock64();
    cycles[0] = static_cast<unsigned long long>(t1 - t0);
    sink[0] = p;
}
