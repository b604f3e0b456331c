// DEPTHWISE forward on the CPU: y[n][k] = sum over taps of w[k][r][s] * x[n][k/m] shifted, for
// groups == C (one input channel per group), any kernel, stride, dilation and padding, in NCHW
// and NHWC natively (cpu/depthwise.hpp). The zero padding is skipped, not multiplied. In NHWC
// every store applies the fused epilogue (bias, residual, ReLU/ReLU6: cpu/epilogue_store.hpp)
// to the output vector while it is in registers, and SiLU follows each output row while it is
// in cache (see vector_epilogue), so the core makes no pass over y after the run; NCHW leaves
// the epilogue to the core.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "common/blend.hpp"
#include "core/solver.hpp"
#include "cpu/depthwise.hpp"
#include "cpu/epilogue_store.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace {

// thread_vector sites
struct Planes;

size_t workspace_bytes(const ConvProblem& p) { return depthwise::taps_bytes(p); }

using epilogue_store::Out;

// e: alpha and beta, and in NHWC the fused epilogue (none in NCHW: fuses_epilogue below).
template <typename T>
struct Rows {
    const ConvProblem& p;
    const T* x;
    const T* taps;
    T* y;
    Out<T> e;
};

// y = alpha * conv alone: no epilogue, beta 0 (the NHWC kernels' E = false).
template <typename T>
bool plain(const Out<T>& e) {
    return e.beta == T(0) && !e.z && !e.bias && e.act == CONVCORE_ACTIVATION_IDENTITY;
}

// The epilogue as the NHWC kernels' vector stores apply it, as constants the compiler folds into
// them where it can. E = false: alpha alone (plain). E = true: everything but SiLU, which nhwc_row
// applies to each output row once its stores are done (while the row is in cache). With the
// activation known to be identity, ReLU or ReLU6, the compiler drops store's per-lane path and
// its calls (exp), across which the kernels' registers would not survive: a call anywhere in a
// kernel, taken or not, makes the compiler spill and reload in its hot loops.
template <bool E, typename T>
CONVCORE_DW_INLINE Out<T> vector_epilogue(const Out<T>& e) {
    if (!E) return Out<T>{e.alpha, T(0), T(0), nullptr, nullptr, CONVCORE_ACTIVATION_IDENTITY};
    Out<T> v = e;
    v.act = e.act == CONVCORE_ACTIVATION_RELU    ? CONVCORE_ACTIVATION_RELU
            : e.act == CONVCORE_ACTIVATION_RELU6 ? CONVCORE_ACTIVATION_RELU6
                                                 : CONVCORE_ACTIVATION_IDENTITY;
    return v;
}

// NCHW's stores: y = alpha * acc + beta * y.
template <typename T>
CONVCORE_DW_INLINE void store_plane(T* out, const T* acc, int64_t len, T alpha, T beta) {
    if (beta == T(0))
        for (int64_t i = 0; i < len; ++i) out[i] = alpha * acc[i];
    else
        for (int64_t i = 0; i < len; ++i) out[i] = alpha * acc[i] + beta * out[i];
}

// NCHW works on one input plane (n, c) at a time, copied first into a zero-padded buffer split
// by column phase (column j of phase f holds padded input column j * stride_w + f), so that
// every tap reads whole vectors of consecutive outputs with no bounds tests: output (oh, q) at
// tap (r, s) reads phase (s*dil_w) % stride_w, row oh*stride_h + r*dil_h, column
// q + (s*dil_w) / stride_w. Rows and columns past the padded input (read by the register
// blocks' overhang) are zero too.
struct PlaneGeometry {
    int64_t rows, cols, phases;  // per phase: rows x cols
    int64_t row_block, vecs;     // register block: row_block output rows x vecs vectors
};

inline PlaneGeometry plane_geometry(const ConvProblem& p, int64_t lanes, int64_t acc_vectors) {
    PlaneGeometry g;
    g.vecs = p.q > lanes ? 2 : 1;
    g.row_block = std::min<int64_t>(depthwise::kMaxRowBlock, acc_vectors / g.vecs);
    depthwise::plane_extent(p, g.row_block, g.vecs * lanes, &g.rows, &g.cols);  // counted: why_not checked plane_fits
    g.phases = p.stride_w;
    return g;
}

