// Host emulation stand-in for <cuda_bf16.h> (see cuda_shim.h): bfloat16 as the top half of a float.
#pragma once
#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    std::uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 h) {
    std::uint32_t u = static_cast<std::uint32_t>(h.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float x) {  // round to nearest even (inputs are finite)
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{static_cast<std::uint16_t>(u >> 16)};
}
