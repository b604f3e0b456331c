// Winograd F(m x m, 3x3) on 3-D convolutions whose filters are 3 x 3 in H and W (T x 3 x 3, any T):
// every input plane's tiles transformed, the depth taps summed in the transformed domain, each
// output tile transformed back once (cpu/winograd_nhwc.hpp has the math and the schedule). This
// is WINOGRAD_2X2_3X3 / WINOGRAD_4X4_3X3's 3-D form in the C API (core/depth_decomposition.cpp):
// x N x D x H x W x C and y N x D' x P x Q x K packed, w K x C x T x 3 x 3 packed; along the
// depth any padding, stride and dilation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/context.hpp"
#include "core/depth_axis.hpp"
#include "core/problem.hpp"

namespace convcore {
namespace cpu {
namespace winograd_3d {

using Depth = depth::DepthAxis;  // core/depth_axis.hpp

// Why F(m x m, 3x3) cannot run the planes of a 3-D problem, "" when it can. `plane` is one depth
// plane's 2-D problem for all N images (packed NHWC): a 3x3 filter, stride 1x1 or 2x2, dilation
// 1, one group, at least a vector of input channels (the transforms' lanes run along them).
std::string why_not(const ConvProblem& plane, int64_t m);
// The bytes of the transformed filters U (the workspace, unless they were prepared).
size_t filter_bytes(const ConvProblem& plane, int64_t m, int64_t taps);
// U from w (K x C x T x 3 x 3) into `out` (filter_bytes).
void prepare(const ConvProblem& plane, const Context& ctx, int64_t m, int64_t taps, const void* w, void* out);
// y = alpha * conv3d(x, w) + beta * y (beta == 0: y never read). U: prepared, or null: then made
// into `workspace` (filter_bytes).
void forward(const ConvProblem& plane, const Context& ctx, int64_t m, const Depth& depth, const void* x,
             const void* w, const void* U, void* y, double alpha, double beta, void* workspace);

// The nested F(m x m x m, 3x3x3) (Lavin & Gray, Sec. 4: minimal filtering algorithms nest, one
// per axis; Jia et al., PPoPP 2018, in n-D): F(m,3) along the depth too, so that a tile is
// m x m x m outputs from (m+2)^3 transformed input points,
//     Y = A_D^T [ sum over c of (G_D (G g G^T) ...) .* (B_D^T (B^T d B) ...) ] ...
// the same fused schedule with cube tiles (cpu/winograd_nhwc.hpp). (m+2)^3 / m^3 multiplications
// per output and (c, k): F(4x4x4): 3.375, the per-tap form 6.75, the definition 27.
// Whether the nested form runs this depth axis: 3 taps, stride and dilation 1, and fewer
// transformed points than the per-tap form's (3 planes per output plane, fewer at the borders).
bool nests(const Depth& depth, int64_t m);
// The bytes of its transformed filters U, the workspace too unless they were prepared.
size_t nested_filter_bytes(const ConvProblem& plane, int64_t m);
// U from w (K x C x 3 x 3 x 3) into `out` (nested_filter_bytes).
void nested_prepare(const ConvProblem& plane, const Context& ctx, int64_t m, const void* w, void* out);
// y = alpha * conv3d(x, w) + beta * y (beta == 0: y never read), as forward; U: prepared, or null:
// then made into `workspace` (nested_filter_bytes).
void nested_forward(const ConvProblem& plane, const Context& ctx, int64_t m, const Depth& depth, const void* x,
                    const void* w, const void* U, void* y, double alpha, double beta, void* workspace);

}  // namespace winograd_3d
}  // namespace cpu
}  // namespace convcore
