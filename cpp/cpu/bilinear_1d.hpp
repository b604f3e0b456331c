// A 1-D bilinear convolution algorithm along W, out = AT [(G g) (.) (BT d)], on overlap-save
// tiles: the CPU path of 1 x F filters for the minimal-multiplication algorithms (Winograd's
// F(m,3), cpu/winograd_1d.cpp; Pitas' 4-point cyclic convolution, cpu/cyclic_minimal.cpp).
//
// Alg supplies the algorithm: n inputs per tile, a multiplications, m outputs, taps filter
// taps, the stride between outputs (n = stride * (m - 1) + taps), and bt(xi, i) (a x n),
// g(xi, j) (a x taps), at(i, xi) (m x a). Each output row (n, oh) reads input row oh * stride_h
// (R = 1, no padding along H) and is cut into tw = ceil(Q/m) tiles; tile j reads the n inputs
// from j*m*stride - pad_w. Per group:
//   1. filter transform: U[xi][k][c] = (G g_kc)[xi]                     (a x K/g x C/g)
//   2. per block of B tiles:
//      a. input transform: V[xi][c][b] = (BT d_bc)[xi]                  (a x C/g x B)
//      b. a GEMMs M[xi] (K/g x B) = U[xi] . V[xi]                        (OpenBLAS)
//      c. output transform: y = AT M per (k, tile), clipped at Q, blended with alpha, beta.
// Each output is one GEMM dot product and a fixed transform, whatever the thread count.
// A column filter (F x 1) runs as the row filter of the transposed problem (H and W swapped, the
// strides saying where each lies), so the same tiles run along H.
#pragma once
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "common/blend.hpp"
#include "core/solver.hpp"
#include "cpu/blas_gemm.hpp"
#include "cpu/blas_threads.hpp"

