// The depth axis of a 3-D convolution, as the depth decomposition (core/depth_decomposition.hpp)
// and the native 3-D forms (core/device.hpp, cpu/native_3d.cpp) see it.
#pragma once
#include <cstdint>

namespace convcore {
namespace depth {

// Filter taps, input and output depth, padding, stride and dilation along the depth (the
// default: a 2-D problem).
struct DepthAxis {
    int64_t taps = 1, d_in = 1, d_out = 1, pad = 0, stride = 1, dil = 1;
};

}  // namespace depth
}  // namespace convcore
