// Error checking for the CUDA backend: every CUDA / cuBLAS / cuFFT call goes through one of
// these macros, which turn a failure into convcore::Error with the call's name and the
// library's own message, e.g.
//   "cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument"
// Allocation failures get CONVCORE_STATUS_ALLOC_FAILED, everything else EXECUTION_FAILED.
// Also: DeviceGuard, the RAII cudaSetDevice used before any work on a handle's device.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"
#include "cuda/launch.hpp"  // CONVCORE_LAUNCH, CONVCORE_SHARED: the kernels' launches and shared memory

#if defined(CONVCORE_HAVE_CUBLAS)
#include <cublas_v2.h>
#endif
#if defined(CONVCORE_HAVE_CUFFT)
#include <cufft.h>
#endif

namespace convcore {
namespace cuda {
namespace detail {

// "cudaMalloc(&p, bytes)" -> "cudaMalloc": the name of the call, without its arguments.
inline std::string call_name(const char* expr) {
    std::string s(expr);
    const size_t paren = s.find('(');
    if (paren != std::string::npos) s.resize(paren);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
    return s;
}

inline bool is_alloc_error(cudaError_t e) { return e == cudaErrorMemoryAllocation; }

[[noreturn]] inline void throw_cuda(cudaError_t e, const std::string& what) {
    // Clear a non-sticky error so that it does not surface again in the next check.
    (void)cudaGetLastError();
    throw Error(is_alloc_error(e) ? CONVCORE_STATUS_ALLOC_FAILED : CONVCORE_STATUS_EXECUTION_FAILED,
                what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

#if defined(CONVCORE_HAVE_CUBLAS)
[[noreturn]] inline void throw_cublas(cublasStatus_t s, const std::string& what) {
    throw Error(s == CUBLAS_STATUS_ALLOC_FAILED ? CONVCORE_STATUS_ALLOC_FAILED
                                                : CONVCORE_STATUS_EXECUTION_FAILED,
                what + ": " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}
#endif

#if defined(CONVCORE_HAVE_CUFFT)
// cuFFT has no status-to-string function.
inline const char* cufft_status_name(cufftResult r) {
    switch (r) {
        case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
        case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
        case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
        case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
        case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
        case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
        case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
        case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
        case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
        case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
        case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
        case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
        case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
        case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
        default: return "CUFFT_UNKNOWN_ERROR";
    }
}
[[noreturn]] inline void throw_cufft(cufftResult r, const std::string& what) {
    throw Error(r == CUFFT_ALLOC_FAILED ? CONVCORE_STATUS_ALLOC_FAILED
                                        : CONVCORE_STATUS_EXECUTION_FAILED,
                what + ": " + cufft_status_name(r) + " (" + std::to_string(static_cast<int>(r)) + ")");
}
#endif

}  // namespace detail
}  // namespace cuda
}  // namespace convcore

// CONVCORE_CUDA_CHECK(cudaMemcpyAsync(...)): throws convcore::Error on failure.
#define CONVCORE_CUDA_CHECK(call)                                                          \
    do {                                                                                   \
        const cudaError_t convcore_err_ = (call);                                          \
        if (convcore_err_ != cudaSuccess)                                                  \
            ::convcore::cuda::detail::throw_cuda(convcore_err_,                            \
                                                 ::convcore::cuda::detail::call_name(#call)); \
    } while (0)

// Same, with an explicit description instead of the call's name ("cudaMalloc(1024 bytes)").
#define CONVCORE_CUDA_CHECK_MSG(call, what)                                       \
    do {                                                                          \
        const cudaError_t convcore_err_ = (call);                                 \
        if (convcore_err_ != cudaSuccess)                                         \
            ::convcore::cuda::detail::throw_cuda(convcore_err_, (what));          \
    } while (0)

// After a launch (CONVCORE_LAUNCH): reports bad launch configurations (and earlier async errors).
#define CONVCORE_CUDA_CHECK_LAUNCH(kernel_name)                                              \
    do {                                                                                     \
        const cudaError_t convcore_err_ = cudaGetLastError();                                \
        if (convcore_err_ != cudaSuccess)                                                    \
            ::convcore::cuda::detail::throw_cuda(convcore_err_,                              \
                                                 std::string("launch of ") + (kernel_name)); \
    } while (0)

#if defined(CONVCORE_HAVE_CUBLAS)
#define CONVCORE_CUBLAS_CHECK(call)                                                          \
    do {                                                                                     \
        const cublasStatus_t convcore_st_ = (call);                                          \
        if (convcore_st_ != CUBLAS_STATUS_SUCCESS)                                           \
            ::convcore::cuda::detail::throw_cublas(convcore_st_,                             \
                                                   ::convcore::cuda::detail::call_name(#call)); \
    } while (0)
#endif

#if defined(CONVCORE_HAVE_CUFFT)
#define CONVCORE_CUFFT_CHECK(call)                                                          \
    do {                                                                                    \
        const cufftResult convcore_st_ = (call);                                            \
        if (convcore_st_ != CUFFT_SUCCESS)                                                  \
            ::convcore::cuda::detail::throw_cufft(convcore_st_,                             \
                                                  ::convcore::cuda::detail::call_name(#call)); \
    } while (0)
#endif

namespace convcore {
namespace cuda {

// Makes `device` current for the guard's lifetime and restores the previous device after
// (the caller's thread may use another device for its own work).
class DeviceGuard {
   public:
    explicit DeviceGuard(int device) {
        CONVCORE_CUDA_CHECK(cudaGetDevice(&previous_));
        if (previous_ != device) {
            CONVCORE_CUDA_CHECK(cudaSetDevice(device));
            switched_ = true;
        }
    }
    ~DeviceGuard() {
        if (switched_) (void)cudaSetDevice(previous_);  // destructors do not throw
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

   private:
    int previous_ = 0;
    bool switched_ = false;
};

}  // namespace cuda
}  // namespace convcore
