// Stand-in for the CUDA runtime header, for compiling CUDA sources as C++ against the emulated
// device (tests/cuda_emulator). It declares only what convcore's CUDA code uses; anything else
// does not compile. Never mixed with the real CUDA headers; never installed.
#pragma once
#include <cstddef>

#define CONVCORE_CUDA_EMULATOR 1
#define CUDART_VERSION 13000

// ---- qualifiers ------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// Static shared memory needs per-block storage: declare it with CONVCORE_SHARED (cuda/launch.hpp).
#define __shared__ _Pragma("GCC error \"__shared__ is not emulated: use CONVCORE_SHARED from cuda/launch.hpp\"")

// ---- vector types --------------------------------------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct __attribute__((aligned(8))) float2 {
    float x, y;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(16))) double2 {
    double x, y;
};

// ---- built-in variables and __syncthreads -------------------------------------------------------
// Set by the engine for the emulated GPU thread that runs on the calling OS thread.
namespace cuda_emulator {
namespace builtin {
extern thread_local uint3 thread_idx;
extern thread_local uint3 block_idx;
extern thread_local dim3 block_dim;
extern thread_local dim3 grid_dim;
}  // namespace builtin
}  // namespace cuda_emulator
#define threadIdx (static_cast<const uint3&>(::cuda_emulator::builtin::thread_idx))
#define blockIdx (static_cast<const uint3&>(::cuda_emulator::builtin::block_idx))
#define blockDim (static_cast<const dim3&>(::cuda_emulator::builtin::block_dim))
#define gridDim (static_cast<const dim3&>(::cuda_emulator::builtin::grid_dim))

// Block-wide barrier. Aborts outside a kernel and on a divergent barrier.
void __syncthreads();

// ---- runtime API ---------------------------------------------------------------------------------
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

// The fields convcore reads, and the limits the engine enforces.
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major;
    int minor;
    int multiProcessorCount;
    int maxThreadsPerMultiProcessor;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void** dev_ptr, size_t size);
template <typename T>
cudaError_t cudaMalloc(T** dev_ptr, size_t size) {
    return cudaMalloc(reinterpret_cast<void**>(dev_ptr), size);
}
cudaError_t cudaFree(void* dev_ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
