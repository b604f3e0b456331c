// Shared by cuda/im2col_gemm.cu (forward) and cuda/im2col_gemm_backward.cu.
#pragma once
#include <string>

#include "core/problem.hpp"

namespace convcore {
namespace cuda {

// 1x1 filter, stride 1, no padding: x (dx) is its own im2col matrix.
bool im2col_direct_1x1(const ConvProblem& p);
// "" when IM2COL_GEMM's `pass` ("forward", "backward data", ...) runs p on CUDA.
std::string im2col_why_not(const ConvProblem& p, const char* pass);

}  // namespace cuda
}  // namespace convcore
