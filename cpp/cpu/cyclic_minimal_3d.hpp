// CYCLIC_MINIMAL's native 3-D form (CPU): Pitas' construction nested over the depth (paper 004,
// Sec. 2: an n-D cyclic convolution by the Chinese remainder theorem in each variable). Along the
// depth, the 4-point cyclic convolution mod z^4 - 1 = (z - 1)(z + 1)(z^2 + 1) in its flat
// overlap-save form (tools/gen_cyclic.py's C4F3Row for 3 depth taps, C4F2Row for 2:
// out = C (U .* (A d)), U = B g; 5 products per tile of 4 input planes, O = 5 - T output planes).
// Each of its 5 products is a whole 2-D convolution of a depth-transformed input plane by a
// depth-transformed filter, run by the 2-D CYCLIC_MINIMAL (the 4x4 minimal cyclic convolution:
// 22 products per tile for a 3x3 filter). Per depth tile of O output planes:
//     X_i = sum_j A[i][j] x[tile * O + j - pad]      (4 input planes, zero outside the volume)
//     W_i = sum_t B[i][t] w[:, :, t]
//     Z_i = conv2d(X_i, W_i)                         (2-D CYCLIC_MINIMAL, every tile and image)
//     y[tile * O + o] = alpha * sum_i C[o][i] Z_i + beta * y
// The nesting is exact for any bilinear product: the 1-D identity holds with planes for the
// inputs, filters for the taps and the 2-D convolution for the product.
// Products per 4x4x4 tile of a 3x3x3 filter (8 outputs): 5 * 22 = 110, 13.75 per output
// (the depth decomposition's per-tap 2-D cyclic: 3 * 22 / 4 = 16.5; the definition: 27).
//
// Tensors: x and y any strides (N, C, D, H, W order: NCDHW and NDHWC, read and written in place),
// w packed K x C/groups x T x R x S. Depth: 2 or 3 taps, stride and dilation 1, any padding; the
// planes: whatever the 2-D CYCLIC_MINIMAL runs (3x3, 2x2, 1x3, 3x1, 1x2, 2x1 filters, stride and
// dilation 1, any padding and groups).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/context.hpp"
#include "core/problem.hpp"
#include "cpu/winograd_3d.hpp"

namespace convcore {
namespace cpu {
namespace cyclic_3d {

using winograd_3d::Depth;

// Why the nested form cannot run the problem, "" when it can. `plane` is one depth plane's 2-D
// problem for all N images (its H/W geometry, channels, groups, mode and type).
std::string why_not(const ConvProblem& plane, const Depth& depth);
// Whether it makes fewer 2-D convolutions than the per-tap decomposition (one per output plane
// and tap that reaches x): 5 per depth tile against up to T * O.
bool nests(const Depth& depth);
size_t workspace_bytes(const ConvProblem& plane, const Depth& depth);
// y = alpha * conv3d(x, w) + beta * y (beta == 0: y never read); strides in elements, N, C, D, H,
// W order.
void forward(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* x,
             const int64_t x_strides[5], const void* w, void* y, const int64_t y_strides[5], double alpha,
             double beta, void* workspace);

}  // namespace cyclic_3d
}  // namespace cpu
}  // namespace convcore
