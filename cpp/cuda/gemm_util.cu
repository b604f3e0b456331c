// Kernels of cuda/gemm_util.hpp. Grid-stride loops with 64-bit indices; the elements are
// common/im2col_gemm_plan.hpp's and common/permute_planes.hpp's, the ones the CPU test checks.
#include "cuda/gemm_util.hpp"

#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void im2col_kernel(const T* __restrict__ x, GemmGeom g, int64_t groups, int64_t n0,
                              int64_t count, T* __restrict__ col, bool group_major,
                              int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const int64_t src = im2col_plan::im2col_source(g, groups, n0, count, group_major, i);
        col[i] = src < 0 ? T(0) : x[src];
    }
}

template <typename T>
__global__ void permute_planes_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                      PlanePermutation pm, int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step)
        dst[i] = src[permuted_source(pm, i)];  // coalesced writes, reads along the plane
}

template <typename T>
__global__ void scale_kernel(T* y, int64_t count, T beta) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += step)
        y[i] = beta == T(0) ? T(0) : beta * y[i];
}

}  // namespace

template <typename T>
void im2col(const Context& ctx, const GemmGeom& g, int64_t groups, const T* x, int64_t n0,
            int64_t count, T* col, ColLayout layout) {
    const int64_t total = count * groups * g.rows() * g.cols();
    if (total == 0) return;
    CONVCORE_LAUNCH(grid_blocks(ctx, total, kThreads), kThreads, 0, stream_of(ctx), im2col_kernel<T>)(
        x, g, groups, n0, count, col, layout == ColLayout::GROUP_MAJOR, total);
    CONVCORE_CUDA_CHECK_LAUNCH("im2col_kernel");
}

template <typename T>
void permute_planes(const Context& ctx, const T* src, T* dst, const PlanePermutation& pm) {
    const int64_t total = pm.dst_dims[0] * pm.dst_dims[1] * pm.dst_dims[2] * pm.plane;
    if (total == 0) return;
    CONVCORE_LAUNCH(grid_blocks(ctx, total, kThreads), kThreads, 0, stream_of(ctx), permute_planes_kernel<T>)(
        src, dst, pm, total);
    CONVCORE_CUDA_CHECK_LAUNCH("permute_planes_kernel");
}

template <typename T>
void scale_by_beta(const Context& ctx, T* y, int64_t count, T beta) {
    if (count == 0) return;
    CONVCORE_LAUNCH(grid_blocks(ctx, count, kThreads), kThreads, 0, stream_of(ctx), scale_kernel<T>)(y, count,
                                                                                                     beta);
    CONVCORE_CUDA_CHECK_LAUNCH("scale_kernel");
}

template void im2col<float>(const Context&, const GemmGeom&, int64_t, const float*, int64_t,
                            int64_t, float*, ColLayout);
template void im2col<double>(const Context&, const GemmGeom&, int64_t, const double*, int64_t,
                             int64_t, double*, ColLayout);
template void permute_planes<float>(const Context&, const float*, float*, const PlanePermutation&);
template void permute_planes<double>(const Context&, const double*, double*,
                                     const PlanePermutation&);
template void scale_by_beta<float>(const Context&, float*, int64_t, float);
template void scale_by_beta<double>(const Context&, double*, int64_t, double);

}  // namespace cuda
}  // namespace convcore
