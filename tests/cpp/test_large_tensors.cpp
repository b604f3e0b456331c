// Tensors with more than 2^31 elements (64-bit indexing), on the CPU.
//
// The input has 2^31 + something float32 elements (8.6 GB of address space), but it is
// calloc'ed and only the rows the convolution reads are written: with a large stride those are
// a few dozen rows, so the pages actually touched stay in the megabytes and the test is cheap.
// The outputs that read past element 2^31 (the last rows, the last images/channels) are
// compared with a direct computation here. An algorithm that wraps an index at 32 bits reads
// the wrong (zero) rows or crashes. Skips, saying so, when the address space cannot be had.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"

namespace {

constexpr int64_t kTwo31 = int64_t(1) << 31;

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

struct Case {
    int64_t n, c, h, w, k, r, s, groups, pad, stride_h, stride_w;
};

// Small exact values (multiples of 1/4): float sums of a few dozen of them are exact.
float pattern(int64_t i) { return float(int64_t((uint64_t(i) * 2654435761u) >> 7) % 9 - 4) * 0.25f; }

void run_large(const Case& cs, convcoreConvolutionFwdAlgo_t algo) {
    const int64_t elems = cs.n * cs.c * cs.h * cs.w;
    ASSERT_GT(elems, kTwo31);
    std::unique_ptr<float, FreeDeleter> x(static_cast<float*>(std::calloc(size_t(elems), sizeof(float))));
    if (!x)
        GTEST_SKIP() << "could not reserve " << double(elems) * 4 / 1e9
                     << " GB of address space for the > 2^31-element input (calloc failed)";

    convcore::Handle handle;
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, cs.n, cs.c, cs.h, cs.w);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, cs.k, cs.c / cs.groups, cs.r, cs.s);
    convcore::ConvDesc conv(cs.pad, 1, 1, cs.groups);
    conv.set(cs.pad, cs.pad, cs.stride_h, cs.stride_w, 1, 1);
    const auto o = conv.output_dims(xd, wd);
    const int64_t P = o[2], Q = o[3];
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, o[0], o[1], P, Q);

    // Write the rows that the outputs read, in every image and channel.
    float* xp = x.get();
    for (int64_t n = 0; n < cs.n; ++n)
        for (int64_t c = 0; c < cs.c; ++c)
            for (int64_t oh = 0; oh < P; ++oh)
                for (int64_t r = 0; r < cs.r; ++r) {
                    const int64_t ih = oh * cs.stride_h - cs.pad + r;
                    if (ih < 0 || ih >= cs.h) continue;
                    const int64_t row = ((n * cs.c + c) * cs.h + ih) * cs.w;
                    for (int64_t iw = 0; iw < cs.w; ++iw) xp[row + iw] = pattern(row + iw);
                }
    std::vector<float> w(size_t(cs.k * (cs.c / cs.groups) * cs.r * cs.s));
    for (size_t i = 0; i < w.size(); ++i) w[i] = pattern(int64_t(i) + 17);
    std::vector<float> y(size_t(o[0] * o[1] * P * Q), std::nanf(""));

    size_t ws_bytes = 0;
    const convcoreStatus_t st =
        convcoreGetConvolutionForwardWorkspaceSize(handle, xd, wd, conv, yd, algo, &ws_bytes);
    ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    ASSERT_LT(ws_bytes, size_t(256) << 20) << "the workspace should not grow with the input";
    std::vector<char> ws(ws_bytes + 64);
    const float one = 1, zero = 0;
    ASSERT_EQ(convcoreConvolutionForward(handle, &one, xd, xp, wd, w.data(), conv, algo,
                                         ws_bytes ? ws.data() : nullptr, ws_bytes, &zero, yd,
                                         y.data()),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();

    // Direct computation of every output (few), in double.
    const int64_t cg = cs.c / cs.groups, kg = cs.k / cs.groups;
    int64_t past_2_31 = 0;  // outputs that read an element at offset >= 2^31
    for (int64_t n = 0; n < o[0]; ++n)
        for (int64_t k = 0; k < o[1]; ++k)
            for (int64_t oh = 0; oh < P; ++oh)
                for (int64_t ow = 0; ow < Q; ++ow) {
                    double acc = 0;
                    bool far = false;
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t r = 0; r < cs.r; ++r)
                            for (int64_t s = 0; s < cs.s; ++s) {
                                const int64_t ih = oh * cs.stride_h - cs.pad + r;
                                const int64_t iw = ow * cs.stride_w - cs.pad + s;
                                if (ih < 0 || ih >= cs.h || iw < 0 || iw >= cs.w) continue;
                                const int64_t off =
                                    ((n * cs.c + (k / kg) * cg + c) * cs.h + ih) * cs.w + iw;
                                far = far || off >= kTwo31;
                                acc += double(xp[off]) * double(w[size_t(((k * cg + c) * cs.r + r) * cs.s + s)]);
                            }
                    past_2_31 += far;
                    const float got = y[size_t(((n * o[1] + k) * P + oh) * Q + ow)];
                    ASSERT_EQ(double(got), acc) << convcoreGetFwdAlgoName(algo) << " y[" << n << ","
                                                << k << "," << oh << "," << ow << "]";
                }
    EXPECT_GT(past_2_31, 0) << "the case should read past element 2^31";
}

