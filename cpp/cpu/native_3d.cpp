// The CPU's native 3-D forms of the depth decomposition (core/depth_decomposition.hpp says when
// each runs; core/device.hpp declares what the core asks of them): the 3-D Winograd of
// cpu/winograd_3d.hpp, the 3-D FFT of cpu/fft_3d.hpp, the nested CYCLIC_MINIMAL of
// cpu/cyclic_minimal_3d.hpp and the 3-D IM2COL_GEMM of cpu/im2col_gemm_nd.hpp.
#include <cstring>
#include <type_traits>

#include "core/algorithms.hpp"
#include "core/depth_decomposition.hpp"
#include "core/device.hpp"
#include "cpu/cyclic_minimal_3d.hpp"
#include "cpu/fft_3d.hpp"
#include "cpu/im2col_gemm_nd.hpp"
#include "cpu/winograd_3d.hpp"

namespace convcore {
namespace cpu {
namespace native_3d {
namespace {

using depth::DepthAxis;
using depth::DepthPlan;
using depth::DepthProblem;

template <typename T>
T* at(T* base, int64_t elements, size_t elem) {
    using Byte = std::conditional_t<std::is_const<T>::value, const char, char>;
    return reinterpret_cast<T*>(reinterpret_cast<Byte*>(base) + elements * int64_t(elem));
}

// Whether an N x C x D x H x W tensor's strides (in that order) lay it out packed N x D x H x W x C
// (axes of length 1: any stride).
bool packed_ndhwc(const int64_t dims[5], const int64_t strides[5]) {
    int64_t expected = 1;
    for (int axis : {1, 4, 3, 2, 0}) {
        if (dims[axis] != 1 && strides[axis] != expected) return false;
        expected *= dims[axis];
    }
    return true;
}

DepthAxis forward_axis(const DepthProblem& p) {
    return DepthAxis{p.taps, p.d_in, p.d_out, p.pad, p.stride, p.dil};
}

// How a native 3-D algorithm runs this plan, or none (the decomposition runs it): the
// F(m x m, 3x3) of cpu/winograd_3d.hpp (m > 0), the 3-D FFT of cpu/fft_3d.hpp (fft) or the nested
// CYCLIC_MINIMAL of cpu/cyclic_minimal_3d.hpp (cyclic) or the 3-D IM2COL_GEMM of
// cpu/im2col_gemm_nd.hpp (im2col), and the forward problem it runs: its planes and depth axis (the
// IM2COL_GEMM: the problem itself, every pass). `rep` is the representative 2-D problem.
struct Native {
    int64_t m = 0;
    bool fft = false, cyclic = false, im2col = false;
    bool im2col_scatter = false;  // backward data's IM2COL_GEMM on disjoint windows (else transposed)
    ConvProblem plane;
    DepthAxis axis;
    bool any() const { return m > 0 || fft || cyclic || im2col; }
};
Native native_form(const DepthProblem& p, const ConvProblem& rep, convcoreConvolutionPass_t pass, int algo) {
    const bool forward = pass == CONVCORE_PASS_FORWARD, backward_data = pass == CONVCORE_PASS_BACKWARD_DATA;
    const bool one_to_one = im2col_nd::one_to_one(rep, forward_axis(p));
    Native n;
    if (forward) {
        n.m = algo == CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3 ? 2 : algo == CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3 ? 4 : 0;
        n.fft = algo == CONVCORE_FWD_ALGO_FFT;
        // The nested cyclic runs where it makes fewer 2-D convolutions than the per-tap form.
        n.cyclic = algo == CONVCORE_FWD_ALGO_CYCLIC_MINIMAL && cyclic_3d::nests(forward_axis(p));
        // (a 1x1x1 filter at stride 1 without padding runs in place, decomposed)
        n.im2col = algo == CONVCORE_FWD_ALGO_IM2COL_GEMM && !one_to_one;
    }
    if (backward_data) {
        n.m = algo == CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3 ? 2 : algo == CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3 ? 4 : 0;
        n.fft = algo == CONVCORE_BWD_DATA_ALGO_FFT;
        n.im2col = algo == CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM && !one_to_one;
        // Disjoint windows: one GEMM and a scatter; overlapping ones: the transposed form below.
        n.im2col_scatter = n.im2col && im2col_nd::disjoint(rep, forward_axis(p));
    }
    if (pass == CONVCORE_PASS_BACKWARD_FILTER) n.im2col = algo == CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM && !one_to_one;
    // The 3-D FFT runs where more than one depth tap reaches the output: with one, the
    // decomposition's 2-D FFT over the output planes is the same work without the depth transform.
    if (n.fft && p.reached.size() < 2) n.fft = false;
    if (!n.any() || p.device != CONVCORE_DEVICE_CPU || !p.has_y) return {};
    const int64_t w_dims[5] = {p.w_dims[0], p.w_dims[1], p.taps, p.w_dims[2], p.w_dims[3]};
    const int64_t w_strides[5] = {p.w_strides[0], p.w_strides[1], p.w_t_stride, p.w_strides[2], p.w_strides[3]};
    int64_t expected = 1;
    for (int axis : {4, 3, 2, 1, 0}) {  // packed K x C x T x R x S
        if (w_dims[axis] != 1 && w_strides[axis] != expected) return {};
        expected *= w_dims[axis];
    }
    // The Winograd needs NDHWC; the FFT reads and writes any strides.
    if (n.m > 0 && (!packed_ndhwc(p.x_dims, p.x_strides) || !packed_ndhwc(p.y_dims, p.y_strides))) return {};
    n.plane = rep.packed();
    n.plane.n = p.n;
    n.axis = forward_axis(p);
    if (n.im2col && (!backward_data || n.im2col_scatter))
        return im2col_nd::why_not(n.plane, n.axis, !backward_data, p.y_strides).empty() ? n : Native{};
    if (backward_data) {  // dx = the forward convolution of dy by w transposed and mirrored
        // (the IM2COL_GEMM's im2col and the FFT take any dilation, the Winograd none)
        const bool unit = p.stride == 1 && rep.unit_stride() && (n.fft || n.im2col || (p.dil == 1 && rep.unit_dilation()));
        const int64_t reach_d = p.dil * (p.taps - 1), reach_h = rep.dil_h * (rep.r - 1), reach_w = rep.dil_w * (rep.s - 1);
        if (!unit || rep.groups != 1 || p.pad > reach_d || rep.pad_h > reach_h || rep.pad_w > reach_w) return {};
        ConvProblem& t = n.plane;
        std::swap(t.c, t.k);
        std::swap(t.h, t.p);
        std::swap(t.w, t.q);
        t.pad_h = reach_h - rep.pad_h;
        t.pad_w = reach_w - rep.pad_w;
        t.flip = !rep.flip;
        t = t.packed();
        n.axis = DepthAxis{p.taps, p.d_out, p.d_in, reach_d - p.pad, 1, p.dil};
    }
    if (n.im2col) return im2col_nd::why_not(n.plane, n.axis, true, p.x_strides).empty() ? n : Native{};
    if (n.fft) return fft_3d::why_not(n.plane, n.axis).empty() ? n : Native{};
    if (n.cyclic) return cyclic_3d::why_not(n.plane, n.axis).empty() ? n : Native{};
    n.plane.nhwc = true;
    if (!winograd_3d::why_not(n.plane, n.m).empty()) return {};
    return n;
}

// w (packed K x C x T x R x S) transposed into `out`: C x K x T x R x S.
void transpose_filter(const Context& ctx, const DepthProblem& p, size_t elem, const void* w, void* out) {
    const int64_t k = p.w_dims[0], c = p.w_dims[1], block = p.taps * p.w_dims[2] * p.w_dims[3];
    const auto* src = static_cast<const char*>(w);
    auto* dst = static_cast<char*>(out);
    const size_t bytes = size_t(block) * elem;
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
    for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t ki = 0; ki < k; ++ki) std::memcpy(dst + (ci * k + ki) * bytes, src + (ki * c + ci) * bytes, bytes);
}

}  // namespace

bool plan(const DepthProblem& prob, const ConvProblem& rep, convcoreConvolutionPass_t pass, int algo, DepthPlan& depth) {
    const Native native = native_form(prob, rep, pass, algo);
    depth.native_m = native.m;
    depth.native_fft = native.fft;
    depth.native_cyclic = native.cyclic;
    depth.native_im2col = native.im2col;
    if (native.im2col) {
        depth.native_plane = native.plane;
        depth.native_axis = native.axis;
        depth.workspace = im2col_nd::workspace_bytes(native.plane, native.axis);
        if (pass == CONVCORE_PASS_BACKWARD_DATA && !native.im2col_scatter) {  // w transposed first
            depth.transposed_bytes = (size_t(prob.w_bytes) + 63) / 64 * 64;
            depth.workspace += depth.transposed_bytes;
        }
        return true;
    }
    if (native.any()) {
        const ConvProblem& plane = depth.native_plane = native.plane;
        const DepthAxis& axis = depth.native_axis = native.axis;
        const int64_t m = native.m;
        if (native.fft) {
            depth.workspace = fft_3d::workspace_bytes(plane, axis);
        } else if (native.cyclic) {
            depth.workspace = cyclic_3d::workspace_bytes(plane, axis);
        } else {
            depth.native_nested = winograd_3d::nests(axis, m);
            const size_t u_bytes = depth.native_nested ? winograd_3d::nested_filter_bytes(plane, m)
                                                       : winograd_3d::filter_bytes(plane, m, prob.taps);
            depth.workspace = u_bytes;
            if (pass == CONVCORE_PASS_FORWARD) depth.prepared_bytes = u_bytes;
        }
        if (pass == CONVCORE_PASS_BACKWARD_DATA) {  // w transposed first, on a 64-byte line of its own
            depth.transposed_bytes = (size_t(prob.w_bytes) + 63) / 64 * 64;
            depth.workspace += depth.transposed_bytes;
        }
        return true;
    }
    return false;
}

void run(const DepthPlan& depth, convcoreConvolutionPass_t pass, const Context& ctx, const void* in0, const void* in1,
         const void* U, void* out, double alpha, double beta, void* workspace) {
    const DepthProblem& p = depth.prob;
    const size_t elem = depth.native_plane.elem_size();
    if (depth.native_im2col) {
        if (pass == CONVCORE_PASS_FORWARD)
            im2col_nd::forward(depth.native_plane, ctx, depth.native_axis, in0, p.x_strides, in1, out, p.y_strides,
                               alpha, beta, workspace);
        else if (pass == CONVCORE_PASS_BACKWARD_FILTER)
            im2col_nd::backward_filter(depth.native_plane, ctx, depth.native_axis, in0, p.x_strides, in1,
                                       p.y_strides, out, alpha, beta, workspace);
        else if (depth.transposed_bytes == 0)  // disjoint windows: one GEMM and a scatter
            im2col_nd::backward_data(depth.native_plane, ctx, depth.native_axis, in0, p.y_strides, in1, out,
                                     p.x_strides, alpha, beta, workspace);
        else {  // dx = the forward IM2COL_GEMM of dy by w transposed (C x K) and mirrored
            transpose_filter(ctx, p, elem, in1, workspace);
            im2col_nd::forward(depth.native_plane, ctx, depth.native_axis, in0, p.y_strides, workspace, out,
                               p.x_strides, alpha, beta, at(workspace, int64_t(depth.transposed_bytes / elem), elem));
        }
        return;
    }
    const void* w = in1;
    void* scratch = workspace;
    const bool backward_data = pass == CONVCORE_PASS_BACKWARD_DATA;
    if (backward_data) {  // w (K x C x T x R x S) as C x K x T x R x S
        transpose_filter(ctx, p, elem, in1, workspace);
        w = workspace;
        scratch = at(workspace, int64_t(depth.transposed_bytes / elem), elem);
    }
    if (depth.native_fft) {
        fft_3d::forward(depth.native_plane, ctx, depth.native_axis, in0, backward_data ? p.y_strides : p.x_strides,
                        w, out, backward_data ? p.x_strides : p.y_strides, alpha, beta, scratch);
        return;
    }
    if (depth.native_cyclic) {
        cyclic_3d::forward(depth.native_plane, ctx, depth.native_axis, in0, p.x_strides, w, out, p.y_strides,
                           alpha, beta, scratch);
        return;
    }
    const auto run_native = depth.native_nested ? winograd_3d::nested_forward : winograd_3d::forward;
    run_native(depth.native_plane, ctx, depth.native_m, depth.native_axis, in0, w, U, out, alpha, beta, scratch);
}

void prepare(const DepthPlan& depth, const Context& ctx, const void* w, void* out) {
    if (depth.native_nested)
        winograd_3d::nested_prepare(depth.native_plane, ctx, depth.native_m, w, out);
    else
        winograd_3d::prepare(depth.native_plane, ctx, depth.native_m, depth.prob.taps, w, out);
}

}  // namespace native_3d
}  // namespace cpu
}  // namespace convcore