template <typename T>
CONVCORE_DW_INLINE void fill_plane(const ConvProblem& p, const PlaneGeometry& g, const T* xp, T* buf) {
    for (int64_t f = 0; f < g.phases; ++f)
        for (int64_t row = 0; row < g.rows; ++row) {
            T* d = buf + (f * g.rows + row) * g.cols;
            const int64_t ih = row - p.pad_h;
            if (ih < 0 || ih >= p.h) {
                for (int64_t j = 0; j < g.cols; ++j) d[j] = T(0);
                continue;
            }
            // Columns j with input column j * stride_w + f - pad_w inside the row: [lo, hi).
            const int64_t sw = p.stride_w, w0 = f - p.pad_w;
            const int64_t lo = std::min(g.cols, w0 >= 0 ? 0 : (-w0 + sw - 1) / sw);
            const int64_t hi = std::max(lo, std::min(g.cols, (p.w - w0 + sw - 1) / sw));
            const T* xr = xp + ih * p.w + w0;
            for (int64_t j = 0; j < lo; ++j) d[j] = T(0);
            if (sw == 1)
                for (int64_t j = lo; j < hi; ++j) d[j] = xr[j];
            else if (sw == 2)  // a constant stride the compiler deinterleaves with shuffles
                for (int64_t j = lo; j < hi; ++j) d[j] = xr[2 * j];
            else
                for (int64_t j = lo; j < hi; ++j) d[j] = xr[j * sw];
            for (int64_t j = hi; j < g.cols; ++j) d[j] = T(0);
        }
}

// One register block of output plane k: rows [oh0, oh0 + RB) x columns [q0, q0 + NV vectors).
template <typename T, int VB, int NV, int RB>
CONVCORE_DW_INLINE void nchw_block(const Rows<T>& a, const PlaneGeometry& g, const T* buf, int64_t k, T* yp,
                                   int64_t oh0, int64_t q0) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    const ConvProblem& p = a.p;
    const T* t = a.taps + k * p.r * p.s;
    V acc[RB][NV];
#pragma GCC unroll 16
    for (int i = 0; i < RB; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s) {
            const T wt = t[r * p.s + s];
            const int64_t f = s * p.dil_w % p.stride_w;
            const T* src = buf + (f * g.rows + oh0 * p.stride_h + r * p.dil_h) * g.cols + q0 + s * p.dil_w / p.stride_w;
#pragma GCC unroll 16
            for (int i = 0; i < RB; ++i)
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) {
                    V xv;
                    __builtin_memcpy(&xv, src + i * p.stride_h * g.cols + v * L, VB);
                    acc[i][v] += wt * xv;
                }
        }
    for (int i = 0; i < RB && oh0 + i < p.p; ++i)
        for (int v = 0; v < NV; ++v) {
            const int64_t q = q0 + v * L;
            if (q >= p.q) break;
            T o[L];
            __builtin_memcpy(o, &acc[i][v], VB);
            store_plane(yp + (oh0 + i) * p.q + q, o, std::min<int64_t>(L, p.q - q), a.e.alpha, a.e.beta);
        }
}

// NCHW: input plane (n, c) into `buf`, then its m output planes in register blocks.
template <typename T, int VB, int kAccVectors>
CONVCORE_DW_INLINE void nchw_plane(const Rows<T>& a, int64_t nc, T* buf) {
    constexpr int L = VB / sizeof(T);
    const ConvProblem& p = a.p;
    const PlaneGeometry g = plane_geometry(p, L, kAccVectors);
    const int64_t m = p.k / p.c, n = nc / p.c, c = nc % p.c;
    fill_plane(p, g, a.x + nc * p.h * p.w, buf);
    for (int64_t k = c * m; k < (c + 1) * m; ++k) {
        T* yp = a.y + (n * p.k + k) * p.p * p.q;
        for (int64_t oh0 = 0; oh0 < p.p; oh0 += g.row_block)
            for (int64_t q0 = 0; q0 < p.q; q0 += g.vecs * L) {
                if (g.vecs == 2)
                    nchw_block<T, VB, 2, std::min<int>(depthwise::kMaxRowBlock, kAccVectors / 2)>(a, g, buf, k, yp, oh0, q0);
                else
                    nchw_block<T, VB, 1, std::min<int>(depthwise::kMaxRowBlock, kAccVectors)>(a, g, buf, k, yp, oh0, q0);
            }
    }
}

