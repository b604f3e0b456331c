// The fused epilogue's activation (core/solver.hpp's Epilogue), shared by the CPU and CUDA code
// that applies it: act(v) for one value.
#pragma once
#include <cmath>

#include "common/conv_index.hpp"  // CONVCORE_HD
#include "convcore/convcore.h"

namespace convcore {
namespace epilogue {

// The activations computed from exp or erfc (the others are compares): their backward reads the
// pre-activation v, and the CPU kernels apply them in vectors of their own (epilogue_store.hpp).
CONVCORE_HD constexpr bool reads_preactivation(convcoreActivationMode_t act) {
    return act == CONVCORE_ACTIVATION_SILU || act == CONVCORE_ACTIVATION_GELU || act == CONVCORE_ACTIVATION_GELU_TANH;
}

// GELU's tanh approximation (Hendrycks & Gimpel 2016, eq. in sec. 2): 0.5 v (1 + tanh(z)) with
// z = sqrt(2 / pi) (v + 0.044715 v^3), which is v * sigmoid(2 z).
constexpr double kGeluTanhBeta = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluTanhKappa = 0.044715;

template <typename T>
CONVCORE_HD T activate(T v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return v > T(0) ? v : T(0);
        case CONVCORE_ACTIVATION_RELU6: return v > T(0) ? (v < T(6) ? v : T(6)) : T(0);
        case CONVCORE_ACTIVATION_SILU: return v / (T(1) + exp(-v));
        case CONVCORE_ACTIVATION_GELU: return v * T(0.5) * erfc(-v * T(0.70710678118654752));  // v * Phi(v)
        case CONVCORE_ACTIVATION_GELU_TANH:
            return v / (T(1) + exp(T(-2 * kGeluTanhBeta) * (v + T(kGeluTanhKappa) * v * v * v)));
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
// s = sigmoid(v); GELU: Phi(v) + v * phi(v), phi(v) = exp(-v^2 / 2) / sqrt(2 pi); GELU_TANH:
// 0.5 (1 + t) + 0.5 v (1 - t^2) beta (1 + 3 kappa v^2), t = tanh(z) (PyTorch's gelu_backward).
// IDENTITY: dy.
template <typename T>
CONVCORE_HD T activation_grad(T dy, T y, T v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return y <= T(0) ? T(0) : dy;
        case CONVCORE_ACTIVATION_RELU6: return y <= T(0) || y >= T(6) ? T(0) : dy;
        case CONVCORE_ACTIVATION_SILU: {
            const T s = T(1) / (T(1) + exp(-v));
            return dy * s * (T(1) + v * (T(1) - s));
        }
        case CONVCORE_ACTIVATION_GELU: {
            const T cdf = T(0.5) * erfc(-v * T(0.70710678118654752));
            const T pdf = exp(T(-0.5) * v * v) * T(0.39894228040143268);  // 1 / sqrt(2 pi)
            return dy * (cdf + v * pdf);
        }
        case CONVCORE_ACTIVATION_GELU_TANH: {
            const T t = tanh(T(kGeluTanhBeta) * (v + T(kGeluTanhKappa) * v * v * v));
            const T inner = T(kGeluTanhBeta) * (T(1) + T(3 * kGeluTanhKappa) * v * v);
            return dy * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * inner);
        }
        default: return dy;
    }
}

}  // namespace epilogue
}  // namespace convcore
