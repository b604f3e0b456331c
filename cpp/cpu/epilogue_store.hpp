// The fused epilogue in a CPU solver's vector stores (core/solver.hpp's Epilogue, with alpha and
// beta): y = act(alpha * o + beta * y + alpha2 * z + bias[k]) while the outputs o are still in
// registers, for the solvers whose outputs lie along the channels (NHWC): the NHWC GEMM
// (POINTWISE, IMPLICIT_GEMM), Winograd's NHWC schedule, DEPTHWISE.
#pragma once
#include <cstdint>

#include "common/epilogue.hpp"
#include "common/generated/erfc_poly.hpp"
#include "core/solver.hpp"

#ifndef CONVCORE_GEMM_INLINE
#define CONVCORE_GEMM_INLINE inline __attribute__((always_inline))
#endif

namespace convcore {
namespace cpu {
namespace epilogue_store {

// A vector of VB bytes of floats (an alias template would drop the attribute).
template <int VB>
struct FloatVecOf {
    typedef float type __attribute__((vector_size(VB)));
};
template <int VB>
using FloatVec = typename FloatVecOf<VB>::type;

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

// The vector helpers below pass vectors by value: always inlined into one instruction set's
// kernel, so the ABI of a wider vector never matters. (GCC reports -Wpsabi at the end of the
// translation unit, past any pop: the files that include this one ignore it.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// exp(a) for a <= 0 in vectors of VB bytes of floats: no call to exp, so it runs in the caller's
// instruction set and keeps its registers (Cody & Waite's range reduction): n = round(a / ln 2),
// r = a - n ln 2 with ln 2 in two parts (n * kLn2Hi is exact), so |r| <= ln(2) / 2; exp(r) by its
// Taylor series to r^7 (remainder below 5e-9, under float's half ulp); times 2^n by adding n to
// the exponent bits. Below a = -87 (exp(a) < 2^-125, float's smallest normals) it is 0. A NaN
// stays NaN.
template <int VB>
CONVCORE_GEMM_INLINE FloatVec<VB> exp_nonpositive(FloatVec<VB> a0) {
    typedef FloatVec<VB> V;
    typedef int32_t I __attribute__((vector_size(VB)));
    constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440054690583e-4f;
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: x + kRound - kRound rounds x to an integer
    const V zero{}, lowest = zero - 87.0f;
    const I tiny = a0 < lowest;
    const V a = tiny ? lowest : a0;
    const V shifted = a * kLog2e + kRound;  // its low mantissa bits hold n + 2^22
    const V n = shifted - kRound;
    const V r = (a - n * kLn2Hi) - n * kLn2Lo;
    V e = zero + 1.0f / 5040.0f;
    e = e * r + 1.0f / 720.0f;
    e = e * r + 1.0f / 120.0f;
    e = e * r + 1.0f / 24.0f;
    e = e * r + 1.0f / 6.0f;
    e = e * r + 0.5f;
    e = e * r + 1.0f;
    e = e * r + 1.0f;
    I bits, n_bits;
    __builtin_memcpy(&bits, &e, VB);
    __builtin_memcpy(&n_bits, &shifted, VB);
    bits += (n_bits - 0x4B400000) << 23;  // 0x4B400000: kRound's bits, so n_bits - it = n
    __builtin_memcpy(&e, &bits, VB);
    return tiny ? zero : e;
}

// v * sigmoid(z) with t = exp(-|z|) in (0, 1]: sigmoid(z) = 1 / (1 + t) for z >= 0 and t / (1 + t)
// for z < 0, so nothing overflows.
template <int VB>
CONVCORE_GEMM_INLINE FloatVec<VB> times_sigmoid(FloatVec<VB> v, FloatVec<VB> z) {
    const FloatVec<VB> zero{};
    const FloatVec<VB> t = exp_nonpositive<VB>(z < zero ? z : -z);
    return v * ((z < zero ? t : zero + 1.0f) / (1.0f + t));
}

// GELU, v * Phi(v), with erfc(u) = t * exp(-u^2 + P(t)), t = 1 / (1 + u / 2), u = |v| / sqrt 2, P
// the polynomial tools/gen_erfc.py fits (relative error of erfc ~2e-7 over u <= 9.5; past that the
// exp's argument is below -87 and erfc is 0): Phi(v) = erfc(u) / 2 for v < 0, 1 - erfc(u) / 2
// else, each with a small relative error, the tail v < 0 included.
template <int VB>
CONVCORE_GEMM_INLINE FloatVec<VB> gelu_vector(FloatVec<VB> v) {
    typedef FloatVec<VB> V;
    using generated::kErfcPoly;
    const V zero{};
    const V u = (v < zero ? -v : v) * 0.70710678118654752f;
    const V t = 1.0f / (1.0f + 0.5f * u);
    const V s = (2.0f * t - (1.0f + generated::kErfcTMin)) * (1.0f / (1.0f - generated::kErfcTMin));
    V p = zero + kErfcPoly[generated::kErfcDegree];
    for (int i = generated::kErfcDegree - 1; i >= 0; --i) p = p * s + kErfcPoly[i];
    const V half_erfc = 0.5f * t * exp_nonpositive<VB>(p - u * u);
    return v * (v < zero ? half_erfc : 1.0f - half_erfc);
}

// act(v) in vectors for the activations computed from exp or erfc (epilogue::reads_preactivation);
// any other act returns v.
template <int VB>
CONVCORE_GEMM_INLINE FloatVec<VB> activate_vector(FloatVec<VB> v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_SILU: return times_sigmoid<VB>(v, v);
        case CONVCORE_ACTIVATION_GELU: return gelu_vector<VB>(v);
        case CONVCORE_ACTIVATION_GELU_TANH: {
            constexpr float kTwoBeta = float(2 * epilogue::kGeluTanhBeta);
            constexpr float kTwoBetaKappa = float(2 * epilogue::kGeluTanhBeta * epilogue::kGeluTanhKappa);
            return times_sigmoid<VB>(v, v * (kTwoBeta + kTwoBetaKappa * v * v));
        }
        default: return v;
    }
}

// y[0, n) = act(y[0, n)) for an activation computed from exp or erfc (reads_preactivation): float
// in whole vectors of VB bytes, the tail through a vector too (every element gets the same
// arithmetic); double by epilogue::activate.
template <typename T, int VB>
CONVCORE_GEMM_INLINE void exp_activation_span(T* y, int64_t n, convcoreActivationMode_t act) {
    if constexpr (sizeof(T) == 4) {
        constexpr int L = VB / sizeof(T);
        FloatVec<VB> v;
        int64_t i = 0;
        for (; i + L <= n; i += L) {
            __builtin_memcpy(&v, y + i, VB);
            v = activate_vector<VB>(v, act);
            __builtin_memcpy(y + i, &v, VB);
        }
        if (i < n) {
            float tail[L] = {};
            for (int64_t l = 0; l < n - i; ++l) tail[l] = y[i + l];
            __builtin_memcpy(&v, tail, VB);
            v = activate_vector<VB>(v, act);
            __builtin_memcpy(tail, &v, VB);
            for (int64_t l = 0; l < n - i; ++l) y[i + l] = tail[l];
        }
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = epilogue::activate(y[i], act);
    }
}

// y[at, at + cols) = act(alpha * o + beta * y + alpha2 * z + bias[k0, k0 + cols)) for cols <= the
// vector's lanes (z at the same offset `at` as y): a whole vector in vector operations, a
// partial one lane by lane. kExpActivations false: the activation is identity, ReLU or ReLU6
// (compares only; the kernels that pass false apply the others after their stores, as a span:
// their exp and erfc in registers would crowd the kernel's accumulators). No copy here has a
// size known only at run time: it would be a call to memcpy.
template <typename T, int VB, typename Vec, bool kExpActivations = true>
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
        } else if (kExpActivations && e.act != CONVCORE_ACTIVATION_IDENTITY) {
            if constexpr (sizeof(T) == 4)
                r = activate_vector<VB>(r, e.act);
            else
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
        else if (kExpActivations && e.act != CONVCORE_ACTIVATION_IDENTITY)
            r = epilogue::activate(r, e.act);
        y[at + l] = r;
    }
}

}  // namespace epilogue_store
}  // namespace cpu
}  // namespace convcore
