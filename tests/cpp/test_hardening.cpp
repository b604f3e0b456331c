// Regression tests for what fuzzing and the sanitizer builds found: each test names
// the failure it guards against. The fuzz inputs that found them are in tests/fuzz/corpus
// (regress-*), replayed by test_fuzz_corpus.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"

namespace {

std::string last_error() { return convcoreGetLastErrorString(); }

// An enum argument outside the enum (any int is valid C) was read as the C++ enum: undefined
// behaviour (UBSan "load of value 7, which is not a valid value"). Now BAD_PARAM, cleanly.
TEST(Hardening, EnumArgumentsOutsideTheirRange) {
    int bad[] = {-1, 2, 7, 1 << 30, -2147483647 - 1};
    for (int v : bad) {
        convcoreHandle_t h = nullptr;
        convcoreDeviceType_t dev;
        std::memcpy(&dev, &v, sizeof v);
        EXPECT_EQ(convcoreCreateForDevice(&h, dev, 0), CONVCORE_STATUS_BAD_PARAM) << v;
        convcoreDataType_t dt;
        std::memcpy(&dt, &v, sizeof v);
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 1, 3, 3);
        EXPECT_EQ(convcoreSetTensor4dDescriptor(x, dt, 1, 1, 3, 3), CONVCORE_STATUS_BAD_PARAM) << v;
        EXPECT_NE(last_error().find("dataType " + std::to_string(v)), std::string::npos) << last_error();
        convcoreConvolutionMode_t mode;
        std::memcpy(&mode, &v, sizeof v);
        convcore::ConvDesc conv;
        EXPECT_EQ(convcoreSetConvolution2dDescriptor(conv, 0, 0, 1, 1, 1, 1, mode),
                  CONVCORE_STATUS_BAD_PARAM);
        convcoreStatus_t status;
        std::memcpy(&status, &v, sizeof v);
        if (v < 0 || v > CONVCORE_STATUS_INTERNAL_ERROR)
            EXPECT_STREQ(convcoreGetStatusName(status), "CONVCORE_STATUS_UNKNOWN");
    }
    int algo_values[] = {-1, CONVCORE_FWD_ALGO_COUNT, 1000};
    for (int v : algo_values) {
        convcoreConvolutionFwdAlgo_t algo;
        std::memcpy(&algo, &v, sizeof v);
        EXPECT_EQ(convcoreGetFwdAlgoName(algo), nullptr);
        convcore::Handle h;
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 1, 3, 3), y(CONVCORE_DATA_FLOAT, 1, 1, 1, 1);
        convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 1, 1, 3, 3);
        convcore::ConvDesc conv;
        size_t bytes = 0;
        EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, algo, &bytes),
                  CONVCORE_STATUS_BAD_PARAM);
        EXPECT_NE(last_error().find("algo " + std::to_string(v)), std::string::npos) << last_error();
    }
}

