// Tensor formats and filter layouts in the C API on the CPU: every pass in NHWC / KRSC and mixed
// layouts (layout_check.hpp); the workspace queries count the filter's conversion; prepared
// filters in KRSC; bad formats and strides named.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "layout_check.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << convcoreGetLastErrorString()

class LayoutPasses : public ::testing::TestWithParam<convcoreConvolutionPass_t> {};

TEST_P(LayoutPasses, EveryAlgorithmInEveryLayoutMatchesTheReference) {
    convcore::Handle h;
    check_layouts(h, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutPasses,
                         ::testing::Values(CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA,
                                           CONVCORE_PASS_BACKWARD_FILTER),
                         [](const auto& info) { return std::string(convcore_test::pass_test_name(info.param)); });

// The workspace queries count the conversion of a KRSC filter (and nothing for KCRS).
TEST(Layouts, WorkspaceCountsTheFilterConversion) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 8, 6, 6), y(CONVCORE_DATA_FLOAT, 1, 4, 6, 6);
    convcore::FilterDesc kcrs(CONVCORE_DATA_FLOAT, 4, 8, 3, 3);
    convcoreFilterDescriptor_t krsc;
    CC_ASSERT_OK(convcoreCreateFilterDescriptor(&krsc));
    CC_ASSERT_OK(convcoreSetFilter4dDescriptorWithFormat(krsc, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 4, 8, 3, 3));
    convcore::ConvDesc conv(1);
    size_t packed = 1, converted = 0;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, kcrs, conv, y, CONVCORE_FWD_ALGO_DIRECT, &packed));
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, krsc, conv, y, CONVCORE_FWD_ALGO_DIRECT, &converted));
    EXPECT_EQ(packed, 0u);
    EXPECT_EQ(converted, 4u * 8 * 3 * 3 * sizeof(float));
    CC_ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv, krsc, CONVCORE_BWD_FILTER_ALGO_DIRECT,
                                                                   &converted));
    EXPECT_EQ(converted, 4u * 8 * 3 * 3 * sizeof(float));
    convcoreDestroyFilterDescriptor(krsc);
}

// Filters prepared from a KRSC buffer give the bits of converting them in every call.
TEST(Layouts, PreparedKrscFiltersMatchTheCall) {
    convcore::Handle h;
    convcoreTensorDescriptor_t x;
    convcoreFilterDescriptor_t w;
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&x));
    CC_ASSERT_OK(convcoreCreateFilterDescriptor(&w));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptorWithFormat(x, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 1, 8, 10, 10));
    CC_ASSERT_OK(convcoreSetFilter4dDescriptorWithFormat(w, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 8, 8, 3, 3));
    convcore::TensorDesc y(CONVCORE_DATA_FLOAT, 1, 8, 10, 10);
    convcore::ConvDesc conv(1);
    std::mt19937 rng(5);
    const auto x64 = random_vector(800, rng), w64 = random_vector(576, rng);
    const std::vector<float> xv(x64.begin(), x64.end()), wv(w64.begin(), w64.end());
    for (auto algo : {CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3, CONVCORE_FWD_ALGO_IM2WIN}) {
        convcore::Plan plan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, algo);
        std::vector<double> ws(plan.workspace_size() / sizeof(double) + 1);
        const float one = 1, zero = 0;
        std::vector<float> per_call(800), prepared(800);
        plan.execute(&one, xv.data(), wv.data(), &zero, per_call.data(), ws.data(), ws.size() * sizeof(double));
        size_t bytes = 0;
        CC_ASSERT_OK(convcorePrepareConvolutionPlanFilters(plan, wv.data(), &bytes));
        EXPECT_GT(bytes, 0u);
        plan.execute(&one, xv.data(), wv.data(), &zero, prepared.data(), ws.data(), ws.size() * sizeof(double));
        EXPECT_EQ(prepared, per_call) << convcoreGetFwdAlgoName(algo);
    }
    convcoreDestroyTensorDescriptor(x);
    convcoreDestroyFilterDescriptor(w);
}

TEST(Layouts, BadFormatsAndStridesAreNamed) {
    convcoreTensorDescriptor_t x;
    convcoreFilterDescriptor_t w;
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&x));
    CC_ASSERT_OK(convcoreCreateFilterDescriptor(&w));
    EXPECT_EQ(convcoreSetTensor4dDescriptorWithFormat(x, convcoreTensorFormat_t(7), CONVCORE_DATA_FLOAT, 1, 2, 3, 4),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("format 7"), std::string::npos);
    EXPECT_EQ(convcoreSetFilter4dDescriptorWithFormat(w, convcoreTensorFormat_t(-1), CONVCORE_DATA_FLOAT, 1, 2, 3, 3),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreSetFilter4dDescriptorEx(w, CONVCORE_DATA_FLOAT, 4, 2, 3, 3, 18, 0, 3, 1),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("cStride"), std::string::npos);
    EXPECT_EQ(convcoreSetTensor4dDescriptorWithFormat(x, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 1, 0, 3, 4),
              CONVCORE_STATUS_BAD_PARAM);
    // A dw whose strides alias elements is refused at execution, naming dw.
    convcore::Handle h;
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, 2, 5, 5), yd(CONVCORE_DATA_FLOAT, 1, 4, 5, 5);
    CC_ASSERT_OK(convcoreSetFilter4dDescriptorEx(w, CONVCORE_DATA_FLOAT, 4, 2, 3, 3, 9, 9, 3, 1));
    convcore::ConvDesc conv(1);
    convcore::Plan plan(h, CONVCORE_PASS_BACKWARD_FILTER, xd, w, conv, yd, CONVCORE_BWD_FILTER_ALGO_DIRECT);
    std::vector<float> xv(50, 1.0f), dy(100, 1.0f), dw(64, 0.0f);
    std::vector<double> ws(plan.workspace_size() / sizeof(double) + 1);
    const float one = 1, zero = 0;
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, &one, xv.data(), dy.data(), &zero, dw.data(), ws.data(),
                                             ws.size() * sizeof(double)),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("dw"), std::string::npos);
    convcoreDestroyTensorDescriptor(x);
    convcoreDestroyFilterDescriptor(w);
}

}  // namespace

