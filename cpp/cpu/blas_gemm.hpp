// Row-major GEMM through CBLAS (OpenBLAS), float or double:
//   C (m x n, row stride ldc) = alpha * op(A) * op(B) + beta * C,
// op(A) = A (m x k, row stride lda) or, with ta, A^T for A (k x m); op(B) likewise with tb.
// beta == 0 does not read C. Dimensions must fit the 32-bit interface (the solvers' why_not).
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cstdint>

namespace convcore {
namespace cpu {

inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
                lda, b, ldb, beta, c, ldc);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                 int ldb, double beta, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
                lda, b, ldb, beta, c, ldc);
}

// The backward GEMMs of a 1x1 convolution in NHWC, on the tensors in place: `rows` pixel rows
// (N*P*Q) of C input and K output channels, per group (W: K x C/groups, KCRS), in blocks of
// kMaxGemmRows rows (BLAS counts rows in an int).
constexpr int64_t kMaxGemmRows = int64_t(1) << 30;

// dx (rows x C) = alpha * dy (rows x K) * W + beta * dx, group by group.
template <typename T>
void nhwc_1x1_data_gemms(int64_t rows, int64_t c, int64_t k, int64_t groups, const T* w, const T* dy, T* dx,
                         T alpha, T beta) {
    const int64_t cg = c / groups, kg = k / groups;
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t m0 = 0; m0 < rows; m0 += kMaxGemmRows)
            gemm(false, false, int(std::min(kMaxGemmRows, rows - m0)), int(cg), int(kg), alpha, dy + m0 * k + g * kg,
                 int(k), w + g * kg * cg, int(cg), beta, dx + m0 * c + g * cg, int(c));
}

// dW (K x C/groups) = alpha * dy^T * x + beta * dW, group by group (the blocks after the first add).
template <typename T>
void nhwc_1x1_filter_gemms(int64_t rows, int64_t c, int64_t k, int64_t groups, const T* x, const T* dy, T* dw,
                           T alpha, T beta) {
    const int64_t cg = c / groups, kg = k / groups;
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t m0 = 0; m0 < rows; m0 += kMaxGemmRows)
            gemm(true, false, int(kg), int(cg), int(std::min(kMaxGemmRows, rows - m0)), alpha, dy + m0 * k + g * kg,
                 int(k), x + m0 * c + g * cg, int(c), m0 == 0 ? beta : T(1), dw + g * kg * cg, int(cg));
}

}  // namespace cpu
}  // namespace convcore