// A strided descriptor whose extent sum (not a single product) leaves int64 overflowed
// (UBSan: signed integer overflow in extent_bytes). Now BAD_PARAM.
TEST(Hardening, TensorExtentSumOverflow) {
    convcoreTensorDescriptor_t d = nullptr;
    ASSERT_EQ(convcoreCreateTensorDescriptor(&d), CONVCORE_STATUS_SUCCESS);
    const int64_t big = int64_t(1) << 61;  // each term (2-1)*2^61 fits; their sum does not
    EXPECT_EQ(convcoreSetTensor4dDescriptorEx(d, CONVCORE_DATA_FLOAT, 2, 2, 2, 2, big, big, big, big),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(last_error().find("overflows 64 bits"), std::string::npos) << last_error();
    convcoreDestroyTensorDescriptor(d);
}

struct Small : ::testing::Test {
    convcore::Handle h;
    convcore::TensorDesc x{CONVCORE_DATA_FLOAT, 1, 2, 5, 5};
    convcore::FilterDesc w{CONVCORE_DATA_FLOAT, 3, 2, 3, 3};
    convcore::ConvDesc conv{1};
    convcore::TensorDesc y{CONVCORE_DATA_FLOAT, 1, 3, 5, 5};
    std::vector<double> xs = std::vector<double>(64, 0.5), ws = std::vector<double>(64, 0.25),
                        ys = std::vector<double>(64, 0.0);
    float one = 1, zero = 0;
    convcoreStatus_t forward(const void* xp, const void* wp, void* yp,
                             convcoreConvolutionFwdAlgo_t algo = CONVCORE_FWD_ALGO_DIRECT,
                             void* workspace = nullptr, size_t bytes = 0) {
        return convcoreConvolutionForward(h, &one, x, xp, w, wp, conv, algo, workspace, bytes, &zero,
                                          y, yp);
    }
};

// Data pointers not aligned to their float elements were read as floats (UB; a fault on
// strict-alignment CPUs). Now BAD_PARAM naming the pointer; element-aligned (not 16/64-byte
// aligned) pointers run.
TEST_F(Small, MisalignedPointersAreBadParam) {
    char* xb = reinterpret_cast<char*>(xs.data());
    char* wb = reinterpret_cast<char*>(ws.data());
    char* yb = reinterpret_cast<char*>(ys.data());
    EXPECT_EQ(forward(xb + 1, wb, yb), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(last_error().find("x is not aligned to its 4-byte elements"), std::string::npos) << last_error();
    EXPECT_EQ(forward(xb, wb + 2, yb), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(last_error().find("w is not aligned"), std::string::npos) << last_error();
    EXPECT_EQ(forward(xb, wb, yb + 3), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(last_error().find("y is not aligned"), std::string::npos) << last_error();
    EXPECT_EQ(forward(xb + 4, wb + 4, yb + 4), CONVCORE_STATUS_SUCCESS) << last_error();
    size_t bytes = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, CONVCORE_FWD_ALGO_IM2COL_GEMM,
                                                         &bytes),
              CONVCORE_STATUS_SUCCESS);
    ASSERT_GT(bytes, 0u);
    std::vector<double> wsp(bytes / 8 + 2);
    char* wsb = reinterpret_cast<char*>(wsp.data());
    EXPECT_EQ(forward(xb, wb, yb, CONVCORE_FWD_ALGO_IM2COL_GEMM, wsb + 1, bytes), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(last_error().find("workspace is not aligned"), std::string::npos) << last_error();
    EXPECT_EQ(forward(xb, wb, yb, CONVCORE_FWD_ALGO_IM2COL_GEMM, wsb + 4, bytes), CONVCORE_STATUS_SUCCESS)
        << last_error();
}

// An output whose strides make elements alias was written by several threads at once (a data
// race, and a meaningless result). Now BAD_PARAM; x may alias itself (it is only read).
TEST_F(Small, OverlappingOutputStridesAreBadParam) {
    convcore::TensorDesc yo(CONVCORE_DATA_FLOAT, 1, 3, 5, 5);
    yo.set_strided(CONVCORE_DATA_FLOAT, {1, 3, 5, 5}, {25, 5, 5, 1});  // channels overlap rows
    size_t bytes = 0;  // staging a strided y takes workspace
    ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, yo, CONVCORE_FWD_ALGO_DIRECT, &bytes),
              CONVCORE_STATUS_SUCCESS);
    std::vector<double> wsp(bytes / 8 + 1);
    EXPECT_EQ(convcoreConvolutionForward(h, &one, x, xs.data(), w, ws.data(), conv,
                                         CONVCORE_FWD_ALGO_DIRECT, wsp.data(), bytes, &zero, yo, ys.data()),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(last_error().find("y: its strides make elements overlap"), std::string::npos) << last_error();
    convcore::TensorDesc xo(CONVCORE_DATA_FLOAT, 1, 2, 5, 5);
    xo.set_strided(CONVCORE_DATA_FLOAT, {1, 2, 5, 5}, {25, 1, 5, 1});  // a broadcast-like input
    ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xo, w, conv, y, CONVCORE_FWD_ALGO_DIRECT, &bytes),
              CONVCORE_STATUS_SUCCESS);
    wsp.assign(bytes / 8 + 1, 0.0);
    EXPECT_EQ(convcoreConvolutionForward(h, &one, xo, xs.data(), w, ws.data(), conv,
                                         CONVCORE_FWD_ALGO_DIRECT, wsp.data(), bytes, &zero, y, ys.data()),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
}

// Workspace queries for huge problems: FFT_TILING multiplied th * tw (int64 overflow for
// whole-image tiles of a 2^31-wide padded image), POLY_HANKEL and FFT multiplied the padded
// image sides, IM2WIN multiplied C * Wp * R: all UB, with meaningless workspace sizes. Now
// NOT_SUPPORTED with the (honest) size, quickly.
TEST(Hardening, HugeProblemsWorkspaceQueries) {
    convcore::Handle h;
    struct Shape { int64_t n, c, hh, ww, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w; };
    const Shape shapes[] = {
        {2, 4, 5, int64_t(1) << 31, 2, 3, 3, (int64_t(1) << 31) + 1, 1, 2, 3, 1, 1},  // regress-fft-huge-tile
        {1, 1, int64_t(1) << 30, int64_t(1) << 29, 1, 3, 3, 1, 1, 1, 1, 1, 1},
        {3, int64_t(1) << 40, 83, 1, 3, 1, 1, 3, int64_t(1) << 31, 3, 2, 3, 1},     // regress-im2win-huge-workspace
    };
    for (const Shape& s : shapes) {
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, s.n, s.c, s.hh, s.ww);
        convcore::FilterDesc w(CONVCORE_DATA_FLOAT, s.k, s.c, s.r, s.s);
        convcore::ConvDesc conv;
        conv.set(s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.dil_h, s.dil_w);
        const auto t0 = std::chrono::steady_clock::now();
        for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
            size_t bytes = 0;
            const convcoreStatus_t st = convcoreGetConvolutionForwardWorkspaceSize(
                h, x, w, conv, nullptr, convcoreConvolutionFwdAlgo_t(a), &bytes);
            EXPECT_TRUE(st == CONVCORE_STATUS_SUCCESS || st == CONVCORE_STATUS_NOT_SUPPORTED ||
                        st == CONVCORE_STATUS_BAD_PARAM)
                << convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(a)) << ": " << last_error();
            if (st == CONVCORE_STATUS_NOT_SUPPORTED && last_error().find("would need") != std::string::npos)
                EXPECT_EQ(last_error().find("would need 0.0 GB"), std::string::npos) << last_error();
        }
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    }
}