// IM2COL_GEMM runs NHWC natively: no staged x or y in the workspace. A pointwise layer needs
// none at all (one GEMM on x); a 3x3 one its KRSC filter and one image's col matrix.
TEST(Layouts, Im2colGemmRunsNhwcNatively) {
    convcore::Handle h;
    const int64_t n = 2, c = 8, k = 6, hw = 10;
    const size_t f = sizeof(float);
    convcore::TensorDesc x(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, n, c, hw, hw);
    convcore::TensorDesc y(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, n, k, hw, hw);
    convcore::FilterDesc w1(CONVCORE_DATA_FLOAT, k, c, 1, 1), w3(CONVCORE_DATA_FLOAT, k, c, 3, 3);
    convcore::ConvDesc none, pad1(1);
    size_t bytes = 1;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w1, none, y, CONVCORE_FWD_ALGO_IM2COL_GEMM, &bytes));
    EXPECT_EQ(bytes, 0u);
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, x, w3, pad1, y, CONVCORE_FWD_ALGO_IM2COL_GEMM, &bytes));
    const size_t filter = (size_t(k * c * 9) * f + 63) / 64 * 64, col = size_t(hw * hw * c * 9) * f;
    EXPECT_EQ(bytes, filter + col);
}

// x as NHWC images with gaps between them (a batch of depth planes read with a depth stride, as
// the 3-D decomposition does) and y packed NHWC: an algorithm that runs NHWC runs this problem in
// NHWC, staging only x by whole pixels (its workspace is the packed problem's plus x's copy; an
// NCHW run would stage y too); every applicable algorithm matches the reference.
TEST(Layouts, NhwcImagesWithGapsRunNhwc) {
    convcore::Handle h;
    const Shape s{3, 16, 9, 7, 12, 3, 3, 1, 1, 2, 2, 1, 1, 1, false};
    const int64_t P = s.out_h(), Q = s.out_w(), image = s.h * s.w * s.c, gap = 5;
    std::mt19937 rng(7);
    const auto xr = rounded<float>(random_vector(size_t(s.n * s.c * s.h * s.w), rng));
    const auto wr = rounded<float>(random_vector(size_t(s.k * s.c * s.r * s.s), rng));
    const auto ref = reference_conv(s, xr, wr);
    std::vector<float> xm(size_t(s.n * (image + gap)), 0.0f), w(wr.begin(), wr.end());
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t i = 0; i < s.h * s.w; ++i)
                xm[size_t(n * (image + gap) + i * s.c + c)] = float(xr[size_t((n * s.c + c) * s.h * s.w + i)]);
    convcore::TensorDesc x, packed_x(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w);
    CC_ASSERT_OK(convcoreSetTensor4dDescriptorEx(x, CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w, image + gap, 1,
                                                 s.w * s.c, s.c));
    convcore::TensorDesc y(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, s.n, s.k, P, Q);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, s.k, s.c, s.r, s.s);
    convcore::ConvDesc conv(1, 2, 1);  // padding 1, stride 2 (H and W)
    int ran = 0;
    for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        const auto algo = convcoreConvolutionFwdAlgo_t(a);
        size_t bytes = 0, packed_bytes = 0;
        if (convcoreGetConvolutionForwardWorkspaceSize(h, x, wd, conv, y, algo, &bytes) != CONVCORE_STATUS_SUCCESS)
            continue;
        SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
        CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, packed_x, wd, conv, y, algo, &packed_bytes));
        if (algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM || algo == CONVCORE_FWD_ALGO_IM2COL_GEMM)  // both run NHWC
            EXPECT_EQ(bytes, packed_bytes + (size_t(s.n * image) * sizeof(float) + 63) / 64 * 64);
        std::vector<char> ws(bytes);
        std::vector<float> out(size_t(s.n * s.k * P * Q), std::nanf(""));
        const float one = 1, zero = 0;
        CC_ASSERT_OK(convcoreConvolutionForward(h, &one, x, xm.data(), wd, w.data(), conv, algo, ws.data(), bytes,
                                                &zero, y, out.data()));
        std::vector<double> got(out.size());
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t k = 0; k < s.k; ++k)
                for (int64_t i = 0; i < P * Q; ++i)
                    got[size_t((n * s.k + k) * P * Q + i)] = out[size_t((n * P * Q + i) * s.k + k)];
        EXPECT_LE(relative_error(got, ref), declared_bound(CONVCORE_PASS_FORWARD, algo, false));
        ++ran;
    }
    EXPECT_GE(ran, 4);
}
