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
        case CONVCORE_ACTIVATION_GELU: return v * 0.5 * std::erfc(-v / std::sqrt(2.0));
        case CONVCORE_ACTIVATION_GELU_TANH:  // v (1 + tanh(z)) / 2 = v sigmoid(2 z): no cancellation for v < 0
            return v / (1.0 + std::exp(-2 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
        default: return v;
    }
}

inline const char* act_name(convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return "relu";
        case CONVCORE_ACTIVATION_RELU6: return "relu6";
        case CONVCORE_ACTIVATION_SILU: return "silu";
        case CONVCORE_ACTIVATION_GELU: return "gelu";
        case CONVCORE_ACTIVATION_GELU_TANH: return "gelu_tanh";
        default: return "identity";
    }
}
