// Strided 4-D tensor copies on the GPU (core/device.hpp): what lets every solver see packed
// NCHW tensors; and the fused epilogue the core applies after solvers that do not fuse it. One
// grid-stride kernel each, 64-bit indices, queued on the handle's stream.
#include <cuda_runtime.h>

#include <string>

#include "common/blend.hpp"
#include "common/epilogue.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

constexpr int kThreads = 256;

// Offsets of linear index i (row-major over view.dims) under the src and dst strides.
struct Offsets {
    int64_t src, dst;
};
__device__ __forceinline__ Offsets view_offsets(int64_t i, const Strided4d& src,
                                                const Strided4d& dst) {
    const int64_t w = i % src.dims[3];
    i /= src.dims[3];
    const int64_t h = i % src.dims[2];
    i /= src.dims[2];
    const int64_t c = i % src.dims[1];
    const int64_t n = i / src.dims[1];
    return {offset4(n, c, h, w, src.strides), offset4(n, c, h, w, dst.strides)};
}

template <typename T>
__global__ void copy_strided_kernel(const T* __restrict__ src, Strided4d src_view,
                                    T* __restrict__ dst, Strided4d dst_view, int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const Offsets o = view_offsets(i, src_view, dst_view);
        dst[o.dst] = src[o.src];
    }
}

template <typename T>
__global__ void blend_strided_kernel(const T* __restrict__ src, Strided4d src_view,
                                     T* __restrict__ dst, Strided4d dst_view, int64_t total,
                                     T alpha, T beta) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const Offsets o = view_offsets(i, src_view, dst_view);
        blend_store(dst + o.dst, src[o.src], alpha, beta);
    }
}

template <typename T>
__global__ void scale_strided_kernel(T* dst, Strided4d view, int64_t total, T beta) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const int64_t o = view_offsets(i, view, view).dst;
        dst[o] = beta == T(0) ? T(0) : beta * dst[o];
    }
}

// y = act(y + alpha2 * z + bias[k]) over the view; z (or null) has y's strides, may be y.
template <typename T>
__global__ void epilogue_kernel(T* y, Strided4d view, const T* z, T alpha2, const T* bias,
                                convcoreActivationMode_t act, int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const int64_t k = i / (view.dims[2] * view.dims[3]) % view.dims[1];
        const int64_t o = view_offsets(i, view, view).dst;
        y[o] = epilogue::finish(y[o], z ? alpha2 * z[o] : T(0), bias ? bias[k] : T(0), act);
    }
}

// Elements of the view; 0 when any dimension is 0. Throws on a shape mismatch.
int64_t view_elems(const Strided4d& src, const Strided4d& dst, const char* what) {
    int64_t total = 1;
    for (int d = 0; d < 4; ++d) {
        if (src.dims[d] != dst.dims[d])
            throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                        std::string(what) + ": source and destination views differ in shape");
        if (src.dims[d] < 0)
            throw Error(CONVCORE_STATUS_INTERNAL_ERROR, std::string(what) + ": negative size");
        total *= src.dims[d];
    }
    return total;
}

void check_elem(size_t elem, const char* what) {
    if (elem != 4 && elem != 8)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                    std::string(what) + ": element size " + std::to_string(elem) +
                        " (expected 4 or 8)");
}

}  // namespace

void copy_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& src_view,
                  void* dst, const Strided4d& dst_view) {
    check_elem(elem, "cuda::copy_strided");
    const int64_t total = view_elems(src_view, dst_view, "cuda::copy_strided");
    if (total == 0) return;
    DeviceGuard guard(ctx.device_index);
    const unsigned int blocks = grid_blocks(ctx, total, kThreads);
    const cudaStream_t stream = stream_of(ctx);
    if (elem == 4) {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, copy_strided_kernel<float>)(
            static_cast<const float*>(src), src_view, static_cast<float*>(dst), dst_view, total);
    } else {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, copy_strided_kernel<double>)(
            static_cast<const double*>(src), src_view, static_cast<double*>(dst), dst_view, total);
    }
    CONVCORE_CUDA_CHECK_LAUNCH("copy_strided_kernel");
}

void blend_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& src_view,
                   void* dst, const Strided4d& dst_view, double alpha, double beta) {
    check_elem(elem, "cuda::blend_strided");
    const int64_t total = view_elems(src_view, dst_view, "cuda::blend_strided");
    if (total == 0) return;
    DeviceGuard guard(ctx.device_index);
    const unsigned int blocks = grid_blocks(ctx, total, kThreads);
    const cudaStream_t stream = stream_of(ctx);
    if (elem == 4) {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, blend_strided_kernel<float>)(
            static_cast<const float*>(src), src_view, static_cast<float*>(dst), dst_view, total,
            static_cast<float>(alpha), static_cast<float>(beta));
    } else {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, blend_strided_kernel<double>)(
            static_cast<const double*>(src), src_view, static_cast<double*>(dst), dst_view, total,
            alpha, beta);
    }
    CONVCORE_CUDA_CHECK_LAUNCH("blend_strided_kernel");
}

void scale_strided(const Context& ctx, size_t elem, void* dst, const Strided4d& view, double beta) {
    check_elem(elem, "cuda::scale_strided");
    const int64_t total = view_elems(view, view, "cuda::scale_strided");
    if (total == 0) return;
    DeviceGuard guard(ctx.device_index);
    const unsigned int blocks = grid_blocks(ctx, total, kThreads);
    const cudaStream_t stream = stream_of(ctx);
    if (elem == 4) {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, scale_strided_kernel<float>)(
            static_cast<float*>(dst), view, total, static_cast<float>(beta));
    } else {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, scale_strided_kernel<double>)(
            static_cast<double*>(dst), view, total, beta);
    }
    CONVCORE_CUDA_CHECK_LAUNCH("scale_strided_kernel");
}

void apply_epilogue(const Context& ctx, size_t elem, void* y, const Strided4d& view, const Epilogue& e) {
    check_elem(elem, "cuda::apply_epilogue");
    if (e.none()) return;
    const int64_t total = view_elems(view, view, "cuda::apply_epilogue");
    if (total == 0) return;
    DeviceGuard guard(ctx.device_index);
    const unsigned int blocks = grid_blocks(ctx, total, kThreads);
    const cudaStream_t stream = stream_of(ctx);
    if (elem == 4) {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, epilogue_kernel<float>)(
            static_cast<float*>(y), view, static_cast<const float*>(e.z), static_cast<float>(e.alpha2),
            static_cast<const float*>(e.bias), e.activation, total);
    } else {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, epilogue_kernel<double>)(
            static_cast<double*>(y), view, static_cast<const double*>(e.z), e.alpha2,
            static_cast<const double*>(e.bias), e.activation, total);
    }
    CONVCORE_CUDA_CHECK_LAUNCH("epilogue_kernel");
}

}  // namespace cuda
}  // namespace convcore
