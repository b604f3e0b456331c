// The nested Winograd F(m x m x m, 3x3x3) (cpu/winograd_3d.hpp has the math): the fused NHWC
// schedule of cpu/winograd_nhwc.hpp with cube tiles, Tile<F, F, F> (F(m,3) on all three axes; at
// stride 2 in the planes, its stride-2 form on H and W). Its own translation unit: the cube's
// unrolled transforms are large, and this keeps winograd.cpp's compile time apart.
#include <cstdint>

#include "cpu/cpu_isa.hpp"
#include "cpu/winograd_3d.hpp"
#include "cpu/winograd_nhwc.hpp"

namespace convcore {
namespace cpu {
namespace {

CONVCORE_EACH_ISA(CONVCORE_WINOGRAD_NHWC_KERNELS)
CONVCORE_WINOGRAD_NHWC_DISPATCH

// fn(Tile) with the cube that runs `plane` (stride 1x1 or 2x2 in the planes) for F(m,3) = F.
template <class F, class Fn>
void with_cube(const ConvProblem& plane, Fn&& fn) {
    using winograd_nhwc::Tile;
    using S = winograd_nhwc::AtStride2<F>;
    plane.stride_h == 2 ? fn(Tile<S, S, F>{}) : fn(Tile<F, F, F>{});
}
template <class Fn>
void with_cube(const ConvProblem& plane, int64_t m, Fn&& fn) {
    m == 2 ? with_cube<winograd::F2x3>(plane, fn) : with_cube<winograd::F4x3>(plane, fn);
}

}  // namespace

namespace winograd_3d {

bool nests(const Depth& depth, int64_t m) {
    if (depth.taps != 3 || depth.stride != 1 || depth.dil != 1 || (m != 2 && m != 4)) return false;
    int64_t per_tap = 0;  // the per-tap form's plane tiles: output planes x taps inside the volume
    for (int64_t t = 0; t < 3; ++t) {
        const int64_t offset = t - depth.pad;
        per_tap += std::max<int64_t>(0, std::min(depth.d_out, depth.d_in - offset) - std::max<int64_t>(0, -offset));
    }
    return winograd_nhwc::ceil_div(depth.d_out, m) * (m + 2) < per_tap;  // the cube's, in its transformed points
}

size_t nested_filter_bytes(const ConvProblem& plane, int64_t m) {
    return size_t(winograd_nhwc::u_elems(plane, m, 1, /*cube=*/true)) * plane.elem_size();
}

void nested_prepare(const ConvProblem& plane, const Context& ctx, int64_t m, const void* w, void* out) {
    with_cube(plane, m, [&](auto tile) { winograd_nhwc_prepare<decltype(tile)>(plane, w, out, ctx.threads()); });
}

namespace {
template <typename T, class Tl>
void run_cube(const ConvArgs& a, const Depth& depth) {
    winograd_nhwc::run<T, Tl>(a, static_cast<const T*>(a.prepared_filter), static_cast<T*>(a.workspace),
                              winograd_nhwc_kernels<T, Tl>(), depth);
}
}  // namespace

void nested_forward(const ConvProblem& plane, const Context& ctx, int64_t m, const Depth& depth, const void* x,
                    const void* w, const void* U, void* y, double alpha, double beta, void* workspace) {
    const ConvArgs a{plane, ctx, x, w, y, alpha, beta, workspace, U};
    with_cube(plane, m, [&](auto tile) {
        using Tl = decltype(tile);
        plane.dtype == CONVCORE_DATA_DOUBLE ? run_cube<double, Tl>(a, depth) : run_cube<float, Tl>(a, depth);
    });
}

}  // namespace winograd_3d
}  // namespace cpu
}  // namespace convcore
