// IMPLICIT_GEMM backward passes on the CPU: the GEMMs of cpu/im2col_gemm_backward.cpp
// without the col matrix, for every stride, padding, dilation, group count and both modes.
// Each task owns an output tile and walks its reduction in chunks, unfolding just that chunk
// into a small per-thread panel, and a register-tiled micro-kernel (MR rows x NR columns,
// GCC vector types, compiled for AVX-512, AVX2+FMA and SSE2, the widest the CPU runs picked at
// run time, as in cpu/implicit_gemm.cpp) accumulates the tile.
//
// Backward data: dX[n, g] (Cg x HW) = W[g]^T * B, B[(k, r, s)][(h, w)] = dy[n, k, oh, ow] where
// h = oh*stride_h - pad_h + r*dil_h (likewise w). With stride > 1 most of B is zero: the input
// positions are split into stride_h x stride_w phase classes (h = ph + i*stride_h,
// w = pw + j*stride_w), and for each phase only the taps r with (ph + pad_h - r*dil_h) a
// multiple of stride_h take part, at oh = i + (ph + pad_h - r*dil_h) / stride_h: a dense
// stride-1 gather, no multiplication by a structural zero.
//
// Backward filter: dW[g] (Kg x L, L = Cg*R*S) = sum over n of dY[n, g] (Kg x PQ) * col_n^T
// (PQ x L). A task owns a tile of output channels x filter elements (c, r', s') and a range
// of the reduction's (image, output-position chunk) pairs. In both directions each chunk's
// float32 tile is added into a float64 accumulator. When there are few tiles, the reduction is split into ranges whose double partial
// sums are added in a fixed order afterwards: the split depends only on the problem, so the
// result does not depend on the thread count. No workspace (scratch is a few hundred KB).
// Backward filter also runs channels-last natively (its own section below).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/scratch.hpp"


namespace convcore {
namespace cpu {

namespace {

// thread_vector sites
struct Phases;
struct DataPanels;
struct DataSums;
struct DataSegments;
struct FilterPanels;
struct FilterSums;
struct FilterPartials;
struct NhwcRows;
struct NhwcSums;
struct NhwcPartials;

constexpr int64_t MT = 64;          // output rows (channels) per task
constexpr int64_t LB = 128;         // reduction rows per panel
constexpr int64_t NB_TARGET = 128;  // output columns per task (rounded to a multiple of NR)

#define CONVCORE_ALWAYS_INLINE inline __attribute__((always_inline))

// c[i][0..NR) += sum_l a[i*lda + l] * b[l*ldb + 0..NR) for i < MR (or a[l*lda + i] when
// APixelMajor: the NHWC backward filter's packed strips); MR x NV accumulators of VB-byte vectors
// stay in registers.
template <typename T, int MR, int NV, int VB, bool APixelMajor = false>
CONVCORE_ALWAYS_INLINE void micro(int64_t len, const T* __restrict a, int64_t lda,
                                  const T* __restrict b, int64_t ldb, T* __restrict c, int64_t ldc) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&acc[i][j], c + i * ldc + j * L, VB);
    for (int64_t l = 0; l < len; ++l) {
        V bv[NV];
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&bv[j], b + l * ldb + j * L, VB);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            // x - 0 is x for every x, so this folds to a broadcast load (0 + x does not: -0)
            const V ai = (APixelMajor ? a[l * lda + i] : a[i * lda + l]) - V{};
#pragma GCC unroll 16
            for (int j = 0; j < NV; ++j) acc[i][j] += ai * bv[j];
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) __builtin_memcpy(c + i * ldc + j * L, &acc[i][j], VB);
}

