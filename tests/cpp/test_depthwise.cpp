// DEPTHWISE (groups == C): every pass against the float64 reference for kernels 3, 5 and 7,
// stride, dilation, channel multipliers, true convolution and wide padding, in NCHW, NHWC and
// mixed layouts (layout_check.hpp runs every applicable algorithm); NHWC runs natively (the
// workspace holds the transposed taps only, no staged tensors); other problems are refused.
#include <gtest/gtest.h>

#include <string>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "layout_check.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << convcoreGetLastErrorString()

// n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, flip
const Shape kShapes[] = {
    {2, 8, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, false},     // 3x3, odd sizes
    {1, 6, 12, 10, 6, 3, 3, 1, 1, 2, 2, 1, 1, 6, false},    // stride 2
    {1, 5, 11, 13, 5, 5, 5, 2, 2, 1, 1, 1, 1, 5, true},     // 5x5, true convolution
    {2, 3, 15, 14, 3, 7, 7, 3, 3, 2, 2, 1, 1, 3, false},    // 7x7 stride 2
    {1, 4, 12, 12, 8, 3, 3, 2, 2, 1, 1, 2, 2, 4, false},    // dilation 2, multiplier 2
    {1, 3, 8, 9, 9, 3, 3, 0, 0, 1, 1, 1, 1, 3, true},       // multiplier 3, no padding
    {1, 70, 7, 6, 70, 3, 3, 1, 1, 1, 1, 1, 1, 70, false},   // more channels than one block
    {1, 20, 6, 20, 20, 7, 7, 3, 3, 1, 1, 1, 1, 20, false},  // 7x7: a sliding block of pixels, the rest after it
    {1, 17, 5, 18, 17, 5, 5, 2, 2, 1, 1, 1, 1, 17, true},   // 5x5 true convolution: sliding, a channel past the vectors
    {1, 2, 5, 5, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, false},      // padding wider than the filter
    {1, 1, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},      // one channel, multiplier 4
    // Rows wide enough for whole sliding blocks (16 pixels in AVX-512) and their halving tails:
    {1, 40, 5, 41, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40, false},  // 3x3, 39 interior pixels, 40 channels
    {1, 33, 6, 47, 33, 3, 3, 1, 1, 2, 2, 1, 1, 33, true},   // 3x3 stride 2, a channel past the vectors
    {1, 24, 7, 50, 24, 5, 5, 2, 2, 2, 2, 1, 1, 24, false},  // 5x5 stride 2
    {1, 16, 9, 61, 16, 7, 7, 3, 3, 2, 2, 1, 1, 16, false},  // 7x7 stride 2
    {1, 32, 5, 37, 32, 3, 3, 0, 0, 1, 1, 1, 1, 32, false},  // no padding: the whole row is interior
};

int depthwise_algo(convcoreConvolutionPass_t pass) {
    if (pass == CONVCORE_PASS_FORWARD) return CONVCORE_FWD_ALGO_DEPTHWISE;
    if (pass == CONVCORE_PASS_BACKWARD_DATA) return CONVCORE_BWD_DATA_ALGO_DEPTHWISE;
    return CONVCORE_BWD_FILTER_ALGO_DEPTHWISE;
}

class DepthwisePasses : public ::testing::TestWithParam<convcoreConvolutionPass_t> {};

