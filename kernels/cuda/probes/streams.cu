// Probe: vector add c = a + b on the GPU (chapter 5.1, claim C2: I = FLOPs / bytes, bandwidth-bound).
//
// What it is: the element-wise add the chapter's roofline table starts from. One grid-stride
//   loop over the vector; FP32 goes through 16-byte float4 loads and stores (FP64 through
//   double2), so each thread keeps several bytes in flight and the kernel can approach the
//   memory roof measured by the copy probe. 1 FLOP (one add) per element, 3 elements moved.
// Constraints: any length n; a, b, c 16-byte aligned (CuPy allocations are 256-byte aligned);
//   256 threads per block (launch bounds: 8 blocks of 256 per SM, so the probe's grid of 8 blocks
//   per SM is one wave).
//   The vectorised part covers the first (n / VEC) * VEC elements, a scalar loop the rest.
// Run alone: python run.py variant=vecadd_gpu precision=fp32 sizes=claims_stream
//   (built with nvcc into a cubin by gemmlab/backends/probes/; no includes needed)

template <typename T, typename V, int VEC>
__device__ __forceinline__ void vecadd_body(const T* __restrict__ a, const T* __restrict__ b,
                                            T* __restrict__ c, long long n) {
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const long long nv = n / VEC;
    const V* av = reinterpret_cast<const V*>(a);
    const V* bv = reinterpret_cast<const V*>(b);
    V* cv = reinterpret_cast<V*>(c);
#pragma unroll 2
    for (long long i = first; i < nv; i += stride) {
        V x = av[i], y = bv[i], z;
        const T* xs = reinterpret_cast<const T*>(&x);
        const T* ys = reinterpret_cast<const T*>(&y);
        T* zs = reinterpret_cast<T*>(&z);
#pragma unroll
        for (int j = 0; j < VEC; ++j) zs[j] = xs[j] + ys[j];
        cv[i] = z;
    }
#pragma unroll 1
    for (long long i = nv * VEC + first; i < n; i += stride) c[i] = a[i] + b[i];
}

// 256 threads x 8 blocks per SM: one full wave of the grid the probe launches (8 blocks per SM)
extern "C" __global__ void __launch_bounds__(256, 8) vecadd_float32(const float* __restrict__ a, const float* __restrict__ b,
                                          float* __restrict__ c, long long n) {
    vecadd_body<float, float4, 4>(a, b, c, n);
}

extern "C" __global__ void __launch_bounds__(256, 8) vecadd_float64(const double* __restrict__ a, const double* __restrict__ b,
                                          double* __restrict__ c, long long n) {
    vecadd_body<double, double2, 2>(a, b, c, n);
}