// NHWC, one output pixel, channels [k0, k0 + kb) (kb <= kChannelBlock): the accumulators stay in
// registers, stored with the epilogue a vector at a time.
template <typename T, int VB, bool E>
CONVCORE_DW_INLINE void nhwc_block(const Rows<T>& a, int64_t n, int64_t oh, int64_t ow, int64_t k0,
                                   const TapRange& rr, const TapRange& sr, int64_t kb) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int64_t L = VB / sizeof(T);
    static_assert(depthwise::kChannelBlock % L == 0, "whole vectors of accumulators");
    const ConvProblem& p = a.p;
    const int64_t m = p.k / p.c;
    T acc[depthwise::kChannelBlock] = {};
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
        for (int64_t s = sr.begin; s < sr.end; ++s) {
            const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
            const T* xi = a.x + ((n * p.h + ih) * p.w + iw) * p.c;
            const T* wt = a.taps + (r * p.s + s) * p.k + k0;
            if (m == 1) {
                const T* xk = xi + k0;
                for (int64_t j = 0; j < kb; ++j) acc[j] += wt[j] * xk[j];
            } else {
                for (int64_t j = 0; j < kb; ++j) acc[j] += wt[j] * xi[(k0 + j) / m];
            }
        }
    }
    const Out<T> e = vector_epilogue<E>(a.e);
    const int64_t at = ((n * p.p + oh) * p.q + ow) * p.k + k0;
    for (int64_t j = 0; j < kb; j += L) {
        V o;
        __builtin_memcpy(&o, acc + j, VB);
        epilogue_store::store<T, VB>(e, o, a.y, at + j, k0 + j, std::min(L, kb - j));
    }
}

// NHWC, m == 1: channels [k0, k0 + NV vectors) of PB consecutive output pixels from ow, over the
// column taps sr (all of them inside the input for every pixel of the block). The PB x NV
// accumulators stay in registers and each tap's weights are loaded once for the PB pixels. GCC
// vector types spell out the vectorisation (acc += w * x contracts to an FMA where the target
// has one).
template <typename T, int VB, int NV, int PB, bool E>
CONVCORE_DW_INLINE void nhwc_pixels(const Rows<T>& a, int64_t n, int64_t oh, int64_t ow, int64_t k0,
                                    const TapRange& rr, const TapRange& sr) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    const ConvProblem& p = a.p;
    const int64_t step = p.stride_w * p.c;  // from one output pixel's input to the next one's
    V acc[PB][NV];
#pragma GCC unroll 16
    for (int i = 0; i < PB; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
        const T* xr = a.x + (n * p.h + ih) * p.w * p.c + k0;
        const T* wr = a.taps + r * p.s * p.k + k0;
        for (int64_t s = sr.begin; s < sr.end; ++s) {
            const T* xs = xr + conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w) * p.c;
            V wv[NV];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) __builtin_memcpy(&wv[v], wr + s * p.k + v * L, VB);
#pragma GCC unroll 16
            for (int i = 0; i < PB; ++i)
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) {
                    V xv;
                    __builtin_memcpy(&xv, xs + i * step + v * L, VB);
                    acc[i][v] += wv[v] * xv;
                }
        }
    }
    const Out<T> e = vector_epilogue<E>(a.e);
    const int64_t at = ((n * p.p + oh) * p.q + ow) * p.k + k0;