TEST_P(DepthwisePasses, EveryLayoutMatchesTheReference) {
    const convcoreConvolutionPass_t pass = GetParam();
    convcore::Handle h;
    const Layouts layouts[] = {{true, true, true}, {true, true, false}, {false, false, false}, {true, false, false}};
    uint32_t seed = 11;
    for (const Shape& s : kShapes) {
        // DEPTHWISE is among the algorithms check_pass runs.
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w);
        convcore::TensorDesc y(CONVCORE_DATA_FLOAT, s.n, s.k, s.out_h(), s.out_w());
        convcore::FilterDesc w(CONVCORE_DATA_FLOAT, s.k, s.c / s.groups, s.r, s.s);
        convcore::ConvDesc conv(s.pad_h, s.stride_h, s.dil_h, s.groups,
                                s.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
        convcoreConvolutionPlan_t plan = nullptr;
        CC_ASSERT_OK(convcoreCreateConvolutionPlan(h, pass, x, w, conv, y, depthwise_algo(pass), &plan));
        convcoreDestroyConvolutionPlan(plan);
        for (const Layouts& l : layouts) {
            SCOPED_TRACE(std::string("x ") + (l.x_nhwc ? "NHWC" : "NCHW") + ", y " + (l.y_nhwc ? "NHWC" : "NCHW") +
                         ", w " + (l.w_krsc ? "KRSC" : "KCRS") + ", c " + std::to_string(s.c) + ", k " +
                         std::to_string(s.k) + ", " + std::to_string(s.r) + "x" + std::to_string(s.s) + " stride " +
                         std::to_string(s.stride_h) + " dilation " + std::to_string(s.dil_h));
            check_pass(h, pass, s, l, seed++);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Depthwise, DepthwisePasses,
                         ::testing::Values(CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA,
                                           CONVCORE_PASS_BACKWARD_FILTER),
                         [](const auto& info) { return std::string(convcore_test::pass_test_name(info.param)); });

// NHWC tensors are not staged: the workspace is the transposed taps (K*R*S elements) alone, and
// in NCHW cross-correlation nothing at all; backward data at stride 1 runs the forward kernels
// on the rotated filter, which it holds beside their taps. An algorithm without NHWC kernels
// stages x and y.
TEST(Depthwise, NhwcRunsNatively) {
    convcore::Handle h;
    const int64_t n = 2, c = 32, hw = 14;
    convcore::TensorDesc x(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, n, c, hw, hw);
    convcore::TensorDesc y(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, n, c, hw, hw);
    convcore::TensorDesc xc(CONVCORE_DATA_FLOAT, n, c, hw, hw), yc(CONVCORE_DATA_FLOAT, n, c, hw, hw);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, c, 1, 3, 3);
    convcore::ConvDesc conv(1, 1, 1, c);
    const size_t taps = size_t(c) * 3 * 3 * sizeof(float), tensor = size_t(n * c * hw * hw) * sizeof(float);
    size_t bytes = 0;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_DEPTHWISE, &bytes));
    EXPECT_EQ(bytes, taps);
    CC_ASSERT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(h, w, y, conv, x, CONVCORE_BWD_DATA_ALGO_DEPTHWISE,
                                                                 &bytes));
    EXPECT_EQ(bytes, 2 * taps);  // taps is a multiple of 64 bytes: no alignment padding
    CC_ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv, w,
                                                                   CONVCORE_BWD_FILTER_ALGO_DEPTHWISE, &bytes));
    EXPECT_EQ(bytes, 0u);
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, xc, w, conv, yc, CONVCORE_FWD_ALGO_DEPTHWISE, &bytes));
    EXPECT_EQ(bytes, 0u);
    // Mixed layouts: DEPTHWISE runs NCHW and stages the NHWC x.
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, yc, CONVCORE_FWD_ALGO_DEPTHWISE, &bytes));
    EXPECT_GE(bytes, tensor);
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_DIRECT, &bytes));
    EXPECT_GE(bytes, 2 * tensor);
}

TEST(Depthwise, RefusesOtherGroupings) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 8, 6, 6), y(CONVCORE_DATA_FLOAT, 1, 8, 6, 6);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 8, 2, 3, 3);
    convcore::ConvDesc conv(1, 1, 1, 4);
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_DEPTHWISE, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    const std::string why = convcoreGetLastErrorString();
    EXPECT_NE(why.find("DEPTHWISE"), std::string::npos) << why;
    EXPECT_NE(why.find("groups == C"), std::string::npos) << why;
}

}  // namespace
