// IMPLICIT_GEMM backward passes on CUDA: the tiled kernel of cuda/implicit_gemm_kernel.cuh with
// the operand policies ImplicitBackwardData and ImplicitBackwardFilter
// (common/implicit_gemm_ops.hpp, checked on the host by tests/cpp/test_gemm_gather.cpp):
//   backward data:   dx[n, c, ih, iw] = sum_{k, fr, fs} w[k][c][fr][fs] * dy[n, k, oh, ow], each
//                    dx element gathering the dy elements that read it (no atomics);
//   backward filter: dW[g] = sum over images and outputs of dY * col^T, the sum over the
//                    images being the GEMM's depth (no atomics, no workspace).
// Every stride, padding, dilation, group count and mode; no workspace; deterministic. The
// float32 filter gradient sums N*P*Q products per element in float (like cuDNN's
// non-split algorithms): for very large batches its rounding error grows with sqrt(N*P*Q).
#include <cuda_runtime.h>

#include <string>

#include "common/implicit_gemm_ops.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/implicit_gemm_kernel.cuh"

namespace convcore {
namespace cuda {

namespace {

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IMPLICIT_GEMM on CUDA runs float32 and float64 only";
    return "";
}

size_t no_workspace(const ConvProblem&) { return 0; }

void data_run(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    if (p.x_elems() == 0) return;
    const GemmGeom g = gemm_geom(p);
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        launch_implicit_gemm(a.ctx, ImplicitBackwardData<double>{g, p.n, static_cast<const double*>(a.dy),
                                                                 static_cast<const double*>(a.w),
                                                                 static_cast<double*>(a.dx)},
                             p.groups, a.alpha, a.beta);
    else
        launch_implicit_gemm(a.ctx, ImplicitBackwardData<float>{g, p.n, static_cast<const float*>(a.dy),
                                                                static_cast<const float*>(a.w),
                                                                static_cast<float*>(a.dx)},
                             p.groups, float(a.alpha), float(a.beta));
}

void filter_run(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    if (p.w_elems() == 0) return;
    const GemmGeom g = gemm_geom(p);
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        launch_implicit_gemm(a.ctx, ImplicitBackwardFilter<double>{g, p.n, static_cast<const double*>(a.x),
                                                                   static_cast<const double*>(a.dy),
                                                                   static_cast<double*>(a.dw)},
                             p.groups, a.alpha, a.beta);
    else
        launch_implicit_gemm(a.ctx, ImplicitBackwardFilter<float>{g, p.n, static_cast<const float*>(a.x),
                                                                  static_cast<const float*>(a.dy),
                                                                  static_cast<float*>(a.dw)},
                             p.groups, float(a.alpha), float(a.beta));
}

}  // namespace

extern const Solver implicit_gemm_bwd_data_solver;
const Solver implicit_gemm_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = no_workspace,
    .backward_data = data_run};
extern const Solver implicit_gemm_bwd_filter_solver;
const Solver implicit_gemm_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = no_workspace,
    .backward_filter = filter_run};

}  // namespace cuda
}  // namespace convcore