#pragma GCC unroll 16
    for (int i = 0; i < PB; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v)
            epilogue_store::store<T, VB>(e, acc[i][v], a.y, at + i * p.k + v * L, k0 + v * L, L);
}

// Channels [k0, k0 + NV vectors) of the output pixels of a row outside the interior [begin,
// end), one at a time over their valid column taps.
template <typename T, int VB, int NV, bool E>
CONVCORE_DW_INLINE void nhwc_edges(const Rows<T>& a, int64_t n, int64_t oh, int64_t begin, int64_t end, int64_t k0,
                                   const TapRange& rr) {
    const ConvProblem& p = a.p;
    const auto edge = [&](int64_t ow) {
        const TapRange sr = conv_valid_taps(ow, p.w, p.s, p.pad_w, p.stride_w, p.dil_w);
        nhwc_pixels<T, VB, NV, 1, E>(a, n, oh, ow, k0, rr, sr);
    };
    for (int64_t ow = 0; ow < begin; ++ow) edge(ow);
    for (int64_t ow = std::max(begin, end); ow < p.q; ++ow) edge(ow);
}

// NHWC, m == 1, unit dilation along the row, S taps, stride SW: one vector of channels from k0
// for PB consecutive interior output pixels from ow. Per filter row, the S weight vectors stay
// in registers and each of the SW * (PB - 1) + S input vectors the block reads is loaded once
// and fed to every (pixel, tap) that reads it (pixel i, tap s read input column SW * i + s), so
// an input vector feeds up to ceil(S / SW) FMAs instead of one.
template <typename T, int VB, int PB, int S, int SW, bool E>
CONVCORE_DW_INLINE void nhwc_sliding(const Rows<T>& a, int64_t n, int64_t oh, int64_t ow, int64_t k0,
                                     const TapRange& rr) {
    typedef T V __attribute__((vector_size(VB)));
    const ConvProblem& p = a.p;
    V acc[PB];
#pragma GCC unroll 16
    for (int i = 0; i < PB; ++i) acc[i] = V{};
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
        const T* xs = a.x + ((n * p.h + ih) * p.w + ow * SW - p.pad_w) * p.c + k0;
        const T* wr = a.taps + r * S * p.k + k0;
        V wv[S];
#pragma GCC unroll 8
        for (int s = 0; s < S; ++s) __builtin_memcpy(&wv[s], wr + s * p.k, VB);
        const int64_t c = p.c;
#pragma GCC unroll 64
        for (int j = 0; j < SW * (PB - 1) + S; ++j, xs += c) {  // one pointer step per column
            V xv;
            __builtin_memcpy(&xv, xs, VB);
            asm("" : "+x"(xv));  // one load in a register: GCC would otherwise reload it for each FMA
#pragma GCC unroll 8
            for (int s = 0; s < S; ++s) {
                const int i = (j - s) / SW;  // the pixel whose tap s reads column j, if any
                if (j >= s && (j - s) % SW == 0 && i < PB) acc[i] += wv[s] * xv;
            }
        }
    }
    constexpr int L = VB / sizeof(T);
    const Out<T> e = vector_epilogue<E>(a.e);
    const int64_t at = ((n * p.p + oh) * p.q + ow) * p.k + k0;
#pragma GCC unroll 16
    for (int i = 0; i < PB; ++i) epilogue_store::store<T, VB>(e, acc[i], a.y, at + i * p.k, k0, L);
}

// The interior pixels [begin, end) of one output row, every whole vector of channels in
// [k_begin, k_end), with the sliding kernel: blocks of PB pixels, then of PB / 2, ... 1 for the rest. The
// channel loop is inside the pixel loop, so the few input rows stream through the cache once.
template <typename T, int VB, int PB, int S, int SW, bool E>
CONVCORE_DW_INLINE int64_t nhwc_sliding_blocks(const Rows<T>& a, int64_t n, int64_t oh, int64_t ow, int64_t end,
                                               int64_t k_begin, int64_t k_end, const TapRange& rr) {
    constexpr int L = VB / sizeof(T);
    for (; ow + PB <= end; ow += PB)
        for (int64_t k0 = k_begin; k0 + L <= k_end; k0 += L) nhwc_sliding<T, VB, PB, S, SW, E>(a, n, oh, ow, k0, rr);
    if constexpr (PB > 1) ow = nhwc_sliding_blocks<T, VB, PB / 2, S, SW, E>(a, n, oh, ow, end, k_begin, k_end, rr);
    return ow;
}

