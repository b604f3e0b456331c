// The C API: descriptors, every bad-parameter path, NOT_SUPPORTED with reasons, memory, strided
// inputs. Each algorithm's correctness is in its own test_<algo>.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

std::string last_error() { return convcoreGetLastErrorString(); }

// Expects `status` with a reason that contains `fragment`.
#define EXPECT_STATUS(call, status, fragment)                                      \
    do {                                                                           \
        convcoreStatus_t st_ = (call);                                             \
        EXPECT_EQ(st_, status) << #call << ": " << last_error();                   \
        EXPECT_NE(last_error().find(fragment), std::string::npos)                  \
            << #call << ": reason '" << last_error() << "' lacks '" << fragment << "'"; \
    } while (0)

// A small valid problem with its descriptors.
struct Fixture : ::testing::Test {
    convcore::Handle handle;
    convcore::TensorDesc x{CONVCORE_DATA_FLOAT, 2, 4, 9, 7};
    convcore::FilterDesc w{CONVCORE_DATA_FLOAT, 6, 4, 3, 3};
    convcore::ConvDesc conv{1, 1};
    convcore::TensorDesc y{CONVCORE_DATA_FLOAT, 2, 6, 9, 7};
    std::vector<float> xs = std::vector<float>(2 * 4 * 9 * 7, 0.5f);
    std::vector<float> ws = std::vector<float>(6 * 4 * 3 * 3, 0.25f);
    std::vector<float> ys = std::vector<float>(2 * 6 * 9 * 7, 0.0f);
    float one = 1.0f, zero = 0.0f;

    convcoreStatus_t forward(convcoreConvolutionFwdAlgo_t algo, void* workspace = nullptr,
                             size_t ws_bytes = 0) {
        return convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv, algo,
                                          workspace, ws_bytes, &zero, y, ys.data());
    }
};

}  // namespace

TEST(Library, VersionAndNames) {
    EXPECT_EQ(convcoreGetVersion(), size_t(CONVCORE_VERSION));
    EXPECT_STREQ(convcoreGetStatusName(CONVCORE_STATUS_NOT_SUPPORTED), "CONVCORE_STATUS_NOT_SUPPORTED");
    EXPECT_STREQ(convcoreGetFwdAlgoName(CONVCORE_FWD_ALGO_POLY_HANKEL), "POLY_HANKEL");
    EXPECT_EQ(convcoreGetFwdAlgoName(CONVCORE_FWD_ALGO_COUNT), nullptr);
    EXPECT_EQ(convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(-1)), nullptr);
    for (int i = 0; i < CONVCORE_FWD_ALGO_COUNT; ++i) {
        convcoreConvolutionFwdAlgo_t a;
        ASSERT_EQ(convcoreGetFwdAlgoByName(convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(i)), &a),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(int(a), i);
    }
    convcoreConvolutionFwdAlgo_t a;
    EXPECT_EQ(convcoreGetFwdAlgoByName("im2col_gemm", &a), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(a, CONVCORE_FWD_ALGO_IM2COL_GEMM);
    EXPECT_STATUS(convcoreGetFwdAlgoByName("winograd", &a), CONVCORE_STATUS_BAD_PARAM, "expected one of");
    EXPECT_STATUS(convcoreGetFwdAlgoByName(nullptr, &a), CONVCORE_STATUS_BAD_PARAM, "name is NULL");
    const std::string info = convcoreGetBuildInfo();
    EXPECT_NE(info.find("blas:"), std::string::npos);
    // The linker's build ID (the find-db's records are keyed with it): at least 8 bytes, in hex.
    EXPECT_TRUE(std::regex_search(info, std::regex("\nbuild id: ([0-9a-f][0-9a-f]){8,}\n"))) << info;
    int count = -1;
    EXPECT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS);
    EXPECT_GE(count, 0);
    EXPECT_STATUS(convcoreGetCudaDeviceCount(nullptr), CONVCORE_STATUS_BAD_PARAM, "count is NULL");
}

