// IM2COL_GEMM on the CPU: for each image and group, unfold the input into the im2col matrix
// col[(c, r, s)][(p, q)] (Cg*R*S rows, P*Q columns) in the workspace, then one BLAS GEMM
//   Y[n, group] (Kg x PQ) = alpha * W[group] (Kg x Cg*R*S) * col + beta * Y[n, group].
// The GEMM's beta == 0 does not read C, which gives the "beta == 0: y is never read" rule.
// 1x1 filters with stride 1 and no padding need no unfolding: x itself is the matrix.
//
// NHWC runs natively, transposed: per image and group, col[(p, q)][(r, s, c)] (P*Q rows of
// R*S*Cg) and
//   Y[n, group] (PQ x Kg, row stride K) = alpha * col * Wt[group]^T + beta * Y[n, group],
// with Wt the filter as K x R x S x Cg (KRSC, the workspace or the prepared filter; a 1x1 filter
// is KRSC already). A 1x1 stride-1 unpadded layer is one GEMM over every image at once, straight
// on x (N*H*W rows, row stride C).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/conv_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/blas_threads.hpp"

namespace convcore {
namespace cpu {

namespace {

// x is already the col matrix (Cg x H*W per image and group).
bool direct_1x1(const ConvProblem& p) {
    return p.is_1x1() && p.unit_stride() && p.pad_h == 0 && p.pad_w == 0;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IM2COL_GEMM runs float32 and float64 only";
    const int64_t crs = p.c_per_group() * p.r * p.s;
    if (p.k_per_group() > INT_MAX || p.p * p.q > INT_MAX || crs > INT_MAX)
        return "IM2COL_GEMM: a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", P*Q=" + std::to_string(p.p * p.q) + ", C/groups*R*S=" + std::to_string(crs) +
               ") exceeds the 32-bit BLAS interface";
    return "";
}

// NHWC: the filter as KRSC, unless it is 1x1 (KCRS and KRSC agree).
size_t krsc_filter_bytes(const ConvProblem& p) {
    return p.nhwc && !p.is_1x1() ? size_t(p.w_elems()) * p.elem_size() : 0;
}

size_t workspace_bytes(const ConvProblem& p) {
    const size_t filter = (krsc_filter_bytes(p) + 63) / 64 * 64;
    if (direct_1x1(p)) return 0;
    return filter + size_t(p.c_per_group() * p.r * p.s) * size_t(p.p * p.q) * p.elem_size();
}

// Leading dimensions of the NHWC GEMMs (C and K) fit the BLAS interface.
bool runs_nhwc(const ConvProblem& p) { return p.c <= INT_MAX && p.k <= INT_MAX; }

// Fills col (Cg*R*S x P*Q) from one image's group (Cg x H x W). Row (c, fr, fs) holds the
// inputs that filter element w[.][c][fr][fs] multiplies: those at tap conv_filter_tap(fr),
// which is fr itself for cross-correlation and R-1-fr for true convolution.
template <typename T>
void im2col(const ConvProblem& p, const T* x, T* col, int threads) {
    const int64_t rows = p.c_per_group() * p.r * p.s, pq = p.p * p.q, hw = p.h * p.w;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
        const int64_t c = row / (p.r * p.s), fr = row / p.s % p.r, fs = row % p.s;
        const int64_t r = conv_filter_tap(fr, p.r, p.flip), s = conv_filter_tap(fs, p.s, p.flip);
        const T* xc = x + c * hw;
        // Outputs q whose tap s lands inside the row (the rest read the zero padding).
        const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
        const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
        T* d = col + row * pq;
        for (int64_t oh = 0; oh < p.p; ++oh, d += p.q) {
            const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
            if (ih < 0 || ih >= p.h) {
                for (int64_t q = 0; q < p.q; ++q) d[q] = T(0);
                continue;
            }
            const T* xr = xc + ih * p.w;  // output q reads xr[q * stride_w + w0]
            for (int64_t q = 0; q < qv.begin; ++q) d[q] = T(0);
            if (p.stride_w == 1)
                for (int64_t q = qv.begin; q < qv.end; ++q) d[q] = xr[q + w0];
            else
                for (int64_t q = qv.begin; q < qv.end; ++q) d[q] = xr[q * p.stride_w + w0];
            for (int64_t q = qv.end; q < p.q; ++q) d[q] = T(0);
        }
    }
}

// NHWC: col (P*Q x R*S*Cg) of one image's group; row (p, q) holds, for each tap in
// correlation order, the Cg channels that tap reads (zeros in the padding).
template <typename T>
void im2col_nhwc(const ConvProblem& p, const T* x, int64_t n, int64_t g, T* col, int threads) {
    const int64_t cg = p.c_per_group(), row_len = p.r * p.s * cg;
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static)
    for (int64_t oh = 0; oh < p.p; ++oh) {
        for (int64_t ow = 0; ow < p.q; ++ow) {
            T* d = col + (oh * p.q + ow) * row_len;
            for (int64_t r = 0; r < p.r; ++r) {
                const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                for (int64_t s = 0; s < p.s; ++s, d += cg) {
                    const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
                    if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) {
                        std::fill(d, d + cg, T(0));
                        continue;
                    }
                    const T* xs = x + ((n * p.h + ih) * p.w + iw) * p.c + g * cg;
                    std::copy(xs, xs + cg, d);
                }
            }
        }
    }
}

