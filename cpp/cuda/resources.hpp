// Per-handle CUDA resources (convcoreContext::cuda): device properties read once at handle
// creation, and library handles created on first use. Created by cuda::init_context.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/context.hpp"
#include "cuda/check.hpp"

namespace convcore {
namespace cuda {

class FftPlanCache;  // cuda/fft_family.hpp

struct DeviceResources {
    int device = 0;
    std::string name;          // "NVIDIA H100 80GB HBM3"
    int cc_major = 0, cc_minor = 0;
    int sm_count = 0;
    int max_threads_per_sm = 0;
    size_t total_memory = 0;

    explicit DeviceResources(int device_index);
    ~DeviceResources();
    DeviceResources(const DeviceResources&) = delete;
    DeviceResources& operator=(const DeviceResources&) = delete;

#if defined(CONVCORE_HAVE_CUBLAS)
    // The handle's cuBLAS handle, created on first use and bound to `stream` on every call
    // (the convcore handle's stream may change between calls).
    cublasHandle_t cublas(cudaStream_t stream);

   private:
    std::mutex mutex_;
    cublasHandle_t cublas_ = nullptr;
#endif

#if defined(CONVCORE_HAVE_CUFFT)
   public:
    // The handle's cuFFT plan cache, created on first use (cuda/fft_family.cu), destroyed with
    // the handle (shared_ptr: the type is complete only there).
    FftPlanCache& fft_plans();

   private:
    std::mutex fft_mutex_;
    std::shared_ptr<FftPlanCache> fft_plans_;
#endif
};

inline cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

// Blocks for a grid-stride loop over `n` items with `threads` threads per block: enough to
// fill the device (a few waves), never more than the items need.
inline unsigned int grid_blocks(const Context& ctx, int64_t n, int threads) {
    const int64_t needed = (n + threads - 1) / threads;
    int64_t cap = 4096;
    if (ctx.cuda && ctx.cuda->sm_count > 0) {
        const int per_sm = ctx.cuda->max_threads_per_sm > 0 ? ctx.cuda->max_threads_per_sm / threads : 8;
        cap = static_cast<int64_t>(ctx.cuda->sm_count) * (per_sm > 0 ? per_sm : 1) * 4;
    }
    const int64_t blocks = needed < cap ? needed : cap;
    return static_cast<unsigned int>(blocks < 1 ? 1 : blocks);
}

}  // namespace cuda
}  // namespace convcore
