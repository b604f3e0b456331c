// 3-D convolutions as 2-D ones: the depth decomposition behind every 3-D pass of the C API.
//
// The math. With filter depth tap t (0..T-1), output depth od reads input depth
//     id = od * stride_d + t * dil_d - pad_d,
// so y[n, :, od] = sum over t of conv2d(x[n, :, id], w[:, :, t]) over the taps with 0 <= id < D
// (true convolution, CONVCORE_CONVOLUTION, uses tap T-1-t of the filter: the 2-D problem flips R
// and S itself, the depth is flipped here). For each tap the output depths with a valid id form
// one contiguous range [od_lo, od_lo + count): one 2-D convolution whose batch is that range
// computes the tap for one image, x's batch stride being stride_d depth strides of x and y's one
// depth stride of y. Every 2-D algorithm, the staging of strided layouts and both devices then
// run the 3-D problem unchanged, through the 2-D plans of core/plan.hpp.
//
// Accumulation: y = alpha * sum + beta * y. A tap whose range covers every output depth runs
// first with the caller's beta, the others add (beta = 1); without such a tap the output is
// scaled by beta first (beta = 0 writes zeros, never reading it). Backward data is the same with
// dx's input depths, backward filter per tap over the images (a tap reaching no output depth
// gets beta * dw[:, :, t]).
//
// WINOGRAD_2X2_3X3 and WINOGRAD_4X4_3X3 run natively instead where they can (cpu/winograd_3d.hpp:
// on the CPU, T x 3 x 3 filters, x and y packed NDHWC, w packed; the forward pass, and backward
// data where every stride and dilation is 1, as the forward convolution of dy by w transposed
// (C x K) and mirrored, with padding T-1-pd, R-1-ph, S-1-pw): each input
// plane transformed once per tap it serves and each output once, the taps summed by the GEMMs.
// With 3x3x3 filters, depth stride and dilation 1 and enough output depths, they run as the
// nested F(2x2x2,3x3x3) / F(4x4x4,3x3x3) instead (F(m,3) along the depth too: fewer
// multiplications, winograd_3d::nests). Such a plan prepares its filters
// (convcorePrepareConvolutionPlanFilters).
//
// FFT runs natively too (cpu/fft_3d.hpp: on the CPU, w packed, any x and y strides; the forward
// pass, and backward data where every stride is 1 and one group, as above) where more than one
// depth tap reaches the output: FFTW's rank-3 transforms, each input volume transformed once.
//
// CYCLIC_MINIMAL runs natively in the forward pass (cpu/cyclic_minimal_3d.hpp: on the CPU, w
// packed, any x and y strides, 2 or 3 depth taps with stride and dilation 1) where its nesting
// makes fewer 2-D convolutions than the per-tap form (cyclic_3d::nests): the 4-point cyclic
// convolution along the depth around the 2-D CYCLIC_MINIMAL.
//
// IM2COL_GEMM runs natively (cpu/im2col_gemm_nd.hpp: on the CPU, w packed, x and dx in any
// strides, y's and dy's pixels one stride apart): the 3-D im2col per block of output pixels and
// one GEMM over all taps, y written once (forward, any windows but 1x1x1 stride 1 without padding,
// which runs in place decomposed); backward data where the outputs' windows are disjoint in every
// axis (a stride of at least the filter size, dilation 1: ConvTranspose3d(k=2, s=2), 1x1x1
// stride-2 downsamples): one GEMM and a scatter, no window summed twice; backward data with
// overlapping windows, stride 1 in every axis and one group: the forward IM2COL_GEMM of dy by w
// transposed and mirrored (as the Winograd's, any dilation), one GEMM per block of dx's pixels
// over all taps where the Winograd transforms the filter per call; backward filter on any
// windows but 1x1x1 stride 1 without padding: the 3-D im2col per block and dW^T += dY^T * col.
//
// Selection and queries: a 3-D problem's 2-D problems differ only in their batch; Get ranks the
// algorithms on the one with the largest batch (representative()), and Get, Find and Select
// answer with the 3-D plans' workspaces and times (core/selection.hpp). A decomposed plan's
// workspace is the largest of its 2-D plans'.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/depth_axis.hpp"
#include "core/descriptors.hpp"
#include "core/plan.hpp"
#include "core/problem.hpp"