// Pixels per sliding block: the PB accumulators, S weights and one input vector in the
// registers (2 * acc_vectors of them), at most 16.
constexpr int sliding_pixels(int acc_vectors, int s) {
    return 2 * acc_vectors - s - 1 < 16 ? 2 * acc_vectors - s - 1 : 16;
}
template <typename T, int VB, int kAccVectors, int S, int SW, bool E>
CONVCORE_DW_INLINE void nhwc_sliding_row(const Rows<T>& a, int64_t n, int64_t oh, int64_t begin, int64_t end,
                                         int64_t k_begin, int64_t k_end, const TapRange& rr) {
    nhwc_sliding_blocks<T, VB, sliding_pixels(kAccVectors, S), S, SW, E>(a, n, oh, begin, end, k_begin, k_end, rr);
}

// Channels [k0, k0 + NV vectors) of one output row: the interior pixels [begin, end) in blocks
// of as many pixels as kAccVectors accumulators hold, the ends one pixel at a time over their
// valid column taps.
template <typename T, int VB, int NV, int kAccVectors, bool E>
CONVCORE_DW_INLINE void nhwc_channels(const Rows<T>& a, int64_t n, int64_t oh, int64_t begin, int64_t end,
                                      int64_t k0, const TapRange& rr, bool edges = true) {
    constexpr int PB = kAccVectors / NV < 1 ? 1 : kAccVectors / NV;
    const TapRange all{0, a.p.s};
    if (edges) nhwc_edges<T, VB, NV, E>(a, n, oh, begin, end, k0, rr);
    int64_t ow = begin;
    for (; ow + PB <= end; ow += PB) nhwc_pixels<T, VB, NV, PB, E>(a, n, oh, ow, k0, rr, all);
    for (; ow < end; ++ow) nhwc_pixels<T, VB, NV, 1, E>(a, n, oh, ow, k0, rr, all);
}