TEST(Handle, CreateAndBadParams) {
    EXPECT_STATUS(convcoreCreate(nullptr), CONVCORE_STATUS_BAD_PARAM, "handle is NULL");
    convcoreHandle_t h = nullptr;
    EXPECT_STATUS(convcoreCreateForDevice(&h, convcoreDeviceType_t(7), 0), CONVCORE_STATUS_BAD_PARAM,
                  "device 7");
    EXPECT_EQ(h, nullptr);
    EXPECT_STATUS(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, -1), CONVCORE_STATUS_BAD_PARAM,
                  "deviceIndex=-1");
    ASSERT_EQ(convcoreCreate(&h), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(last_error(), "");
    convcoreDeviceType_t dev;
    int index = -1;
    EXPECT_EQ(convcoreGetDevice(h, &dev, &index), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(dev, CONVCORE_DEVICE_CPU);
    EXPECT_STATUS(convcoreSetStream(h, nullptr), CONVCORE_STATUS_BAD_PARAM, "CPU handle");
    EXPECT_STATUS(convcoreSetNumThreads(h, -2), CONVCORE_STATUS_BAD_PARAM, "numThreads=-2");
    EXPECT_EQ(convcoreSetNumThreads(h, 1), CONVCORE_STATUS_SUCCESS);
    EXPECT_STATUS(convcoreGetDevice(nullptr, &dev, &index), CONVCORE_STATUS_BAD_PARAM, "handle is NULL");
    EXPECT_EQ(convcoreDestroy(h), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreDestroy(nullptr), CONVCORE_STATUS_SUCCESS);  // like free(NULL)
}

TEST(Handle, CudaWithoutGpuIsNotSupported) {
    int count = 0;
    ASSERT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS);
    if (count > 0) GTEST_SKIP() << count << " CUDA device(s) visible: this checks the no-GPU path";
    convcoreHandle_t h = nullptr;
    EXPECT_EQ(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_FALSE(last_error().empty());
    EXPECT_EQ(h, nullptr);
}

TEST(Descriptors, TensorBadParams) {
    convcoreTensorDescriptor_t d;
    ASSERT_EQ(convcoreCreateTensorDescriptor(&d), CONVCORE_STATUS_SUCCESS);
    EXPECT_STATUS(convcoreSetTensor4dDescriptor(d, CONVCORE_DATA_FLOAT, 0, 3, 4, 4),
                  CONVCORE_STATUS_BAD_PARAM, "n=0 must be >= 1");
    EXPECT_STATUS(convcoreSetTensor4dDescriptor(d, CONVCORE_DATA_FLOAT, 1, -3, 4, 4),
                  CONVCORE_STATUS_BAD_PARAM, "c=-3");
    EXPECT_STATUS(convcoreSetTensor4dDescriptor(d, convcoreDataType_t(9), 1, 3, 4, 4),
                  CONVCORE_STATUS_BAD_PARAM, "dataType 9");
    const int64_t big = int64_t(1) << 40;
    EXPECT_STATUS(convcoreSetTensor4dDescriptor(d, CONVCORE_DATA_FLOAT, big, big, 1, 1),
                  CONVCORE_STATUS_BAD_PARAM, "overflows");
    EXPECT_STATUS(convcoreSetTensor4dDescriptorEx(d, CONVCORE_DATA_FLOAT, 1, 3, 4, 4, 48, 16, 4, 0),
                  CONVCORE_STATUS_BAD_PARAM, "wStride=0");
    const int64_t huge = int64_t(1) << 62;
    EXPECT_STATUS(convcoreSetTensor4dDescriptorEx(d, CONVCORE_DATA_FLOAT, 2, 3, 4, 4, huge, huge, huge, huge),
                  CONVCORE_STATUS_BAD_PARAM, "overflows");
    int64_t n;
    EXPECT_STATUS(convcoreGetTensor4dDescriptor(d, nullptr, &n, nullptr, nullptr, nullptr, nullptr,
                                                nullptr, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "never set");
    ASSERT_EQ(convcoreSetTensor4dDescriptor(d, CONVCORE_DATA_DOUBLE, 2, 3, 4, 5), CONVCORE_STATUS_SUCCESS);
    int64_t c, h, w, ns, cs, hs, wsd;
    convcoreDataType_t t;
    ASSERT_EQ(convcoreGetTensor4dDescriptor(d, &t, &n, &c, &h, &w, &ns, &cs, &hs, &wsd),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(t, CONVCORE_DATA_DOUBLE);
    EXPECT_EQ(n * 1000 + c * 100 + h * 10 + w, 2345);
    EXPECT_EQ(ns, 60);
    EXPECT_EQ(cs, 20);
    EXPECT_EQ(hs, 5);
    EXPECT_EQ(wsd, 1);
    EXPECT_STATUS(convcoreSetTensor4dDescriptor(nullptr, CONVCORE_DATA_FLOAT, 1, 1, 1, 1),
                  CONVCORE_STATUS_BAD_PARAM, "desc is NULL");
    EXPECT_STATUS(convcoreCreateTensorDescriptor(nullptr), CONVCORE_STATUS_BAD_PARAM, "desc is NULL");
    convcoreDestroyTensorDescriptor(d);
}

TEST(Descriptors, FilterAndConvolutionBadParams) {
    convcoreFilterDescriptor_t f;
    ASSERT_EQ(convcoreCreateFilterDescriptor(&f), CONVCORE_STATUS_SUCCESS);
    EXPECT_STATUS(convcoreSetFilter4dDescriptor(f, CONVCORE_DATA_FLOAT, 4, 3, 0, 3),
                  CONVCORE_STATUS_BAD_PARAM, "r=0");
    EXPECT_STATUS(convcoreSetFilter4dDescriptor(f, CONVCORE_DATA_FLOAT, -1, 3, 3, 3),
                  CONVCORE_STATUS_BAD_PARAM, "k=-1");
    EXPECT_STATUS(convcoreGetFilter4dDescriptor(f, nullptr, nullptr, nullptr, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "never set");
    convcoreDestroyFilterDescriptor(f);

    convcoreConvolutionDescriptor_t c;
    ASSERT_EQ(convcoreCreateConvolutionDescriptor(&c), CONVCORE_STATUS_SUCCESS);
    int64_t ph, pw, sh, sw, dh, dw, g;
    convcoreConvolutionMode_t mode;
    ASSERT_EQ(convcoreGetConvolution2dDescriptor(c, &ph, &pw, &sh, &sw, &dh, &dw, &mode), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(ph + pw, 0);
    EXPECT_EQ(sh * sw * dh * dw, 1);
    EXPECT_EQ(mode, CONVCORE_CROSS_CORRELATION);  // the default
    ASSERT_EQ(convcoreGetConvolutionGroupCount(c, &g), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(g, 1);
    EXPECT_STATUS(convcoreSetConvolution2dDescriptor(c, -1, 0, 1, 1, 1, 1, CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "padding (-1, 0)");
    EXPECT_STATUS(convcoreSetConvolution2dDescriptor(c, 0, 0, 0, 1, 1, 1, CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "strideH=0");
    EXPECT_STATUS(convcoreSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 0, CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "dilationW=0");
    EXPECT_STATUS(convcoreSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, convcoreConvolutionMode_t(5)),
                  CONVCORE_STATUS_BAD_PARAM, "mode 5");
    EXPECT_STATUS(convcoreSetConvolution2dDescriptor(c, int64_t(1) << 50, 0, 1, 1, 1, 1,
                                                     CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "2^40");
    EXPECT_STATUS(convcoreSetConvolutionGroupCount(c, 0), CONVCORE_STATUS_BAD_PARAM, "groups=0");
    convcoreDestroyConvolutionDescriptor(c);
}

TEST(Descriptors, OutputDimsAndMismatches) {
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 2, 6, 11, 8);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 4, 3, 3, 2);
    convcore::ConvDesc conv;
    conv.set(1, 0, 2, 3, 2, 1);
    conv.set_groups(2);
    auto o = conv.output_dims(x, w);
    EXPECT_EQ(o[0], 2);
    EXPECT_EQ(o[1], 4);
    EXPECT_EQ(o[2], (11 + 2 - 2 * 2 - 1) / 2 + 1);
    EXPECT_EQ(o[3], (8 - 1 - 1) / 3 + 1);
    int64_t n, c, h, wd;
    conv.set_groups(4);  // 6 channels / 4 groups
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "C=6 are not divisible by groups=4");
    conv.set_groups(1);
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "w: C/groups=3 does not match x: C=6 with groups=1");
    convcore::FilterDesc w5(CONVCORE_DATA_FLOAT, 5, 2, 3, 3);
    conv.set_groups(3);
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(conv, x, w5, &n, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "K=5 are not divisible by groups=3");
    convcore::FilterDesc big(CONVCORE_DATA_FLOAT, 4, 6, 13, 3);
    convcore::ConvDesc plain;
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(plain, x, big, &n, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "empty output");
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(plain, x, w, nullptr, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "n is NULL");
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(nullptr, x, w, &n, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "convDesc is NULL");
    convcoreTensorDescriptor_t unset;
    convcoreCreateTensorDescriptor(&unset);
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(plain, unset, w, &n, &c, &h, &wd),
                  CONVCORE_STATUS_BAD_PARAM, "never set");
    convcoreDestroyTensorDescriptor(unset);
}

TEST_F(Fixture, ForwardBadParams) {
    EXPECT_EQ(forward(CONVCORE_FWD_ALGO_DIRECT), CONVCORE_STATUS_SUCCESS) << last_error();
    EXPECT_STATUS(convcoreConvolutionForward(nullptr, &one, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "handle is NULL");
    EXPECT_STATUS(convcoreConvolutionForward(handle, nullptr, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "alpha is NULL");
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, nullptr, w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "x is NULL");
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w, nullptr, conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "w is NULL");
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "y is NULL");
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, nullptr, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "yDesc is NULL");
    EXPECT_STATUS(forward(convcoreConvolutionFwdAlgo_t(42)), CONVCORE_STATUS_BAD_PARAM, "algo 42");
    // y with the wrong shape / dtype
    convcore::TensorDesc y_wrong(CONVCORE_DATA_FLOAT, 2, 6, 8, 7);
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y_wrong, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "does not match the output shape 2x6x9x7");
    convcore::TensorDesc y_double(CONVCORE_DATA_DOUBLE, 2, 6, 9, 7);
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y_double, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "y: data type float64 does not match x: float32");
    convcore::FilterDesc w_double(CONVCORE_DATA_DOUBLE, 6, 4, 3, 3);
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w_double, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, ys.data()),
                  CONVCORE_STATUS_BAD_PARAM, "w: data type float64");
    // y overlapping x
    EXPECT_STATUS(convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, y, xs.data()),
                  CONVCORE_STATUS_BAD_PARAM, "y overlaps x");
}

