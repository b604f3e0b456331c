// The cuBLAS calls of IM2COL_GEMM on CUDA (cuda/im2col_gemm.cu, cuda/im2col_gemm_backward.cu)
// and the element of their im2col kernel, as plain functions, so that
// tests/cpp/test_gemm_gather.cpp replays the exact calls on the host (a column-major strided-
// batched GEMM emulator) and checks the pipelines against the float64 reference.
//
// Row-major matrices are cuBLAS's column-major transposes: Y (Kg x PQ) = W (Kg x L) * col
// (L x PQ) is computed as Y^T (PQ x Kg) = col^T (PQ x L) * W^T (L x Kg). Matrix layouts:
//   im2col IMAGE_MAJOR  [n][g][L][PQ]   (forward, backward data)
//   im2col GROUP_MAJOR  [g][L][n][PQ]   (backward filter: a chunk's images side by side)
//   dy transposed       [K][n][PQ]      (backward filter)
#pragma once
#include <cstdint>
#include <vector>

#include "common/gemm_gather.hpp"

namespace convcore {
namespace im2col_plan {

// 1x1 filter, stride 1, no padding: x (dx) is its own im2col matrix (PQ = H*W), no unfolding.
inline bool x_is_col(const GemmGeom& g) {
    return g.r == 1 && g.s == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
           g.pad_w == 0;
}

// The col element i of images n0 .. n0+count-1: its offset in x (packed NCHW), or -1 for the
// zero padding.
CONVCORE_HD int64_t im2col_source(const GemmGeom& g, int64_t groups, int64_t n0, int64_t count,
                                  bool group_major, int64_t i) {
    const int64_t pq = g.cols(), rows = g.rows();
    const int64_t j = i % pq;
    int64_t t = i / pq, n, grp, l;
    if (group_major) {  // [g][L][n][PQ]
        n = t % count;
        t /= count;
        l = t % rows;
        grp = t / rows;
    } else {  // [n][g][L][PQ]
        l = t % rows;
        t /= rows;
        grp = t % groups;
        n = t / groups;
    }
    const int64_t off = gather_offset(g, column_origin(g, j), l);
    return off < 0 ? -1 : ((n0 + n) * g.c + grp * g.cg) * g.h * g.w + off;
}

// Element i ([n][c][ih][iw] over the chunk) of the backward-data gradient before alpha/beta:
// the col entries ([n][g][L][PQ]) that read it, gathered (col2im_gather; no atomics).
template <typename T>
CONVCORE_HD T col2im_value(const GemmGeom& g, int64_t groups, const T* col, int64_t i) {
    const int64_t hw = g.h * g.w;
    const int64_t iw = i % g.w, ih = i / g.w % g.h, ci = i / hw % g.c, n = i / (hw * g.c);
    const int64_t grp = ci / g.cg;
    return col2im_gather<T>(g, col + (n * groups + grp) * g.rows() * g.cols(), ci - grp * g.cg,
                            ih, iw);
}

// The buffers a call reads or writes, by role: the activations (x, or dx in backward data),
// the filter (w or dw), the output (y, or dy in the backward passes), the im2col workspace and
// the transposed-dy workspace.
enum Buffer { kActivations, kFilter, kOutput, kCol, kOutputT };

struct Matrix {
    Buffer buffer;
    int64_t offset, ld, stride;  // elements; stride between the batch's matrices
};

// Column-major C_i = alpha * op(A_i) op(B_i) + beta * C_i, i < batch (cuBLAS's
// cublas<t>gemmStridedBatched; the scalars are the caller's).
struct GemmCall {
    bool trans_a, trans_b;
    int64_t m, n, k;
    Matrix a, b, c;
    int64_t batch;
};

// Batched over the images of the chunk (one call per group) or, when there are more groups than
// images, over the groups (one call per image).
inline std::vector<GemmCall> batched(int64_t groups, int64_t count, const GemmCall& proto,
                                     int64_t a_image, int64_t a_group, int64_t b_image,
                                     int64_t b_group, int64_t c_image, int64_t c_group) {
    std::vector<GemmCall> calls;
    if (count >= groups) {
        for (int64_t grp = 0; grp < groups; ++grp) {
            GemmCall c = proto;
            c.a.offset += grp * a_group, c.a.stride = a_image;
            c.b.offset += grp * b_group, c.b.stride = b_image;
            c.c.offset += grp * c_group, c.c.stride = c_image;
            c.batch = count;
            calls.push_back(c);
        }
    } else {
        for (int64_t i = 0; i < count; ++i) {
            GemmCall c = proto;
            c.a.offset += i * a_image, c.a.stride = a_group;
            c.b.offset += i * b_image, c.b.stride = b_group;
            c.c.offset += i * c_image, c.c.stride = c_group;
            c.batch = groups;
            calls.push_back(c);
        }
    }
    return calls;
}

// Forward, images n0 .. n0+count-1: Y[n, g]^T (PQ x Kg) = col[n, g]^T (PQ x L) * W[g]^T.
// `direct`: 1x1, stride 1, no padding: x is the col matrix (PQ = H*W).
inline std::vector<GemmCall> forward_calls(const GemmGeom& g, int64_t groups, int64_t n0,
                                           int64_t count, bool direct) {
    const int64_t L = g.rows(), pq = g.cols(), hw = g.h * g.w;
    const Matrix col = direct ? Matrix{kActivations, n0 * g.c * hw, pq, 0} : Matrix{kCol, 0, pq, 0};
    const int64_t col_image = direct ? g.c * hw : groups * L * pq, col_group = direct ? g.cg * hw : L * pq;
    const GemmCall proto{false, false, pq, g.kg, L, col, {kFilter, 0, L, 0},
                         {kOutput, n0 * g.k * pq, pq, 0}, 0};
    return batched(groups, count, proto, col_image, col_group, 0, g.kg * L, g.k * pq, g.kg * pq);
}

// Backward data: col[n, g]^T (PQ x L) = dY[n, g]^T (PQ x Kg) * W[g] (Kg x L); `direct`: into
// dx itself (then the caller's alpha/beta go to the GEMM; else to col2im).
inline std::vector<GemmCall> backward_data_calls(const GemmGeom& g, int64_t groups, int64_t n0,
                                                 int64_t count, bool direct) {
    const int64_t L = g.rows(), pq = g.cols(), hw = g.h * g.w;
    const Matrix col = direct ? Matrix{kActivations, n0 * g.c * hw, pq, 0} : Matrix{kCol, 0, pq, 0};
    const int64_t col_image = direct ? g.c * hw : groups * L * pq, col_group = direct ? g.cg * hw : L * pq;
    const GemmCall proto{false, true, pq, L, g.kg, {kOutput, n0 * g.k * pq, pq, 0},
                         {kFilter, 0, L, 0}, col, 0};
    return batched(groups, count, proto, g.k * pq, g.kg * pq, 0, g.kg * L, col_image, col_group);
}

// Backward filter, one chunk of `count` images (col GROUP_MAJOR, dy transposed to [K][n][PQ]):
// dW[g]^T (L x Kg) = col_g (L x count*PQ) * dYt_g^T, batched over the groups: the sum over the
// chunk's images is the GEMM's inner dimension.
inline GemmCall backward_filter_call(const GemmGeom& g, int64_t groups, int64_t count) {
    const int64_t L = g.rows(), span = count * g.cols();
    return {true, false, L, g.kg, span, {kCol, 0, span, L * span}, {kOutputT, 0, span, g.kg * span},
            {kFilter, 0, L, g.kg * L}, groups};
}

}  // namespace im2col_plan
}  // namespace convcore
