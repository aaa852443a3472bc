// Host emulation stand-in for <mma.h> (see cuda_shim.h): the WMMA calls the kernels use, with the
// documented preconditions checked (256-bit aligned pointers, leading dimensions a multiple of
// 16 bytes). Each lane's fragment holds the whole 16 x 16 tile, so every lane loads, multiplies
// and stores the full tile itself; the results equal the warp-collective ones.
#pragma once
#include <cstdint>

#include "cuda_bf16.h"
#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation knows 16 x 16 x 16 only");
    float v[16 * 16];  // row-major tile: A is M x K, B is K x N, the accumulator M x N
};

namespace detail {
inline float to_float(float x) { return x; }
inline float to_float(__half x) { return __half2float(x); }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
inline void check(const T* p, unsigned ldm) {
    if (reinterpret_cast<std::uintptr_t>(p) % 32) gemm_host::fail("WMMA pointer not 256-bit aligned", p);
    if ((ldm * sizeof(T)) % 16) gemm_host::fail("WMMA leading dimension not a multiple of 16 bytes", p);
}
}  // namespace detail

template <typename Use, typename T, typename L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L>& f, float value) {
    for (float& x : f.v) x = value;
}

template <typename Use, typename T>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, row_major>& f, const T* p, unsigned ldm) {
    detail::check(p, ldm);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.v[r * 16 + c] = detail::to_float(p[r * ldm + c]);
}

template <typename Use, typename T>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, col_major>& f, const T* p, unsigned ldm) {
    detail::check(p, ldm);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.v[r * 16 + c] = detail::to_float(p[c * ldm + r]);
}

template <typename TA, typename LA, typename TB, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, TB, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
    float out[256];
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
            float s = c.v[i * 16 + j];
            for (int k = 0; k < 16; ++k) s += a.v[i * 16 + k] * b.v[k * 16 + j];
            out[i * 16 + j] = s;
        }
    for (int i = 0; i < 256; ++i) d.v[i] = out[i];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
    detail::check(p, ldm);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) {
            float* dst = layout == mem_row_major ? &p[r * ldm + c] : &p[c * ldm + r];
            *dst = f.v[r * 16 + c];
        }
}
}  // namespace wmma
}  // namespace nvcuda
