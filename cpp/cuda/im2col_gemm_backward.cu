// IM2COL_GEMM backward passes on CUDA, the transposes of cuda/im2col_gemm.cu's GEMM
// Y[n, g] (Kg x PQ) = W[g] (Kg x L) * col[n, g] (L x PQ), L = Cg*R*S:
//   backward data:   col[n, g] = W[g]^T * dY[n, g] (cuBLAS, batched as in the forward pass)
//                    for a chunk of images, then col2im: one thread per dx element GATHERS
//                    the col entries that read it (common/im2col_gemm_plan.hpp: col2im_value;
//                    no atomics, so the result is deterministic) and blends alpha/beta.
//                    The cuBLAS calls are common/im2col_gemm_plan.hpp's (replayed on the host
//                    by the CPU test).
//                    1x1/stride 1/no padding: dx[n, g] = alpha * W[g]^T dY[n, g] + beta * dx
//                    directly, no workspace.
//   backward filter: per chunk of images, im2col of x with the images side by side
//                    (col_g: L x count*PQ) and dY transposed to dYt_g (Kg x count*PQ), then
//                    dW[g] = alpha * dYt_g * col_g^T + beta' * dW[g]: the sum over the images
//                    of the chunk is the GEMM's inner dimension; beta' = beta for the first
//                    chunk (cuBLAS with beta == 0 does not read dW) and 1 after.
// Workspace: data: chunk * groups * L * PQ elements; filter: chunk * groups * (L + Kg) * PQ
// elements (chunks of at most 256 MiB, one image at least).
#include <cuda_runtime.h>

#include <string>

#include "common/blend.hpp"
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

namespace {

constexpr int kThreads = 256;

// dx[n0 + n][ci][ih][iw] for n < count from col ([n][g][L][PQ]), blended.
template <typename T>
__global__ void col2im_kernel(const T* __restrict__ col, GemmGeom g, int64_t groups, T* dx,
                              T alpha, T beta, int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step)
        blend_store(dx + i, im2col_plan::col2im_value(g, groups, col, i), alpha, beta);
}

size_t data_bytes_per_image(const ConvProblem& p) {
    return size_t(p.groups) * size_t(p.c_per_group() * p.r * p.s) * size_t(p.p * p.q) *
           p.elem_size();
}
size_t filter_bytes_per_image(const ConvProblem& p) {
    return size_t(p.groups) * size_t(p.c_per_group() * p.r * p.s + p.k_per_group()) *
           size_t(p.p * p.q) * p.elem_size();
}

std::string data_why_not(const ConvProblem& p) { return im2col_why_not(p, "backward data"); }
std::string filter_why_not(const ConvProblem& p) { return im2col_why_not(p, "backward filter"); }

size_t data_workspace(const ConvProblem& p) {
    if (im2col_direct_1x1(p) || p.x_elems() == 0 || p.y_elems() == 0) return 0;
    return size_t(chunk_images(p.n, data_bytes_per_image(p), 0)) * data_bytes_per_image(p);
}
size_t filter_workspace(const ConvProblem& p) {
    if (p.x_elems() == 0 || p.y_elems() == 0) return 0;
    return size_t(chunk_images(p.n, filter_bytes_per_image(p), p.p * p.q)) *
           filter_bytes_per_image(p);
}

