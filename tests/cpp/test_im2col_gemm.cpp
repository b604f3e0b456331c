// IM2COL_GEMM on the CPU: the im2col buffer and the BLAS GEMM, every problem.
#include <gtest/gtest.h>

#include <random>

#include "forward_case.hpp"

using namespace convcore_test;

namespace {

// Random problems of every geometry (groups, padding, stride, dilation, both modes, alpha and
// beta, a strided y) against the float64 reference, float32 and float64.
TEST(Im2ColGemm, MatchesTheReferenceOnAnyGeometry) {
    std::mt19937 rng(1234 + int(CONVCORE_FWD_ALGO_IM2COL_GEMM));
    for (int trial = 0; trial < 24; ++trial) {
        const ForwardCase tc = any_geometry_case(rng, trial);
        SCOPED_TRACE(describe(tc.shape));
        EXPECT_LT(run_forward_case<float>(CONVCORE_FWD_ALGO_IM2COL_GEMM, tc, rng), 1e-5);
        EXPECT_LT(run_forward_case<double>(CONVCORE_FWD_ALGO_IM2COL_GEMM, tc, rng), 1e-12);
    }
}

}  // namespace
