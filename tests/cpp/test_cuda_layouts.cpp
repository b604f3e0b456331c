// Tensor formats and filter layouts on a CUDA device (layout_check.hpp): every pass in NHWC /
// KRSC and mixed layouts, every applicable CUDA algorithm, against the float64 reference.
#include <gtest/gtest.h>

#include <string>

#include "convcore/convcore.h"
#include "layout_check.hpp"

namespace {

class CudaLayoutPasses : public ::testing::TestWithParam<convcoreConvolutionPass_t> {};

TEST_P(CudaLayoutPasses, EveryAlgorithmInEveryLayoutMatchesTheReference) {
    int count = 0;
    ASSERT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS);
    if (count == 0) GTEST_SKIP() << "no CUDA GPU is visible: GPU test skipped";
    convcoreHandle_t h = nullptr;
    ASSERT_EQ(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_SUCCESS);
    convcore_test::check_layouts(h, GetParam());
    convcoreDestroy(h);
}

INSTANTIATE_TEST_SUITE_P(CudaLayouts, CudaLayoutPasses,
                         ::testing::Values(CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA,
                                           CONVCORE_PASS_BACKWARD_FILTER),
                         [](const auto& info) { return std::string(convcore_test::pass_test_name(info.param)); });

}  // namespace
