// The CUDA backend's device services (core/device.hpp): device discovery, handle
// initialization, memory and copies. Strided tensor copies are in tensor_ops.cu.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

struct DeviceCount {
    int count = 0;
    std::string error;  // why the count is 0, when the runtime said so
};

// cudaGetDeviceCount once per process (the visible set cannot change after CUDA starts).
const DeviceCount& probe_devices() {
    static const DeviceCount result = [] {
        DeviceCount r;
        int n = 0;
        const cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            r.count = 0;
            r.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
                      cudaGetErrorString(e);
            if (e == cudaErrorInsufficientDriver)
                r.error += "; no NVIDIA driver is loaded, or it is older than the CUDA " +
                           std::to_string(CUDART_VERSION / 1000) + "." +
                           std::to_string(CUDART_VERSION % 1000 / 10) + " runtime convcore uses";
        } else {
            r.count = n < 0 ? 0 : n;
            if (r.count == 0) r.error = "cudaGetDeviceCount returned 0";
        }
        return r;
    }();
    return result;
}

void check_index(int index) {
    const DeviceCount& dc = probe_devices();
    if (dc.count == 0)
        throw_not_supported("no CUDA device is visible (" + dc.error + ")");
    if (index < 0 || index >= dc.count)
        throw_bad_param("device index " + std::to_string(index) + " out of range: " +
                        std::to_string(dc.count) + " CUDA device(s) visible");
}

void check_handle(const Context& ctx) {
    if (ctx.device != CONVCORE_DEVICE_CUDA)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "cuda:: function called on a non-CUDA handle");
}

void memcpy_sync(const Context& ctx, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    check_handle(ctx);
    if (bytes == 0) return;
    if (dst == nullptr || src == nullptr) throw_bad_param("memcpy: null pointer");
    DeviceGuard guard(ctx.device_index);
    const cudaStream_t stream = stream_of(ctx);
    CONVCORE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    CONVCORE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

// ---- DeviceResources -------------------------------------------------------------------------

DeviceResources::DeviceResources(int device_index) : device(device_index) {
    cudaDeviceProp prop{};
    CONVCORE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
    name = prop.name;
    cc_major = prop.major;
    cc_minor = prop.minor;
    sm_count = prop.multiProcessorCount;
    max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
    total_memory = prop.totalGlobalMem;
}

DeviceResources::~DeviceResources() {
#if defined(CONVCORE_HAVE_CUBLAS)
    if (cublas_ != nullptr) {
        int previous = 0;
        const bool have_previous = cudaGetDevice(&previous) == cudaSuccess;
        if (have_previous && previous != device) (void)cudaSetDevice(device);
        (void)cublasDestroy(cublas_);  // destructors do not throw
        if (have_previous && previous != device) (void)cudaSetDevice(previous);
    }
#endif
}

#if defined(CONVCORE_HAVE_CUBLAS)
cublasHandle_t DeviceResources::cublas(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cublas_ == nullptr) {
        DeviceGuard guard(device);
        CONVCORE_CUBLAS_CHECK(cublasCreate(&cublas_));
    }
    CONVCORE_CUBLAS_CHECK(cublasSetStream(cublas_, stream));
    return cublas_;
}
#endif

// ---- device.hpp ------------------------------------------------------------------------------

int device_count() {
    try {
        return probe_devices().count;
    } catch (...) {
        return 0;
    }
}

void init_context(Context& ctx) {
    check_index(ctx.device_index);
    DeviceGuard guard(ctx.device_index);
    // Creates the primary context now (the "slow first call" is paid at handle creation).
    CONVCORE_CUDA_CHECK(cudaFree(nullptr));
    ctx.device = CONVCORE_DEVICE_CUDA;
    ctx.cuda = std::make_shared<DeviceResources>(ctx.device_index);
}

void* malloc(const Context& ctx, size_t bytes) {
    check_handle(ctx);
    if (bytes == 0) return nullptr;
    DeviceGuard guard(ctx.device_index);
    void* ptr = nullptr;
    const cudaError_t e = cudaMalloc(&ptr, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        // Out of memory is ALLOC_FAILED; anything else (a broken context) too, since the
        // caller asked for memory and got none, but with CUDA's own words.
        throw Error(CONVCORE_STATUS_ALLOC_FAILED, "cudaMalloc(" + std::to_string(bytes) +
                                                      " bytes): " + cudaGetErrorName(e) + ": " +
                                                      cudaGetErrorString(e));
    }
    return ptr;
}

void free(const Context& ctx, void* ptr) {
    check_handle(ctx);
    if (ptr == nullptr) return;
    DeviceGuard guard(ctx.device_index);
    CONVCORE_CUDA_CHECK(cudaFree(ptr));
}

void memcpy_to_device(const Context& ctx, void* dst, const void* src, size_t bytes) {
    memcpy_sync(ctx, dst, src, bytes, cudaMemcpyHostToDevice);
}

void memcpy_to_host(const Context& ctx, void* dst, const void* src, size_t bytes) {
    memcpy_sync(ctx, dst, src, bytes, cudaMemcpyDeviceToHost);
}

void synchronize(const Context& ctx) {
    check_handle(ctx);
    DeviceGuard guard(ctx.device_index);
    CONVCORE_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
}

const char* device_name(int index) {
    // One string per device, built once, alive until exit (the caller keeps the pointer).
    static std::mutex mutex;
    static std::vector<std::unique_ptr<std::string>> names;
    const int count = device_count();
    if (index < 0 || index >= count) return "";
    std::lock_guard<std::mutex> lock(mutex);
    if (names.size() < static_cast<size_t>(count)) names.resize(count);
    if (!names[index]) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
            (void)cudaGetLastError();
            return "";
        }
        names[index] = std::make_unique<std::string>(std::string(prop.name) + " (sm_" +
                                                     std::to_string(prop.major) +
                                                     std::to_string(prop.minor) + ")");
    }
    return names[index]->c_str();
}

}  // namespace cuda
}  // namespace convcore
