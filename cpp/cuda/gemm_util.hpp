// Device building blocks of the CUDA GEMM algorithms and of the backward-via-forward
// reductions (cuda/gemm_util.cu): im2col into a workspace, the A x B x plane -> B x A x plane
// transpose, beta scaling, and the strided-batched cuBLAS GEMM for float and double.
// Everything is queued on the handle's stream; nothing synchronises.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/gemm_gather.hpp"
#include "common/im2col_gemm_plan.hpp"
#include "common/permute_planes.hpp"
#include "core/context.hpp"
#include "cuda/check.hpp"

namespace convcore {
namespace cuda {

// Layout of the im2col matrices of images n0 .. n0+count-1 (L = Cg*R*S rows, PQ columns):
//   IMAGE_MAJOR: [n][g][L][PQ]    one L x PQ matrix per image and group (forward, backward data)
//   GROUP_MAJOR: [g][L][n][PQ]    one L x (count*PQ) matrix per group: the images side by side,
//                                 so one GEMM sums over them (backward filter)
enum class ColLayout { IMAGE_MAJOR, GROUP_MAJOR };

// col (count * groups * L * PQ elements) from x (packed NCHW), images n0 .. n0+count-1.
template <typename T>
void im2col(const Context& ctx, const GemmGeom& g, int64_t groups, const T* x, int64_t n0,
            int64_t count, T* col, ColLayout layout);

// dst[i] = src[permuted_source(pm, i)] (common/permute_planes.hpp) for every dst element.
template <typename T>
void permute_planes(const Context& ctx, const T* src, T* dst, const PlanePermutation& pm);

// dst[b][a][:] = src[a][b][:] for an A x B array of `plane`-element planes.
template <typename T>
void swap_outer(const Context& ctx, const T* src, T* dst, int64_t a, int64_t b, int64_t plane) {
    permute_planes(ctx, src, dst, swap_outer_axes(a, b, plane));
}

// y = beta * y over `count` elements (beta == 0: y = 0, never read): the result of a pass
// whose sum is empty (a zero batch).
template <typename T>
void scale_by_beta(const Context& ctx, T* y, int64_t count, T beta);

// The workspace of the im2col algorithms holds the matrices of a chunk of images: as many as
// fit in kChunkBytes (at least 1, at most n), and, when `span_cols` > 0, few enough that
// images * span_cols fits a cuBLAS int (a GEMM dimension that spans the chunk).
constexpr size_t kChunkBytes = size_t(256) << 20;
inline int64_t chunk_images(int64_t n, size_t per_image_bytes, int64_t span_cols) {
    int64_t images = per_image_bytes == 0 ? n : int64_t(kChunkBytes / per_image_bytes);
    if (span_cols > 0 && images > INT32_MAX / span_cols) images = INT32_MAX / span_cols;
    if (images > n) images = n;
    return images < 1 && n > 0 ? 1 : images;
}

#if defined(CONVCORE_HAVE_CUBLAS)
// Column-major C_i = alpha * op(A_i) * op(B_i) + beta * C_i for i < batch (cuBLAS's
// convention; beta == 0 does not read C). Sizes are checked to fit cuBLAS's int by why_not.
inline void gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                         int64_t n, int64_t k, float alpha, const float* A, int64_t lda,
                         int64_t sa, const float* B, int64_t ldb, int64_t sb, float beta,
                         float* C, int64_t ldc, int64_t sc, int64_t batch) {
    CONVCORE_CUBLAS_CHECK(cublasSgemmStridedBatched(h, ta, tb, int(m), int(n), int(k), &alpha, A,
                                                    int(lda), sa, B, int(ldb), sb, &beta, C,
                                                    int(ldc), sc, int(batch)));
}
inline void gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                         int64_t n, int64_t k, double alpha, const double* A, int64_t lda,
                         int64_t sa, const double* B, int64_t ldb, int64_t sb, double beta,
                         double* C, int64_t ldc, int64_t sc, int64_t batch) {
    CONVCORE_CUBLAS_CHECK(cublasDgemmStridedBatched(h, ta, tb, int(m), int(n), int(k), &alpha, A,
                                                    int(lda), sa, B, int(ldb), sb, &beta, C,
                                                    int(ldc), sc, int(batch)));
}

// One planned call (common/im2col_gemm_plan.hpp) on the buffers indexed by im2col_plan::Buffer.
template <typename T>
void run_gemm(cublasHandle_t h, const im2col_plan::GemmCall& c, T alpha, T beta,
              T* const buffers[5]) {
    gemm_batched(h, c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                 c.m, c.n, c.k, alpha, buffers[c.a.buffer] + c.a.offset, c.a.ld, c.a.stride,
                 buffers[c.b.buffer] + c.b.offset, c.b.ld, c.b.stride, beta,
                 buffers[c.c.buffer] + c.c.offset, c.c.ld, c.c.stride, c.batch);
}
#endif

}  // namespace cuda
}  // namespace convcore