// NHWC: output row oh of image n, channels [kb, ke) (kb a multiple of the vector's lanes; all
// of them when the channel multiplier m > 1), the taps [r][s][k] contiguous along k like x and
// y. With one output channel per input channel (m == 1), channels in blocks of 4, 2, then 1
// vector, over register blocks of pixels; the channels left (fewer than a vector), and every
// channel when m > 1, one pixel at a time.
template <typename T, int VB, int kAccVectors, bool E>
CONVCORE_DW_INLINE void nhwc_row(const Rows<T>& a, int64_t n, int64_t oh, int64_t kb, int64_t ke) {
    constexpr int64_t L = VB / sizeof(T), B = depthwise::kChannelBlock;
    const ConvProblem& p = a.p;
    const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
    int64_t k0 = kb;
    if (p.k == p.c) {
        // Interior: output columns whose taps 0 and S-1 both read inside the row.
        const int64_t last = p.w - 1 + p.pad_w - (p.s - 1) * p.dil_w;
        const int64_t begin = std::min(p.q, (p.pad_w + p.stride_w - 1) / p.stride_w);
        const int64_t end = last < 0 ? begin : std::max(begin, std::min(p.q, last / p.stride_w + 1));
        const int64_t whole = kb + (ke - kb) / L * L;  // channels in whole vectors
        // Unit dilation along the row, the common kernel widths and strides: the interior slides
        // each loaded input vector under the taps that read it; the ends as below.
        const int kind = p.dil_w != 1 || whole == kb ? 0 : p.s * 10 + int(std::min<int64_t>(p.stride_w, 3));
        if (kind == 31 || kind == 32 || kind == 51 || kind == 52 || kind == 71 || kind == 72) {
            if (kind == 31) nhwc_sliding_row<T, VB, kAccVectors, 3, 1, E>(a, n, oh, begin, end, kb, whole, rr);
            if (kind == 32) nhwc_sliding_row<T, VB, kAccVectors, 3, 2, E>(a, n, oh, begin, end, kb, whole, rr);
            if (kind == 51) nhwc_sliding_row<T, VB, kAccVectors, 5, 1, E>(a, n, oh, begin, end, kb, whole, rr);
            if (kind == 52) nhwc_sliding_row<T, VB, kAccVectors, 5, 2, E>(a, n, oh, begin, end, kb, whole, rr);
            if (kind == 71) nhwc_sliding_row<T, VB, kAccVectors, 7, 1, E>(a, n, oh, begin, end, kb, whole, rr);
            if (kind == 72) nhwc_sliding_row<T, VB, kAccVectors, 7, 2, E>(a, n, oh, begin, end, kb, whole, rr);
            for (; k0 + 4 * L <= whole; k0 += 4 * L) nhwc_edges<T, VB, 4, E>(a, n, oh, begin, end, k0, rr);
            for (; k0 < whole; k0 += L) nhwc_edges<T, VB, 1, E>(a, n, oh, begin, end, k0, rr);
        }
        for (; k0 + 4 * L <= ke; k0 += 4 * L) nhwc_channels<T, VB, 4, kAccVectors, E>(a, n, oh, begin, end, k0, rr);
        if (k0 + 2 * L <= ke) nhwc_channels<T, VB, 2, kAccVectors, E>(a, n, oh, begin, end, k0, rr), k0 += 2 * L;
        if (k0 + L <= ke) nhwc_channels<T, VB, 1, kAccVectors, E>(a, n, oh, begin, end, k0, rr), k0 += L;
    }
    for (int64_t ow = 0; ow < p.q && k0 < ke; ++ow) {
        const TapRange sr = conv_valid_taps(ow, p.w, p.s, p.pad_w, p.stride_w, p.dil_w);
        for (int64_t c0 = k0; c0 < ke; c0 += B) nhwc_block<T, VB, E>(a, n, oh, ow, c0, rr, sr, std::min(B, ke - c0));
    }
    // SiLU or GELU on the row the vector stores have written (vector_epilogue), while it is in cache.
    if (E && epilogue::reads_preactivation(a.e.act)) {
        T* row = a.y + (n * p.p + oh) * p.q * p.k;
        if (kb == 0 && ke == p.k) {
            epilogue_store::exp_activation_span<T, VB>(row, p.q * p.k, a.e.act);
        } else {
            for (int64_t ow = 0; ow < p.q; ++ow)
                epilogue_store::exp_activation_span<T, VB>(row + ow * p.k + kb, ke - kb, a.e.act);
        }
    }
}

template <typename T>
struct Kernels {
    void (*nchw_plane)(const Rows<T>&, int64_t, T*);
    size_t (*plane_elements)(const ConvProblem&);
    void (*nhwc_row)(const Rows<T>&, int64_t, int64_t, int64_t, int64_t);
};

// VB: vector bytes; ACC: accumulator vectors a kernel keeps in registers (of 32 or 16).
#define CONVCORE_DW_FORWARD(ISA, ATTR, VB, ACC)                                           \
    template <typename T>                                                                 \
    ATTR void nchw_plane_##ISA(const Rows<T>& a, int64_t nc, T* buf) {                   \
        nchw_plane<T, VB, ACC>(a, nc, buf);                                               \
    }                                                                                     \
    template <typename T>                                                                 \
    size_t plane_elements_##ISA(const ConvProblem& p) {                                   \
        const PlaneGeometry g = plane_geometry(p, VB / sizeof(T), ACC);                   \
        return size_t(g.phases * g.rows * g.cols);                                        \
    }                                                                                     \
    template <typename T>                                                                 \
    ATTR void nhwc_row_##ISA(const Rows<T>& a, int64_t n, int64_t oh, int64_t kb, int64_t ke) { \
        if (plain(a.e))                                                                   \
            nhwc_row<T, VB, ACC, false>(a, n, oh, kb, ke);                                \
        else                                                                              \
            nhwc_row<T, VB, ACC, true>(a, n, oh, kb, ke);                                 \
    }                                                                                     \
    template <typename T>                                                                 \
    constexpr Kernels<T> kernels_##ISA = {nchw_plane_##ISA<T>, plane_elements_##ISA<T>, nhwc_row_##ISA<T>};