template <typename T, int MR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void strip(int64_t i, int64_t m, int64_t len, const T* a, int64_t lda,
                                  const T* b, int64_t ldb, T* c, int64_t ldc) {
    for (; i + MR <= m; i += MR) micro<T, MR, NV, VB>(len, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
    if constexpr (MR > 1) strip<T, MR / 2, NV, VB>(i, m, len, a, lda, b, ldb, c, ldc);
}

// c (m x nbp) += a (m x len, row stride lda) * b (len x nbp, row stride ldb); nbp a multiple of NR.
template <typename T, int MR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void panel_gemm(int64_t m, int64_t nbp, int64_t len, const T* a, int64_t lda,
                                       const T* b, int64_t ldb, T* c, int64_t ldc) {
    constexpr int64_t NR = NV * VB / sizeof(T);
    for (int64_t j = 0; j < nbp; j += NR) strip<T, MR, NV, VB>(0, m, len, a, lda, b + j, ldb, c + j, ldc);
}

template <typename T>
using PanelGemm = void (*)(int64_t, int64_t, int64_t, const T*, int64_t, const T*, int64_t, T*, int64_t);

struct Kernel {
    PanelGemm<float> f32;
    int nr_f32;
    PanelGemm<double> f64;
    int nr_f64;
};

#define CONVCORE_BWD_KERNELS(NAME, ATTR, MR, NV, VB)                                            \
    ATTR void NAME##_f32(int64_t m, int64_t nbp, int64_t len, const float* a, int64_t lda,      \
                         const float* b, int64_t ldb, float* c, int64_t ldc) {                  \
        panel_gemm<float, MR, NV, VB>(m, nbp, len, a, lda, b, ldb, c, ldc);                     \
    }                                                                                           \
    ATTR void NAME##_f64(int64_t m, int64_t nbp, int64_t len, const double* a, int64_t lda,     \
                         const double* b, int64_t ldb, double* c, int64_t ldc) {                \
        panel_gemm<double, MR, NV, VB>(m, nbp, len, a, lda, b, ldb, c, ldc);                    \
    }                                                                                           \
    const Kernel NAME = {NAME##_f32, NV * VB / 4, NAME##_f64, NV * VB / 8};

// The NHWC backward filter's kernels: c (m x nbp) += A (len x m) * B (len x nbp), both packed:
// A as strips of MR columns ([strip][l][MR], m a multiple of MR), B as panels of NR columns
// ([panel][l][NR]). MR x 2 vectors of accumulators (12, 12 and 24 of the 16, 16 and 32 vector
// registers).
template <typename T, int MR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void packed_gemm(int64_t m, int64_t nbp, int64_t len, const T* a, const T* b, T* c,
                                        int64_t ldc) {
    constexpr int64_t NR = NV * VB / sizeof(T);
    for (int64_t j = 0; j < nbp; j += NR)
        for (int64_t i = 0; i < m; i += MR)
            micro<T, MR, NV, VB, true>(len, a + i * len, MR, b + j * len, NR, c + i * ldc + j, ldc);
}

template <typename T>
using PackedGemm = void (*)(int64_t, int64_t, int64_t, const T*, const T*, T*, int64_t);

struct NhwcKernel {
    PackedGemm<float> f32;
    int mr_f32, nr_f32;
    PackedGemm<double> f64;
    int mr_f64, nr_f64;
};

#define CONVCORE_BWD_NHWC_KERNELS(NAME, ATTR, MR, NV, VB)                                                 \
    ATTR void NAME##_f32(int64_t m, int64_t nbp, int64_t len, const float* a, const float* b, float* c,    \
                         int64_t ldc) {                                                                   \
        packed_gemm<float, MR, NV, VB>(m, nbp, len, a, b, c, ldc);                                        \
    }                                                                                                     \
    ATTR void NAME##_f64(int64_t m, int64_t nbp, int64_t len, const double* a, const double* b, double* c, \
                         int64_t ldc) {                                                                   \
        packed_gemm<double, MR, NV, VB>(m, nbp, len, a, b, c, ldc);                                       \
    }                                                                                                     \
    const NhwcKernel NAME = {NAME##_f32, MR, NV * VB / 4, NAME##_f64, MR, NV * VB / 8};

CONVCORE_BWD_KERNELS(bwd_baseline, , 4, 2, 16)
CONVCORE_BWD_NHWC_KERNELS(bwd_nhwc_baseline, , 4, 2, 16)
#ifdef CONVCORE_X86_DISPATCH
CONVCORE_BWD_KERNELS(bwd_avx2, __attribute__((target("avx2,fma"))), 4, 3, 32)
CONVCORE_BWD_KERNELS(bwd_avx512, __attribute__((target("avx512f,fma"))), 8, 2, 64)
CONVCORE_BWD_NHWC_KERNELS(bwd_nhwc_avx2, __attribute__((target("avx2,fma"))), 6, 2, 32)
CONVCORE_BWD_NHWC_KERNELS(bwd_nhwc_avx512, __attribute__((target("avx512f,fma"))), 12, 2, 64)
#else  // one set: for_cpu_isa picks the baseline
const Kernel &bwd_avx2 = bwd_baseline, &bwd_avx512 = bwd_baseline;
const NhwcKernel &bwd_nhwc_avx2 = bwd_nhwc_baseline, &bwd_nhwc_avx512 = bwd_nhwc_baseline;
#endif

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IMPLICIT_GEMM runs float32 and float64 only";
    return "";
}

