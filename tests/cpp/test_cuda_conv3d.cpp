// 3-D convolutions on a CUDA handle (the depth decomposition of core/depth_decomposition.hpp runs
// the 2-D CUDA solvers, the staging kernels and the scaling kernel) against the CPU handle's
// DIRECT: the three passes with DIRECT, IM2COL_GEMM and IMPLICIT_GEMM, NCDHW and NDHWC, outputs
// poisoned with NaN (beta 0) and blended (alpha 1.5, beta 0.5), a case whose outputs are scaled
// first (no depth tap covers them) and one with a filter tap that reaches no output depth; and
// the bias gradient of a 5-D dy. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << " failed: " << convcoreGetLastErrorString()

// A CUDA handle destroyed on scope exit (declared before the buffers that use it).
struct GpuHandle {
    convcoreHandle_t h = nullptr;
    GpuHandle() { EXPECT_EQ(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_SUCCESS); }
    ~GpuHandle() { convcoreDestroy(h); }
    GpuHandle(const GpuHandle&) = delete;
    GpuHandle& operator=(const GpuHandle&) = delete;
};

bool gpu_visible() {
    int count = 0;
    return convcoreGetCudaDeviceCount(&count) == CONVCORE_STATUS_SUCCESS && count > 0;
}

// A device buffer of floats, freed with the handle.
struct DeviceFloats {
    convcoreHandle_t h;
    void* ptr = nullptr;
    size_t count;
    DeviceFloats(convcoreHandle_t handle, const std::vector<float>& host) : h(handle), count(host.size()) {
        EXPECT_EQ(convcoreMalloc(h, &ptr, std::max<size_t>(count * 4, 4)), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreMemcpyToDevice(h, ptr, host.data(), count * 4), CONVCORE_STATUS_SUCCESS);
    }
    ~DeviceFloats() { convcoreFree(h, ptr); }
    DeviceFloats(const DeviceFloats&) = delete;
    DeviceFloats& operator=(const DeviceFloats&) = delete;
    std::vector<float> host() const {
        std::vector<float> out(count);
        EXPECT_EQ(convcoreMemcpyToHost(h, out.data(), ptr, count * 4), CONVCORE_STATUS_SUCCESS);
        return out;
    }
};

double rel(const std::vector<float>& got, const std::vector<float>& want) {
    for (float v : got)
        if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
    return relative_error(std::vector<double>(got.begin(), got.end()), std::vector<double>(want.begin(), want.end()));
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
    const auto v = random_vector(n, rng);
    return std::vector<float>(v.begin(), v.end());
}

struct Problem {
    int64_t x[5], w[5], pad[3], stride[3], dil[3], groups;
    bool flip;
};

// Depth stride 2, padding 1, T = 3, groups 2 (a tap covers every output depth); depth padding 2,
// dilation 2, flipped (none covers them); depth stride 3 with a tap that reaches no output depth.
const Problem kProblems[] = {
    {{2, 4, 5, 7, 6}, {6, 2, 3, 3, 3}, {1, 1, 1}, {2, 1, 1}, {1, 1, 1}, 2, false},
    {{1, 3, 5, 6, 5}, {4, 3, 2, 2, 3}, {2, 0, 1}, {1, 2, 1}, {2, 1, 1}, 1, true},
    {{2, 2, 2, 5, 4}, {3, 2, 3, 2, 2}, {1, 0, 1}, {3, 1, 2}, {1, 1, 1}, 1, true},
};

}  // namespace

