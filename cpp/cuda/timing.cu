// CUDA events around one run on the handle's stream (core/timing.hpp).
#include <cuda_runtime.h>

#include "core/timing.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {
namespace {

struct Event {
    cudaEvent_t event = nullptr;
    Event() { CONVCORE_CUDA_CHECK(cudaEventCreate(&event)); }
    ~Event() {
        if (event) cudaEventDestroy(event);
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
};

}  // namespace

double time_on_stream_ms(const Context& ctx, const std::function<void()>& run) {
    DeviceGuard guard(ctx.device_index);
    const cudaStream_t stream = stream_of(ctx);
    Event start, stop;
    CONVCORE_CUDA_CHECK(cudaEventRecord(start.event, stream));
    run();
    CONVCORE_CUDA_CHECK(cudaEventRecord(stop.event, stream));
    CONVCORE_CUDA_CHECK(cudaEventSynchronize(stop.event));
    float ms = 0.0f;
    CONVCORE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event, stop.event));
    return ms;
}

}  // namespace cuda
}  // namespace convcore
