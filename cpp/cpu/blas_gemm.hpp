// Row-major GEMM through CBLAS (OpenBLAS), float or double:
//   C (m x n, row stride ldc) = alpha * op(A) * op(B) + beta * C,
// op(A) = A (m x k, row stride lda) or, with ta, A^T for A (k x m); op(B) likewise with tb.
// beta == 0 does not read C. Dimensions must fit the 32-bit interface (the solvers' why_not).
#pragma once
#include <cblas.h>

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

}  // namespace cpu
}  // namespace convcore