size_t workspace_bytes(const ConvProblem&) { return 0; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- backward data ----------------------------------------------------------------------------

// One phase class of input positions (h = ph + i*stride_h, w = pw + j*stride_w), with the taps
// that reach it and their output offsets: tap r reads oh = i + off_r.
struct Phase {
    int64_t ph, pw, hn, wn;
    std::vector<int64_t> r, off_r, s, off_s;
};

// The phases of p into this thread's vector (its phases' vectors keep their capacity).
const std::vector<Phase>& phases_of(const ConvProblem& p) {
    std::vector<Phase>& out = thread_vector<Phase, Phases>();
    out.resize(size_t(std::min(p.stride_h, p.h) * std::min(p.stride_w, p.w)));
    size_t i = 0;
    for (int64_t ph = 0; ph < std::min(p.stride_h, p.h); ++ph)
        for (int64_t pw = 0; pw < std::min(p.stride_w, p.w); ++pw) {
            Phase& f = out[i++];
            f.ph = ph, f.pw = pw, f.hn = ceil_div(p.h - ph, p.stride_h), f.wn = ceil_div(p.w - pw, p.stride_w);
            f.r.clear(), f.off_r.clear(), f.s.clear(), f.off_s.clear();
            for (int64_t r = 0; r < p.r; ++r) {
                const int64_t u = ph + p.pad_h - r * p.dil_h;
                if (u % p.stride_h == 0) f.r.push_back(r), f.off_r.push_back(u / p.stride_h);
            }
            for (int64_t s = 0; s < p.s; ++s) {
                const int64_t u = pw + p.pad_w - s * p.dil_w;
                if (u % p.stride_w == 0) f.s.push_back(s), f.off_s.push_back(u / p.stride_w);
            }
        }
    return out;
}

// A run of tile columns in one row of the phase grid: columns [col, col + j1 - j0) are (i, j0..j1).
struct Segment {
    int64_t i, j0, j1, col;
};

template <typename T>
void data_typed(const BwdDataArgs& a, PanelGemm<T> gemm, int64_t nr) {
    const ConvProblem& pr = a.prob;
    const int64_t cg = pr.c_per_group(), kg = pr.k_per_group(), rs = pr.r * pr.s;
    const int64_t pq = pr.p * pr.q, hw = pr.h * pr.w;
    const int64_t nb = std::max<int64_t>(1, NB_TARGET / nr) * nr;
    const int64_t ct_max = std::min(MT, cg), c_tiles = ceil_div(cg, MT);
    const T* w = static_cast<const T*>(a.w);
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    const T alpha = T(a.alpha), beta = T(a.beta);
    const std::vector<Phase>& phases = phases_of(pr);

    const int threads = a.ctx.threads();
    const int64_t scratch_elems = ct_max * LB + LB * nb + ct_max * nb;
    std::vector<T>& scratch = thread_vector<T, DataPanels>(size_t(threads * scratch_elems));
    std::vector<double>& dscratch = thread_vector<double, DataSums>(size_t(threads * ct_max * nb));
    std::vector<Segment>& seg_scratch = thread_vector<Segment, DataSegments>(size_t(threads * nb));

#pragma omp parallel num_threads(threads)
    {
        T* apan = scratch.data() + omp_get_thread_num() * scratch_elems;  // ct_max x LB
        T* bpan = apan + ct_max * LB;                                      // LB x nb
        T* acc = bpan + LB * nb;                                           // ct_max x nb
        double* dacc = dscratch.data() + omp_get_thread_num() * ct_max * nb;
        Segment* segs = seg_scratch.data() + omp_get_thread_num() * nb;
        for (const Phase& f : phases) {
            const int64_t positions = f.hn * f.wn, p_tiles = ceil_div(positions, nb);
            const int64_t nr_taps = int64_t(f.r.size()), ns_taps = int64_t(f.s.size());
            const int64_t len = kg * nr_taps * ns_taps;
            const int64_t tasks = pr.n * pr.groups * c_tiles * p_tiles;
#pragma omp for schedule(dynamic)
            for (int64_t t = 0; t < tasks; ++t) {
                const int64_t ptile = t % p_tiles, ctile = t / p_tiles % c_tiles;
                const int64_t g = t / (p_tiles * c_tiles) % pr.groups;
                const int64_t n = t / (p_tiles * c_tiles * pr.groups);
                const int64_t col0 = ptile * nb, cols = std::min(nb, positions - col0);
                const int64_t ncols = ceil_div(cols, nr) * nr;
                const int64_t c0 = ctile * MT, ct = std::min(MT, cg - c0);
                int64_t n_segs = 0;
                for (int64_t col = 0; col < cols;) {
                    const int64_t i = (col0 + col) / f.wn, j0 = (col0 + col) % f.wn;
                    const int64_t j1 = std::min(f.wn, j0 + cols - col);
                    segs[n_segs++] = {i, j0, j1, col};
                    col += j1 - j0;
                }
                std::fill(dacc, dacc + ct * nb, 0.0);
                for (int64_t l0 = 0; l0 < len; l0 += LB) {
                    const int64_t lb = std::min(LB, len - l0);
                    // A: a[ci][ll] = w[g*Kg + k][c0 + ci][r'][s'] for l = (k, ri, si).
                    for (int64_t ll = 0; ll < lb; ++ll) {
                        const int64_t l = l0 + ll, si = l % ns_taps, ri = l / ns_taps % nr_taps;
                        const int64_t k = l / (ns_taps * nr_taps);
                        const int64_t tap = conv_filter_tap(f.r[ri], pr.r, pr.flip) * pr.s +
                                            conv_filter_tap(f.s[si], pr.s, pr.flip);
                        const T* wk = w + ((g * kg + k) * cg + c0) * rs + tap;
                        for (int64_t ci = 0; ci < ct; ++ci) apan[ci * LB + ll] = wk[ci * rs];
                    }
                    // B: b[ll][col] = dy[n][g*Kg + k][i + off_r][j + off_s] (0 outside dy).
                    for (int64_t ll = 0; ll < lb; ++ll) {
                        const int64_t l = l0 + ll, si = l % ns_taps, ri = l / ns_taps % nr_taps;
                        const int64_t k = l / (ns_taps * nr_taps);
                        const int64_t offr = f.off_r[ri], offs = f.off_s[si];
                        const T* dyk = dy + (n * pr.k + g * kg + k) * pq;
                        T* d = bpan + ll * nb;
                        const int64_t ja = std::max<int64_t>(0, -offs), jb = std::min(f.wn, pr.q - offs);
                        for (int64_t sg = 0; sg < n_segs; ++sg) {
                            const Segment& s = segs[sg];
                            T* ds = d + s.col - s.j0;  // ds[j]: column of (s.i, j)
                            const int64_t oh = s.i + offr;
                            if (oh < 0 || oh >= pr.p) {
                                for (int64_t j = s.j0; j < s.j1; ++j) ds[j] = T(0);
                                continue;
                            }
                            const T* row = dyk + oh * pr.q + offs;  // row[j] = dy[oh][j + offs]
                            const int64_t lo = std::clamp(ja, s.j0, s.j1), hi = std::clamp(jb, lo, s.j1);
                            for (int64_t j = s.j0; j < lo; ++j) ds[j] = T(0);
                            for (int64_t j = lo; j < hi; ++j) ds[j] = row[j];
                            for (int64_t j = hi; j < s.j1; ++j) ds[j] = T(0);
                        }
                        for (int64_t col = cols; col < ncols; ++col) d[col] = T(0);
                    }
                    // Each chunk's tile in T, their sum in double (float32 error does not grow
                    // with K*R*S).
                    std::fill(acc, acc + ct * nb, T(0));
                    gemm(ct, ncols, lb, apan, LB, bpan, nb, acc, nb);
                    for (int64_t i = 0; i < ct * nb; ++i) dacc[i] += double(acc[i]);
                }
                // Epilogue: dx = alpha * acc + beta * dx (beta == 0 never reads dx).
                for (int64_t ci = 0; ci < ct; ++ci) {
                    T* dxc = dx + (n * pr.c + g * cg + c0 + ci) * hw;
                    const double* ar = dacc + ci * nb;
                    for (int64_t sg = 0; sg < n_segs; ++sg) {
                        const Segment& s = segs[sg];
                        T* xr = dxc + (f.ph + s.i * pr.stride_h) * pr.w + f.pw;
                        for (int64_t j = s.j0; j < s.j1; ++j)
                            blend_store(xr + j * pr.stride_w, T(ar[s.col + j - s.j0]), alpha, beta);
                    }
                }
            }
        }
    }
}

// ---- backward filter --------------------------------------------------------------------------

// Reduction splits: enough independent (split, tile) tasks for a machine's cores, chosen from
// the problem alone so that the summation order is the same for every thread count.
int64_t filter_splits(int64_t tiles, int64_t chunks) {
    constexpr int64_t kTargetTasks = 32;
    if (tiles >= kTargetTasks) return 1;
    return std::max<int64_t>(1, std::min(chunks, ceil_div(kTargetTasks, tiles)));
}

template <typename T>
void filter_typed(const BwdFilterArgs& a, PanelGemm<T> gemm, int64_t nr) {
    const ConvProblem& pr = a.prob;
    const int64_t cg = pr.c_per_group(), kg = pr.k_per_group(), rs = pr.r * pr.s;
    const int64_t len_out = cg * rs, pq = pr.p * pr.q, hw = pr.h * pr.w;
    const int64_t nb = std::max<int64_t>(1, NB_TARGET / nr) * nr;
    const int64_t kt_max = std::min(MT, kg), k_tiles = ceil_div(kg, MT), l_tiles = ceil_div(len_out, nb);
    const int64_t tiles = pr.groups * k_tiles * l_tiles;
    const int64_t chunks_per_image = ceil_div(pq, LB), chunks = pr.n * chunks_per_image;
    const int64_t splits = filter_splits(tiles, chunks);
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);

    // Per filter element column (c, r', s') of a tile: nothing precomputed beyond the taps.
    const int threads = a.ctx.threads();
    const int64_t scratch_elems = LB * nb + kt_max * nb;
    std::vector<T>& scratch = thread_vector<T, FilterPanels>(size_t(threads * scratch_elems));
    std::vector<double>& dscratch = thread_vector<double, FilterSums>(size_t(threads * kt_max * nb));
    std::vector<double>& partial = thread_vector<double, FilterPartials>(size_t(splits) * size_t(pr.k * len_out));

#pragma omp parallel num_threads(threads)
    {
        T* bpan = scratch.data() + omp_get_thread_num() * scratch_elems;  // LB x nb
        T* acc = bpan + LB * nb;                                           // kt_max x nb
        double* dacc = dscratch.data() + omp_get_thread_num() * kt_max * nb;
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < splits * tiles; ++t) {
            const int64_t ltile = t % l_tiles, ktile = t / l_tiles % k_tiles;
            const int64_t g = t / (l_tiles * k_tiles) % pr.groups, split = t / tiles;
            const int64_t col0 = ltile * nb, cols = std::min(nb, len_out - col0);
            const int64_t ncols = ceil_div(cols, nr) * nr;
            const int64_t k0 = ktile * MT, kt = std::min(MT, kg - k0);
            const int64_t m0 = split * chunks / splits, m1 = (split + 1) * chunks / splits;
            std::fill(dacc, dacc + kt * nb, 0.0);
            for (int64_t m = m0; m < m1; ++m) {
                const int64_t n = m / chunks_per_image, pq0 = m % chunks_per_image * LB;
                const int64_t lb = std::min(LB, pq - pq0);
                const T* xg = x + (n * pr.c + g * cg) * hw;
                // B: b[ll][col] = x[n][g*Cg + c][ih][iw] for output position pq0 + ll and filter
                // element col0 + col = (c, r', s') at tap (r, s) = (conv_filter_tap(r'), ...).
                for (int64_t col = 0; col < cols; ++col) {
                    const int64_t e = col0 + col, c = e / rs, fr = e / pr.s % pr.r, fs = e % pr.s;
                    const int64_t r = conv_filter_tap(fr, pr.r, pr.flip), s = conv_filter_tap(fs, pr.s, pr.flip);
                    const T* xc = xg + c * hw;
                    int64_t oh = pq0 / pr.q, ow = pq0 % pr.q;
                    for (int64_t ll = 0; ll < lb; ++ll) {
                        const int64_t ih = conv_input_coord(oh, r, pr.pad_h, pr.stride_h, pr.dil_h);
                        const int64_t iw = conv_input_coord(ow, s, pr.pad_w, pr.stride_w, pr.dil_w);
                        bpan[ll * nb + col] =
                            (ih >= 0 && ih < pr.h && iw >= 0 && iw < pr.w) ? xc[ih * pr.w + iw] : T(0);
                        if (++ow == pr.q) ow = 0, ++oh;
                    }
                }
                for (int64_t ll = 0; ll < lb; ++ll)
                    for (int64_t col = cols; col < ncols; ++col) bpan[ll * nb + col] = T(0);
                std::fill(acc, acc + kt * nb, T(0));
                gemm(kt, ncols, lb, dy + (n * pr.k + g * kg + k0) * pq + pq0, pq, bpan, nb, acc, nb);
                for (int64_t i = 0; i < kt * nb; ++i) dacc[i] += double(acc[i]);
            }
            double* out = partial.data() + split * pr.k * len_out;
            for (int64_t i = 0; i < kt; ++i)
                for (int64_t col = 0; col < cols; ++col)
                    out[(g * kg + k0 + i) * len_out + col0 + col] = dacc[i * nb + col];
        }
        // dw = alpha * (the splits' partial sums, in split order) + beta * dw.
        const T alpha = T(a.alpha), beta = T(a.beta);
        const int64_t total = pr.k * len_out;
#pragma omp for schedule(static)
        for (int64_t e = 0; e < total; ++e) {
            double sum = 0.0;
            for (int64_t sp = 0; sp < splits; ++sp) sum += partial[sp * total + e];
            blend_store(dw + e, T(sum), alpha, beta);
        }
    }
}

