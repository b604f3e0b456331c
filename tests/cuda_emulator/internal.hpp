// Shared between the engine (engine.cpp) and the runtime stand-in (runtime.cpp).
#pragma once
#include <cuda_runtime.h>

namespace cuda_emulator {
namespace detail {

// Records e as the calling thread's last error (unless cudaSuccess) and returns it.
cudaError_t record_error(cudaError_t e);
// Null (the default stream) or a stream from cudaStreamCreate that is not destroyed yet.
bool is_live_stream(cudaStream_t stream);
// True on an emulated GPU thread (inside a kernel).
bool in_device_code();
// Aborts when called from device code: `what` is host-only.
void require_host(const char* what);

}  // namespace detail
}  // namespace cuda_emulator

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMULATOR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMULATOR_ASAN 1
#endif
#endif

#if defined(CUDA_EMULATOR_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#if defined(__SANITIZE_THREAD__)
#define CUDA_EMULATOR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CUDA_EMULATOR_TSAN 1
#endif
#endif
