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

// The epilogue of one output: act(v + alpha2 * z + bias), where v = alpha * conv(x, w) and the
// caller passes z_term = alpha2 * z (0 without z) and bias_k (0 without bias).
template <typename T>
CONVCORE_HD T finish(T v, T z_term, T bias_k, convcoreActivationMode_t act) {
    return activate(v + z_term + bias_k, act);
}

// The epilogue's backward: dy * act'(v), act' read from the output y = act(v) for RELU and RELU6
// (their derivative is 1 exactly where y lies inside the clamps; PyTorch's threshold_backward and
// hardtanh_backward, NaN passing dy on) and from v for SILU: silu'(v) = s * (1 + v * (1 - s)),
// s = sigmoid(v). IDENTITY: dy.
template <typename T>
CONVCORE_HD T activation_grad(T dy, T y, T v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return y <= T(0) ? T(0) : dy;
        case CONVCORE_ACTIVATION_RELU6: return y <= T(0) || y >= T(6) ? T(0) : dy;
        case CONVCORE_ACTIVATION_SILU: {
            const T s = T(1) / (T(1) + exp(-v));
            return dy * s * (T(1) + v * (T(1) - s));
        }
        default: return dy;
    }
}

}  // namespace epilogue
}  // namespace convcore
