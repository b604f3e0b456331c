// Kernel launches and static shared memory in a form that compiles both with nvcc and against the
// emulated CUDA device of the tests (tests/cuda_emulator, which defines CONVCORE_CUDA_EMULATOR):
//
//   CONVCORE_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...);
//       nvcc: kernel<<<grid, block, shared_bytes, stream>>>(args...)
//       The kernel comes last, so that a template-id with commas needs no parentheses.
//   CONVCORE_SHARED(double[256], partial);
//   CONVCORE_SHARED_ALIGNED(16, float[2][8][64], tile);
//       nvcc: __shared__ double partial[256]; / __shared__ __align__(16) float tile[2][8][64];
//       (the type carries the array extents).
#pragma once
#include <cuda_runtime.h>

namespace convcore {
namespace cuda {
template <typename T>
using shared_type = T;  // lets CONVCORE_SHARED take an array type: shared_type<float[4]> name
}  // namespace cuda
}  // namespace convcore

#if defined(__CUDACC__)

#define CONVCORE_LAUNCH(grid, block, shared_bytes, stream, ...) \
    __VA_ARGS__<<<(grid), (block), (shared_bytes), (stream)>>>
#define CONVCORE_SHARED(type, name) __shared__ ::convcore::cuda::shared_type<type> name
#define CONVCORE_SHARED_ALIGNED(alignment, type, name) \
    __shared__ __align__(alignment)::convcore::cuda::shared_type<type> name

#elif defined(CONVCORE_CUDA_EMULATOR)
#include <cuda_emulator/engine.hpp>

// The lambda calls the kernel as the GPU threads would, so template arguments are deduced from
// the arguments as they are in kernel<<<...>>>(args...).
#define CONVCORE_LAUNCH(grid, block, shared_bytes, stream, ...)                                    \
    ::cuda_emulator::kernel_launch(#__VA_ARGS__, (grid), (block), (shared_bytes), (stream),         \
                                   [&](const auto&... convcore_launch_args_) { __VA_ARGS__(convcore_launch_args_...); })
// One static variable per declaration site identifies the variable within its block.
#define CONVCORE_SHARED(type, name) \
    CONVCORE_SHARED_ALIGNED(alignof(::convcore::cuda::shared_type<type>), type, name)
#define CONVCORE_SHARED_ALIGNED(alignment, type, name)                                     \
    static char convcore_shared_site_##name;                                               \
    ::convcore::cuda::shared_type<type>& name =                                            \
        ::cuda_emulator::block_shared<::convcore::cuda::shared_type<type>>(&convcore_shared_site_##name, \
                                                                          (alignment))

#else
#error "cuda/launch.hpp is for CUDA sources: compile them with nvcc or against tests/cuda_emulator"
#endif
