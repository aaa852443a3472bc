// Host emulation stand-in for <cuda_fp8.h> (see cuda_shim.h): the two OCP FP8 storage types as bytes,
// decoded exactly (every FP8 value is a float).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

struct __nv_fp8_e4m3 {
    std::uint8_t __x;
};
struct __nv_fp8_e5m2 {
    std::uint8_t __x;
};

// e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, S.1111.111 is NaN.
inline float gemm_host_e4m3_decode(std::uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 0x7;
    if (exp == 0xF && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
    const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9)  // subnormal: man/8 * 2^-6
                               : std::ldexp(1.0f + man / 8.0f, exp - 7);
    return sign ? -mag : mag;
}
// The same, from a table of all 256 (the FP8 MMAs' inner loop decodes every operand byte).
inline float gemm_host_e4m3_to_float(std::uint8_t b) {
    struct Table {
        float v[256];
        Table() {
            for (int i = 0; i < 256; ++i) v[i] = gemm_host_e4m3_decode(static_cast<std::uint8_t>(i));
        }
    };
    static const Table table;
    return table.v[b];
}

// e5m2: IEEE-like, 5 exponent bits (bias 15), 2 mantissa bits.
inline float gemm_host_e5m2_to_float(std::uint8_t b) {
    const int sign = b >> 7, exp = (b >> 2) & 0x1F, man = b & 0x3;
    float mag;
    if (exp == 0x1F)
        mag = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        mag = exp == 0 ? std::ldexp(static_cast<float>(man), -16) : std::ldexp(1.0f + man / 4.0f, exp - 15);
    return sign ? -mag : mag;
}