namespace convcore {
namespace depth {

// A depth tap that reaches output depths: outputs od_lo .. od_lo + count - 1 read input depths
// id_lo, id_lo + stride_d, ... with the filter's depth index filter_t (t, or T-1-t when flipped).
struct Tap {
    int64_t t, filter_t, od_lo, count, id_lo;
};

// The taps of a depth axis that reach at least one output depth, in tap order.
std::vector<Tap> reached_taps(int64_t d_in, int64_t d_out, int64_t pad, int64_t stride, int64_t dil, int64_t taps,
                              bool flip);

// A validated 3-D problem: its depth geometry, its taps and the 2-D descriptors of one image's
// depth range (batch set per call).
struct DepthProblem {
    convcoreDeviceType_t device = CONVCORE_DEVICE_CPU;
    int64_t n = 0;                                     // images
    int64_t d_in = 0, d_out = 0, taps = 0;             // D, output depth, T
    int64_t pad = 0, stride = 1, dil = 1;              // along the depth
    int64_t x_n_stride = 0, x_d_stride = 0;            // elements
    int64_t y_n_stride = 0, y_d_stride = 0;
    int64_t w_t_stride = 0;
    int64_t x_bytes = 0, y_bytes = 0, w_bytes = 0;     // byte extents of the whole 3-D tensors
    int64_t y_dims[5] = {0, 0, 0, 0, 0}, y_strides[5] = {0, 0, 0, 0, 0};  // N, K, D', P, Q
    int64_t x_dims[5] = {0, 0, 0, 0, 0}, x_strides[5] = {0, 0, 0, 0, 0};  // N, C, D, H, W
    int64_t w_dims[4] = {0, 0, 0, 0}, w_strides[4] = {0, 0, 0, 0};        // K, C/g, R, S
    std::vector<Tap> reached;
    int64_t largest_count = 0;  // the largest tap range (0: every output depth reads only padding)
    // The 2-D descriptors of a depth range: x2 and y2 with batch = the range, w2 one tap.
    convcoreTensorStruct x2, y2;
    convcoreFilterStruct w2;
    convcoreConvolutionStruct conv2;
    bool has_y = false;

    // The 2-D problem of `count` output depths of one image.
    ConvProblem plane(int64_t count) const;
    // The 2-D problem that stands for the 3-D one in queries and selection: the largest batch.
    ConvProblem representative() const { return plane(largest_count > 0 ? largest_count : 1); }
};

// Whether a tensor descriptor is 3-D (nbDims 5): its problem goes through this decomposition.
inline bool is_3d(const convcoreTensorStruct* x) { return x && x->set && x->nb_dims == 5; }

// Validates 3-D descriptors (y may be null) into a DepthProblem; BAD_PARAM names the argument, as
// make_problem does for 2-D (a y whose shape is not the output's, mixed dimension counts, an
// empty output).
DepthProblem make_depth_problem(convcoreDeviceType_t device, const convcoreTensorStruct* x,
                                const convcoreFilterStruct* w, const convcoreConvolutionStruct* conv,
                                const convcoreTensorStruct* y);

// What a 3-D plan holds: the problem and one 2-D plan per distinct batch of its taps, or the
// native Winograd's tile size.
struct DepthPlan {
    DepthProblem prob;
    std::vector<std::pair<int64_t, convcoreConvolutionPlanStruct>> plans;  // (batch, plan)
    int64_t native_m = 0;  // > 0: cpu/winograd_3d.hpp's F(m x m, 3x3) runs the whole problem
    bool native_nested = false;  // ... as the nested F(m x m x m, 3x3x3) (winograd_3d::nests)
    bool native_fft = false;  // cpu/fft_3d.hpp's 3-D FFT runs the whole problem
    bool native_cyclic = false;  // cpu/cyclic_minimal_3d.hpp's nested CYCLIC_MINIMAL runs it
    bool native_im2col = false;  // cpu/im2col_gemm_nd.hpp's 3-D IM2COL_GEMM runs it
    // The forward problem it runs: its planes (N images, packed NHWC) and depth axis; for
    // backward data the one that makes dx from dy (by w transposed and mirrored), except the
    // IM2COL_GEMM's (the problem itself)
    ConvProblem native_plane;
    DepthAxis native_axis;
    size_t prepared_bytes = 0;  // native forward: the transformed filters' bytes
    size_t transposed_bytes = 0;  // native backward data: w transposed, at the workspace's start
    size_t workspace = 0;  // the largest of the plans' workspaces (native: its own)
    const convcoreConvolutionPlanStruct& plan_for(int64_t count) const;
    bool native() const { return native_m > 0 || native_fft || native_cyclic || native_im2col; }
};

// A 3-D plan for `algo`: a native form where the device backend has one for it (the CPU's,
// cpu/native_3d.cpp through core/device.hpp), else the representative 2-D plan (its algorithm, solver, checks), with the
// 2-D plans of every tap batch in plan.depth. NOT_SUPPORTED as in 2-D for an algorithm that
// cannot run the 2-D problems.
convcoreConvolutionPlanStruct make_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        const DepthProblem& prob, int algo);

// Runs a 3-D plan (plan.depth set): out = alpha * pass(in0, in1) + beta * out, as api::execute.
void execute(const convcoreConvolutionPlanStruct& plan, const void* alpha, const void* in0, const void* in1,
             const void* beta, void* out, void* workspace, size_t workspace_size);

// y = act(y + alpha2 * z + bias) over a 3-D plan's y (z: null or laid out as y), per image.
void apply_epilogue(const convcoreConvolutionPlanStruct& plan, void* y, const Epilogue& e);

}  // namespace depth
}  // namespace convcore
