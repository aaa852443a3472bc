// Host emulation stand-in for <cuda_fp16.h> (see cuda_shim.h): IEEE half, rounded through _Float16.
#pragma once
#include <cstdint>
#include <cstring>

struct __half {
    std::uint16_t bits;
};
typedef __half half;

// Exact, field by field: _Float16's conversion is a libgcc call on x86-64 without F16C, and was half
// of an fp16 mma.sync emulation's time. tests/test_host_emulation.py checks all 65536 against NumPy.
inline float __half2float(__half h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
    const std::uint32_t exp = (h.bits >> 10) & 0x1Fu, man = h.bits & 0x3FFu;
    std::uint32_t u;
    if (exp == 0x1F) {
        u = sign | 0x7F800000u | (man << 13);  // infinity, NaN (payload kept)
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
    } else {
        float f = static_cast<float>(man) * 0x1p-24f;  // zero, subnormal: exact in float
        std::memcpy(&u, &f, 4);
        u |= sign;
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline __half __float2half_rn(float x) {
    _Float16 f = static_cast<_Float16>(x);
    __half h;
    std::memcpy(&h.bits, &f, 2);
    return h;
}
