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


namespace convcore {
namespace cpu {

namespace {

constexpr int64_t MT = 64;          // output rows (channels) per task
constexpr int64_t LB = 128;         // reduction rows per panel
constexpr int64_t NB_TARGET = 128;  // output columns per task (rounded to a multiple of NR)

#define CONVCORE_ALWAYS_INLINE inline __attribute__((always_inline))

// c[i][0..NR) += sum_l a[i*lda + l] * b[l*ldb + 0..NR) for i < MR; MR x NV accumulators of
// VB-byte vectors stay in registers.
template <typename T, int MR, int NV, int VB>
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
            const V ai = V{} + a[i * lda + l];
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

CONVCORE_BWD_KERNELS(bwd_baseline, , 4, 2, 16)
#ifdef CONVCORE_X86_DISPATCH
CONVCORE_BWD_KERNELS(bwd_avx2, __attribute__((target("avx2,fma"))), 4, 3, 32)
CONVCORE_BWD_KERNELS(bwd_avx512, __attribute__((target("avx512f,fma"))), 8, 2, 64)
#endif

// The widest kernel this CPU runs; CONVCORE_CPU_ISA=avx2|baseline caps it.
const Kernel& pick_kernel() {
#ifdef CONVCORE_X86_DISPATCH
    return for_cpu_isa(bwd_avx512, bwd_avx2, bwd_baseline);
#else
    return bwd_baseline;
#endif
}

const Kernel& best_kernel() {
    static const Kernel& k = pick_kernel();
    return k;
}

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

std::vector<Phase> phases_of(const ConvProblem& p) {
    std::vector<Phase> out;
    for (int64_t ph = 0; ph < std::min(p.stride_h, p.h); ++ph)
        for (int64_t pw = 0; pw < std::min(p.stride_w, p.w); ++pw) {
            Phase f{ph, pw, ceil_div(p.h - ph, p.stride_h), ceil_div(p.w - pw, p.stride_w), {}, {}, {}, {}};
            for (int64_t r = 0; r < p.r; ++r) {
                const int64_t u = ph + p.pad_h - r * p.dil_h;
                if (u % p.stride_h == 0) f.r.push_back(r), f.off_r.push_back(u / p.stride_h);
            }
            for (int64_t s = 0; s < p.s; ++s) {
                const int64_t u = pw + p.pad_w - s * p.dil_w;
                if (u % p.stride_w == 0) f.s.push_back(s), f.off_s.push_back(u / p.stride_w);
            }
            out.push_back(std::move(f));
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
    const std::vector<Phase> phases = phases_of(pr);

    const int threads = a.ctx.threads();
    const int64_t scratch_elems = ct_max * LB + LB * nb + ct_max * nb;
    std::vector<T> scratch(threads * scratch_elems);
    std::vector<double> dscratch(threads * ct_max * nb);
    std::vector<Segment> seg_scratch(threads * nb);

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
    std::vector<T> scratch(threads * scratch_elems);
    std::vector<double> dscratch(threads * kt_max * nb);
    std::vector<double> partial(size_t(splits) * size_t(pr.k * len_out));

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

void run_data(const BwdDataArgs& a) {
    const Kernel& k = best_kernel();
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        data_typed<double>(a, k.f64, k.nr_f64);
    else
        data_typed<float>(a, k.f32, k.nr_f32);
}

void run_filter(const BwdFilterArgs& a) {
    const Kernel& k = best_kernel();
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        filter_typed<double>(a, k.f64, k.nr_f64);
    else
        filter_typed<float>(a, k.f32, k.nr_f32);
}

}  // namespace

extern const Solver implicit_gemm_bwd_data_solver;
const Solver implicit_gemm_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_data = run_data};
extern const Solver implicit_gemm_bwd_filter_solver;
const Solver implicit_gemm_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run_filter};

}  // namespace cpu
}  // namespace convcore