// ---- backward filter, NHWC ------------------------------------------------------------------

// NHWC transposes the filter GEMM so that both operands are read along their contiguous axes:
//   dWt[g] ((R*S*Cg) x Kg): dWt[(r, s, c)][k] = sum over output pixels m of A[m][(r, s, c)] * dy[m][g*Kg + k],
// A[m] being output pixel m's NHWC im2col row: the Cg channels of the input pixel each tap
// (r, s) reads, 0 in the padding. A task owns NHWC_COLS filter elements x MT output channels;
// per chunk of LB pixels it packs A's rows for its columns alone (copies of channel runs, of
// whole filter rows S*C long without groups or dilation), and the kernel reads dy in place
// (packed only when Kg is not a multiple of the kernel's vectors). Taps are in correlation
// order; the final store mirrors them in the true-convolution mode. Reduction splits and the
// float64 accumulation are those of the NCHW path above, so the result does not depend on the
// thread count either.
constexpr int64_t NHWC_COLS = 120;  // filter elements per task: a multiple of every kernel's MR
constexpr int64_t NHWC_K = 256;     // output channels per task: a packed A panel serves all of them

// row[0, cols) = A[pixel (n, oh, ow)][col0, col0 + cols).
template <typename T>
void pack_nhwc_row(const ConvProblem& p, const T* x, int64_t g, int64_t n, int64_t oh, int64_t ow, int64_t col0,
                   int64_t cols, T* row) {
    const int64_t cg = p.c_per_group(), sc = p.s * cg, end = col0 + cols;
    const bool row_runs = p.groups == 1 && p.dil_w == 1;  // a filter row's taps read one run of x
    const T* xn = x + n * p.h * p.w * p.c;
    for (int64_t col = col0; col < end;) {
        const int64_t r = col / sc, j = col % sc, jend = std::min(sc, j + end - col);  // j = s*Cg + c
        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
        T* d = row + (col - col0) - j;  // d[j'] holds column (r, j')
        if (ih < 0 || ih >= p.h) {
            std::fill(d + j, d + jend, T(0));
        } else if (row_runs) {
            const int64_t iw0 = ow * p.stride_w - p.pad_w;  // tap s reads iw0 + s
            const int64_t lo = std::clamp<int64_t>(-iw0, 0, p.s) * cg, hi = std::clamp<int64_t>(p.w - iw0, 0, p.s) * cg;
            const int64_t a0 = std::clamp(lo, j, jend), a1 = std::clamp(hi, a0, jend);
            std::fill(d + j, d + a0, T(0));
            std::copy(xn + (ih * p.w + iw0) * p.c + a0, xn + (ih * p.w + iw0) * p.c + a1, d + a0);
            std::fill(d + a1, d + jend, T(0));
        } else {
            for (int64_t jj = j; jj < jend;) {
                const int64_t s = jj / cg, c = jj % cg, cend = std::min(cg, c + jend - jj);
                const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
                if (iw < 0 || iw >= p.w)
                    std::fill(d + jj, d + jj + cend - c, T(0));
                else
                    std::copy_n(xn + (ih * p.w + iw) * p.c + g * cg + c, cend - c, d + jj);
                jj += cend - c;
            }
        }
        col += jend - j;
    }
}

