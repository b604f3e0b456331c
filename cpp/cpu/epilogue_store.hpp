// The fused epilogue in a CPU solver's vector stores (core/solver.hpp's Epilogue, with alpha and
// beta): y = act(alpha * o + beta * y + alpha2 * z + bias[k]) while the outputs o are still in
// registers, for the solvers whose outputs lie along the channels (NHWC): the NHWC GEMM
// (POINTWISE, IMPLICIT_GEMM), Winograd's NHWC schedule, DEPTHWISE.
#pragma once
#include <cstdint>

#include "common/epilogue.hpp"
#include "core/solver.hpp"

#ifndef CONVCORE_GEMM_INLINE
#define CONVCORE_GEMM_INLINE inline __attribute__((always_inline))
#endif

namespace convcore {
namespace cpu {
namespace epilogue_store {

// The epilogue's inputs in this element type (z and bias null when absent).
template <typename T>
struct Out {
    T alpha, beta, alpha2;
    const T* z;     // y's layout, or null
    const T* bias;  // K values, or null
    convcoreActivationMode_t act;
};

template <typename T>
Out<T> out_of(const ConvArgs& a) {
    const Epilogue& ep = a.epilogue;
    return Out<T>{T(a.alpha), T(a.beta), T(ep.alpha2), static_cast<const T*>(ep.z), static_cast<const T*>(ep.bias),
                  ep.activation};
}

// y[at, at + cols) = act(alpha * o + beta * y + alpha2 * z + bias[k0, k0 + cols)) for cols <= the
// vector's lanes (z at the same offset `at` as y): a whole vector in vector operations, a
// partial one lane by lane. kSilu false: the activation is identity, ReLU or ReLU6 (compares
// only; SiLU's exp is a call, around which the compiler spills the caller's registers). No
// copy here has a size known only at run time: it would be a call to memcpy.
template <typename T, int VB, typename Vec, bool kSilu = true>
CONVCORE_GEMM_INLINE void store(const Out<T>& e, Vec o, T* y, int64_t at, int64_t k0, int64_t cols) {
    constexpr int L = VB / sizeof(T);
    if (cols == L) {
        Vec r = e.alpha * o, t;
        if (e.beta != T(0)) __builtin_memcpy(&t, y + at, VB), r += e.beta * t;
        if (e.z) __builtin_memcpy(&t, e.z + at, VB), r += e.alpha2 * t;
        if (e.bias) __builtin_memcpy(&t, e.bias + k0, VB), r += t;
        if (e.act == CONVCORE_ACTIVATION_RELU) {
            r = r > Vec{} ? r : Vec{};
        } else if (e.act == CONVCORE_ACTIVATION_RELU6) {
            const Vec six = Vec{} + T(6);
            r = r > Vec{} ? r : Vec{};
            r = r < six ? r : six;
        } else if (kSilu && e.act != CONVCORE_ACTIVATION_IDENTITY) {
            for (int l = 0; l < L; ++l) r[l] = epilogue::activate(r[l], e.act);
        }
        __builtin_memcpy(y + at, &r, VB);
        return;
    }
    for (int64_t l = 0; l < cols; ++l) {
        T r = e.alpha * o[l];
        if (e.beta != T(0)) r += e.beta * y[at + l];
        if (e.z) r += e.alpha2 * e.z[at + l];
        if (e.bias) r += e.bias[k0 + l];
        if (e.act == CONVCORE_ACTIVATION_RELU)
            r = r > T(0) ? r : T(0);
        else if (e.act == CONVCORE_ACTIVATION_RELU6)
            r = r > T(0) ? (r < T(6) ? r : T(6)) : T(0);
        else if (kSilu && e.act != CONVCORE_ACTIVATION_IDENTITY)
            r = epilogue::activate(r, e.act);
        y[at + l] = r;
    }
}

}  // namespace epilogue_store
}  // namespace cpu
}  // namespace convcore