// Wt[k][r][s][c] = w[k][c] at the filter element of correlation tap (r, s).
template <typename T>
void filter_to_krsc(const ConvProblem& p, const T* w, T* wt) {
    const int64_t cg = p.c_per_group();
    for (int64_t k = 0; k < p.k; ++k)
        for (int64_t r = 0; r < p.r; ++r)
            for (int64_t s = 0; s < p.s; ++s)
                for (int64_t c = 0; c < cg; ++c)
                    wt[((k * p.r + r) * p.s + s) * cg + c] =
                        w[((k * cg + c) * p.r + conv_filter_tap(r, p.r, p.flip)) * p.s + conv_filter_tap(s, p.s, p.flip)];
}

// C (m x n, row stride ldc) = alpha * A (m x k, row stride lda) * op(B) + beta * C, op(B) = B
// (k x n, row stride n) or, with b_trans, B^T for B (n x k, row stride ldb).
void gemm(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, bool b_trans,
          float beta, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
}
void gemm(int m, int n, int k, double alpha, const double* a, int lda, const double* b, int ldb, bool b_trans,
          double beta, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
}
void gemm(int m, int n, int k, float alpha, const float* a, const float* b, float beta, float* c) {
    gemm(m, n, k, alpha, a, k, b, n, false, beta, c, n);
}
void gemm(int m, int n, int k, double alpha, const double* a, const double* b, double beta, double* c) {
    gemm(m, n, k, alpha, a, k, b, n, false, beta, c, n);
}

template <typename T>
void run_nhwc(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), rsc = p.r * p.s * cg, pq = p.p * p.q;
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    char* ws = static_cast<char*>(a.workspace);
    const T* wt = static_cast<const T*>(a.w);
    if (a.prepared_filter) {
        wt = static_cast<const T*>(a.prepared_filter);
    } else if (krsc_filter_bytes(p)) {
        filter_to_krsc(p, static_cast<const T*>(a.w), reinterpret_cast<T*>(ws));
        wt = reinterpret_cast<const T*>(ws);
    }
    T* col = reinterpret_cast<T*>(ws + (krsc_filter_bytes(p) + 63) / 64 * 64);
    BlasThreads blas_threads(threads);
    const int lda_x = int(p.c), ldc = int(p.k);
    if (direct_1x1(p) && p.n * pq <= INT_MAX) {  // every image in one GEMM, on x itself
        for (int64_t g = 0; g < p.groups; ++g)
            gemm(int(p.n * pq), int(kg), int(cg), T(a.alpha), x + g * cg, lda_x, wt + g * kg * cg, int(cg), true,
                 T(a.beta), y + g * kg, ldc);
        return;
    }
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t g = 0; g < p.groups; ++g) {
            const bool no_unfold = direct_1x1(p);
            if (!no_unfold) im2col_nhwc(p, x, n, g, col, threads);
            const T* am = no_unfold ? x + n * pq * p.c + g * cg : col;
            gemm(int(pq), int(kg), int(rsc), T(a.alpha), am, no_unfold ? lda_x : int(rsc), wt + g * kg * rsc,
                 int(rsc), true, T(a.beta), y + n * pq * p.k + g * kg, ldc);
        }
    }
}

template <typename T>
void run_typed(const ConvArgs& a) {
    if (a.prob.nhwc) return run_nhwc<T>(a);
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), crs = cg * p.r * p.s;
    const int64_t pq = p.p * p.q, hw = p.h * p.w;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    T* col = static_cast<T*>(a.workspace);
    const bool no_unfold = direct_1x1(p);
    BlasThreads blas_threads(threads);
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t g = 0; g < p.groups; ++g) {
            const T* xg = x + (n * p.c + g * cg) * hw;
            if (!no_unfold) im2col(p, xg, col, threads);
            gemm(int(kg), int(pq), int(crs), T(a.alpha), w + g * kg * crs, no_unfold ? xg : col,
                 T(a.beta), y + (n * p.k + g * kg) * pq);
        }
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

// A plan prepares the KRSC filter of an NHWC problem.
size_t prepared_filter_bytes(const ConvProblem& p) { return krsc_filter_bytes(p); }

void prepare_filter(const ConvProblem& p, const Context&, const void* w, void* out) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        filter_to_krsc(p, static_cast<const double*>(w), static_cast<double*>(out));
    else
        filter_to_krsc(p, static_cast<const float*>(w), static_cast<float*>(out));
}

}  // namespace

extern const Solver im2col_gemm_solver;
const Solver im2col_gemm_solver = {.algo = CONVCORE_FWD_ALGO_IM2COL_GEMM, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run, .runs_nhwc = runs_nhwc,
    .prepared_filter_bytes = prepared_filter_bytes, .prepare_filter = prepare_filter, .made_for = made_for::general};

}  // namespace cpu
}  // namespace convcore
