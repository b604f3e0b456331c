// POINTWISE (1x1 filters): the forward pass against the float64 reference in NCHW, NHWC and mixed
// layouts (layout_check.hpp runs every applicable algorithm), with channel counts that leave
// partial vectors and register blocks, padding, stride, groups and more pixels and channels than
// one task; NHWC and unstrided NCHW run on the tensors in place.
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
    {1, 5, 7, 9, 37, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},     // odd channel and pixel counts
    {2, 40, 6, 5, 24, 1, 1, 1, 1, 2, 2, 1, 1, 1, false},    // padding and stride
    {1, 12, 9, 9, 18, 1, 1, 0, 0, 1, 1, 1, 1, 3, true},     // groups, true convolution
    {1, 3, 20, 20, 70, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},   // more pixels and channels than a task
    {3, 16, 11, 13, 33, 1, 1, 0, 0, 1, 1, 2, 2, 1, false},  // batch, dilation (no effect on 1x1)
    {1, 4500, 2, 3, 40, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},  // NHWC: C in chunks (L2 up to 2 MB), partial panel
    {1, 512, 5, 5, 70, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},   // NHWC: rows 2 KiB apart are copied; 25 pixels
    // NHWC with 1 to 4 output channels: dot products along C (whole vectors and a remainder, or
    // fewer channels than a vector), padding and stride, more pixels than a task
    {2, 37, 9, 13, 2, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},
    {1, 32, 12, 11, 1, 1, 1, 1, 1, 2, 2, 1, 1, 1, true},
    {1, 3, 7, 9, 3, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},
    {1, 70, 5, 8, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
};

TEST(Pointwise, EveryLayoutMatchesTheReference) {
    convcore::Handle h;
    const Layouts layouts[] = {{true, true, true}, {true, true, false}, {false, false, false}, {false, true, false}};
    uint32_t seed = 3;
    for (const Shape& s : kShapes) {
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w);
        convcore::TensorDesc y(CONVCORE_DATA_FLOAT, s.n, s.k, s.out_h(), s.out_w());
        convcore::FilterDesc w(CONVCORE_DATA_FLOAT, s.k, s.c / s.groups, 1, 1);
        convcore::ConvDesc conv(s.pad_h, s.stride_h, s.dil_h, s.groups,
                                s.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
        size_t bytes = 0;  // POINTWISE is among the algorithms check_pass runs
        CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_POINTWISE, &bytes));
        for (const Layouts& l : layouts) {
            SCOPED_TRACE(std::string("x ") + (l.x_nhwc ? "NHWC" : "NCHW") + ", y " + (l.y_nhwc ? "NHWC" : "NCHW") +
                         ", w " + (l.w_krsc ? "KRSC" : "KCRS") + ", c " + std::to_string(s.c) + ", k " +
                         std::to_string(s.k) + ", groups " + std::to_string(s.groups) + ", stride " +
                         std::to_string(s.stride_h));
            check_pass(h, CONVCORE_PASS_FORWARD, s, l, seed++);
        }
    }
}

// In place: no staged x or y. NHWC needs Wt and a zero row, unstrided NCHW nothing.
TEST(Pointwise, RunsOnTheTensorsInPlace) {
    convcore::Handle h;
    const int64_t n = 2, c = 24, k = 40, hw = 9;
    convcore::TensorDesc x(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, n, c, hw, hw);
    convcore::TensorDesc y(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, n, k, hw, hw);
    convcore::TensorDesc xc(CONVCORE_DATA_FLOAT, n, c, hw, hw), yc(CONVCORE_DATA_FLOAT, n, k, hw, hw);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, k, c, 1, 1);
    convcore::ConvDesc conv;
    size_t bytes = 1;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, xc, w, conv, yc, CONVCORE_FWD_ALGO_POINTWISE, &bytes));
    EXPECT_EQ(bytes, 0u);
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_POINTWISE, &bytes));
    EXPECT_LT(bytes, size_t(n * c * hw * hw) * sizeof(float));
    EXPECT_GE(bytes, size_t(c * k) * sizeof(float));
}

TEST(Pointwise, RefusesLargerFilters) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 8, 6, 6), y(CONVCORE_DATA_FLOAT, 1, 8, 6, 6);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 8, 8, 3, 3);
    convcore::ConvDesc conv(1);
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_POINTWISE, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    const std::string why = convcoreGetLastErrorString();
    EXPECT_NE(why.find("POINTWISE needs a 1x1 filter, got 3x3"), std::string::npos) << why;
}

}  // namespace
