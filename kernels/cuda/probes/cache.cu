// Probes: L2 and L1 bandwidth, the roofs of the hierarchical roofline above DRAM (issue 21).
//
// What they are:
//   l2_read   every thread streams 16-byte loads with ld.global.cg (cached in L2 only, not in L1)
//             over a working set that fits in the L2 (set by the host: a fraction of it), passes
//             times: after the first pass every load hits L2, so bytes requested / time is the L2
//             bandwidth. The host times it on a warm L2 (measure.cache=warm), never after a flush.
//   l1_read   each block streams 16-byte loads with ld.global.ca (cached in L1) over its own slice
//             of `per_block_vec4` float4 (small enough for the L1 of its SM), iters times: after
//             the first pass every load hits L1: bytes requested / time is the L1 bandwidth.
// The loads are inline PTX (`asm volatile`) so the compiler can neither drop nor merge them; the
// sums go to `out`, one value per thread, only to keep the loads alive.
// Constraints: blockDim.x a multiple of 32 and at most 1024; n_vec4 and per_block_vec4 > 0;
//   per_block_vec4 a multiple of blockDim.x; `out` holds gridDim.x * blockDim.x floats.
// Run alone: python run.py +experiment=cache_roofs

#define LDG_ADD(acc, ptr, qualifier)                                                        \
    {                                                                                       \
        float4 v_;                                                                          \
        asm volatile("ld.global." qualifier ".v4.f32 {%0, %1, %2, %3}, [%4];"              \
                     : "=f"(v_.x), "=f"(v_.y), "=f"(v_.z), "=f"(v_.w) : "l"(ptr));         \
        acc.x += v_.x; acc.y += v_.y; acc.z += v_.z; acc.w += v_.w;                         \
    }

extern "C" __global__ void __launch_bounds__(1024)
l2_read(const float4* __restrict__ buf, long long n_vec4, int passes, float* __restrict__ out) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float4 acc0 = make_float4(0.f, 0.f, 0.f, 0.f), acc1 = acc0;
    for (int pass = 0; pass < passes; ++pass) {
        long long i = first;
        for (; i + stride < n_vec4; i += 2 * stride) {  // two independent loads in flight per step
            LDG_ADD(acc0, buf + i, "cg")
            LDG_ADD(acc1, buf + i + stride, "cg")
        }
        if (i < n_vec4) LDG_ADD(acc0, buf + i, "cg")
    }
    out[first] = acc0.x + acc0.y + acc0.z + acc0.w + acc1.x + acc1.y + acc1.z + acc1.w;
}

extern "C" __global__ void __launch_bounds__(1024)
l1_read(const float4* __restrict__ buf, int per_block_vec4, int iters, float* __restrict__ out) {
    const float4* slice = buf + (long long)blockIdx.x * per_block_vec4;
    float4 acc0 = make_float4(0.f, 0.f, 0.f, 0.f), acc1 = acc0;
    for (int it = 0; it < iters; ++it) {
        int i = threadIdx.x;
        for (; i + (int)blockDim.x < per_block_vec4; i += 2 * blockDim.x) {
            LDG_ADD(acc0, slice + i, "ca")
            LDG_ADD(acc1, slice + i + blockDim.x, "ca")
        }
        if (i < per_block_vec4) LDG_ADD(acc0, slice + i, "ca")
    }
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] =
        acc0.x + acc0.y + acc0.z + acc0.w + acc1.x + acc1.y + acc1.z + acc1.w;
}
