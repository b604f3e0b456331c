// The execution engine of the emulated CUDA device (a test facility, never installed).
//
// A launch runs the whole grid before it returns (every stream is synchronous):
// - the blocks run on 2 worker threads, in a shuffled order;
// - the threads of a block run as fibers (ucontext) on their worker, one after another up to the
//   next __syncthreads, so barriers inside loops work; a block whose threads reach different
//   numbers of barriers aborts (divergent barrier);
// - static shared memory (CONVCORE_SHARED in cuda/launch.hpp) is per block and filled with 0xFF
//   bytes (NaN for floats) at each block start;
// - the launch is validated as a GPU validates it (cudaErrorInvalidConfiguration /
//   cudaErrorInvalidValue through cudaGetLastError), and every pointer argument must be null or
//   point into a live device allocation (else abort: on a GPU the kernel would fault).
// Device memory comes from cudaMalloc: 256-byte aligned, filled with 0xFF bytes, tracked in a
// registry and, under AddressSanitizer, poisoned unless a copy, a kernel or a library call
// (DeviceMemoryAccess) is running, so host code that dereferences a device pointer is caught.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cuda_emulator {

// The emulated device's limits and properties (what cudaGetDeviceProperties reports).
constexpr int kMultiprocessors = 2;
constexpr int kWorkerThreads = 2;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535u, 65535u};
constexpr size_t kMaxSharedBytesPerBlock = 48 * 1024;
constexpr size_t kAllocationAlignment = 256;
constexpr size_t kGlobalMemoryBytes = size_t(8) << 30;

// Prints "cuda_emulator: <message>" to stderr and aborts.
[[noreturn]] void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

// ---- device memory ----------------------------------------------------------------------------
struct Allocation {
    unsigned char* base = nullptr;
    size_t size = 0;
};
// The live allocation that p points into (or one past its end); false if there is none.
bool find_allocation(const void* p, Allocation* found);
// The live allocation that holds the byte at p; false if there is none.
bool find_allocation_containing(const void* p, Allocation* found);

// While one exists, every device allocation may be read and written by host code: a kernel, a
// copy or a library stand-in (cuBLAS, cuFFT) holds one. It also serialises the device: one
// holder at a time, other threads wait. Must not be created from device code.
class DeviceMemoryAccess {
   public:
    DeviceMemoryAccess();
    ~DeviceMemoryAccess();
    DeviceMemoryAccess(const DeviceMemoryAccess&) = delete;
    DeviceMemoryAccess& operator=(const DeviceMemoryAccess&) = delete;
};

// ---- kernel launches ----------------------------------------------------------------------------
struct LaunchConfig {
    const char* kernel_name;
    dim3 grid;
    dim3 block;
    size_t dynamic_shared_bytes;
    cudaStream_t stream;
};

namespace detail {
// False (and the launch error recorded for cudaGetLastError) when a GPU would refuse the launch.
bool validate_launch(const LaunchConfig& config);
// Aborts unless p is null or points into a live device allocation.
void check_pointer_argument(const LaunchConfig& config, size_t index, const void* p);
// Runs thread_body(closure) once per GPU thread of the grid.
void run_grid(const LaunchConfig& config, void (*thread_body)(const void*), const void* closure);
// Storage of one static __shared__ variable of the running block (site: one per declaration).
void* block_shared(const void* site, size_t size, size_t alignment);

template <typename T>
constexpr bool is_data_pointer = std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>;
}  // namespace detail

// CONVCORE_LAUNCH's emulated form: KernelLaunch(config, body)(args...) validates the launch,
// copies the arguments once (as the GPU's parameter buffer does), checks the pointer arguments
// and runs body(args...) for every GPU thread (body calls the kernel; each call copies the
// arguments into the kernel's own parameters).
template <typename Body>
class KernelLaunch {
   public:
    KernelLaunch(const LaunchConfig& config, Body body) : config_(config), body_(std::move(body)) {}

    template <typename... Args>
    void operator()(const Args&... args) const {
        using Params = std::tuple<std::decay_t<Args>...>;
        const Params params(args...);
        if (!detail::validate_launch(config_)) return;
        check_pointers(params, std::index_sequence_for<Args...>{});
        struct Closure {
            const Body* body;
            const Params* params;
        };
        const Closure closure{&body_, &params};
        detail::run_grid(
            config_,
            [](const void* p) {
                const Closure& c = *static_cast<const Closure*>(p);
                std::apply(*c.body, *c.params);
            },
            &closure);
    }

   private:
    template <typename Params, size_t... I>
    void check_pointers(const Params& params, std::index_sequence<I...>) const {
        (check_pointer(I, std::get<I>(params)), ...);
    }
    template <typename T>
    void check_pointer(size_t index, const T& value) const {
        if constexpr (detail::is_data_pointer<T>) detail::check_pointer_argument(config_, index, value);
    }

    LaunchConfig config_;
    Body body_;
};

template <typename Body>
KernelLaunch<Body> kernel_launch(const char* kernel_name, dim3 grid, dim3 block, size_t shared_bytes,
                                 cudaStream_t stream, Body body) {
    return KernelLaunch<Body>(LaunchConfig{kernel_name, grid, block, shared_bytes, stream}, std::move(body));
}

// The running block's instance of a static __shared__ variable of type T.
template <typename T>
T& block_shared(const void* site, size_t alignment) {
    return *reinterpret_cast<T*>(detail::block_shared(site, sizeof(T), alignment));
}

}  // namespace cuda_emulator
