// Timing one run of an algorithm for Find, on the handle's device: the host's steady clock on
// the CPU, CUDA events recorded on the handle's stream around the work on CUDA handles (the
// work is queued asynchronously there, so a host clock would time only the launches).
#pragma once
#include <functional>

#include "core/context.hpp"

namespace convcore {

// Milliseconds `run` takes on ctx's device (run throws convcore::Error on failure).
double time_run_ms(const Context& ctx, const std::function<void()>& run);

namespace cuda {
// The CUDA side of time_run_ms (cuda/timing.cu; only built with CONVCORE_WITH_CUDA).
double time_on_stream_ms(const Context& ctx, const std::function<void()>& run);
}  // namespace cuda

}  // namespace convcore
