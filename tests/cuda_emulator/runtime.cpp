// The CUDA runtime functions of include/cuda_runtime.h, on the emulated device: one device,
// synchronous streams, events that record host time, and device memory in a registry.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

#include "cuda_emulator/engine.hpp"
#include "internal.hpp"
#include "cuda_emulator/call_counts.hpp"

// ---- call counts (cuda_emulator/call_counts.hpp) ----------------------------------------------
namespace cuda_emulator {
std::atomic<long long> g_mallocs{0}, g_frees{0}, g_synchronizes{0}, g_memcpys{0}, g_cublas_handles{0},
    g_cufft_plans{0};
CallCounts call_counts() {
    CallCounts c;
    c.mallocs = g_mallocs.load(), c.frees = g_frees.load(), c.synchronizes = g_synchronizes.load();
    c.memcpys = g_memcpys.load(), c.cublas_handles = g_cublas_handles.load(), c.cufft_plans = g_cufft_plans.load();
    return c;
}
}  // namespace cuda_emulator

struct CUstream_st {
    int unused;
};
struct CUevent_st {
    bool recorded = false;
    std::chrono::steady_clock::time_point time;
};

namespace cuda_emulator {
namespace {

thread_local cudaError_t tl_last_error = cudaSuccess;

// ---- device memory registry ------------------------------------------------------------------
// All device state is guarded by one recursive mutex: a DeviceMemoryAccess holds it, and so
// does every runtime call that touches the registry.
struct Registry {
    std::recursive_mutex mutex;
    std::map<uintptr_t, size_t> allocations;  // base -> size
    size_t bytes_in_use = 0;
    int open_accesses = 0;  // live DeviceMemoryAccess objects; device memory is poisoned at 0
    std::set<cudaStream_t> streams;
    std::set<cudaEvent_t> events;
};
Registry& registry() {
    static Registry* r = new Registry;  // never destroyed: usable from other static destructors
    return *r;
}

void poison_all(Registry& r, bool poison) {
    for (const auto& [base, size] : r.allocations) {
        if (poison)
            ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(base), size);
        else
            ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(base), size);
    }
}

bool find_locked(Registry& r, const void* p, bool one_past_end_counts, Allocation* found) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = r.allocations.upper_bound(a);
    if (it == r.allocations.begin()) return false;
    --it;
    const uintptr_t end = it->first + it->second;
    if (a > end || (a == end && !one_past_end_counts)) return false;
    if (found) *found = Allocation{reinterpret_cast<unsigned char*>(it->first), it->second};
    return true;
}

const char* describe(bool device) { return device ? "device memory" : "host memory"; }

}  // namespace

bool find_allocation(const void* p, Allocation* found) {
    Registry& r = registry();
    std::lock_guard<std::recursive_mutex> lock(r.mutex);
    return find_locked(r, p, true, found);
}

bool find_allocation_containing(const void* p, Allocation* found) {
    Registry& r = registry();
    std::lock_guard<std::recursive_mutex> lock(r.mutex);
    return find_locked(r, p, false, found);
}

DeviceMemoryAccess::DeviceMemoryAccess() {
    detail::require_host("a device memory access (copy, launch or library call)");
    Registry& r = registry();
    r.mutex.lock();
    if (r.open_accesses++ == 0) poison_all(r, false);
}

DeviceMemoryAccess::~DeviceMemoryAccess() {
    Registry& r = registry();
    if (--r.open_accesses == 0) poison_all(r, true);
    r.mutex.unlock();
}

namespace detail {

cudaError_t record_error(cudaError_t e) {
    if (e != cudaSuccess) tl_last_error = e;
    return e;
}

bool is_live_stream(cudaStream_t stream) {
    if (stream == nullptr) return true;
    Registry& r = registry();
    std::lock_guard<std::recursive_mutex> lock(r.mutex);
    return r.streams.count(stream) != 0;
}

}  // namespace detail
}  // namespace cuda_emulator

using cuda_emulator::Allocation;
using cuda_emulator::fail;
using cuda_emulator::detail::record_error;
using cuda_emulator::detail::require_host;
using Lock = std::lock_guard<std::recursive_mutex>;

