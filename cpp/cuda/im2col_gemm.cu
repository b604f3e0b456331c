// IM2COL_GEMM forward on CUDA: the im2col matrices of a chunk of images go into the workspace
// (cuda/gemm_util.cu, the element of common/gemm_gather.hpp), then cuBLAS computes, per image
// and group, Y[n, g] (Kg x PQ) = alpha * W[g] (Kg x L) * col[n, g] (L x PQ) + beta * Y[n, g]
// as strided-batched GEMMs (batched over the images of the chunk, or over the groups when
// there are more groups than images): the calls of common/im2col_gemm_plan.hpp, which the CPU
// test replays on the host. cuBLAS with beta == 0 does not read Y. 1x1 filters with stride 1 and no padding need no unfolding: x is the col matrix.
// Workspace: chunk_images * groups * L * PQ elements (chunks of at most 256 MiB, one image
// at least). Deterministic (fixed GEMM configuration on one stream).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "common/gemm_gather.hpp"
#include "common/im2col_gemm_plan.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/gemm_util.hpp"
#include "cuda/im2col_gemm.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

bool im2col_direct_1x1(const ConvProblem& p) { return im2col_plan::x_is_col(gemm_geom(p)); }

std::string im2col_why_not(const ConvProblem& p, const char* pass) {
    const std::string name = std::string("IM2COL_GEMM ") + pass + " on CUDA";
#if !defined(CONVCORE_HAVE_CUBLAS)
    (void)p;
    return name + " needs cuBLAS, which this build did not find (pip install nvidia-cublas)";
#else
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return name + " runs float32 and float64 only";
    const int64_t crs = p.c_per_group() * p.r * p.s;
    if (p.k_per_group() > INT_MAX || p.p * p.q > INT_MAX || crs > INT_MAX || p.groups > INT_MAX ||
        p.n > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", P*Q=" + std::to_string(p.p * p.q) + ", C/groups*R*S=" + std::to_string(crs) +
               ") exceeds cuBLAS's 32-bit int";
    // One image's matrices (backward filter: col and the transposed dy) must have a byte size.
    const double image_bytes = double(p.groups) * double(crs + p.k_per_group()) *
                               double(p.p * p.q) * double(p.elem_size());
    if (image_bytes > double(INT64_MAX / 2))
        return name + ": one image's im2col matrices would need " + std::to_string(image_bytes) +
               " bytes";
    return "";
#endif
}

namespace {

size_t col_bytes_per_image(const ConvProblem& p) {
    return size_t(p.groups) * size_t(p.c_per_group() * p.r * p.s) * size_t(p.p * p.q) *
           p.elem_size();
}

std::string why_not(const ConvProblem& p) { return im2col_why_not(p, "forward"); }

size_t workspace_bytes(const ConvProblem& p) {
    if (im2col_direct_1x1(p) || p.y_elems() == 0) return 0;
    return size_t(chunk_images(p.n, col_bytes_per_image(p), 0)) * col_bytes_per_image(p);
}

#if defined(CONVCORE_HAVE_CUBLAS)
template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const GemmGeom g = gemm_geom(p);
    const bool direct = im2col_direct_1x1(p);
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    T* col = static_cast<T*>(a.workspace);
    if (!direct && col == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "IM2COL_GEMM (CUDA): no workspace");
    const T alpha = T(a.alpha), beta = T(a.beta);
    cublasHandle_t h = a.ctx.cuda->cublas(stream_of(a.ctx));
    const int64_t chunk = direct ? p.n : chunk_images(p.n, col_bytes_per_image(p), 0);
    T* const buffers[5] = {const_cast<T*>(x), const_cast<T*>(w), y, col, nullptr};
    for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
        const int64_t count = p.n - n0 < chunk ? p.n - n0 : chunk;
        if (!direct) im2col(a.ctx, g, p.groups, x, n0, count, col, ColLayout::IMAGE_MAJOR);
        for (const im2col_plan::GemmCall& call : im2col_plan::forward_calls(g, p.groups, n0, count, direct))
            run_gemm(h, call, alpha, beta, buffers);
    }
}
#endif

void run(const ConvArgs& a) {
    if (a.prob.y_elems() == 0) return;
#if defined(CONVCORE_HAVE_CUBLAS)
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
#else
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, im2col_why_not(a.prob, "forward"));
#endif
}

}  // namespace

extern const Solver im2col_gemm_solver;
const Solver im2col_gemm_solver = {.algo = CONVCORE_FWD_ALGO_IM2COL_GEMM,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .made_for = made_for::general};

}  // namespace cuda
}  // namespace convcore
