// IM2COL_GEMM over 1 to 3 spatial axes in blocks of output pixels (CPU): the 3-D problem's own
// im2col, one GEMM per block, instead of one 2-D convolution per depth tap.
//
// Columns of col are the window positions (t, r, s) and channels c, L = T*R*S*Cg of them; rows
// are a block of output pixels (od, oh, ow) of one image, as many as fill half of L2. Each block
// is one thread's: its col block, its single-threaded GEMM and what follows, while the block is in
// cache. Wt[k][(t, r, s, c)] is the filter element at window position (t, r, s), mirrored in the
// true-convolution mode.
//   forward (any windows): col[(od, oh, ow)][(t, r, s, c)] = x[n, g*Cg + c, od*sd - pd + t*dd, ...]
//                          (zero outside x), then y_rows (rows x Kg) = alpha * col * Wt[g]^T + beta * y_rows,
//                          the GEMM writing y in place. With 3 depth taps it reads x once where the
//                          per-tap decomposition adds into y three times; with few channels (the
//                          stems, 3 x 7 x 7 x 3) its reduction is T times longer.
//   backward data (disjoint windows: in every axis a stride of at least the filter size and
//                  dilation 1, or a filter size of 1): col (rows x L) = alpha * dY (rows x Kg) * Wt[g],
//                  then dx[n, c, od*sd - pd + t, oh*sh - ph + r, ow*sw - pw + s] = col + beta * dx.
//                  Every dx element lies in at most one window, so col2im is a scatter that sums
//                  nothing: the transposed convolution whose kernel equals its stride (U-Net
//                  decoders' ConvTranspose2d/3d(k=2, s=2)) and the backward data of 1x1 stride-2
//                  downsamples. The dx elements no window covers get beta * dx.
//   backward filter (any windows): dWt[g] (Kg x L) = the sum over the blocks of dY_block^T * col,
//                  each thread summing its blocks into a partial of its own, the partials added,
//                  then dw = alpha * dWt (in K x C/g x T x R x S order) + beta * dw.
//
// Tensors: x and dx in any strides (N, C, D, H, W order); y and dy with the output pixels one
// stride apart (NDHWC and NCDHW, packed per image: the GEMM reads and writes them in place);
// w packed K x C/groups x T x R x S. A 2-D problem is the depth axis Depth{} (one tap, one plane).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/context.hpp"
#include "core/problem.hpp"
#include "cpu/winograd_3d.hpp"

namespace convcore {
namespace cpu {
namespace im2col_nd {

using winograd_3d::Depth;

// Whether every window is one element at its output's own position (1x1x1, stride 1, no
// padding): x is col itself, and the GEMMs run on the tensors in place instead (cpu/pointwise.cpp).
bool one_to_one(const ConvProblem& plane, const Depth& depth);
// Whether the outputs' windows are disjoint in D, H and W (backward data's shape rule), one to one
// excepted.
bool disjoint(const ConvProblem& plane, const Depth& depth);
// Why the pass cannot run the problem, "" when it can: float32/float64, backward data's shape
// rule (any_windows false), the output pixels of y or dy one stride apart (`strides`), and GEMM
// sizes within BLAS's int.
std::string why_not(const ConvProblem& plane, const Depth& depth, bool any_windows, const int64_t strides[5]);
// The filters (or their gradient) in K x L order: the workspace; the col blocks and the filter
// gradient's partial sums are per-thread scratch.
size_t workspace_bytes(const ConvProblem& plane, const Depth& depth);
// y = alpha * conv3d(x, w) + beta * y (beta == 0: y never read).
void forward(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* x,
             const int64_t x_strides[5], const void* w, void* y, const int64_t y_strides[5], double alpha, double beta,
             void* workspace);
// dw = alpha * conv3d_backward_filter(x, dy) + beta * dw (beta == 0: dw never read); dw packed
// K x C/groups x T x R x S.
void backward_filter(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* x,
                     const int64_t x_strides[5], const void* dy, const int64_t dy_strides[5], void* dw, double alpha,
                     double beta, void* workspace);
// dx = alpha * conv3d_backward_data(dy, w) + beta * dx (beta == 0: dx never read).
void backward_data(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* dy,
                   const int64_t dy_strides[5], const void* w, void* dx, const int64_t dx_strides[5], double alpha,
                   double beta, void* workspace);

}  // namespace im2col_nd
}  // namespace cpu
}  // namespace convcore