#if defined(CONVCORE_HAVE_CUBLAS)
template <typename T>
void data_typed(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    const GemmGeom g = gemm_geom(p);
    const int64_t hw = p.h * p.w;
    const T* w = static_cast<const T*>(a.w);
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    const T alpha = T(a.alpha), beta = T(a.beta);
    cublasHandle_t h = a.ctx.cuda->cublas(stream_of(a.ctx));
    const bool direct = im2col_direct_1x1(p);
    T* col = static_cast<T*>(a.workspace);
    if (!direct && col == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "IM2COL_GEMM backward data (CUDA): no workspace");
    const int64_t chunk = direct ? p.n : chunk_images(p.n, data_bytes_per_image(p), 0);
    // The GEMM writes col^T (PQ x L) = dY^T (PQ x Kg) * W[g] (Kg x L): in direct mode straight
    // into dx with alpha and beta, else into the workspace, blended by col2im.
    const T ga = direct ? alpha : T(1), gb = direct ? beta : T(0);
    T* const buffers[5] = {dx, const_cast<T*>(w), const_cast<T*>(dy), col, nullptr};
    for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
        const int64_t count = p.n - n0 < chunk ? p.n - n0 : chunk;
        for (const im2col_plan::GemmCall& call :
             im2col_plan::backward_data_calls(g, p.groups, n0, count, direct))
            run_gemm(h, call, ga, gb, buffers);
        if (!direct) {
            const int64_t total = count * p.c * hw;
            CONVCORE_LAUNCH(grid_blocks(a.ctx, total, kThreads), kThreads, 0, stream_of(a.ctx),
                            col2im_kernel<T>)(col, g, p.groups, dx + n0 * p.c * hw, alpha,
                                              beta, total);
            CONVCORE_CUDA_CHECK_LAUNCH("col2im_kernel");
        }
    }
}

template <typename T>
void filter_typed(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    const GemmGeom g = gemm_geom(p);
    const int64_t L = g.rows(), pq = g.cols();
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);
    const T alpha = T(a.alpha), beta = T(a.beta);
    if (p.x_elems() == 0 || p.y_elems() == 0) {  // an empty sum: dw = beta * dw
        scale_by_beta(a.ctx, dw, p.w_elems(), beta);
        return;
    }
    if (a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "IM2COL_GEMM backward filter (CUDA): no workspace");
    cublasHandle_t h = a.ctx.cuda->cublas(stream_of(a.ctx));
    const int64_t chunk = chunk_images(p.n, filter_bytes_per_image(p), pq);
    T* col = static_cast<T*>(a.workspace);             // [g][L][count][PQ]
    T* dyt = col + chunk * p.groups * L * pq;           // [g][Kg][count][PQ] = [K][count][PQ]
    T* const buffers[5] = {const_cast<T*>(x), dw, const_cast<T*>(dy), col, dyt};
    for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
        const int64_t count = p.n - n0 < chunk ? p.n - n0 : chunk;
        im2col(a.ctx, g, p.groups, x, n0, count, col, ColLayout::GROUP_MAJOR);
        swap_outer(a.ctx, dy + n0 * p.k * pq, dyt, count, p.k, pq);
        run_gemm(h, im2col_plan::backward_filter_call(g, p.groups, count), alpha,
                 n0 == 0 ? beta : T(1), buffers);
    }
}
#endif

void data_run(const BwdDataArgs& a) {
    if (a.prob.x_elems() == 0) return;
#if defined(CONVCORE_HAVE_CUBLAS)
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.y_elems() == 0) {  // no output: dx = beta * dx
        if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
            scale_by_beta(a.ctx, static_cast<double*>(a.dx), a.prob.x_elems(), a.beta);
        else
            scale_by_beta(a.ctx, static_cast<float*>(a.dx), a.prob.x_elems(), float(a.beta));
        return;
    }
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        data_typed<double>(a);
    else
        data_typed<float>(a);
#else
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, data_why_not(a.prob));
#endif
}

void filter_run(const BwdFilterArgs& a) {
    if (a.prob.w_elems() == 0) return;
#if defined(CONVCORE_HAVE_CUBLAS)
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        filter_typed<double>(a);
    else
        filter_typed<float>(a);
#else
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, filter_why_not(a.prob));
#endif
}

}  // namespace

extern const Solver im2col_gemm_bwd_data_solver;
const Solver im2col_gemm_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM,
    .device = CONVCORE_DEVICE_CUDA, .why_not = data_why_not, .workspace_bytes = data_workspace,
    .backward_data = data_run};
extern const Solver im2col_gemm_bwd_filter_solver;
const Solver im2col_gemm_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM,
    .device = CONVCORE_DEVICE_CUDA, .why_not = filter_why_not, .workspace_bytes = filter_workspace,
    .backward_filter = filter_run};

}  // namespace cuda
}  // namespace convcore
