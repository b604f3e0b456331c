// The emulated runtime's count of the calls that cost a real GPU an allocation, a
// synchronisation or a library object, since the process started: what the tests read around
// repeated calls of a plan (a steady state makes none of them).
#pragma once

namespace cuda_emulator {

struct CallCounts {
    long long mallocs = 0;        // cudaMalloc of at least one byte
    long long frees = 0;          // cudaFree of a pointer
    long long synchronizes = 0;   // cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize
    long long memcpys = 0;        // cudaMemcpy, cudaMemcpyAsync
    long long cublas_handles = 0; // cublasCreate
    long long cufft_plans = 0;    // cufftMakePlanMany64
};

CallCounts call_counts();

}  // namespace cuda_emulator