namespace convcore {
namespace cpu {
namespace bilinear_1d {

// V and M of one block. Each GEMM call packs its U[xi] (K/g x C/g) again, so its columns must be
// many for that packing to stay small against the GEMM: with 512 channels a 4 MiB block held 112
// tiles, and F(4,2) on wav2vec2's layers took 1.3-1.45x IM2COL_GEMM's time; 32 MiB, 1.0-1.2x
// (bench/results/cpu-2026-11-29-issue33-s11.md).
constexpr int64_t kBlockBudgetBytes = int64_t(32) << 20;
constexpr int64_t kMinBlock = 64, kMaxBlock = 4096;  // tiles per block
constexpr int64_t kGemmColumns = 1024;               // columns of one GEMM task
constexpr int64_t kChunk = 16;                       // tiles of one transform task

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether p's filter is a column (F x 1, F > 1): the tiles run along H.
inline bool along_h(const ConvProblem& p) { return p.s == 1 && p.r > 1; }
// The filter's taps along the axis the tiles run on.
inline int64_t taps_of(const ConvProblem& p) { return along_h(p) ? p.r : p.s; }
// The problem whose rows the tiles run along: p, or p with H and W swapped for a column filter.
inline ConvProblem row_problem(const ConvProblem& p) {
    if (!along_h(p)) return p;
    ConvProblem t = p;
    std::swap(t.h, t.w);
    std::swap(t.p, t.q);
    std::swap(t.r, t.s);
    std::swap(t.pad_h, t.pad_w);
    std::swap(t.stride_h, t.stride_w);
    std::swap(t.dil_h, t.dil_w);
    return t;
}

struct Geometry {
    int64_t tw, tiles, block, cg, kg;
    int64_t xs_n, xs_c, xs_h, xs_w;  // element strides of packed x (NCHW or NHWC)
    int64_t ys_n, ys_c, ys_h, ys_w;
};

// m outputs and a multiplications per tile; `given` is the problem as given (a column filter's
// tiles run along its H: its row_problem's W).
inline Geometry geometry(const ConvProblem& given, int m, int a) {
    const ConvProblem p = row_problem(given);
    Geometry g{};
    g.tw = ceil_div(p.q, m);
    g.tiles = p.n * p.p * g.tw;
    g.cg = p.c_per_group();
    g.kg = p.k_per_group();
    const int64_t per_tile = a * (g.cg + g.kg) * int64_t(p.elem_size());
    g.block = std::min(std::max(kBlockBudgetBytes / std::max<int64_t>(per_tile, 1), kMinBlock), kMaxBlock);
    g.block = std::min(ceil_div(g.block, 16) * 16, ceil_div(g.tiles, 16) * 16);
    const ConvProblem& q = given;  // the strides of the memory as it lies
    if (q.nhwc) {
        g.xs_c = 1, g.xs_w = q.c, g.xs_h = q.w * q.c, g.xs_n = q.h * q.w * q.c;
        g.ys_c = 1, g.ys_w = q.k, g.ys_h = q.q * q.k, g.ys_n = q.p * q.q * q.k;
    } else {
        g.xs_w = 1, g.xs_h = q.w, g.xs_c = q.h * q.w, g.xs_n = q.c * q.h * q.w;
        g.ys_w = 1, g.ys_h = q.q, g.ys_c = q.p * q.q, g.ys_n = q.k * q.p * q.q;
    }
    if (along_h(given)) std::swap(g.xs_h, g.xs_w), std::swap(g.ys_h, g.ys_w);
    return g;
}

// "" when the 1-D path of `name` runs p (a 1 x taps or taps x 1 filter), otherwise why. The
// caller has an algorithm for each stride along the tiles from 1 to max_stride (1 or 2).
inline std::string why_not(const std::string& name, const std::string& algorithm, const ConvProblem& given,
                           int m, int a, int64_t max_stride = 1) {
    const ConvProblem p = row_problem(given);
    const std::string filter = std::to_string(given.r) + "x" + std::to_string(given.s);
    const char* along = along_h(given) ? "H" : "W";
    const char* across = along_h(given) ? "W" : "H";
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return name + " runs float32 and float64 only";
    if (p.stride_w < 1 || p.stride_w > max_stride || p.dil_w != 1)
        return name + " on a " + filter + " filter (" + algorithm + " along " + along + ") needs stride " +
               (max_stride == 1 ? "1" : "1 or 2") + " and dilation 1 along " + along + ", got stride " +
               std::to_string(p.stride_w) + ", dilation " + std::to_string(p.dil_w);
    if (p.pad_h != 0)
        return name + " on a " + filter + " filter needs no padding along " + across + ", got " +
               std::to_string(p.pad_h);
    const Geometry d = geometry(given, m, a);
    if (d.kg > INT_MAX || d.cg > INT_MAX || d.block > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(d.kg) + ", C/groups=" +
               std::to_string(d.cg) + ") exceeds the 32-bit BLAS interface";
    return "";
}

inline int64_t u_elems(const ConvProblem& p, int a) { return a * p.k * p.c_per_group(); }

// For `count` consecutive tiles from tile t: the offset of each one's row (image stride n_stride,
// row stride row_stride) and its first column, j*step + origin. One division for the first
// tile; the others step along (tiles run along a row, rows along the images).
inline void tile_starts(const ConvProblem& p, const Geometry& d, int64_t t, int64_t count, int64_t step,
                        int64_t origin, int64_t n_stride, int64_t row_stride, int64_t* row_at, int64_t* w_at) {
    int64_t row = t / d.tw, j = t % d.tw;
    for (int64_t b = 0; b < count; ++b) {
        row_at[b] = row / p.p * n_stride + row % p.p * row_stride;
        w_at[b] = j * step + origin;
        if (++j == d.tw) j = 0, ++row;
    }
}

inline size_t workspace_bytes(const ConvProblem& p, int m, int a) {
    const Geometry d = geometry(p, m, a);
    return size_t(u_elems(p, a) + a * (d.cg + d.kg) * d.block) * p.elem_size();
}

// U for every group: U[g][xi][k][c] = sum_j G[xi][j] g_kc[j] (true convolution: g mirrored).
template <class Alg, typename T>
void filter_transform(const ConvProblem& p, const T* w, T* U, int threads) {
    constexpr int a = Alg::a, taps = Alg::taps;
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t kc = 0; kc < p.k * cg; ++kc) {
        const int64_t k = kc / cg, c = kc % cg, g = k / kg, kl = k % kg;
        const T* w_kc = w + kc * taps;
        T t[taps];
        for (int j = 0; j < taps; ++j) t[j] = w_kc[p.flip ? taps - 1 - j : j];
        T* u = U + g * a * kg * cg + kl * cg + c;
        for (int xi = 0; xi < a; ++xi) {
            T v = T(0);
            for (int j = 0; j < taps; ++j) v += Alg::template g<T>(xi, j) * t[j];
            u[xi * kg * cg] = v;
        }
    }
}

template <class Alg, typename T>
void run(const ConvArgs& args) {
    constexpr int n = Alg::n, a = Alg::a, m = Alg::m, stride = Alg::stride;
    static_assert(n == stride * (m - 1) + Alg::taps, "a tile's inputs");
    const ConvProblem p = row_problem(args.prob);
    const Geometry d = geometry(args.prob, m, a);
    const int threads = args.ctx.threads();
    const T* x = static_cast<const T*>(args.x);
    T* y = static_cast<T*>(args.y);
    T* workspace = static_cast<T*>(args.workspace);
    const T* U = static_cast<const T*>(args.prepared_filter);
    T* V = workspace + u_elems(p, a);
    T* Mt = V + a * d.cg * d.block;
    if (!U) {
        filter_transform<Alg, T>(p, static_cast<const T*>(args.w), workspace, threads);
        U = workspace;
    }
    const T alpha = T(args.alpha), beta = T(args.beta);
    const int64_t ldv = d.block;
    BlasThreads blas_threads(1);  // the GEMMs run side by side, each on one thread
    for (int64_t g = 0; g < p.groups; ++g) {
        const T* Ug = U + g * a * d.kg * d.cg;
        for (int64_t t0 = 0; t0 < d.tiles; t0 += d.block) {
            const int64_t nb = std::min(d.block, d.tiles - t0);
            const int64_t tasks = a * ceil_div(nb, kGemmColumns);
#pragma omp parallel num_threads(threads)
            {
                // a. input transform, kChunk tiles at a time: where each tile starts (computed
                // once per chunk, not per channel), then for each channel the tiles' inputs (in
                // NHWC the channels of a pixel are adjacent: the chunk's pixels stay in cache
                // while its channels are read)
#pragma omp for schedule(static)
                for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
                    const int64_t count = std::min(nb - b0, kChunk);
                    int64_t x_at[kChunk], w_at[kChunk];
                    tile_starts(p, d, t0 + b0, count, m * stride, -p.pad_w, d.xs_n, d.xs_h * p.stride_h, x_at,
                                w_at);
                    // in[i][b]: input i of tile b (zeros past the image and past the chunk's tiles)
                    T in[n][kChunk];
                    if (count < kChunk)
                        for (int i = 0; i < n; ++i) std::fill(in[i] + count, in[i] + kChunk, T(0));
                    for (int64_t c = 0; c < d.cg; ++c) {
                        const T* xc = x + (g * d.cg + c) * d.xs_c;
                        T* vc = V + c * ldv + b0;
                        for (int64_t b = 0; b < count; ++b) {
                            const T* xr = xc + x_at[b];
                            const int64_t w0 = w_at[b];
                            if (w0 >= 0 && w0 + n <= p.w) {
#pragma GCC unroll 16
                                for (int i = 0; i < n; ++i) in[i][b] = xr[(w0 + i) * d.xs_w];
                            } else {
                                for (int i = 0; i < n; ++i) {
                                    const int64_t wi = w0 + i;
                                    in[i][b] = wi >= 0 && wi < p.w ? xr[wi * d.xs_w] : T(0);
                                }
                            }
                        }
                        // BT in[:, b] for the chunk's tiles side by side, in vectors along b (V's
                        // rows hold whole chunks: the block is a multiple of kChunk); unrolled, so
                        // each coefficient is a constant and its zeros drop out
#pragma GCC unroll 16
                        for (int xi = 0; xi < a; ++xi) {
                            T v[kChunk] = {};
#pragma GCC unroll 16
                            for (int i = 0; i < n; ++i)
                                if (Alg::template bt<T>(xi, i) != T(0))
                                    for (int64_t b = 0; b < kChunk; ++b) v[b] += Alg::template bt<T>(xi, i) * in[i][b];
                            std::copy(v, v + kChunk, vc + xi * d.cg * ldv);
                        }
                    }
                }
                // b. the GEMMs, in column slices of a fixed width
#pragma omp for schedule(dynamic, 1)
                for (int64_t task = 0; task < tasks; ++task) {
                    const int64_t xi = task % a, c0 = task / a * kGemmColumns;
                    const int64_t cols = std::min(kGemmColumns, nb - c0);
                    gemm(false, false, int(d.kg), int(cols), int(d.cg), T(1), Ug + xi * d.kg * d.cg, int(d.cg),
                         V + xi * d.cg * ldv + c0, int(ldv), T(0), Mt + xi * d.kg * ldv + c0, int(ldv));
                }
                // c. output transform, kChunk tiles at a time, as the input transform
#pragma omp for schedule(static)
                for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
                    const int64_t count = std::min(nb - b0, kChunk);
                    int64_t y_at[kChunk], q_at[kChunk];
                    tile_starts(p, d, t0 + b0, count, m, 0, d.ys_n, d.ys_h, y_at, q_at);
                    for (int64_t k = 0; k < d.kg; ++k) {
                        T* yk = y + (g * d.kg + k) * d.ys_c;
                        const T* mk = Mt + k * ldv + b0;
                        // out[i][b] = (AT M[:, b])[i], in vectors along b as the input transform
                        // (columns past nb are the workspace's, computed and never stored)
                        T out[m][kChunk] = {};
#pragma GCC unroll 16
                        for (int xi = 0; xi < a; ++xi) {
                            T mv[kChunk];
                            std::copy(mk + xi * d.kg * ldv, mk + xi * d.kg * ldv + kChunk, mv);
#pragma GCC unroll 16
                            for (int i = 0; i < m; ++i)
                                if (Alg::template at<T>(i, xi) != T(0))
                                    for (int64_t b = 0; b < kChunk; ++b) out[i][b] += Alg::template at<T>(i, xi) * mv[b];
                        }
                        for (int64_t b = 0; b < count; ++b) {
                            T* yr = yk + y_at[b];
                            const int64_t q0 = q_at[b];  // the tile's first output
                            const int64_t outputs = std::min<int64_t>(m, p.q - q0);
                            for (int i = 0; i < outputs; ++i) blend_store(yr + (q0 + i) * d.ys_w, out[i][b], alpha, beta);
                        }
                    }
                }
            }
        }
    }
}

}  // namespace bilinear_1d
}  // namespace cpu
}  // namespace convcore
