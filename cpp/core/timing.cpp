#include "core/timing.hpp"

#include <chrono>

namespace convcore {

double time_run_ms(const Context& ctx, const std::function<void()>& run) {
#ifdef CONVCORE_WITH_CUDA
    if (ctx.device == CONVCORE_DEVICE_CUDA) return cuda::time_on_stream_ms(ctx, run);
#endif
    const auto start = std::chrono::steady_clock::now();
    run();
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(stop - start).count();
}

}  // namespace convcore
