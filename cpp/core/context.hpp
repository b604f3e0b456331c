// The handle (convcoreHandle_t points to this): the device it is bound to, its stream and
// CPU thread count, and per-device resources created on first use.
#pragma once
#include <memory>

#include "convcore/convcore.h"

namespace convcore {
namespace cuda {
struct DeviceResources;  // cuda/context.cu: cuBLAS/cuFFT handles and the like
}
struct HandleCaches;  // core/plan_cache.hpp: the plan cache and the workspace
}  // namespace convcore

struct convcoreContext {
    convcoreDeviceType_t device = CONVCORE_DEVICE_CPU;
    int device_index = 0;
    void* stream = nullptr;  // cudaStream_t on CUDA handles
    int num_threads = 0;     // 0: OpenMP's default
    size_t find_workspace_limit = SIZE_MAX;  // convcoreSetFindWorkspaceLimit
    bool deterministic_only = false;         // convcoreSetDeterministicOnly
    std::shared_ptr<convcore::cuda::DeviceResources> cuda;  // null until needed
    // Made with the handle; declared last, so released first (its device memory needs `cuda`).
    std::shared_ptr<convcore::HandleCaches> caches;

    // Threads an OpenMP region of this handle uses.
    int threads() const;
};

namespace convcore {
using Context = convcoreContext;
}
