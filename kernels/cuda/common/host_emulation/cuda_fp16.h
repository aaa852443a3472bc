// Host emulation stand-in for <cuda_fp16.h> (see cuda_shim.h): IEEE half through _Float16.
#pragma once
#include <cstdint>
#include <cstring>

struct __half {
    std::uint16_t bits;
};
typedef __half half;

inline float __half2float(__half h) {
    _Float16 f;
    std::memcpy(&f, &h.bits, 2);
    return static_cast<float>(f);
}
inline __half __float2half_rn(float x) {
    _Float16 f = static_cast<_Float16>(x);
    __half h;
    std::memcpy(&h.bits, &f, 2);
    return h;
}