// One 65536 x 32769 image (2^31 + 65536 elements): the last output rows read rows 65534-65535,
// at offsets past 2^31; the last column reads the right padding.
const Case kRows{1, 1, 65536, 32769, 2, 3, 3, 1, 1, 13107, 16384};
// 2 images x 2 channels (groups 2) of 23171 x 23171: the second image's second channel
// starts past 2^31.
const Case kBatch{2, 2, 23171, 23171, 4, 3, 3, 2, 1, 5792, 7723};

class LargeTensor : public ::testing::TestWithParam<convcoreConvolutionFwdAlgo_t> {};

TEST_P(LargeTensor, OneImageWithMoreThan2To31Elements) { run_large(kRows, GetParam()); }
TEST_P(LargeTensor, BatchAndChannelsPast2To31) { run_large(kBatch, GetParam()); }

INSTANTIATE_TEST_SUITE_P(Cpu, LargeTensor,
                         ::testing::Values(CONVCORE_FWD_ALGO_DIRECT, CONVCORE_FWD_ALGO_IMPLICIT_GEMM,
                                           CONVCORE_FWD_ALGO_IM2COL_GEMM),
                         [](const auto& info) { return std::string(convcoreGetFwdAlgoName(info.param)); });

// Shapes far past 2^31 elements (nothing allocated): the descriptors, output dims, ranking and
// workspace queries answer in 64 bits.
TEST(LargeTensor, QueriesOnHugeShapes) {
    convcore::Handle handle;
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 4, 8, int64_t(1) << 20, int64_t(1) << 19);  // 2^44
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 16, 8, 3, 3);
    convcore::ConvDesc conv(1);
    const auto o = conv.output_dims(xd, wd);
    EXPECT_EQ(o[2], int64_t(1) << 20);
    EXPECT_EQ(o[3], int64_t(1) << 19);
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, o[0], o[1], o[2], o[3]);
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int count = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(handle, xd, wd, conv, yd, CONVCORE_FWD_ALGO_COUNT,
                                                     &count, perf),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    bool direct = false, implicit = false;
    for (int i = 0; i < count; ++i) {
        direct |= perf[i].algo == CONVCORE_FWD_ALGO_DIRECT && perf[i].status == CONVCORE_STATUS_SUCCESS;
        implicit |= perf[i].algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM && perf[i].status == CONVCORE_STATUS_SUCCESS;
    }
    EXPECT_TRUE(direct && implicit);
    size_t bytes = 1;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(handle, xd, wd, conv, yd,
                                                         CONVCORE_FWD_ALGO_DIRECT, &bytes),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(bytes, 0u);
    // Every algorithm answers: a workspace size or NOT_SUPPORTED, quickly.
    for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        const convcoreStatus_t st = convcoreGetConvolutionForwardWorkspaceSize(
            handle, xd, wd, conv, yd, convcoreConvolutionFwdAlgo_t(a), &bytes);
        EXPECT_TRUE(st == CONVCORE_STATUS_SUCCESS || st == CONVCORE_STATUS_NOT_SUPPORTED)
            << convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(a)) << ": "
            << convcoreGetLastErrorString();
    }
}

// An output whose element count leaves int64 (no y descriptor: a query) is BAD_PARAM, not an
// overflow. Regression test: make_problem computed n*k*p*q unchecked.
TEST(LargeTensor, OutputTooLargeForInt64IsBadParam) {
    convcore::Handle handle;
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, int64_t(1) << 20, 1, int64_t(1) << 20, int64_t(1) << 19);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, int64_t(1) << 20, 1, 1, 1);
    convcore::ConvDesc conv;
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(handle, xd, wd, conv, nullptr,
                                                         CONVCORE_FWD_ALGO_DIRECT, &bytes),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("more elements than 64-bit"),
              std::string::npos)
        << convcoreGetLastErrorString();
}

// A dilated filter whose span dil*(R-1)+1 leaves int64 is an empty output (BAD_PARAM), not an
// overflow. Regression test: output_dims computed the span unchecked.
TEST(LargeTensor, FilterSpanOverflowIsEmptyOutput) {
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, 1, 8, 8);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 1, 1, int64_t(1) << 40, 1);
    convcore::ConvDesc conv;
    conv.set(0, 0, 1, 1, int64_t(1) << 40, 1);
    int64_t n, k, p, q;
    EXPECT_EQ(convcoreGetConvolution2dForwardOutputDim(conv, xd, wd, &n, &k, &p, &q),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("spans more than 2^63"),
              std::string::npos)
        << convcoreGetLastErrorString();
}

}  // namespace
