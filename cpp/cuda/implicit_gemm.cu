// IMPLICIT_GEMM forward on CUDA: the GEMM of IM2COL_GEMM,
//   Y[n, g] (Kg x PQ) = alpha * W[g] (Kg x L) * col[n, g] (L x PQ) + beta * Y[n, g],
// with the images side by side (columns j = (n, oh, ow), N*P*Q of them) and col never
// materialised: the tiled kernel of cuda/implicit_gemm_kernel.cuh with the operand policy
// ImplicitForward (common/implicit_gemm_ops.hpp, whose elements the CPU test checks). Every
// stride, padding, dilation, group count and mode; no workspace; deterministic.
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

size_t workspace_bytes(const ConvProblem&) { return 0; }

void run(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    if (p.y_elems() == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "IMPLICIT_GEMM (CUDA): null tensor pointer");
    const GemmGeom g = gemm_geom(p);
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        launch_implicit_gemm(a.ctx, ImplicitForward<double>{g, p.n, static_cast<const double*>(a.x),
                                                            static_cast<const double*>(a.w),
                                                            static_cast<double*>(a.y)},
                             p.groups, a.alpha, a.beta);
    else
        launch_implicit_gemm(a.ctx, ImplicitForward<float>{g, p.n, static_cast<const float*>(a.x),
                                                           static_cast<const float*>(a.w),
                                                           static_cast<float*>(a.y)},
                             p.groups, float(a.alpha), float(a.beta));
}

}  // namespace

extern const Solver implicit_gemm_solver;
const Solver implicit_gemm_solver = {.algo = CONVCORE_FWD_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .made_for = made_for::general};

}  // namespace cuda
}  // namespace convcore