// The offset in dw (K x Cg x R x S) of output channel 0's filter element col = (r, s, c), (r, s)
// a correlation tap: its filter element is (conv_filter_tap(r), conv_filter_tap(s)).
int64_t nhwc_filter_offset(const ConvProblem& p, int64_t col) {
    const int64_t cg = p.c_per_group(), r = col / (p.s * cg), s = col / cg % p.s, c = col % cg;
    return (c * p.r + conv_filter_tap(r, p.r, p.flip)) * p.s + conv_filter_tap(s, p.s, p.flip);
}

template <typename T>
void filter_nhwc_typed(const BwdFilterArgs& a, PackedGemm<T> gemm, int64_t mr, int64_t nr) {
    const ConvProblem& pr = a.prob;
    const int64_t cg = pr.c_per_group(), kg = pr.k_per_group(), len_out = pr.r * pr.s * cg;
    const int64_t pixels = pr.n * pr.p * pr.q;
    const int64_t k_tiles = ceil_div(kg, NHWC_K), c_tiles = ceil_div(len_out, NHWC_COLS);
    const int64_t tiles = pr.groups * k_tiles * c_tiles, chunks = ceil_div(pixels, LB);
    const int64_t splits = filter_splits(tiles, chunks);
    const int64_t ktp_max = ceil_div(std::min(NHWC_K, kg), nr) * nr, colp_max = ceil_div(NHWC_COLS, mr) * mr;
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);
    const T alpha = T(a.alpha), beta = T(a.beta);

    const int threads = a.ctx.threads();
    const int64_t scratch_elems = NHWC_COLS + LB * colp_max + LB * ktp_max + colp_max * ktp_max;
    std::vector<T>& scratch = thread_vector<T, NhwcRows>(size_t(threads * scratch_elems));
    std::vector<double>& dscratch = thread_vector<double, NhwcSums>(size_t(threads * colp_max * ktp_max));
    std::vector<double>& partial =  // [split][k][(r, s, c)]
        thread_vector<double, NhwcPartials>(splits > 1 ? size_t(splits) * size_t(pr.k * len_out) : 0);