TEST_F(Fixture, WorkspaceTooSmall) {
    size_t need = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, CONVCORE_FWD_ALGO_IM2COL_GEMM, &need),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
    ASSERT_GT(need, 0u);
    std::vector<char> buf(need);
    EXPECT_STATUS(forward(CONVCORE_FWD_ALGO_IM2COL_GEMM, buf.data(), need - 1), CONVCORE_STATUS_BAD_PARAM,
                  "bytes given");
    EXPECT_STATUS(forward(CONVCORE_FWD_ALGO_IM2COL_GEMM, nullptr, need), CONVCORE_STATUS_BAD_PARAM,
                  "workspace is NULL");
    EXPECT_EQ(forward(CONVCORE_FWD_ALGO_IM2COL_GEMM, buf.data(), need), CONVCORE_STATUS_SUCCESS) << last_error();
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, CONVCORE_FWD_ALGO_DIRECT, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "sizeInBytes is NULL");
}

TEST_F(Fixture, UnimplementedAlgorithmsSayNotSupported) {
    // Algorithms with no solver in this build must say so (never run something else).
    for (int i = 0; i < CONVCORE_FWD_ALGO_COUNT; ++i) {
        const auto algo = convcoreConvolutionFwdAlgo_t(i);
        size_t bytes = 0;
        const convcoreStatus_t st = convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, algo, &bytes);
        ASSERT_TRUE(st == CONVCORE_STATUS_SUCCESS || st == CONVCORE_STATUS_NOT_SUPPORTED) << last_error();
        if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
            EXPECT_NE(last_error().find(convcoreGetFwdAlgoName(algo)), std::string::npos) << last_error();
            std::fill(ys.begin(), ys.end(), -7.0f);
            EXPECT_EQ(forward(algo), CONVCORE_STATUS_NOT_SUPPORTED);
            EXPECT_EQ(ys[0], -7.0f) << "an unsupported algorithm wrote the output";
        }
    }
}