// ---- device --------------------------------------------------------------------------------------
namespace {
thread_local int tl_device = 0;
}

cudaError_t cudaGetDeviceCount(int* count) {
    require_host("cudaGetDeviceCount");
    if (!count) return record_error(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    require_host("cudaGetDevice");
    if (!device) return record_error(cudaErrorInvalidValue);
    *device = tl_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    require_host("cudaSetDevice");
    if (device != 0) return record_error(cudaErrorInvalidDevice);
    tl_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    require_host("cudaGetDeviceProperties");
    using namespace cuda_emulator;
    if (!prop) return record_error(cudaErrorInvalidValue);
    if (device != 0) return record_error(cudaErrorInvalidDevice);
    *prop = cudaDeviceProp{};
    std::snprintf(prop->name, sizeof prop->name, "convcore emulated CUDA device");
    prop->totalGlobalMem = kGlobalMemoryBytes;
    prop->sharedMemPerBlock = kMaxSharedBytesPerBlock;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = int(kMaxThreadsPerBlock);
    for (int d = 0; d < 3; ++d) {
        prop->maxThreadsDim[d] = int(kMaxBlockDim[d]);
        prop->maxGridSize[d] = int(kMaxGridDim[d]);
    }
    prop->major = 9;  // what convcore's real build targets (sm_90)
    prop->minor = 0;
    prop->multiProcessorCount = kMultiprocessors;
    prop->maxThreadsPerMultiProcessor = 2048;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
    require_host("cudaDeviceSynchronize");
    cuda_emulator::g_synchronizes.fetch_add(1);
    return cudaSuccess;  // all work is done when its call returns
}

// ---- errors -----------------------------------------------------------------------------------
cudaError_t cudaGetLastError() {
    const cudaError_t e = cuda_emulator::tl_last_error;
    cuda_emulator::tl_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError() { return cuda_emulator::tl_last_error; }

namespace {
struct ErrorText {
    cudaError_t code;
    const char* name;
    const char* text;
};
// The real runtime's names and messages.
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
const ErrorText* error_text(cudaError_t e) {
    for (const ErrorText& t : kErrors)
        if (t.code == e) return &t;
    return nullptr;
}
}  // namespace

const char* cudaGetErrorName(cudaError_t error) {
    const ErrorText* t = error_text(error);
    return t ? t->name : "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) {
    const ErrorText* t = error_text(error);
    return t ? t->text : "unrecognized error code";
}

// ---- memory ------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
    require_host("cudaMalloc");
    using namespace cuda_emulator;
    if (!dev_ptr) return record_error(cudaErrorInvalidValue);
    if (size == 0) {
        *dev_ptr = nullptr;
        return cudaSuccess;
    }
    g_mallocs.fetch_add(1);
    Registry& r = registry();
    Lock lock(r.mutex);
    if (size > kGlobalMemoryBytes - r.bytes_in_use) return record_error(cudaErrorMemoryAllocation);
    void* p = nullptr;
    if (posix_memalign(&p, kAllocationAlignment, size) != 0 || !p) return record_error(cudaErrorMemoryAllocation);
    std::memset(p, 0xFF, size);  // uninitialised device memory reads as NaN
    r.allocations.emplace(reinterpret_cast<uintptr_t>(p), size);
    r.bytes_in_use += size;
    if (r.open_accesses == 0) ASAN_POISON_MEMORY_REGION(p, size);
    *dev_ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* dev_ptr) {
    require_host("cudaFree");
    using namespace cuda_emulator;
    if (!dev_ptr) return cudaSuccess;
    g_frees.fetch_add(1);
    Registry& r = registry();
    Lock lock(r.mutex);
    const auto it = r.allocations.find(reinterpret_cast<uintptr_t>(dev_ptr));
    if (it == r.allocations.end()) {
        std::fprintf(stderr, "cuda_emulator: cudaFree(%p): not the start of a live device allocation\n", dev_ptr);
        return record_error(cudaErrorInvalidValue);
    }
    ASAN_UNPOISON_MEMORY_REGION(dev_ptr, it->second);
    r.bytes_in_use -= it->second;
    r.allocations.erase(it);
    std::free(dev_ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
    require_host("cudaMemcpyAsync");
    cuda_emulator::g_memcpys.fetch_add(1);
    using namespace cuda_emulator;
    if (!detail::is_live_stream(stream)) return record_error(cudaErrorInvalidResourceHandle);
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record_error(cudaErrorInvalidMemcpyDirection);
    if (count == 0) return cudaSuccess;
    if (!dst || !src) return record_error(cudaErrorInvalidValue);
    DeviceMemoryAccess access;
    Allocation dst_alloc, src_alloc;
    // The first byte decides: a host buffer may start right where a device allocation ends.
    const bool dst_device = find_allocation_containing(dst, &dst_alloc);
    const bool src_device = find_allocation_containing(src, &src_alloc);
    static const char* const kKinds[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost",
                                         "cudaMemcpyDeviceToDevice", "cudaMemcpyDefault"};
    if (kind != cudaMemcpyDefault) {
        const bool want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        const bool want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        if (dst_device != want_dst_device || src_device != want_src_device)
            fail("cudaMemcpy(Async)(dst %p, src %p, %zu bytes, %s): dst is %s and src is %s, which the direction "
                 "does not match (undefined behaviour in CUDA)",
                 dst, src, count, kKinds[kind], describe(dst_device), describe(src_device));
    }
    const auto check_range = [&](const char* which, const void* p, const Allocation& a) {
        if (static_cast<const unsigned char*>(p) + count > a.base + a.size)
            fail("cudaMemcpy(Async)(%zu bytes, %s): %s range [%p, +%zu) overruns its device allocation [%p, +%zu)",
                 count, kKinds[kind], which, p, count, static_cast<const void*>(a.base), a.size);
    };
    if (dst_device) check_range("dst", dst, dst_alloc);
    if (src_device) check_range("src", src, src_alloc);
    std::memcpy(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    return cudaMemcpyAsync(dst, src, count, kind, nullptr);
}

// ---- streams and events ----------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    require_host("cudaStreamCreate");
    if (!stream) return record_error(cudaErrorInvalidValue);
    auto& r = cuda_emulator::registry();
    Lock lock(r.mutex);
    *stream = new CUstream_st{};
    r.streams.insert(*stream);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    require_host("cudaStreamDestroy");
    auto& r = cuda_emulator::registry();
    Lock lock(r.mutex);
    if (!stream || !r.streams.erase(stream)) return record_error(cudaErrorInvalidResourceHandle);
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    require_host("cudaStreamSynchronize");
    cuda_emulator::g_synchronizes.fetch_add(1);
    if (!cuda_emulator::detail::is_live_stream(stream)) return record_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;  // streams run their work synchronously
}

namespace {
bool is_live_event(cudaEvent_t event) {
    auto& r = cuda_emulator::registry();
    Lock lock(r.mutex);
    return event && r.events.count(event) != 0;
}
}  // namespace

cudaError_t cudaEventCreate(cudaEvent_t* event) {
    require_host("cudaEventCreate");
    if (!event) return record_error(cudaErrorInvalidValue);
    auto& r = cuda_emulator::registry();
    Lock lock(r.mutex);
    *event = new CUevent_st{};
    r.events.insert(*event);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    require_host("cudaEventDestroy");
    auto& r = cuda_emulator::registry();
    Lock lock(r.mutex);
    if (!event || !r.events.erase(event)) return record_error(cudaErrorInvalidResourceHandle);
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    require_host("cudaEventRecord");
    if (!is_live_event(event) || !cuda_emulator::detail::is_live_stream(stream))
        return record_error(cudaErrorInvalidResourceHandle);
    event->recorded = true;
    event->time = std::chrono::steady_clock::now();  // the stream's earlier work is done already
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    require_host("cudaEventSynchronize");
    cuda_emulator::g_synchronizes.fetch_add(1);
    if (!is_live_event(event)) return record_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    require_host("cudaEventElapsedTime");
    if (!ms) return record_error(cudaErrorInvalidValue);
    if (!is_live_event(start) || !is_live_event(end) || !start->recorded || !end->recorded)
        return record_error(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
    return cudaSuccess;
}
