// Strided 4-D copies on the CPU: how the core packs strided x and unpacks strided y; and the
// fused epilogue the core applies after solvers that do not fuse it.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/epilogue.hpp"
#include "core/device.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/epilogue_store.hpp"

namespace convcore {
namespace cpu {

void evict_from_caches(const void* p, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
    if (!p) return;
    const auto* first = static_cast<const char*>(p);
    for (size_t off = 0; off < bytes; off += 64) _mm_clflush(first + off);
    if (bytes) _mm_clflush(first + bytes - 1);
    _mm_mfence();
#else
    (void)p;
    (void)bytes;
#endif
}

const char* isa_name() {
    switch (cpu_isa()) {
        case CpuIsa::avx512: return "avx512";
        case CpuIsa::avx2: return "avx2";
        default: return "baseline";
    }
}

namespace {

// Calls f(src_offset, dst_offset) for every element, parallel over the three outer axes. The
// innermost loop runs along the axis whose source and destination strides add up least: W
// between NCHW tensors, C between NHWC ones (where W would step over whole pixels), W between
// NCHW and NHWC when C < H*W (one side contiguous, the other C apart, not a plane apart).
template <typename F>
void for_each_element(const Context& ctx, const Strided4d& s, const Strided4d& d, F f) {
    const auto step = [&](int axis) { return std::abs(s.strides[axis]) + std::abs(d.strides[axis]); };
    int inner = 3;
    for (int axis = 0; axis < 4; ++axis)
        if (s.dims[axis] > 1 && (s.dims[inner] == 1 || step(axis) < step(inner))) inner = axis;
    int outer_axes[3], count = 0;
    for (int axis = 0; axis < 4; ++axis)
        if (axis != inner) outer_axes[count++] = axis;
    const int64_t d0 = s.dims[outer_axes[0]], d1 = s.dims[outer_axes[1]], d2 = s.dims[outer_axes[2]];
    const int64_t s_in = s.strides[inner], d_in = d.strides[inner], len = s.dims[inner];
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
    for (int64_t i = 0; i < d0 * d1 * d2; ++i) {
        const int64_t i2 = i % d2, i1 = i / d2 % d1, i0 = i / (d2 * d1);
        const int64_t so = i0 * s.strides[outer_axes[0]] + i1 * s.strides[outer_axes[1]] + i2 * s.strides[outer_axes[2]];
        const int64_t dof = i0 * d.strides[outer_axes[0]] + i1 * d.strides[outer_axes[1]] + i2 * d.strides[outer_axes[2]];
        for (int64_t e = 0; e < len; ++e) f(so + e * s_in, dof + e * d_in);
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

// SiLU's and GELU's exp and erfc in vectors after the adds (epilogue_store::exp_activation_span,
// in the CPU's widest vectors: this file is compiled for the baseline instruction set); ReLU and
// ReLU6 in the same loop as the adds.
template <convcoreActivationMode_t Act>
constexpr convcoreActivationMode_t kLoopActivation =
    epilogue::reads_preactivation(Act) ? CONVCORE_ACTIVATION_IDENTITY : Act;

#ifdef CONVCORE_X86_DISPATCH
__attribute__((target("avx512f,avx512dq,fma"))) void exp_activation_avx512(float* y, int64_t n,
                                                                            convcoreActivationMode_t act) {
    epilogue_store::exp_activation_span<float, 64>(y, n, act);
}
__attribute__((target("avx2,fma"))) void exp_activation_avx2(float* y, int64_t n, convcoreActivationMode_t act) {
    epilogue_store::exp_activation_span<float, 32>(y, n, act);
}
#endif

void exp_activation_baseline(float* y, int64_t n, convcoreActivationMode_t act) {
    epilogue_store::exp_activation_span<float, 16>(y, n, act);
}

template <typename T>
void exp_activation(T* y, int64_t n, convcoreActivationMode_t act) {
    using Span = void (*)(float*, int64_t, convcoreActivationMode_t);
    if constexpr (sizeof(T) == 4) {
#ifdef CONVCORE_X86_DISPATCH
        static const Span span = for_cpu_isa<Span>(exp_activation_avx512, exp_activation_avx2, exp_activation_baseline);
#else
        static const Span span = exp_activation_baseline;
#endif
        span(y, n, act);
    } else {
        epilogue_store::exp_activation_span<T, 16>(y, n, act);
    }
}

// y[i] = act(y[i] + alpha2 * z[i] + b) over n contiguous elements (z: null unless HasZ).
template <typename T, convcoreActivationMode_t Act, bool HasZ>
inline void epilogue_row(T* y, const T* z, int64_t n, T alpha2, T b) {
    for (int64_t i = 0; i < n; ++i)
        y[i] = epilogue::finish(y[i], HasZ ? alpha2 * z[i] : T(0), b, kLoopActivation<Act>);
    if constexpr (epilogue::reads_preactivation(Act)) exp_activation(y, n, Act);
}

// The same over n contiguous channels, bias[k] per channel (bias: null for none).
template <typename T, convcoreActivationMode_t Act, bool HasZ>
inline void epilogue_channels(T* y, const T* z, int64_t n, T alpha2, const T* bias) {
    if (!bias) return epilogue_row<T, Act, HasZ>(y, z, n, alpha2, T(0));
    for (int64_t i = 0; i < n; ++i)
        y[i] = epilogue::finish(y[i], HasZ ? alpha2 * z[i] : T(0), bias[i], kLoopActivation<Act>);
    if constexpr (epilogue::reads_preactivation(Act)) exp_activation(y, n, Act);
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
        case CONVCORE_ACTIVATION_GELU: return epilogue_z<T, CONVCORE_ACTIVATION_GELU>(ctx, y, v, e);
        case CONVCORE_ACTIVATION_GELU_TANH: return epilogue_z<T, CONVCORE_ACTIVATION_GELU_TANH>(ctx, y, v, e);
        default: return epilogue_z<T, CONVCORE_ACTIVATION_IDENTITY>(ctx, y, v, e);
    }
}

// ---- the epilogue's backward (activation_backward_bias) ----

enum class Layout { strided, nchw, nhwc };

bool same_view(const Strided4d& a, const Strided4d& b) {
    for (int i = 0; i < 4; ++i)
        if (a.dims[i] != b.dims[i] || a.strides[i] != b.strides[i]) return false;
    return true;
}

// NCHW or NHWC where every tensor given has dy's view and it packs its dims that way.
Layout packed_layout(const ActivationBackward& a) {
    const Strided4d& d = a.dy_view;
    if ((a.y && !same_view(a.y_view, d)) || (a.v && !same_view(a.v_view, d)) || (a.dv && !same_view(a.dv_view, d)))
        return Layout::strided;
    const int64_t k = d.dims[1], p = d.dims[2], q = d.dims[3];
    const int64_t* s = d.strides;
    if (s[3] == 1 && s[2] == q && s[1] == p * q && s[0] == k * p * q) return Layout::nchw;
    if (s[1] == 1 && s[3] == k && s[2] == q * k && s[0] == p * q * k) return Layout::nhwc;
    return Layout::strided;
}

template <typename T>
void store_bias(T* db, int64_t stride, int64_t k, double sum, double alpha, double beta) {
    T* d = db + k * stride;
    *d = beta == 0 ? T(alpha * sum) : T(alpha * sum + beta * double(*d));
}

// The gradients of R contiguous runs of n values, ld apart (dy, y and v at the same offsets):
// written to dv (Write) or to a scratch chunk, then, where Sum, added into the double sums: per
// channel (NHWC: R pixels' rows of channels, added to sums[0, n) as one sum of R terms each, which
// keeps the sums' loads and stores R times fewer), or a plane spread over 8 lanes sums[0, 8)
// (NCHW, R = 1). Two loops per chunk, each one the compiler vectorises: fused, it turned the
// select of RELU's gradient into a branch around the sum (random signs: 6x slower).
template <typename T, convcoreActivationMode_t A, bool Write, bool Sum, bool PerChannel, int R>
void activation_backward_rows(const T* dy, const T* y, const T* v, T* dv, int64_t n, int64_t ld, double* sums) {
    constexpr int64_t kChunk = 256;
    constexpr bool kReadsY = A == CONVCORE_ACTIVATION_RELU || A == CONVCORE_ACTIVATION_RELU6;
    constexpr bool kReadsV = epilogue::reads_preactivation(A);
    T scratch[R][kChunk];
    for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
        const int64_t m = std::min(kChunk, n - c0);
        const T* out[R];
        for (int r = 0; r < R; ++r) {
            const int64_t o = r * ld + c0;
            out[r] = dy + o;  // IDENTITY's gradient, when it is not written: dy itself
            if constexpr (Write || A != CONVCORE_ACTIVATION_IDENTITY) {
                T* to = Write ? dv + o : scratch[r];
                for (int64_t i = 0; i < m; ++i)
                    to[i] = epilogue::activation_grad<T>(dy[o + i], kReadsY ? y[o + i] : T(0),
                                                         kReadsV ? v[o + i] : T(0), A);
                out[r] = to;
            }
        }
        if constexpr (Sum && PerChannel) {
            for (int64_t i = 0; i < m; ++i) {
                double sum = 0;
                for (int r = 0; r < R; ++r) sum += double(out[r][i]);
                sums[c0 + i] += sum;
            }
        } else if constexpr (Sum) {
            int64_t i = 0;
            for (; i + 8 <= m; i += 8)
                for (int j = 0; j < 8; ++j) sums[j] += double(out[0][i + j]);
            for (; i < m; ++i) sums[i % 8] += double(out[0][i]);
        }
    }
}

// One activation's loops. Write: dv is written; Sum: db is summed. In the packed layouts every
// tensor shares one offset and the runs are contiguous (activation_backward_rows); any other
// strides go value by value.
template <typename T, convcoreActivationMode_t A, bool Write, bool Sum>
void activation_backward_loops(const Context& ctx, const ActivationBackward& a, Layout layout) {
    const T* dy = static_cast<const T*>(a.dy);
    const T* y = static_cast<const T*>(a.y);
    const T* v = static_cast<const T*>(a.v);
    T* dv = static_cast<T*>(a.dv);
    T* db = static_cast<T*>(a.db);
    const int64_t* dims = a.dy_view.dims;
    const int64_t n = dims[0], k = dims[1], p = dims[2], q = dims[3];
    // y or v at offset o where A reads them (null where it does not)
    auto at = [](const T* t, int64_t o) { return t ? t + o : nullptr; };
    if (layout == Layout::nhwc) {
        // Blocks of pixels whose count and bounds depend on the problem only, each summed in
        // order into its own row of partial sums, then the rows added in order: the sums do not
        // depend on the number of threads (every CPU algorithm is deterministic across them).
        const int64_t pixels = n * p * q, blocks = std::max<int64_t>(1, std::min<int64_t>(256, pixels / 512));
        std::vector<double> partial(Sum ? size_t(blocks) * size_t(k) : 0, 0.0);
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
        for (int64_t blk = 0; blk < blocks; ++blk) {
            constexpr int kRows = 8;
            double* acc = Sum ? partial.data() + blk * k : nullptr;
            const int64_t end = pixels * (blk + 1) / blocks;
            int64_t pix = pixels * blk / blocks;
            for (; pix + kRows <= end; pix += kRows) {
                const int64_t o = pix * k;
                activation_backward_rows<T, A, Write, Sum, true, kRows>(dy + o, at(y, o), at(v, o),
                                                                        Write ? dv + o : nullptr, k, k, acc);
            }
            for (; pix < end; ++pix) {
                const int64_t o = pix * k;
                activation_backward_rows<T, A, Write, Sum, true, 1>(dy + o, at(y, o), at(v, o), Write ? dv + o : nullptr,
                                                                    k, k, acc);
            }
        }
        if constexpr (Sum)
            for (int64_t c = 0; c < k; ++c) {
                double sum = 0;
                for (int64_t blk = 0; blk < blocks; ++blk) sum += partial[size_t(blk) * size_t(k) + size_t(c)];
                store_bias(db, a.db_stride, c, sum, a.alpha, a.beta);
            }
        return;
    }
    // NCHW and any strides: a thread per channel, which owns its sum.
    const int64_t plane = p * q;
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
    for (int64_t c = 0; c < k; ++c) {
        double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t b = 0; b < n; ++b) {
            if (layout == Layout::nchw) {
                const int64_t o = (b * k + c) * plane;
                activation_backward_rows<T, A, Write, Sum, false, 1>(dy + o, at(y, o), at(v, o),
                                                                     Write ? dv + o : nullptr, plane, plane, lanes);
                continue;
            }
            for (int64_t h = 0; h < p; ++h)
                for (int64_t w = 0; w < q; ++w) {
                    const T g = epilogue::activation_grad<T>(
                        dy[offset4(b, c, h, w, a.dy_view.strides)], y ? y[offset4(b, c, h, w, a.y_view.strides)] : T(0),
                        v ? v[offset4(b, c, h, w, a.v_view.strides)] : T(0), A);
                    if constexpr (Write) dv[offset4(b, c, h, w, a.dv_view.strides)] = g;
                    if constexpr (Sum) lanes[0] += double(g);
                }
        }
        if constexpr (Sum) {
            double sum = 0;
            for (double l : lanes) sum += l;
            store_bias(db, a.db_stride, c, sum, a.alpha, a.beta);
        }
    }
}

template <typename T, convcoreActivationMode_t A>
void activation_backward_t(const Context& ctx, const ActivationBackward& a) {
    const Layout layout = packed_layout(a);
    // IDENTITY writes dv only where it is another tensor than dy
    const bool write = a.dv && (A != CONVCORE_ACTIVATION_IDENTITY || a.dv != a.dy);
    if (write && a.db) return activation_backward_loops<T, A, true, true>(ctx, a, layout);
    if (write) return activation_backward_loops<T, A, true, false>(ctx, a, layout);
    if (a.db) activation_backward_loops<T, A, false, true>(ctx, a, layout);
}

template <typename T>
void activation_backward_by_mode(const Context& ctx, const ActivationBackward& a) {
    switch (a.act) {
        case CONVCORE_ACTIVATION_RELU: return activation_backward_t<T, CONVCORE_ACTIVATION_RELU>(ctx, a);
        case CONVCORE_ACTIVATION_RELU6: return activation_backward_t<T, CONVCORE_ACTIVATION_RELU6>(ctx, a);
        case CONVCORE_ACTIVATION_SILU: return activation_backward_t<T, CONVCORE_ACTIVATION_SILU>(ctx, a);
        case CONVCORE_ACTIVATION_GELU: return activation_backward_t<T, CONVCORE_ACTIVATION_GELU>(ctx, a);
        case CONVCORE_ACTIVATION_GELU_TANH: return activation_backward_t<T, CONVCORE_ACTIVATION_GELU_TANH>(ctx, a);
        default: return activation_backward_t<T, CONVCORE_ACTIVATION_IDENTITY>(ctx, a);
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

void scale_strided(const Context& ctx, size_t elem, void* dst, const Strided4d& view, double beta) {
    const auto scale = [&](auto* y) {
        using T = std::remove_pointer_t<decltype(y)>;
        const T b = T(beta);
        for_each_element(ctx, view, view, [&](int64_t, int64_t o) { y[o] = b == T(0) ? T(0) : b * y[o]; });
    };
    if (elem == 8)
        scale(static_cast<double*>(dst));
    else
        scale(static_cast<float*>(dst));
}

void activation_backward_bias(const Context& ctx, size_t elem, const ActivationBackward& a) {
    if (elem == 8)
        activation_backward_by_mode<double>(ctx, a);
    else
        activation_backward_by_mode<float>(ctx, a);
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
