// The fused epilogue's activation (core/solver.hpp's Epilogue), shared by the CPU and CUDA code
// that applies it: act(v) for one value.
#pragma once
#include <cmath>

#include "common/conv_index.hpp"  // CONVCORE_HD
#include "convcore/convcore.h"

namespace convcore {
namespace epilogue {

template <typename T>
CONVCORE_HD T activate(T v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return v > T(0) ? v : T(0);
        case CONVCORE_ACTIVATION_RELU6: return v > T(0) ? (v < T(6) ? v : T(6)) : T(0);
        case CONVCORE_ACTIVATION_SILU: return v / (T(1) + exp(-v));
        default: return v;
    }
}

}  // namespace epilogue
}  // namespace convcore