TEST(CudaConv3d, PassesMatchTheCpu) {
    if (!gpu_visible()) GTEST_SKIP() << "no CUDA GPU is visible: GPU test skipped";
    convcore::Handle cpu;
    const GpuHandle handle;
    convcoreHandle_t gpu = handle.h;
    ASSERT_NE(gpu, nullptr) << convcoreGetLastErrorString();
    std::mt19937 rng(77);
    const float one = 1.0f, zero = 0.0f, alpha = 1.5f, beta = 0.5f;
    for (const Problem& pr : kProblems)
        for (bool cl : {false, true}) {
            SCOPED_TRACE(std::string(cl ? "NDHWC" : "NCDHW") + " problem " + std::to_string(&pr - kProblems));
            const convcoreTensorFormat_t f = cl ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW;
            convcore::TensorDesc xd, yd;
            convcore::FilterDesc wd;
            convcore::ConvDesc conv;
            CC_ASSERT_OK(convcoreSetTensorNdDescriptorEx(xd, f, CONVCORE_DATA_FLOAT, 5, pr.x));
            CC_ASSERT_OK(convcoreSetFilterNdDescriptor(wd, CONVCORE_DATA_FLOAT, f, 5, pr.w));
            CC_ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv, 3, pr.pad, pr.stride, pr.dil,
                                                            pr.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION));
            CC_ASSERT_OK(convcoreSetConvolutionGroupCount(conv, pr.groups));
            int64_t y[5];
            CC_ASSERT_OK(convcoreGetConvolutionNdForwardOutputDim(conv, xd, wd, 5, y));
            CC_ASSERT_OK(convcoreSetTensorNdDescriptorEx(yd, f, CONVCORE_DATA_FLOAT, 5, y));
            const size_t nx = size_t(pr.x[0] * pr.x[1] * pr.x[2] * pr.x[3] * pr.x[4]);
            const size_t nw = size_t(pr.w[0] * pr.w[1] * pr.w[2] * pr.w[3] * pr.w[4]);
            const size_t ny = size_t(y[0] * y[1] * y[2] * y[3] * y[4]);
            const auto x = random_floats(nx, rng), w = random_floats(nw, rng), dy = random_floats(ny, rng);
            const auto y0 = random_floats(ny, rng), x0 = random_floats(nx, rng), w0 = random_floats(nw, rng);
            const DeviceFloats gx(gpu, x), gw(gpu, w), gdy(gpu, dy);
            for (int blended = 0; blended < 2; ++blended) {
                const float* a = blended ? &alpha : &one;
                const float* b = blended ? &beta : &zero;
                const float nan = std::numeric_limits<float>::quiet_NaN();
                // CPU DIRECT references.
                std::vector<float> y_ref = blended ? y0 : std::vector<float>(ny, 0.0f);
                std::vector<float> dx_ref = blended ? x0 : std::vector<float>(nx, 0.0f);
                std::vector<float> dw_ref = blended ? w0 : std::vector<float>(nw, 0.0f);
                std::vector<char> cws(size_t(1) << 20);  // NCDHW depth ranges are staged, even for DIRECT
                CC_ASSERT_OK(convcoreConvolutionForward(cpu, a, xd, x.data(), wd, w.data(), conv,
                                                        CONVCORE_FWD_ALGO_DIRECT, cws.data(), cws.size(), b, yd,
                                                        y_ref.data()));
                CC_ASSERT_OK(convcoreConvolutionBackwardData(cpu, a, wd, w.data(), yd, dy.data(), conv,
                                                             CONVCORE_BWD_DATA_ALGO_DIRECT, cws.data(), cws.size(), b,
                                                             xd, dx_ref.data()));
                CC_ASSERT_OK(convcoreConvolutionBackwardFilter(cpu, a, xd, x.data(), yd, dy.data(), conv,
                                                               CONVCORE_BWD_FILTER_ALGO_DIRECT, cws.data(), cws.size(),
                                                               b, wd, dw_ref.data()));
                for (int algo = 0; algo < 3; ++algo) {  // DIRECT, IM2COL_GEMM, IMPLICIT_GEMM in each pass
                    SCOPED_TRACE(std::string(convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(algo))) +
                                 (blended ? " alpha 1.5 beta 0.5" : " beta 0 on NaN"));
                    size_t bytes = 0;
                    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(gpu, xd, wd, conv, yd,
                                                                            convcoreConvolutionFwdAlgo_t(algo), &bytes));
                    void* ws = nullptr;
                    CC_ASSERT_OK(convcoreMalloc(gpu, &ws, std::max<size_t>(bytes, 4)));
                    DeviceFloats gy(gpu, blended ? y0 : std::vector<float>(ny, nan));
                    EXPECT_EQ(convcoreConvolutionForward(gpu, a, xd, gx.ptr, wd, gw.ptr, conv,
                                                         convcoreConvolutionFwdAlgo_t(algo), ws, bytes, b, yd, gy.ptr),
                              CONVCORE_STATUS_SUCCESS)
                        << convcoreGetLastErrorString();
                    EXPECT_LE(rel(gy.host(), y_ref), 1e-5) << "forward";
                    convcoreFree(gpu, ws);

                    CC_ASSERT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(
                        gpu, wd, yd, conv, xd, convcoreConvolutionBwdDataAlgo_t(algo), &bytes));
                    CC_ASSERT_OK(convcoreMalloc(gpu, &ws, std::max<size_t>(bytes, 4)));
                    DeviceFloats gdx(gpu, blended ? x0 : std::vector<float>(nx, nan));
                    EXPECT_EQ(convcoreConvolutionBackwardData(gpu, a, wd, gw.ptr, yd, gdy.ptr, conv,
                                                              convcoreConvolutionBwdDataAlgo_t(algo), ws, bytes, b, xd,
                                                              gdx.ptr),
                              CONVCORE_STATUS_SUCCESS)
                        << convcoreGetLastErrorString();
                    EXPECT_LE(rel(gdx.host(), dx_ref), 1e-5) << "backward data";
                    convcoreFree(gpu, ws);

                    CC_ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(
                        gpu, xd, yd, conv, wd, convcoreConvolutionBwdFilterAlgo_t(algo), &bytes));
                    CC_ASSERT_OK(convcoreMalloc(gpu, &ws, std::max<size_t>(bytes, 4)));
                    DeviceFloats gdw(gpu, blended ? w0 : std::vector<float>(nw, nan));
                    EXPECT_EQ(convcoreConvolutionBackwardFilter(gpu, a, xd, gx.ptr, yd, gdy.ptr, conv,
                                                                convcoreConvolutionBwdFilterAlgo_t(algo), ws, bytes, b,
                                                                wd, gdw.ptr),
                              CONVCORE_STATUS_SUCCESS)
                        << convcoreGetLastErrorString();
                    EXPECT_LE(rel(gdw.host(), dw_ref), 1e-5) << "backward filter";
                    convcoreFree(gpu, ws);
                }
            }
        }
}