#pragma omp parallel num_threads(threads)
    {
        T* row = scratch.data() + omp_get_thread_num() * scratch_elems;  // one pixel's A row
        T* apan = row + NHWC_COLS;                                       // [strip][LB][mr]
        T* bpan = apan + LB * colp_max;                                  // [panel][LB][nr]: dy
        T* acc = bpan + LB * ktp_max;                                    // colp x ktp
        double* dacc = dscratch.data() + omp_get_thread_num() * colp_max * ktp_max;
        int64_t offsets[NHWC_COLS];
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < splits * tiles; ++t) {
            const int64_t ctile = t % c_tiles, ktile = t / c_tiles % k_tiles;
            const int64_t g = t / (c_tiles * k_tiles) % pr.groups, split = t / tiles;
            const int64_t col0 = ctile * NHWC_COLS, cols = std::min(NHWC_COLS, len_out - col0);
            const int64_t colp = ceil_div(cols, mr) * mr;
            const int64_t k0 = ktile * NHWC_K, kt = std::min(NHWC_K, kg - k0), ktp = ceil_div(kt, nr) * nr;
            const int64_t c0 = split * chunks / splits, c1 = (split + 1) * chunks / splits;
            std::fill(dacc, dacc + colp * ktp, 0.0);
            for (int64_t ch = c0; ch < c1; ++ch) {
                const int64_t m0 = ch * LB, lb = std::min(LB, pixels - m0);
                int64_t n = m0 / (pr.p * pr.q), oh = m0 / pr.q % pr.p, ow = m0 % pr.q;
                std::fill(row + cols, row + colp, T(0));  // the last strip's padding columns
                for (int64_t ll = 0; ll < lb; ++ll) {
                    pack_nhwc_row(pr, x, g, n, oh, ow, col0, cols, row);
                    for (int64_t i = 0; i < colp; i += mr) {
                        T* d = apan + i * lb + ll * mr;
                        for (int64_t u = 0; u < mr; ++u) d[u] = row[i + u];
                    }
                    const T* dyp = dy + (m0 + ll) * pr.k + g * kg + k0;
                    for (int64_t j = 0; j < ktp; j += nr) {
                        T* d = bpan + j * lb + ll * nr;
                        if (j + nr <= kt)
                            for (int64_t u = 0; u < nr; ++u) d[u] = dyp[j + u];
                        else
                            for (int64_t u = 0; u < nr; ++u) d[u] = j + u < kt ? dyp[j + u] : T(0);
                    }
                    if (++ow == pr.q) {
                        ow = 0;
                        if (++oh == pr.p) oh = 0, ++n;
                    }
                }
                std::fill(acc, acc + colp * ktp, T(0));
                gemm(colp, ktp, lb, apan, bpan, acc, ktp);
                for (int64_t i = 0; i < colp * ktp; ++i) dacc[i] += double(acc[i]);
            }
            // dw rows (output channels) one at a time: its filter elements lie within one row
            for (int64_t i = 0; i < cols; ++i) offsets[i] = nhwc_filter_offset(pr, col0 + i);
            for (int64_t j = 0; j < kt; ++j) {
                const int64_t k = g * kg + k0 + j;
                if (splits == 1)
                    for (int64_t i = 0; i < cols; ++i)
                        blend_store(dw + k * len_out + offsets[i], T(dacc[i * ktp + j]), alpha, beta);
                else
                    for (int64_t i = 0; i < cols; ++i)
                        partial[(split * pr.k + k) * len_out + col0 + i] = dacc[i * ktp + j];
            }
        }
        if (splits > 1) {  // the splits' partial sums, in split order
#pragma omp for schedule(static)
            for (int64_t k = 0; k < pr.k; ++k)
                for (int64_t col = 0; col < len_out; ++col) {
                    double sum = 0.0;
                    for (int64_t sp = 0; sp < splits; ++sp) sum += partial[(sp * pr.k + k) * len_out + col];
                    blend_store(dw + k * len_out + nhwc_filter_offset(pr, col), T(sum), alpha, beta);
                }
        }
    }
}

