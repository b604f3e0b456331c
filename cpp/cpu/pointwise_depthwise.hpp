// A 1x1 convolution and the depthwise convolution that reads its output, computed together on
// NHWC tensors (oneDNN's depthwise post-op, dnnl::post_ops::append_dw; the first two layers of
// MobileNetV2's and EfficientNet's inverted residual blocks):
//   y = act_dw(dwconv(act_pw(conv1x1(x, w_pw) + b_pw), w_dw) + b_dw).
// The 1x1 convolution's output (the block's expanded tensor, K channels) is never written to
// memory: each thread walks its rows of y in bands, computes the rows of the expanded tensor a
// band reads into a buffer sized to stay in L2 (keeping the rows the next band reads again), and
// runs the depthwise rows from there. Unfused, the expanded tensor is written and read back
// once (MobileNetV2's 16 -> 96 channels at 112x112: 4.8 MB each way), which is most of those two
// layers' time. The 1x1 runs on the NHWC GEMM's kernels (cpu/nhwc_gemm.hpp), the depthwise rows
// on DEPTHWISE's (cpu/depthwise.cpp); each applies its own epilogue in its stores.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.hpp"
#include "core/problem.hpp"
#include "cpu/epilogue_store.hpp"

namespace convcore {
namespace cpu {
namespace pointwise_depthwise {

// why_not, prepared_bytes, prepare and the type-erased run: core/device.hpp.

// y = the fused pair of x, with `prepared` made by prepare(); e_pw and e_dw: each convolution's
// epilogue (bias, activation; alpha 1, beta 0, no residual for the 1x1).
template <typename T>
void run(const ConvProblem& pw, const ConvProblem& dw, const T* x, const void* prepared,
         const epilogue_store::Out<T>& e_pw, const epilogue_store::Out<T>& e_dw, T* y, int threads);

}  // namespace pointwise_depthwise
}  // namespace cpu
}  // namespace convcore
