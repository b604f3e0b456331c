// The CUDA data movements of the backward-via-forward reductions (core/backward_via_forward:
// the reduction math and the registry templates via_forward::bwd_data_cuda / bwd_filter_cuda
// are shared with the CPU; only these transposes are device code). Queued on the handle's
// stream, like the forward solver that runs between them.
#include <cuda_runtime.h>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/permute_planes.hpp"
#include "core/backward_via_forward.hpp"
#include "cuda/check.hpp"
#include "cuda/gemm_util.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace via_forward {

namespace {

constexpr int kThreads = 256;

// dw = alpha * (y' rearranged: common/permute_planes.hpp reduced_filter_source) + beta * dw.
template <typename T>
__global__ void store_dw_kernel(const T* __restrict__ yt, T* dw, int64_t k_all, int64_t cg,
                                int64_t r_size, int64_t s_size, bool flip, T alpha, T beta,
                                int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step)
        blend_store(dw + i, yt[reduced_filter_source(k_all, cg, r_size, s_size, flip, i)], alpha,
                    beta);
}

template <typename T>
void filter_t(const Context& ctx, const ConvProblem& p, const void* w, void* wt) {
    cuda::permute_planes(ctx, static_cast<const T*>(w), static_cast<T*>(wt),
                         filter_transpose(p.groups, p.k_per_group(), p.c_per_group(), p.r * p.s));
}

template <typename T>
void x_t(const Context& ctx, const ConvProblem& p, const void* x, void* xt) {
    cuda::permute_planes(ctx, static_cast<const T*>(x), static_cast<T*>(xt),
                         input_transpose(p.n, p.groups, p.c_per_group(), p.h * p.w));
}

template <typename T>
void dy_t(const Context& ctx, const ConvProblem& p, const void* dy, void* dyt) {
    cuda::swap_outer(ctx, static_cast<const T*>(dy), static_cast<T*>(dyt), p.n, p.k, p.p * p.q);
}

template <typename T>
void store_dw(const Context& ctx, const ConvProblem& p, const void* yt, void* dw, double alpha,
              double beta) {
    const int64_t total = p.w_elems();
    if (total == 0) return;
    CONVCORE_LAUNCH(cuda::grid_blocks(ctx, total, kThreads), kThreads, 0, cuda::stream_of(ctx),
                    store_dw_kernel<T>)(static_cast<const T*>(yt), static_cast<T*>(dw),
                                        p.k, p.c_per_group(), p.r, p.s, p.flip,
                                        T(alpha), T(beta), total);
    CONVCORE_CUDA_CHECK_LAUNCH("store_dw_kernel");
}

// The dtype dispatch of one mover, with the handle's device current.
template <void (*F32)(const Context&, const ConvProblem&, const void*, void*),
          void (*F64)(const Context&, const ConvProblem&, const void*, void*)>
void by_dtype(const Context& ctx, const ConvProblem& p, const void* src, void* dst) {
    cuda::DeviceGuard guard(ctx.device_index);
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        F64(ctx, p, src, dst);
    else
        F32(ctx, p, src, dst);
}

void store_dw_any(const Context& ctx, const ConvProblem& p, const void* yt, void* dw,
                  double alpha, double beta) {
    cuda::DeviceGuard guard(ctx.device_index);
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        store_dw<double>(ctx, p, yt, dw, alpha, beta);
    else
        store_dw<float>(ctx, p, yt, dw, alpha, beta);
}

const Movers kCudaMovers = {by_dtype<filter_t<float>, filter_t<double>>,
                            by_dtype<x_t<float>, x_t<double>>, by_dtype<dy_t<float>, dy_t<double>>,
                            store_dw_any};

}  // namespace

const Movers& cuda_movers() { return kCudaMovers; }

}  // namespace via_forward
}  // namespace convcore