void run_data(const BwdDataArgs& a) {
    const Kernel& k = for_cpu_isa(bwd_avx512, bwd_avx2, bwd_baseline);  // CONVCORE_CPU_ISA caps the pick
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        data_typed<double>(a, k.f64, k.nr_f64);
    else
        data_typed<float>(a, k.f32, k.nr_f32);
}

void run_filter(const BwdFilterArgs& a) {
    const Kernel& k = for_cpu_isa(bwd_avx512, bwd_avx2, bwd_baseline);
    const NhwcKernel& nk = for_cpu_isa(bwd_nhwc_avx512, bwd_nhwc_avx2, bwd_nhwc_baseline);
    const bool f64 = a.prob.dtype == CONVCORE_DATA_DOUBLE;
    if (a.prob.nhwc)
        f64 ? filter_nhwc_typed<double>(a, nk.f64, nk.mr_f64, nk.nr_f64)
            : filter_nhwc_typed<float>(a, nk.f32, nk.mr_f32, nk.nr_f32);
    else
        f64 ? filter_typed<double>(a, k.f64, k.nr_f64) : filter_typed<float>(a, k.f32, k.nr_f32);
}

// Backward filter runs NHWC natively (x and dy channels-last); backward data converts.
bool runs_nhwc(const ConvProblem&) { return true; }

}  // namespace

extern const Solver implicit_gemm_bwd_data_solver;
const Solver implicit_gemm_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_data = run_data, .made_for = made_for::grouped};
extern const Solver implicit_gemm_bwd_filter_solver;
const Solver implicit_gemm_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run_filter, .runs_nhwc = runs_nhwc, .made_for = made_for::grouped};

}  // namespace cpu
}  // namespace convcore
