// The most blocks a launch puts on grid axis y. CUDA's limit is 65535; the kernels whose y axis
// counts more (IM2WIN's GEMM and the fused Winograd F(2x2,3x3): output-channel blocks x groups)
// launch at most this many and loop over the rest. The emulated device takes a smaller value, so
// that its tests reach that loop with about a thousand blocks instead of 70000 (minutes under
// ASan and TSan).
#pragma once
#include <cstdint>

namespace convcore {
namespace cuda {

#if defined(CONVCORE_CUDA_EMULATOR) || defined(CONVCORE_TESTS_ON_EMULATED_CUDA)
constexpr int64_t kMaxGridY = 1024;
#else
constexpr int64_t kMaxGridY = 65535;
#endif

}  // namespace cuda
}  // namespace convcore