CONVCORE_EACH_ISA(CONVCORE_DW_FORWARD)

template <typename T>
void run_t(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const T* taps = depthwise::taps_for<T>(p, a.w, a.prepared_filter, a.workspace);
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    const Kernels<T>& kern = for_cpu_isa(kernels_avx512<T>, kernels_avx2<T>, kernels_baseline<T>);
    const Rows<T> rows{p, x, taps, y, epilogue_store::out_of<T>(a)};
    if (p.nhwc) {
#pragma omp parallel for collapse(2) num_threads(a.ctx.threads()) schedule(static)
        for (int64_t n = 0; n < p.n; ++n)
            for (int64_t oh = 0; oh < p.p; ++oh) kern.nhwc_row(rows, n, oh, 0, p.k);
        return;
    }
    // Per-thread plane buffers, allocated here: an exception cannot leave a parallel region.
    const int threads = a.ctx.threads();
    const size_t plane = kern.plane_elements(p);
    std::vector<T>& bufs = thread_vector<T, Planes>(plane * size_t(threads));
#pragma omp parallel num_threads(threads)
    {
        T* buf = bufs.data() + plane * size_t(omp_get_thread_num());
#pragma omp for schedule(static)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc) kern.nchw_plane(rows, nc, buf);
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_t<double>(a);
    else
        run_t<float>(a);
}

size_t prepared_filter_bytes(const ConvProblem& p) { return depthwise::taps_bytes(p); }

// Every NHWC store applies the epilogue (nhwc_block, nhwc_pixels, nhwc_sliding; SiLU per row
// in nhwc_row); NCHW's do not.
bool fuses_epilogue(const ConvProblem& p) { return p.nhwc; }

void prepare_filter(const ConvProblem& p, const Context&, const void* w, void* out) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        depthwise::make_taps(p, static_cast<const double*>(w), static_cast<double*>(out));
    else
        depthwise::make_taps(p, static_cast<const float*>(w), static_cast<float*>(out));
}

}  // namespace

namespace depthwise {
template <typename T>
void nhwc_rows(const ConvProblem& p, const T* x, const T* taps, T* y, const epilogue_store::Out<T>& e, int64_t n,
               int64_t oh0, int64_t oh1, int64_t k_begin, int64_t k_end) {
    const Kernels<T>& kern = for_cpu_isa(kernels_avx512<T>, kernels_avx2<T>, kernels_baseline<T>);
    const Rows<T> rows{p, x, taps, y, e};
    for (int64_t oh = oh0; oh < oh1; ++oh) kern.nhwc_row(rows, n, oh, k_begin, k_end);
}
template void nhwc_rows<float>(const ConvProblem&, const float*, const float*, float*,
                               const epilogue_store::Out<float>&, int64_t, int64_t, int64_t, int64_t, int64_t);
template void nhwc_rows<double>(const ConvProblem&, const double*, const double*, double*,
                                const epilogue_store::Out<double>&, int64_t, int64_t, int64_t, int64_t, int64_t);
}  // namespace depthwise

extern const Solver depthwise_solver;
const Solver depthwise_solver = {.algo = CONVCORE_FWD_ALGO_DEPTHWISE, .device = CONVCORE_DEVICE_CPU,
    .why_not = depthwise::why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .runs_nhwc = depthwise::runs_nhwc, .prepared_filter_bytes = prepared_filter_bytes,
    .prepare_filter = prepare_filter, .fuses_epilogue = fuses_epilogue,
    .made_for = made_for::only};

}  // namespace cpu
}  // namespace convcore
