// IM2COL_GEMM's backward data where the windows the outputs read are disjoint (CPU, 1-D to 3-D):
// in every axis the stride is at least the filter size and the dilation 1 (or the filter size
// 1). Then every dx element lies in at most one output's window, and col2im is a scatter: no
// element is summed twice. This is the transposed convolution whose kernel equals its stride
// (U-Net decoders' ConvTranspose2d/3d(k=2, s=2), ViT's patch embedding in training) and the
// backward data of 1x1 stride-2 downsamples.
//   col (rows x L) = alpha * dY (rows x Kg) * Wt[g] (Kg x L),  L = T*R*S*Cg, columns (t, r, s, c)
//   dx[n, c, od*sd - pd + t, oh*sh - ph + r, ow*sw - pw + s] = col[(od, oh, ow)][(t, r, s, c)] + beta * dx
// (t, r, s are window positions; the filter element there is mirrored in the true-convolution
// mode). Rows are taken in blocks whose col block fills half of L2, each block one thread's: its
// single-threaded GEMM, then its scatter while the block is in cache. The dx elements no window
// covers (a stride above the filter size, padding, the input's last rows) get beta * dx.
//
// Tensors: dy and dx in any strides (N, C, D, H, W order) where dy's output pixels lie one
// stride apart (NDHWC and NCDHW, packed per image); w packed K x C/groups x T x R x S. A 2-D
// problem is the depth axis Depth{} (one tap, one plane).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/context.hpp"
#include "core/problem.hpp"
#include "cpu/winograd_3d.hpp"

namespace convcore {
namespace cpu {
namespace im2col_disjoint {

using winograd_3d::Depth;

// Whether the outputs' windows are disjoint in D, H and W (the shape rule above), except where
// every window is one element at its output's own position (1x1x1, stride 1, no padding): there
// dx is col itself, and the GEMM runs in place instead.
bool applies(const ConvProblem& plane, const Depth& depth);
// Why the scatter form cannot run the problem, "" when it can: the shape rule, float32/float64,
// dy's pixels one stride apart (dy_strides), and GEMM sizes within BLAS's int.
std::string why_not(const ConvProblem& plane, const Depth& depth, const int64_t dy_strides[5]);
// The filters in K x L order (the workspace; the col blocks are per-thread scratch).
size_t workspace_bytes(const ConvProblem& plane, const Depth& depth);
// dx = alpha * conv3d_backward_data(dy, w) + beta * dx (beta == 0: dx never read).
void backward_data(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* dy,
                   const int64_t dy_strides[5], const void* w, void* dx, const int64_t dx_strides[5], double alpha,
                   double beta, void* workspace);

}  // namespace im2col_disjoint
}  // namespace cpu
}  // namespace convcore
