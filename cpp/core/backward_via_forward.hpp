// Backward passes by reduction to a FORWARD solver (core/backward_via_forward.cpp), written
// once so that an algorithm with a forward solver (the FFT family, POLY_HANKEL, Winograd for
// backward data) gets a backward pass from one VIA_FORWARD line of algorithms.def, which the
// registry turns into:
//
//   &via_forward::data_solver<CONVCORE_BWD_DATA_ALGO_FFT, CONVCORE_FWD_ALGO_FFT, CONVCORE_DEVICE_CPU>
//
// Backward data (stride 1): dx is the forward convolution of dy (N x K x P x Q) with the
// transposed filter w' (C x K/g x R x S, w'[g,c][k] = w[g,k][c]), padding dil*(R-1) - pad,
// the same dilation and groups, and the mode toggled (the flip of the filter is the mode's).
// Backward filter (stride 1): dw is a correlation of x with dy, run as the forward problem
// with batch C/g, channels g*N (x transposed), filter dy transposed (K x N x P x Q), stride
// = the dilation, padding = pad, groups g; its C/g x K x R x S output is transposed into dw.
// The transposes live in the workspace: workspace = the forward solver's + the transposes.
#pragma once
#include <string>

#include "core/problem.hpp"
#include "core/solver.hpp"

namespace convcore {
namespace via_forward {

// The forward problem each reduction runs; only meaningful when the why_not below is "".
ConvProblem data_problem(const ConvProblem& prob);
ConvProblem filter_problem(const ConvProblem& prob);

std::string data_why_not(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd);
size_t data_workspace_bytes(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd);
void data_run(const BwdDataArgs& args, convcoreConvolutionFwdAlgo_t fwd);
// Backward data runs NHWC natively where the forward solver runs the reduced problem in NHWC.
bool data_runs_nhwc(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd);
// Made for what the forward solver is made for, on the problem it runs (Winograd: 3x3 stride 1).
// The filter reductions are not: their "filter" is dy's whole map, which every FFT would claim.
MadeFor data_made_for(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd);

std::string filter_why_not(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd);
size_t filter_workspace_bytes(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd);
void filter_run(const BwdFilterArgs& args, convcoreConvolutionFwdAlgo_t fwd);

template <convcoreConvolutionFwdAlgo_t F>
std::string data_why_not_t(const ConvProblem& p) { return data_why_not(p, F); }
template <convcoreConvolutionFwdAlgo_t F>
size_t data_workspace_t(const ConvProblem& p) { return data_workspace_bytes(p, F); }
template <convcoreConvolutionFwdAlgo_t F>
void data_run_t(const BwdDataArgs& a) { data_run(a, F); }
template <convcoreConvolutionFwdAlgo_t F>
bool data_runs_nhwc_t(const ConvProblem& p) { return data_runs_nhwc(p, F); }
template <convcoreConvolutionFwdAlgo_t F>
MadeFor data_made_for_t(const ConvProblem& p) { return data_made_for(p, F); }
template <convcoreConvolutionFwdAlgo_t F>
std::string filter_why_not_t(const ConvProblem& p) { return filter_why_not(p, F); }
template <convcoreConvolutionFwdAlgo_t F>
size_t filter_workspace_t(const ConvProblem& p) { return filter_workspace_bytes(p, F); }
template <convcoreConvolutionFwdAlgo_t F>
void filter_run_t(const BwdFilterArgs& a) { filter_run(a, F); }

// The solver of backward algorithm B by forward algorithm F on device D: the same reduction on
// every device (the forward solver is the one of the problem's device, and so are the data
// movements below).
template <convcoreConvolutionBwdDataAlgo_t B, convcoreConvolutionFwdAlgo_t F, convcoreDeviceType_t D>
inline const Solver data_solver = {.algo = B, .device = D, .why_not = data_why_not_t<F>,
                                   .workspace_bytes = data_workspace_t<F>, .backward_data = data_run_t<F>,
                                   .runs_nhwc = data_runs_nhwc_t<F>, .made_for = data_made_for_t<F>};
template <convcoreConvolutionBwdFilterAlgo_t B, convcoreConvolutionFwdAlgo_t F, convcoreDeviceType_t D>
inline const Solver filter_solver = {.algo = B, .device = D, .why_not = filter_why_not_t<F>,
                                     .workspace_bytes = filter_workspace_t<F>, .backward_filter = filter_run_t<F>};

// The reductions' data movements on one device (packed tensors, the problem's dtype):
//   filter_t:  w' (C x K/g x R x S), w'[g*Cg + c][k] = w[g*Kg + k][c]
//   x_t:       x' (Cg x g*N x H x W), x'[c][g*N + n] = x[n][g*Cg + c]
//   dy_t:      dy' (K x N x P x Q), dy'[k][n] = dy[n][k]
//   store_dw:  dw[k][c][r][s] = alpha * y'[c][k][tap(r)][tap(s)] + beta * dw (beta == 0: dw
//              not read), y' the Cg x K x R x S output of the filter problem, tap mirrored in
//              the true-convolution mode.
struct Movers {
    void (*filter_t)(const Context& ctx, const ConvProblem& p, const void* w, void* wt);
    void (*x_t)(const Context& ctx, const ConvProblem& p, const void* x, void* xt);
    void (*dy_t)(const Context& ctx, const ConvProblem& p, const void* dy, void* dyt);
    void (*store_dw)(const Context& ctx, const ConvProblem& p, const void* yt, void* dw,
                     double alpha, double beta);
};
#ifdef CONVCORE_WITH_CUDA
const Movers& cuda_movers();  // cuda/backward_via_forward.cu
#endif

}  // namespace via_forward
}  // namespace convcore
