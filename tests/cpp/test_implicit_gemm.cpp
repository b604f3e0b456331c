// IMPLICIT_GEMM on the CPU: GEMM tiling without the im2col buffer, every problem; its row path and its
// unfolded-GEMM path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "forward_case.hpp"

using namespace convcore_test;

namespace {

// Random problems of every geometry (groups, padding, stride, dilation, both modes, alpha and
// beta, a strided y) against the float64 reference, float32 and float64.
TEST(ImplicitGemm, MatchesTheReferenceOnAnyGeometry) {
    std::mt19937 rng(1234 + int(CONVCORE_FWD_ALGO_IMPLICIT_GEMM));
    for (int trial = 0; trial < 24; ++trial) {
        const ForwardCase tc = any_geometry_case(rng, trial);
        SCOPED_TRACE(describe(tc.shape));
        EXPECT_LT(run_forward_case<float>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-5);
        EXPECT_LT(run_forward_case<double>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-12);
    }
}

// NHWC's panel path (one group, K at least two vectors; 1x1 filters, few input channels, or
// filter rows too long for L1): its filters packed per call into panels of two vectors of output
// channels, K past a whole panel, C past a block of 16, both modes (true convolution mirrors the
// taps while packing), R != S.
TEST(ImplicitGemm, NhwcPanelPathMatchesReference) {
    std::mt19937 rng(78);
    const Shape shapes[] = {
        make_shape(2, 3, 11, 13, 33, 3, 5, 1),            // a stem: C below a vector
        make_shape(1, 40, 6, 7, 70, 3, 3, 1, 1, 1, 1, true),
        make_shape(1, 300, 5, 4, 40, 3, 2, 1, 2, 1, 1, true),  // long filter rows (past L1 / 2)
        make_shape(1, 21, 5, 6, 64, 1, 1, 0, 1, 1, 1, true),
    };
    for (const Shape& p : shapes) {
        ForwardCase tc;
        tc.shape = p;
        tc.nhwc = true;
        tc.alpha = 0.75;
        SCOPED_TRACE(describe(p));
        EXPECT_LT(run_forward_case<float>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-5);
        EXPECT_LT(run_forward_case<double>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-12);
    }
}

// IMPLICIT_GEMM has two paths: the row path (K/g <= 4 and unit stride along the rows; rows
// wider than a vector, so several chunks and a partial last one) and the unfolded-GEMM path,
// forced on the same shapes by CONVCORE_IMPLICIT_GEMM_NO_ROWS.
TEST(ImplicitGemm, RowPathAndGemmPathMatchReference) {
    std::mt19937 rng(77);
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int lo, int hi) { return int64_t(lo + u(rng) % (hi - lo + 1)); };
    for (const bool gemm_path : {false, true}) {
        if (gemm_path)
            setenv("CONVCORE_IMPLICIT_GEMM_NO_ROWS", "1", 1);
        for (int trial = 0; trial < 16; ++trial) {
            Shape p{};
            p.groups = pick(1, 3);
            p.n = pick(1, 2);
            p.c = p.groups * pick(1, 5);
            p.k = p.groups * pick(1, 4);
            p.r = pick(1, 5);
            p.s = pick(1, 7);
            p.pad_h = pick(0, 3);
            p.pad_w = pick(0, 4);
            p.stride_h = pick(1, 3);
            p.stride_w = 1;
            p.dil_h = pick(1, 2);
            p.dil_w = pick(1, 3);
            p.flip = trial % 2 == 1;
            p.h = pick(int(p.dil_h * (p.r - 1) + 1), 21);
            const int w_min = int(p.dil_w * (p.s - 1) + 1);
            p.w = pick(w_min, w_min + (trial % 3 == 0 ? 8 : 60));
            ForwardCase tc;
            tc.shape = p;
            tc.alpha = trial % 3 == 0 ? 1.0 : 0.75;
            tc.beta = trial % 4 == 0 ? 0.5 : 0.0;
            tc.strided_y = trial % 5 == 0;
            SCOPED_TRACE(describe(p));
            EXPECT_LT(run_forward_case<float>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-5);
            EXPECT_LT(run_forward_case<double>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-12);
        }
        // One or two output channels per group, unit stride and dilation along the rows: the
        // row path's two-rows-at-a-time pass (and a last odd row), and with one channel its
        // double-width chunks (128 floats on AVX-512) while they fit, then narrow ones.
        for (int trial = 0; trial < 8; ++trial) {
            Shape p{};
            p.groups = trial % 4 == 3 ? 3 : 1;
            p.n = 1;
            p.c = p.groups * (trial % 2 == 0 ? 1 : 2);
            p.k = p.groups * (trial % 3 == 1 ? 2 : 1);
            p.r = pick(1, 4);
            p.s = pick(1, 5);
            p.pad_h = pick(0, 2);
            p.pad_w = pick(0, 2);
            p.stride_h = p.stride_w = p.dil_h = 1;
            p.dil_w = trial % 4 == 2 ? 2 : 1;
            p.flip = trial % 2 == 1;
            p.h = pick(int(p.r), 13);
            p.w = pick(260, 400);
            ForwardCase tc;
            tc.shape = p;
            tc.alpha = trial % 3 == 0 ? 1.0 : 0.75;
            tc.beta = trial % 4 == 0 ? 0.5 : 0.0;
            SCOPED_TRACE(describe(p));
            EXPECT_LT(run_forward_case<float>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-5);
            EXPECT_LT(run_forward_case<double>(CONVCORE_FWD_ALGO_IMPLICIT_GEMM, tc, rng), 1e-12);
        }
        unsetenv("CONVCORE_IMPLICIT_GEMM_NO_ROWS");
    }
}

}  // namespace
