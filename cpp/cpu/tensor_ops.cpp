// Strided 4-D copies on the CPU: how the core packs strided x and unpacks strided y; and the
// fused epilogue the core applies after solvers that do not fuse it.
#include <cstdint>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/epilogue.hpp"
#include "core/device.hpp"
#include "cpu/epilogue_store.hpp"

namespace convcore {
namespace cpu {
namespace {

// Calls f(src_offset, dst_offset) for every element, parallel over the three outer axes.
template <typename F>
void for_each_element(const Context& ctx, const Strided4d& s, const Strided4d& d, F f) {
    const int64_t outer = s.dims[0] * s.dims[1] * s.dims[2];
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
    for (int64_t i = 0; i < outer; ++i) {
        const int64_t h = i % s.dims[2], c = (i / s.dims[2]) % s.dims[1], n = i / (s.dims[2] * s.dims[1]);
        const int64_t so = offset4(n, c, h, 0, s.strides), dof = offset4(n, c, h, 0, d.strides);
        for (int64_t w = 0; w < s.dims[3]; ++w) f(so + w * s.strides[3], dof + w * d.strides[3]);
    }
}

template <typename T>
void copy_t(const Context& ctx, const T* src, const Strided4d& sv, T* dst, const Strided4d& dv) {
    for_each_element(ctx, sv, dv, [&](int64_t so, int64_t dof) { dst[dof] = src[so]; });
}

template <typename T>
void blend_t(const Context& ctx, const T* src, const Strided4d& sv, T* dst, const Strided4d& dv,
             T alpha, T beta) {
    for_each_element(ctx, sv, dv,
                     [&](int64_t so, int64_t dof) { blend_store(dst + dof, src[so], alpha, beta); });
}

// Below this many elements the epilogue runs on the calling thread (a parallel region costs more).
constexpr int64_t kEpilogueParallelMin = int64_t(1) << 15;

// SiLU's exp in vectors (epilogue_store::silu_span, 16-byte vectors: this file is compiled for
// the baseline instruction set), after the adds; the other activations in the same loop.
template <convcoreActivationMode_t Act>
constexpr convcoreActivationMode_t kLoopActivation = Act == CONVCORE_ACTIVATION_SILU ? CONVCORE_ACTIVATION_IDENTITY : Act;

// y[i] = act(y[i] + alpha2 * z[i] + b) over n contiguous elements (z: null unless HasZ).
template <typename T, convcoreActivationMode_t Act, bool HasZ>
inline void epilogue_row(T* y, const T* z, int64_t n, T alpha2, T b) {
    for (int64_t i = 0; i < n; ++i)
        y[i] = epilogue::finish(y[i], HasZ ? alpha2 * z[i] : T(0), b, kLoopActivation<Act>);
    if constexpr (Act == CONVCORE_ACTIVATION_SILU) epilogue_store::silu_span<T, 16>(y, n);
}

// The same over n contiguous channels, bias[k] per channel (bias: null for none).
template <typename T, convcoreActivationMode_t Act, bool HasZ>
inline void epilogue_channels(T* y, const T* z, int64_t n, T alpha2, const T* bias) {
    if (!bias) return epilogue_row<T, Act, HasZ>(y, z, n, alpha2, T(0));
    for (int64_t i = 0; i < n; ++i)
        y[i] = epilogue::finish(y[i], HasZ ? alpha2 * z[i] : T(0), bias[i], kLoopActivation<Act>);
    if constexpr (Act == CONVCORE_ACTIVATION_SILU) epilogue_store::silu_span<T, 16>(y, n);
}

// One pass over y. Packed NHWC (channels innermost, contiguous): rows of K channels. Otherwise
// one task per (n, k) plane, contiguous planes as one row, else row by row with y's strides.
template <typename T, convcoreActivationMode_t Act, bool HasZ>
void epilogue_t(const Context& ctx, T* y, const Strided4d& v, const T* z, T alpha2, const T* bias) {
    const int64_t N = v.dims[0], K = v.dims[1], H = v.dims[2], W = v.dims[3];
    const int64_t* st = v.strides;
    const int64_t total = N * K * H * W;
    const bool nhwc = st[1] == 1 && st[3] == K && st[2] == W * K && st[0] == H * W * K;
    if (nhwc) {
        const int64_t rows = N * H * W;
#pragma omp parallel for num_threads(ctx.threads()) schedule(static) if (total >= kEpilogueParallelMin)
        for (int64_t r = 0; r < rows; ++r)
            epilogue_channels<T, Act, HasZ>(y + r * K, HasZ ? z + r * K : nullptr, K, alpha2, bias);
        return;
    }
    const bool plane_contiguous = st[3] == 1 && st[2] == W;
#pragma omp parallel for num_threads(ctx.threads()) schedule(static) if (total >= kEpilogueParallelMin)
    for (int64_t plane = 0; plane < N * K; ++plane) {
        const int64_t n = plane / K, k = plane % K;
        const T b = bias ? bias[k] : T(0);
        const int64_t base = n * st[0] + k * st[1];
        if (plane_contiguous) {
            epilogue_row<T, Act, HasZ>(y + base, HasZ ? z + base : nullptr, H * W, alpha2, b);
            continue;
        }
        for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) {
                const int64_t o = base + h * st[2] + w * st[3];
                y[o] = epilogue::finish(y[o], HasZ ? alpha2 * z[o] : T(0), b, Act);
            }
    }
}

template <typename T, convcoreActivationMode_t Act>
void epilogue_z(const Context& ctx, T* y, const Strided4d& v, const Epilogue& e) {
    const T* z = static_cast<const T*>(e.z);
    const T* bias = static_cast<const T*>(e.bias);
    if (z)
        epilogue_t<T, Act, true>(ctx, y, v, z, T(e.alpha2), bias);
    else
        epilogue_t<T, Act, false>(ctx, y, v, nullptr, T(0), bias);
}

template <typename T>
void epilogue_act(const Context& ctx, T* y, const Strided4d& v, const Epilogue& e) {
    switch (e.activation) {
        case CONVCORE_ACTIVATION_RELU: return epilogue_z<T, CONVCORE_ACTIVATION_RELU>(ctx, y, v, e);
        case CONVCORE_ACTIVATION_RELU6: return epilogue_z<T, CONVCORE_ACTIVATION_RELU6>(ctx, y, v, e);
        case CONVCORE_ACTIVATION_SILU: return epilogue_z<T, CONVCORE_ACTIVATION_SILU>(ctx, y, v, e);
        default: return epilogue_z<T, CONVCORE_ACTIVATION_IDENTITY>(ctx, y, v, e);
    }
}

}  // namespace

void copy_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& sv, void* dst,
                  const Strided4d& dv) {
    if (elem == 8)
        copy_t(ctx, static_cast<const double*>(src), sv, static_cast<double*>(dst), dv);
    else
        copy_t(ctx, static_cast<const float*>(src), sv, static_cast<float*>(dst), dv);
}

void blend_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& sv, void* dst,
                   const Strided4d& dv, double alpha, double beta) {
    if (elem == 8)
        blend_t(ctx, static_cast<const double*>(src), sv, static_cast<double*>(dst), dv, alpha, beta);
    else
        blend_t(ctx, static_cast<const float*>(src), sv, static_cast<float*>(dst), dv, float(alpha),
                float(beta));
}

void apply_epilogue(const Context& ctx, size_t elem, void* y, const Strided4d& v, const Epilogue& e) {
    if (e.none()) return;
    if (elem == 8)
        epilogue_act(ctx, static_cast<double*>(y), v, e);
    else
        epilogue_act(ctx, static_cast<float*>(y), v, e);
}

}  // namespace cpu
}  // namespace convcore
