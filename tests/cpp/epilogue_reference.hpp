// The fused epilogue's activation in float64, the reference of the epilogue tests, and its name.
#pragma once
#include <algorithm>
#include <cmath>

#include "convcore/convcore.h"

inline double act_ref(double v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return v > 0 ? v : 0;
        case CONVCORE_ACTIVATION_RELU6: return std::min(std::max(v, 0.0), 6.0);
        case CONVCORE_ACTIVATION_SILU: return v / (1.0 + std::exp(-v));
        default: return v;
    }
}

inline const char* act_name(convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return "relu";
        case CONVCORE_ACTIVATION_RELU6: return "relu6";
        case CONVCORE_ACTIVATION_SILU: return "silu";
        default: return "identity";
    }
}