TEST_F(Fixture, HeuristicRanking) {
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int returned = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(handle, x, w, conv, y, CONVCORE_FWD_ALGO_COUNT,
                                                     &returned, perf),
              CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(returned, CONVCORE_FWD_ALGO_COUNT);
    bool seen_unsupported = false, seen[CONVCORE_FWD_ALGO_COUNT] = {};
    for (int i = 0; i < returned; ++i) {
        EXPECT_FALSE(seen[perf[i].algo]) << "algorithm listed twice";
        seen[perf[i].algo] = true;
        EXPECT_EQ(perf[i].time, -1.0f);
        if (perf[i].status == CONVCORE_STATUS_SUCCESS) {
            EXPECT_FALSE(seen_unsupported) << "applicable algorithms must come first";
            size_t bytes = 0;
            ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, perf[i].algo, &bytes),
                      CONVCORE_STATUS_SUCCESS);
            EXPECT_EQ(bytes, perf[i].memory);
        } else {
            EXPECT_EQ(perf[i].status, CONVCORE_STATUS_NOT_SUPPORTED);
            seen_unsupported = true;
        }
    }
    EXPECT_EQ(perf[0].status, CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(handle, x, w, conv, y, 2, &returned, perf),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(returned, 2);
    EXPECT_STATUS(convcoreGetConvolutionForwardAlgorithm(handle, x, w, conv, y, 0, &returned, perf),
                  CONVCORE_STATUS_BAD_PARAM, "requestedAlgoCount=0");
    EXPECT_STATUS(convcoreGetConvolutionForwardAlgorithm(handle, x, w, conv, y, 3, &returned, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "perfResults is NULL");
}

TEST(Memory, CpuHandleMallocAndCopy) {
    convcore::Handle h;
    void* p = nullptr;
    ASSERT_EQ(convcoreMalloc(h, &p, 100), CONVCORE_STATUS_SUCCESS);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    const char msg[] = "convcore";
    EXPECT_EQ(convcoreMemcpyToDevice(h, p, msg, sizeof msg), CONVCORE_STATUS_SUCCESS);
    char back[sizeof msg] = {};
    EXPECT_EQ(convcoreMemcpyToHost(h, back, p, sizeof msg), CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(back, msg);
    EXPECT_STATUS(convcoreMemcpyToHost(h, nullptr, p, 4), CONVCORE_STATUS_BAD_PARAM, "dst is NULL");
    EXPECT_EQ(convcoreFree(h, p), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreSynchronize(h), CONVCORE_STATUS_SUCCESS);
    EXPECT_STATUS(convcoreMalloc(h, nullptr, 4), CONVCORE_STATUS_BAD_PARAM, "ptr is NULL");
    EXPECT_EQ(convcoreMalloc(h, &p, size_t(-1) / 2), CONVCORE_STATUS_ALLOC_FAILED);
}

TEST(Strided, StridedInputIsPackedThroughTheWorkspace) {
    // x stored NHWC, described as NCHW with strides: the workspace grows by x's packed size.
    const Shape p{1, 3, 6, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    convcore::Handle h;
    convcore::TensorDesc xd(CONVCORE_DATA_DOUBLE, 1, 3, 6, 5);
    xd.set_strided(CONVCORE_DATA_DOUBLE, {1, 3, 6, 5}, {90, 1, 15, 3});
    convcore::FilterDesc wd(CONVCORE_DATA_DOUBLE, 2, 3, 3, 3);
    convcore::ConvDesc conv(1, 1);
    convcore::TensorDesc yd(CONVCORE_DATA_DOUBLE, 1, 2, 6, 5);
    std::mt19937 rng(7);
    const auto xr = random_vector(90, rng);  // packed NCHW values
    const auto w = random_vector(54, rng);
    std::vector<double> x_nhwc(90);
    for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 6; ++i)
            for (int j = 0; j < 5; ++j) x_nhwc[size_t(i * 15 + j * 3 + c)] = xr[size_t((c * 6 + i) * 5 + j)];
    size_t bytes = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, CONVCORE_FWD_ALGO_DIRECT, &bytes),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_GE(bytes, 90 * sizeof(double));
    std::vector<char> ws(bytes);
    std::vector<double> y(60);
    const double one = 1, zero = 0;
    ASSERT_EQ(convcoreConvolutionForward(h, &one, xd, x_nhwc.data(), wd, w.data(), conv, CONVCORE_FWD_ALGO_DIRECT,
                                         ws.data(), bytes, &zero, yd, y.data()),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
    EXPECT_LT(relative_error(y, reference_conv(p, xr, w)), 1e-14);
}
