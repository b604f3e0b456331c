// IM2COL_GEMM on the CPU: for each image and group, unfold the input into the im2col matrix
// col[(c, r, s)][(p, q)] (Cg*R*S rows, P*Q columns) in the workspace, then one BLAS GEMM
//   Y[n, group] (Kg x PQ) = alpha * W[group] (Kg x Cg*R*S) * col + beta * Y[n, group].
// The GEMM's beta == 0 does not read C, which gives the "beta == 0: y is never read" rule.
// 1x1 filters with stride 1 and no padding need no unfolding: x itself is the matrix.
#include <cblas.h>
#include <omp.h>

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

size_t workspace_bytes(const ConvProblem& p) {
    if (direct_1x1(p)) return 0;
    return size_t(p.c_per_group() * p.r * p.s) * size_t(p.p * p.q) * p.elem_size();
}

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

void gemm(int m, int n, int k, float alpha, const float* a, const float* b, float beta, float* c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, k, b, n, beta, c, n);
}
void gemm(int m, int n, int k, double alpha, const double* a, const double* b, double beta,
          double* c) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, k, b, n, beta, c, n);
}

template <typename T>
void run_typed(const ConvArgs& a) {
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

}  // namespace

extern const Solver im2col_gemm_solver;
const Solver im2col_gemm_solver = {CONVCORE_FWD_ALGO_IM2COL_GEMM, CONVCORE_DEVICE_CPU,
                                   /*deterministic=*/true, why_not, workspace_bytes, run};

}  // namespace cpu
}  // namespace convcore