// FFT_TILING computed every stride-1 output: a tiny problem with stride 2^31 (2 outputs per
// row) ran 2^31 columns of tiles (the fuzzer's timeout). Now NOT_SUPPORTED past 64 times the
// outputs; ordinary strides (2, 4) still run.
TEST(Hardening, FftTilingRefusesHugeStrides) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 3, 3, 5, 3);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 3, 3, 5, 3);
    convcore::ConvDesc conv;
    conv.set(2, (int64_t(1) << 31) + 1, 1, (int64_t(1) << 31) + 1, 1, 2);  // regress-fft-tiling-huge-stride
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, nullptr, CONVCORE_FWD_ALGO_FFT_TILING,
                                                         &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("times the outputs"), std::string::npos) << last_error();
    convcore::TensorDesc x2(CONVCORE_DATA_FLOAT, 1, 3, 32, 32);
    convcore::FilterDesc w2(CONVCORE_DATA_FLOAT, 4, 3, 3, 3);
    convcore::ConvDesc conv2(1, 4);
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x2, w2, conv2, nullptr,
                                                         CONVCORE_FWD_ALGO_FFT_TILING, &bytes),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
}

// DIRECT skipped the zero padding, so an Inf weight gave Inf at the borders where the GEMM
// algorithms (and PyTorch's reference path) give 0 * Inf = NaN. Now the three agree.
TEST(Hardening, InfWeightTimesPaddingIsNaN) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 1, 4, 4), y(CONVCORE_DATA_FLOAT, 1, 1, 4, 4);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 1, 1, 3, 3);
    convcore::ConvDesc conv(1);
    std::vector<float> xs(16, 1.0f), ws(9, 0.5f);
    ws[0] = INFINITY;  // tap (0, 0): in the padding for the top row and the left column
    const float one = 1, zero = 0;
    for (auto algo : {CONVCORE_FWD_ALGO_DIRECT, CONVCORE_FWD_ALGO_IM2COL_GEMM, CONVCORE_FWD_ALGO_IMPLICIT_GEMM}) {
        size_t bytes = 0;
        ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, algo, &bytes), CONVCORE_STATUS_SUCCESS);
        std::vector<double> wsp(bytes / 8 + 1);
        std::vector<float> ys(16, 0.0f);
        ASSERT_EQ(convcoreConvolutionForward(h, &one, x, xs.data(), w, ws.data(), conv, algo, wsp.data(), bytes,
                                             &zero, y, ys.data()),
                  CONVCORE_STATUS_SUCCESS);
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) {
                const float v = ys[size_t(i * 4 + j)];
                if (i == 0 || j == 0)
                    EXPECT_TRUE(std::isnan(v)) << convcoreGetFwdAlgoName(algo) << " y[" << i << "][" << j << "] = " << v;
                else
                    EXPECT_TRUE(std::isinf(v) && v > 0) << convcoreGetFwdAlgoName(algo) << " y[" << i << "][" << j << "] = " << v;
            }
    }
}

}  // namespace