TEST(CudaConv3d, BackwardBiasOfA5dDy) {
    if (!gpu_visible()) GTEST_SKIP() << "no CUDA GPU is visible: GPU test skipped";
    convcore::Handle cpu;
    const GpuHandle handle;
    convcoreHandle_t gpu = handle.h;
    ASSERT_NE(gpu, nullptr) << convcoreGetLastErrorString();
    std::mt19937 rng(78);
    const int64_t dims[5] = {2, 3, 4, 3, 5}, bdims[5] = {1, 3, 1, 1, 1};
    convcore::TensorDesc dyd, dbd;
    CC_ASSERT_OK(convcoreSetTensorNdDescriptorEx(dyd, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 5, dims));
    CC_ASSERT_OK(convcoreSetTensorNdDescriptorEx(dbd, CONVCORE_TENSOR_NCHW, CONVCORE_DATA_FLOAT, 5, bdims));
    const auto dy = random_floats(size_t(2 * 3 * 4 * 3 * 5), rng);
    const auto db0 = random_floats(3, rng);
    const float alpha = 2.0f, beta = 0.5f;
    std::vector<float> ref = db0;
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(cpu, &alpha, dyd, dy.data(), &beta, dbd, ref.data()));
    const DeviceFloats gdy(gpu, dy), gdb(gpu, db0);
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(gpu, &alpha, dyd, gdy.ptr, &beta, dbd, gdb.ptr));
    EXPECT_LE(rel(gdb.host(), ref), 1e-5);
}
