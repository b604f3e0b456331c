// The Nd descriptors of the C API (convcore.h, "Nd descriptors"): every Set/Get round trip, the
// 4d getters on 1-D descriptors, every bad parameter, the rule that 1-D and 2-D descriptors do
// not mix (3-D descriptors and convolutions: test_conv3d.cpp), and 1-D convolutions (stored as 2-D with H = 1) through
// several algorithms of each pass against a float64 1-D reference written here (odd lengths,
// padding, stride, dilation, groups, both modes, NCW and NWC).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

std::string last_error() { return convcoreGetLastErrorString(); }

#define EXPECT_STATUS(call, status, fragment)                                           \
    do {                                                                                \
        convcoreStatus_t st_ = (call);                                                  \
        EXPECT_EQ(st_, status) << #call << ": " << last_error();                        \
        EXPECT_NE(last_error().find(fragment), std::string::npos)                       \
            << #call << ": reason '" << last_error() << "' lacks '" << fragment << "'"; \
    } while (0)

#define EXPECT_OK(call) EXPECT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << last_error()
#define ASSERT_OK(call) ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << last_error()

constexpr convcoreDataType_t F32 = CONVCORE_DATA_FLOAT;
constexpr convcoreTensorFormat_t NCHW = CONVCORE_TENSOR_NCHW;
constexpr convcoreTensorFormat_t NHWC = CONVCORE_TENSOR_NHWC;

}  // namespace

// ---- round trips ----------------------------------------------------------------------------

TEST(NdDescriptors, TensorRoundTrips) {
    convcore::TensorDesc d;
    // 1-D with explicit strides (each row of W padded to 10): Nd back as set, 4d with H = 1.
    const int64_t dims[3] = {2, 3, 7}, strides[3] = {40, 10, 1};
    ASSERT_OK(convcoreSetTensorNdDescriptor(d, F32, 3, dims, strides));
    convcoreDataType_t t = CONVCORE_DATA_DOUBLE;
    int nb = 0;
    int64_t gd[4] = {-1, -1, -1, -1}, gs[4] = {-1, -1, -1, -1};
    ASSERT_OK(convcoreGetTensorNdDescriptor(d, 4, &t, &nb, gd, gs));
    EXPECT_EQ(t, F32);
    EXPECT_EQ(nb, 3);
    EXPECT_EQ(std::vector<int64_t>(gd, gd + 4), (std::vector<int64_t>{2, 3, 7, -1}));
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 4), (std::vector<int64_t>{40, 10, 1, -1}));
    int64_t n, c, h, w, ns, cs, hs, ws;
    ASSERT_OK(convcoreGetTensor4dDescriptor(d, &t, &n, &c, &h, &w, &ns, &cs, &hs, &ws));
    EXPECT_EQ(std::vector<int64_t>({n, c, h, w}), (std::vector<int64_t>{2, 3, 1, 7}));
    EXPECT_EQ(std::vector<int64_t>({ns, cs, ws}), (std::vector<int64_t>{40, 10, 1}));
    // Fewer requested than set: only those written; *nbDims still the count set. 0 is allowed.
    int64_t two[3] = {-1, -1, -1};
    ASSERT_OK(convcoreGetTensorNdDescriptor(d, 2, nullptr, &nb, two, nullptr));
    EXPECT_EQ(nb, 3);
    EXPECT_EQ(std::vector<int64_t>(two, two + 3), (std::vector<int64_t>{2, 3, -1}));
    EXPECT_OK(convcoreGetTensorNdDescriptor(d, 0, nullptr, &nb, nullptr, nullptr));

    // Packed NCW and NWC.
    const int64_t d1[3] = {2, 5, 9};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(d, NCHW, F32, 3, d1));
    ASSERT_OK(convcoreGetTensorNdDescriptor(d, 3, &t, &nb, gd, gs));
    EXPECT_EQ(nb, 3);
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 3), (std::vector<int64_t>{45, 9, 1}));
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(d, NHWC, CONVCORE_DATA_DOUBLE, 3, d1));
    ASSERT_OK(convcoreGetTensorNdDescriptor(d, 3, &t, &nb, gd, gs));
    EXPECT_EQ(t, CONVCORE_DATA_DOUBLE);
    EXPECT_EQ(std::vector<int64_t>(gd, gd + 3), (std::vector<int64_t>{2, 5, 9}));
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 3), (std::vector<int64_t>{45, 1, 5}));
    ASSERT_OK(convcoreGetTensor4dDescriptor(d, &t, &n, &c, &h, &w, &ns, &cs, &hs, &ws));
    EXPECT_EQ(h, 1);

    // 2-D: the same as the 4d calls, in either direction.
    const int64_t d2[4] = {2, 3, 4, 5};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(d, NHWC, F32, 4, d2));
    ASSERT_OK(convcoreGetTensor4dDescriptor(d, &t, &n, &c, &h, &w, &ns, &cs, &hs, &ws));
    EXPECT_EQ(std::vector<int64_t>({n, c, h, w, ns, cs, hs, ws}), (std::vector<int64_t>{2, 3, 4, 5, 60, 1, 15, 3}));
    const int64_t s2[4] = {100, 30, 6, 1};
    ASSERT_OK(convcoreSetTensorNdDescriptor(d, F32, 4, d2, s2));
    ASSERT_OK(convcoreGetTensorNdDescriptor(d, 4, &t, &nb, gd, gs));
    EXPECT_EQ(nb, 4);
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 4), (std::vector<int64_t>{100, 30, 6, 1}));
    // A 1-D descriptor set again by a 4d call is 2-D.
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(d, NCHW, F32, 3, d1));
    ASSERT_OK(convcoreSetTensor4dDescriptor(d, F32, 1, 2, 3, 4));
    ASSERT_OK(convcoreGetTensorNdDescriptor(d, 4, &t, &nb, gd, gs));
    EXPECT_EQ(nb, 4);
    EXPECT_EQ(std::vector<int64_t>(gd, gd + 4), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(NdDescriptors, FilterRoundTrips) {
    convcore::FilterDesc d;
    convcoreDataType_t t;
    convcoreTensorFormat_t f = convcoreTensorFormat_t(-1);
    int nb = 0;
    int64_t fd[4] = {-1, -1, -1, -1};
    int64_t k, c, r, s;
    for (convcoreTensorFormat_t format : {NCHW, NHWC}) {
        std::fill(fd, fd + 4, -1);
        const int64_t d1[3] = {6, 2, 5};
        ASSERT_OK(convcoreSetFilterNdDescriptor(d, CONVCORE_DATA_DOUBLE, format, 3, d1));
        ASSERT_OK(convcoreGetFilterNdDescriptor(d, 4, &t, &f, &nb, fd));
        EXPECT_EQ(t, CONVCORE_DATA_DOUBLE);
        EXPECT_EQ(f, format);
        EXPECT_EQ(nb, 3);
        EXPECT_EQ(std::vector<int64_t>(fd, fd + 4), (std::vector<int64_t>{6, 2, 5, -1}));
        ASSERT_OK(convcoreGetFilter4dDescriptor(d, &t, &k, &c, &r, &s));
        EXPECT_EQ(std::vector<int64_t>({k, c, r, s}), (std::vector<int64_t>{6, 2, 1, 5}));

        const int64_t d2[4] = {4, 3, 2, 5};
        ASSERT_OK(convcoreSetFilterNdDescriptor(d, F32, format, 4, d2));
        ASSERT_OK(convcoreGetFilterNdDescriptor(d, 4, &t, &f, &nb, fd));
        EXPECT_EQ(f, format);
        EXPECT_EQ(nb, 4);
        EXPECT_EQ(std::vector<int64_t>(fd, fd + 4), (std::vector<int64_t>{4, 3, 2, 5}));
        // Fewer requested.
        int64_t one[2] = {-1, -1};
        ASSERT_OK(convcoreGetFilterNdDescriptor(d, 1, nullptr, nullptr, &nb, one));
        EXPECT_EQ(one[0], 4);
        EXPECT_EQ(one[1], -1);
    }
    // A 1x1 filter with one channel is packed both ways: the format set is the one answered.
    const int64_t unit[3] = {3, 1, 1};
    ASSERT_OK(convcoreSetFilterNdDescriptor(d, F32, NHWC, 3, unit));
    ASSERT_OK(convcoreGetFilterNdDescriptor(d, 3, nullptr, &f, nullptr, nullptr));
    EXPECT_EQ(f, NHWC);
    // The 4d calls: the 4d descriptors are 2-D; explicit strides report the format they match.
    ASSERT_OK(convcoreSetFilter4dDescriptor(d, F32, 4, 3, 2, 5));
    ASSERT_OK(convcoreGetFilterNdDescriptor(d, 4, nullptr, &f, &nb, fd));
    EXPECT_EQ(f, NCHW);
    EXPECT_EQ(nb, 4);
    ASSERT_OK(convcoreSetFilter4dDescriptorEx(d, F32, 4, 3, 2, 5, 30, 1, 15, 3));  // KRSC
    ASSERT_OK(convcoreGetFilterNdDescriptor(d, 4, nullptr, &f, &nb, fd));
    EXPECT_EQ(f, NHWC);
    ASSERT_OK(convcoreSetFilter4dDescriptorEx(d, F32, 4, 3, 2, 5, 40, 10, 5, 1));  // neither
    EXPECT_STATUS(convcoreGetFilterNdDescriptor(d, 4, nullptr, &f, &nb, fd), CONVCORE_STATUS_BAD_PARAM,
                  "packed in neither format");
    nb = 0;
    EXPECT_OK(convcoreGetFilterNdDescriptor(d, 4, nullptr, nullptr, &nb, fd));
    EXPECT_EQ(nb, 4);
    EXPECT_EQ(std::vector<int64_t>(fd, fd + 4), (std::vector<int64_t>{4, 3, 2, 5}));
}

TEST(NdDescriptors, ConvolutionRoundTrips) {
    convcore::ConvDesc d;
    d.set_groups(3);
    int len = 0;
    int64_t p[3] = {-1, -1, -1}, s[3] = {-1, -1, -1}, dl[3] = {-1, -1, -1};
    convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION;
    // A descriptor the 2d call set (here the wrapper's constructor) is 2-D.
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(d, 3, &len, p, s, dl, &mode));
    EXPECT_EQ(len, 2);
    EXPECT_EQ(std::vector<int64_t>(s, s + 3), (std::vector<int64_t>{1, 1, -1}));
    // So is one never set.
    convcoreConvolutionDescriptor_t fresh;
    ASSERT_OK(convcoreCreateConvolutionDescriptor(&fresh));
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(fresh, 2, &len, p, s, dl, &mode));
    EXPECT_EQ(len, 2);
    convcoreDestroyConvolutionDescriptor(fresh);

    const int64_t p1[1] = {2}, s1[1] = {3}, d1[1] = {4};
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(d, 1, p1, s1, d1, CONVCORE_CONVOLUTION));
    int64_t p3[3] = {-1, -1, -1}, s3[3] = {-1, -1, -1}, d3[3] = {-1, -1, -1};
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(d, 3, &len, p3, s3, d3, &mode));
    EXPECT_EQ(len, 1);
    EXPECT_EQ(mode, CONVCORE_CONVOLUTION);
    EXPECT_EQ(std::vector<int64_t>(p3, p3 + 3), (std::vector<int64_t>{2, -1, -1}));
    EXPECT_EQ(std::vector<int64_t>(s3, s3 + 3), (std::vector<int64_t>{3, -1, -1}));
    EXPECT_EQ(std::vector<int64_t>(d3, d3 + 3), (std::vector<int64_t>{4, -1, -1}));
    // The 2d getter: H is padding 0, stride 1, dilation 1. The group count is kept.
    int64_t ph, pw, sh, sw, dh, dw;
    ASSERT_OK(convcoreGetConvolution2dDescriptor(d, &ph, &pw, &sh, &sw, &dh, &dw, &mode));
    EXPECT_EQ(std::vector<int64_t>({ph, pw, sh, sw, dh, dw}), (std::vector<int64_t>{0, 2, 1, 3, 1, 4}));
    int64_t groups = 0;
    ASSERT_OK(convcoreGetConvolutionGroupCount(d, &groups));
    EXPECT_EQ(groups, 3);
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(d, 0, &len, nullptr, nullptr, nullptr, nullptr));
    EXPECT_EQ(len, 1);

    const int64_t p2[2] = {1, 2}, s2[2] = {3, 4}, d2[2] = {5, 6};
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(d, 2, p2, s2, d2, CONVCORE_CROSS_CORRELATION));
    ASSERT_OK(convcoreGetConvolution2dDescriptor(d, &ph, &pw, &sh, &sw, &dh, &dw, &mode));
    EXPECT_EQ(std::vector<int64_t>({ph, pw, sh, sw, dh, dw}), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(mode, CONVCORE_CROSS_CORRELATION);
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(d, 1, &len, p3, s3, d3, nullptr));
    EXPECT_EQ(len, 2);
    EXPECT_EQ(p3[0], 1);
    EXPECT_EQ(s3[0], 3);
    EXPECT_EQ(d3[0], 5);
    // The 2d call makes a 1-D descriptor 2-D again.
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(d, 1, p1, s1, d1, CONVCORE_CONVOLUTION));
    ASSERT_OK(convcoreSetConvolution2dDescriptor(d, 0, 0, 1, 1, 1, 1, CONVCORE_CROSS_CORRELATION));
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(d, 2, &len, p3, s3, d3, nullptr));
    EXPECT_EQ(len, 2);
}

TEST(NdDescriptors, OutputDims) {
    convcore::TensorDesc x;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    const int64_t xd[3] = {2, 6, 11}, wd[3] = {4, 3, 3}, pad[1] = {1}, stride[1] = {2}, dil[1] = {2};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(x, NCHW, F32, 3, xd));
    ASSERT_OK(convcoreSetFilterNdDescriptor(w, F32, NCHW, 3, wd));
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv, 1, pad, stride, dil, CONVCORE_CROSS_CORRELATION));
    conv.set_groups(2);
    int64_t out[3] = {0, 0, 0};
    ASSERT_OK(convcoreGetConvolutionNdForwardOutputDim(conv, x, w, 3, out));
    EXPECT_EQ(std::vector<int64_t>(out, out + 3), (std::vector<int64_t>{2, 4, (11 + 2 - 4 - 1) / 2 + 1}));
    // The 2d query on 1-D descriptors: H = 1.
    int64_t n, k, p, q;
    ASSERT_OK(convcoreGetConvolution2dForwardOutputDim(conv, x, w, &n, &k, &p, &q));
    EXPECT_EQ(std::vector<int64_t>({n, k, p, q}), (std::vector<int64_t>{2, 4, 1, 5}));
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(conv, x, w, 4, out), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=4 does not match xDesc's 3 dimensions");
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(conv, x, w, 2, out), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=2 must be 3 (1-D), 4 (2-D) or 5 (3-D)");
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(conv, x, w, 5, out), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=5 does not match xDesc's 3 dimensions");
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(conv, x, w, 3, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "outDims is NULL");
    // 2-D through the Nd query.
    convcore::TensorDesc x2(F32, 2, 6, 9, 11);
    convcore::FilterDesc w2(F32, 4, 3, 3, 3);
    convcore::ConvDesc conv2(1, 2, 1, 2);
    int64_t out4[4];
    ASSERT_OK(convcoreGetConvolutionNdForwardOutputDim(conv2, x2, w2, 4, out4));
    EXPECT_EQ(std::vector<int64_t>(out4, out4 + 4), (std::vector<int64_t>{2, 4, 5, 6}));
}

// A transposed convolution (PyTorch's ConvTranspose) is the backward-data pass of the convolution
// it transposes: its output dims with PyTorch's output padding in 1-D, 2-D and 3-D (the rule
// output_padding < max(stride, dilation) checked), and a 2-D one with output padding run through
// the plan cache against the float64 reference of backward data.
TEST(NdDescriptors, TransposedOutputDims) {
    // 1-D: in 5, filter 3, stride 2, pad 1, dilation 2, output padding 1, groups 2
    convcore::TensorDesc dy;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    const int64_t dyd[3] = {2, 4, 5}, wd[3] = {4, 3, 3}, pad[1] = {1}, stride[1] = {2}, dil[1] = {2}, op[1] = {1};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(dy, NCHW, F32, 3, dyd));
    ASSERT_OK(convcoreSetFilterNdDescriptor(w, F32, NCHW, 3, wd));
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv, 1, pad, stride, dil, CONVCORE_CROSS_CORRELATION));
    conv.set_groups(2);
    int64_t out[5] = {0, 0, 0, 0, 0};
    ASSERT_OK(convcoreGetConvolutionNdTransposedOutputDim(conv, dy, w, 3, op, out));
    EXPECT_EQ(std::vector<int64_t>(out, out + 3), (std::vector<int64_t>{2, 6, (5 - 1) * 2 - 2 + 2 * 2 + 1 + 1}));
    const int64_t too_big[1] = {2};
    EXPECT_STATUS(convcoreGetConvolutionNdTransposedOutputDim(conv, dy, w, 3, too_big, out), CONVCORE_STATUS_BAD_PARAM,
                  "outputPadding[0]=2 must be >= 0 and smaller than stride or dilation (max 2)");
    EXPECT_STATUS(convcoreGetConvolutionNdTransposedOutputDim(conv, dy, w, 4, op, out), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=4 does not match dyDesc's 3 dimensions");
    // 3-D: stride (1, 2, 3), no dilation: output padding up to (0, 1, 2).
    convcore::TensorDesc dy3;
    convcore::FilterDesc w3;
    convcore::ConvDesc conv3;
    const int64_t dy3d[5] = {1, 2, 3, 4, 5}, w3d[5] = {2, 5, 3, 2, 1}, pad3[3] = {1, 0, 0}, stride3[3] = {1, 2, 3},
                  dil3[3] = {1, 1, 1}, op3[3] = {0, 1, 2};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(dy3, NCHW, F32, 5, dy3d));
    ASSERT_OK(convcoreSetFilterNdDescriptor(w3, F32, NCHW, 5, w3d));
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv3, 3, pad3, stride3, dil3, CONVCORE_CROSS_CORRELATION));
    ASSERT_OK(convcoreGetConvolutionNdTransposedOutputDim(conv3, dy3, w3, 5, op3, out));
    EXPECT_EQ(std::vector<int64_t>(out, out + 5), (std::vector<int64_t>{1, 5, 3, 4 * 2 - 2 + 1 + 1 + 1, 5 * 3 - 3 + 2 + 1}));
    const int64_t op3_bad[3] = {1, 0, 0};  // stride 1, dilation 1 along depth: none allowed
    EXPECT_STATUS(convcoreGetConvolutionNdTransposedOutputDim(conv3, dy3, w3, 5, op3_bad, out),
                  CONVCORE_STATUS_BAD_PARAM, "outputPadding[0]=1");
    // 2-D through backward data: dx of the dims given, against the reference.
    const Shape s{2, 6, 0, 0, 4, 3, 3, 1, 1, 2, 2, 1, 1, 2, false};  // h, w filled below
    convcore::TensorDesc dy2(F32, 2, 4, 5, 4);
    convcore::FilterDesc w2(F32, 4, 3, 3, 3);
    convcore::ConvDesc conv2(1, 2, 1, 2);
    const int64_t op2[2] = {1, 0};
    int64_t dx_dims[4];
    ASSERT_OK(convcoreGetConvolutionNdTransposedOutputDim(conv2, dy2, w2, 4, op2, dx_dims));
    EXPECT_EQ(std::vector<int64_t>(dx_dims, dx_dims + 4), (std::vector<int64_t>{2, 6, 10, 7}));
    Shape shape = s;
    shape.h = dx_dims[2], shape.w = dx_dims[3];
    ASSERT_EQ(shape.out_h(), 5);  // the forward convolution of dx gives dy back
    ASSERT_EQ(shape.out_w(), 4);
    convcore::TensorDesc dx2(F32, 2, 6, dx_dims[2], dx_dims[3]);
    convcore::Handle h;
    std::mt19937 rng(17);
    const std::vector<double> w64 = rounded<float>(random_vector(4 * 3 * 9, rng)),
                              dy64 = rounded<float>(random_vector(2 * 4 * 5 * 4, rng));
    const std::vector<float> wv(w64.begin(), w64.end()), dyv(dy64.begin(), dy64.end());
    std::vector<float> dx(size_t(2 * 6 * dx_dims[2] * dx_dims[3]));
    convcoreConvolutionArgs_t args{};
    args.in0 = dyv.data();
    args.in1 = wv.data();
    args.out = dx.data();
    convcore::execute(h, CONVCORE_PASS_BACKWARD_DATA, dx2, w2, conv2, dy2, CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM, args);
    EXPECT_LE(relative_error(std::vector<double>(dx.begin(), dx.end()), reference_bwd_data(shape, w64, dy64)), 1e-5);
}

// ---- bad parameters ---------------------------------------------------------------------------

TEST(NdDescriptors, TensorBadParams) {
    convcore::TensorDesc d;
    const int64_t dims[4] = {2, 3, 5, 7}, strides[4] = {105, 35, 7, 1};
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(nullptr, F32, 3, dims, strides), CONVCORE_STATUS_BAD_PARAM,
                  "desc is NULL");
    for (int bad : {-1, 0, 2, 6, 8})
        EXPECT_STATUS(convcoreSetTensorNdDescriptor(d, F32, bad, dims, strides), CONVCORE_STATUS_BAD_PARAM,
                      "nbDims=" + std::to_string(bad) + " must be 3 (1-D), 4 (2-D) or 5 (3-D)");
    EXPECT_STATUS(convcoreSetTensorNdDescriptorEx(d, NCHW, F32, 2, dims), CONVCORE_STATUS_BAD_PARAM, "nbDims=2");
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(d, F32, 3, nullptr, strides), CONVCORE_STATUS_BAD_PARAM,
                  "dims is NULL");
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(d, F32, 3, dims, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "strides is NULL");
    EXPECT_STATUS(convcoreSetTensorNdDescriptorEx(d, NCHW, F32, 3, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "dims is NULL");
    const int64_t zero_w[3] = {2, 3, 0}, neg_c[4] = {2, -3, 5, 7}, zero_stride[3] = {15, 0, 1};
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(d, F32, 3, zero_w, strides), CONVCORE_STATUS_BAD_PARAM,
                  "tensor descriptor: dims[2]=0 must be >= 1");
    EXPECT_STATUS(convcoreSetTensorNdDescriptorEx(d, NHWC, F32, 4, neg_c), CONVCORE_STATUS_BAD_PARAM,
                  "tensor descriptor: dims[1]=-3 must be >= 1");
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(d, F32, 3, dims, zero_stride), CONVCORE_STATUS_BAD_PARAM,
                  "tensor descriptor: strides[1]=0 must be >= 1");
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(d, convcoreDataType_t(9), 3, dims, strides),
                  CONVCORE_STATUS_BAD_PARAM, "dataType 9");
    EXPECT_STATUS(convcoreSetTensorNdDescriptorEx(d, convcoreTensorFormat_t(4), F32, 3, dims),
                  CONVCORE_STATUS_BAD_PARAM, "format 4");
    const int64_t huge[3] = {int64_t(1) << 40, int64_t(1) << 20, int64_t(1) << 10};
    EXPECT_STATUS(convcoreSetTensorNdDescriptorEx(d, NCHW, F32, 3, huge), CONVCORE_STATUS_BAD_PARAM, "overflows");
    // Getters.
    int nb;
    EXPECT_STATUS(convcoreGetTensorNdDescriptor(d, 3, nullptr, &nb, nullptr, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "never set");
    EXPECT_STATUS(convcoreGetTensorNdDescriptor(nullptr, 3, nullptr, &nb, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "desc is NULL");
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(d, NCHW, F32, 3, dims));
    EXPECT_STATUS(convcoreGetTensorNdDescriptor(d, -1, nullptr, &nb, nullptr, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "nbDimsRequested=-1 must be >= 0");
}

TEST(NdDescriptors, FilterBadParams) {
    convcore::FilterDesc d;
    const int64_t dims[4] = {4, 3, 3, 3};
    EXPECT_STATUS(convcoreSetFilterNdDescriptor(nullptr, F32, NCHW, 3, dims), CONVCORE_STATUS_BAD_PARAM,
                  "desc is NULL");
    EXPECT_STATUS(convcoreSetFilterNdDescriptor(d, F32, NCHW, 1, dims), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=1 must be 3 (1-D), 4 (2-D) or 5 (3-D)");
    EXPECT_STATUS(convcoreSetFilterNdDescriptor(d, F32, NCHW, 3, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "filterDims is NULL");
    const int64_t zero_c[3] = {4, 0, 3};
    EXPECT_STATUS(convcoreSetFilterNdDescriptor(d, F32, NCHW, 3, zero_c), CONVCORE_STATUS_BAD_PARAM,
                  "filter descriptor: filterDims[1]=0 must be >= 1");
    EXPECT_STATUS(convcoreSetFilterNdDescriptor(d, F32, convcoreTensorFormat_t(7), 3, dims),
                  CONVCORE_STATUS_BAD_PARAM, "format 7");
    EXPECT_STATUS(convcoreSetFilterNdDescriptor(d, convcoreDataType_t(-2), NCHW, 3, dims),
                  CONVCORE_STATUS_BAD_PARAM, "dataType -2");
    int nb;
    EXPECT_STATUS(convcoreGetFilterNdDescriptor(d, 3, nullptr, nullptr, &nb, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "never set");
    ASSERT_OK(convcoreSetFilterNdDescriptor(d, F32, NCHW, 3, dims));
    EXPECT_STATUS(convcoreGetFilterNdDescriptor(d, -3, nullptr, nullptr, &nb, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "nbDimsRequested=-3 must be >= 0");
    EXPECT_STATUS(convcoreGetFilterNdDescriptor(nullptr, 3, nullptr, nullptr, &nb, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "desc is NULL");
}

TEST(NdDescriptors, ConvolutionBadParams) {
    convcore::ConvDesc d;
    const int64_t p[2] = {1, 1}, s[2] = {1, 1}, dl[2] = {1, 1};
    const auto xc = CONVCORE_CROSS_CORRELATION;
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(nullptr, 1, p, s, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                  "desc is NULL");
    for (int bad : {-1, 0, 4})
        EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, bad, p, s, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                      "arrayLength=" + std::to_string(bad) + " must be 1 (1-D), 2 (2-D) or 3 (3-D)");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 1, nullptr, s, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                  "pads is NULL");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 1, p, nullptr, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                  "strides is NULL");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 1, p, s, nullptr, xc), CONVCORE_STATUS_BAD_PARAM,
                  "dilations is NULL");
    const int64_t neg[2] = {1, -1}, zero[2] = {0, 1};
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 2, neg, s, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                  "convolution descriptor: pads[1]=-1 must be >= 0");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 1, p, zero, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                  "convolution descriptor: strides[0]=0 must be >= 1");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 2, p, s, zero, xc), CONVCORE_STATUS_BAD_PARAM,
                  "convolution descriptor: dilations[0]=0 must be >= 1");
    const int64_t huge[1] = {(int64_t(1) << 40) + 1};
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 1, p, huge, dl, xc), CONVCORE_STATUS_BAD_PARAM,
                  "must be <= 2^40");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(d, 1, p, s, dl, convcoreConvolutionMode_t(5)),
                  CONVCORE_STATUS_BAD_PARAM, "mode 5");
    // Nothing was stored by the failed calls.
    int len = 0;
    int64_t gp[2];
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(d, 2, &len, gp, nullptr, nullptr, nullptr));
    EXPECT_EQ(len, 2);
    EXPECT_EQ(gp[0], 0);
    EXPECT_STATUS(convcoreGetConvolutionNdDescriptor(d, -1, &len, nullptr, nullptr, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "arrayLengthRequested=-1 must be >= 0");
    EXPECT_STATUS(convcoreGetConvolutionNdDescriptor(nullptr, 1, &len, nullptr, nullptr, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "desc is NULL");
}

// 1-D and 2-D descriptors do not mix; each pass names the descriptor that differs.
TEST(NdDescriptors, OneAndTwoDimensionsDoNotMix) {
    convcore::Handle handle;
    convcore::TensorDesc x1, y1;
    convcore::FilterDesc w1;
    convcore::ConvDesc conv1;
    const int64_t xd[3] = {2, 4, 9}, yd[3] = {2, 6, 9}, wd[3] = {6, 4, 3}, one[1] = {1};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(x1, NCHW, F32, 3, xd));
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(y1, NCHW, F32, 3, yd));
    ASSERT_OK(convcoreSetFilterNdDescriptor(w1, F32, NCHW, 3, wd));
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv1, 1, one, one, one, CONVCORE_CROSS_CORRELATION));
    // The same problem as 2-D descriptors with H = 1.
    convcore::TensorDesc x2(F32, 2, 4, 1, 9), y2(F32, 2, 6, 1, 9);
    convcore::FilterDesc w2(F32, 6, 4, 1, 3);
    convcore::ConvDesc conv2;
    conv2.set(0, 1, 1, 1, 1, 1);
    size_t bytes = 0;
    const auto fwd = CONVCORE_FWD_ALGO_DIRECT;
    EXPECT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, x1, w1, conv1, y1, fwd, &bytes));
    EXPECT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, x2, w2, conv2, y2, fwd, &bytes));
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x1, w2, conv1, y1, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "w: 2-D filter (nbDims 4) does not match x: 1-D tensor (nbDims 3)");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x2, w1, conv2, y2, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "w: 1-D filter (nbDims 3) does not match x: 2-D tensor (nbDims 4)");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x1, w1, conv2, y1, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "convDesc: 2-D convolution");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x2, w2, conv1, y2, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "convDesc: 1-D convolution (arrayLength 1) does not match x: 2-D tensor");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x1, w1, conv1, y2, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "y: 2-D tensor (nbDims 4) does not match x: 1-D tensor (nbDims 3)");
    // A convolution descriptor never set is 2-D.
    convcoreConvolutionDescriptor_t fresh;
    ASSERT_OK(convcoreCreateConvolutionDescriptor(&fresh));
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(fresh, x1, w1, 3, nullptr), CONVCORE_STATUS_BAD_PARAM,
                  "outDims is NULL");
    int64_t out[3];
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(fresh, x1, w1, 3, out), CONVCORE_STATUS_BAD_PARAM,
                  "set convDesc with convcoreSetConvolutionNdDescriptor, arrayLength 1");
    convcoreDestroyConvolutionDescriptor(fresh);
    // A 1-D y of the wrong length, in 1-D terms.
    convcore::TensorDesc y_short;
    const int64_t ys[3] = {2, 6, 8};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(y_short, NCHW, F32, 3, ys));
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x1, w1, conv1, y_short, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM,
                  "y: shape 2x6x8 does not match the output shape 2x6x9 (use convcoreGetConvolutionNdForwardOutputDim)");
    // The backward passes, in their names.
    const auto bd = CONVCORE_BWD_DATA_ALGO_DIRECT;
    const auto bf = CONVCORE_BWD_FILTER_ALGO_DIRECT;
    EXPECT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, w1, y1, conv1, x1, bd, &bytes));
    EXPECT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, x1, y1, conv1, w1, bf, &bytes));
    EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, w1, y1, conv1, x2, bd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "w: 1-D filter (nbDims 3) does not match dx: 2-D tensor (nbDims 4)");
    EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, w1, y2, conv1, x1, bd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "dy: 2-D tensor (nbDims 4) does not match dx: 1-D tensor (nbDims 3)");
    EXPECT_STATUS(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, x1, y1, conv1, w2, bf, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "dw: 2-D filter (nbDims 4) does not match x: 1-D tensor (nbDims 3)");
    EXPECT_STATUS(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, x1, y1, conv2, w1, bf, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "convDesc: 2-D convolution");
    convcoreConvolutionPlan_t plan = nullptr;
    EXPECT_STATUS(convcoreCreateConvolutionPlan(handle, CONVCORE_PASS_FORWARD, x1, w2, conv1, y1, 0, &plan),
                  CONVCORE_STATUS_BAD_PARAM, "w: 2-D filter");
    EXPECT_EQ(plan, nullptr);
}

// ---- 1-D convolutions against a float64 reference -----------------------------------------------

namespace {

struct Case1d {
    int64_t n, c, w, k, s, pad, stride, dil, groups;
    bool flip;
    int64_t q() const { return (w + 2 * pad - dil * (s - 1) - 1) / stride + 1; }
    int64_t cg() const { return c / groups; }
};

// The problems: odd lengths, padding, stride, dilation, groups, both modes.
const Case1d kCases[] = {
    {2, 4, 37, 6, 5, 3, 2, 2, 2, false},
    {1, 3, 29, 4, 3, 1, 1, 1, 1, true},
    {3, 6, 23, 6, 3, 2, 3, 1, 3, false},
    {2, 5, 31, 3, 4, 0, 1, 3, 1, false},
    {2, 4, 33, 6, 3, 1, 2, 1, 2, false},
};

// y[n, k, j] = sum over c < C/g, t < S of x[n, g*C/g + c, j*stride - pad + t*dil] * w[k, c, t or S-1-t]
// (out-of-range x are zero). Vectors in N, C, W order (filters K, C/g, S). f(yi, xi, wi) is
// called for every term; the three passes are sums over it.
template <typename F>
void for_each_term_1d(const Case1d& p, F f) {
    const int64_t Q = p.q(), cg = p.cg(), kg = p.k / p.groups;
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t k = 0; k < p.k; ++k)
            for (int64_t j = 0; j < Q; ++j)
                for (int64_t c = 0; c < cg; ++c)
                    for (int64_t t = 0; t < p.s; ++t) {
                        const int64_t i = j * p.stride - p.pad + t * p.dil;
                        if (i < 0 || i >= p.w) continue;
                        const int64_t cin = (k / kg) * cg + c, tw = p.flip ? p.s - 1 - t : t;
                        f((n * p.k + k) * Q + j, (n * p.c + cin) * p.w + i, (k * cg + c) * p.s + tw);
                    }
}

// An N x C x L tensor from N, C, L order to NCW or NWC memory, and back.
std::vector<float> to_memory(const std::vector<double>& v, int64_t n, int64_t c, int64_t l, bool nwc) {
    std::vector<float> out(v.size());
    for (int64_t a = 0; a < n; ++a)
        for (int64_t b = 0; b < c; ++b)
            for (int64_t i = 0; i < l; ++i)
                out[size_t(nwc ? (a * l + i) * c + b : (a * c + b) * l + i)] = float(v[size_t((a * c + b) * l + i)]);
    return out;
}
std::vector<double> from_memory(const std::vector<float>& v, int64_t n, int64_t c, int64_t l, bool nwc) {
    std::vector<double> out(v.size());
    for (int64_t a = 0; a < n; ++a)
        for (int64_t b = 0; b < c; ++b)
            for (int64_t i = 0; i < l; ++i)
                out[size_t((a * c + b) * l + i)] = double(v[size_t(nwc ? (a * l + i) * c + b : (a * c + b) * l + i)]);
    return out;
}

// The descriptors of a case through the Nd calls: x and y packed NCW or NWC, the filter in the
// matching format (K C/g S or K S C/g).
struct Descs1d {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    Descs1d(const Case1d& p, bool nwc) {
        const convcoreTensorFormat_t f = nwc ? NHWC : NCHW;
        const int64_t xd[3] = {p.n, p.c, p.w}, yd[3] = {p.n, p.k, p.q()}, wd[3] = {p.k, p.cg(), p.s};
        convcore::check(convcoreSetTensorNdDescriptorEx(x, f, F32, 3, xd));
        convcore::check(convcoreSetTensorNdDescriptorEx(y, f, F32, 3, yd));
        convcore::check(convcoreSetFilterNdDescriptor(w, F32, f, 3, wd));
        const int64_t pad[1] = {p.pad}, stride[1] = {p.stride}, dil[1] = {p.dil};
        convcore::check(convcoreSetConvolutionNdDescriptor(conv, 1, pad, stride, dil,
                                                           p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION));
        conv.set_groups(p.groups);
    }
};

// Random inputs of a case (rounded to float) in N, C, W order, and in the layout's memory.
struct Data1d {
    std::vector<double> x, w, dy;          // float64, N C W / K C/g S / N K Q
    std::vector<float> xm, wm, dym;        // in memory
    Data1d(const Case1d& p, bool nwc, std::mt19937& rng) {
        x = rounded<float>(random_vector(size_t(p.n * p.c * p.w), rng));
        w = rounded<float>(random_vector(size_t(p.k * p.cg() * p.s), rng));
        dy = rounded<float>(random_vector(size_t(p.n * p.k * p.q()), rng));
        xm = to_memory(x, p.n, p.c, p.w, nwc);
        dym = to_memory(dy, p.n, p.k, p.q(), nwc);
        // Filters: K x C/g x S is N, C, W order; K x S x C/g is its NWC form.
        wm = to_memory(w, p.k, p.cg(), p.s, nwc);
    }
};

std::string case_name(const Case1d& p, bool nwc) {
    return std::string(nwc ? "NWC" : "NCW") + " n" + std::to_string(p.n) + " c" + std::to_string(p.c) + " w" +
           std::to_string(p.w) + " k" + std::to_string(p.k) + " s" + std::to_string(p.s) + " pad" +
           std::to_string(p.pad) + " stride" + std::to_string(p.stride) + " dil" + std::to_string(p.dil) + " g" +
           std::to_string(p.groups) + (p.flip ? " conv" : " xcorr");
}

const float kOne = 1.0f, kZero = 0.0f;

}  // namespace

// Every forward algorithm either runs the 1-D problem within its declared bound or says
// NOT_SUPPORTED; DIRECT, IM2COL_GEMM, IMPLICIT_GEMM and FFT must run every case, WINOGRAD_2X2_3X3
// (3x3 filters, and on the CPU 1x3 ones: F(2,3) along W with stride 1, F(2,2) on the even inputs
// with stride 2, dilation 1) must run the S = 3 cases of stride 1 and 2 and refuse the others.
TEST(NdConvolution1d, ForwardAgainstReference) {
    convcore::Handle handle;
    std::mt19937 rng(1234);
    for (const Case1d& p : kCases)
        for (bool nwc : {false, true}) {
            SCOPED_TRACE(case_name(p, nwc));
            const Descs1d d(p, nwc);
            const Data1d data(p, nwc, rng);
            std::vector<double> ref(size_t(p.n * p.k * p.q()), 0.0);
            for_each_term_1d(p, [&](int64_t yi, int64_t xi, int64_t wi) { ref[yi] += data.x[xi] * data.w[wi]; });
            int ran = 0;
            for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
                const auto algo = convcoreConvolutionFwdAlgo_t(a);
                SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
                size_t bytes = 0;
                const convcoreStatus_t st =
                    convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, algo, &bytes);
                const bool winograd_1x3 = p.s == 3 && (p.stride == 1 || p.stride == 2) && p.dil == 1;
                const bool must_run = algo == CONVCORE_FWD_ALGO_DIRECT || algo == CONVCORE_FWD_ALGO_IM2COL_GEMM ||
                                      algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM || algo == CONVCORE_FWD_ALGO_FFT ||
                                      (algo == CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3 && winograd_1x3);
                if (algo == CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3 && !winograd_1x3) {
                    EXPECT_EQ(st, CONVCORE_STATUS_NOT_SUPPORTED);
                    EXPECT_NE(last_error().find("WINOGRAD_2X2_3X3"), std::string::npos) << last_error();
                    std::vector<float> y(size_t(p.n * p.k * p.q()));
                    EXPECT_STATUS(convcoreConvolutionForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(),
                                                             d.conv, algo, nullptr, 0, &kZero, d.y, y.data()),
                                  CONVCORE_STATUS_NOT_SUPPORTED, "WINOGRAD_2X2_3X3");
                    continue;
                }
                if (st == CONVCORE_STATUS_NOT_SUPPORTED && !must_run) {
                    EXPECT_FALSE(last_error().empty());
                    continue;
                }
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                std::vector<char> ws(bytes);
                std::vector<float> y(size_t(p.n * p.k * p.q()), 7.0f);
                ASSERT_OK(convcoreConvolutionForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                                     algo, ws.data(), bytes, &kZero, d.y, y.data()));
                const double err = relative_error(from_memory(y, p.n, p.k, p.q(), nwc), ref);
                EXPECT_LE(err, declared_bound(CONVCORE_PASS_FORWARD, a, false));
                ++ran;
            }
            EXPECT_GE(ran, 4);
        }
}

// A strided 1-D x (each row of W padded), set with explicit strides, and a plan chosen by the
// heuristic on 1-D descriptors.
TEST(NdConvolution1d, StridedInputAndPlan) {
    convcore::Handle handle;
    std::mt19937 rng(99);
    const Case1d p = kCases[0];
    const Descs1d d(p, false);
    const Data1d data(p, false, rng);
    std::vector<double> ref(size_t(p.n * p.k * p.q()), 0.0);
    for_each_term_1d(p, [&](int64_t yi, int64_t xi, int64_t wi) { ref[yi] += data.x[xi] * data.w[wi]; });

    const int64_t row = p.w + 3;
    convcore::TensorDesc xs;
    const int64_t dims[3] = {p.n, p.c, p.w}, strides[3] = {p.c * row, row, 1};
    ASSERT_OK(convcoreSetTensorNdDescriptor(xs, F32, 3, dims, strides));
    std::vector<float> xm(size_t(p.n * p.c * row), std::nanf(""));
    for (int64_t i = 0; i < p.n * p.c; ++i)
        for (int64_t j = 0; j < p.w; ++j) xm[size_t(i * row + j)] = float(data.x[size_t(i * p.w + j)]);
    for (auto algo : {CONVCORE_FWD_ALGO_DIRECT, CONVCORE_FWD_ALGO_IM2COL_GEMM}) {
        SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
        size_t bytes = 0;
        ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, xs, d.w, d.conv, d.y, algo, &bytes));
        std::vector<char> ws(bytes);
        std::vector<float> y(size_t(p.n * p.k * p.q()));
        ASSERT_OK(convcoreConvolutionForward(handle, &kOne, xs, xm.data(), d.w, data.wm.data(), d.conv, algo,
                                             ws.data(), bytes, &kZero, d.y, y.data()));
        EXPECT_LE(relative_error(from_memory(y, p.n, p.k, p.q(), false), ref),
                  declared_bound(CONVCORE_PASS_FORWARD, algo, false));
    }
    convcore::Plan plan(handle, CONVCORE_PASS_FORWARD, d.x, d.w, d.conv, d.y, CONVCORE_PLAN_SELECT_HEURISTIC);
    std::vector<char> ws(plan.workspace_size());
    std::vector<float> y(size_t(p.n * p.k * p.q()));
    plan.execute(&kOne, data.xm.data(), data.wm.data(), &kZero, y.data(), ws.data(), ws.size());
    EXPECT_LE(relative_error(from_memory(y, p.n, p.k, p.q(), false), ref),
              declared_bound(CONVCORE_PASS_FORWARD, plan.algorithm(), false));
}

// Backward data and backward filter of the 1-D problems: every algorithm within its bound or
// NOT_SUPPORTED; DIRECT, IM2COL_GEMM and IMPLICIT_GEMM must run every case.
TEST(NdConvolution1d, BackwardAgainstReference) {
    convcore::Handle handle;
    std::mt19937 rng(4321);
    for (const Case1d& p : kCases)
        for (bool nwc : {false, true}) {
            SCOPED_TRACE(case_name(p, nwc));
            const Descs1d d(p, nwc);
            const Data1d data(p, nwc, rng);
            std::vector<double> dx_ref(data.x.size(), 0.0), dw_ref(data.w.size(), 0.0);
            for_each_term_1d(p, [&](int64_t yi, int64_t xi, int64_t wi) {
                dx_ref[xi] += data.dy[yi] * data.w[wi];
                dw_ref[wi] += data.dy[yi] * data.x[xi];
            });
            for (int a = 0; a < CONVCORE_BWD_DATA_ALGO_COUNT; ++a) {
                const auto algo = convcoreConvolutionBwdDataAlgo_t(a);
                SCOPED_TRACE(std::string("backward data ") + convcoreGetBwdDataAlgoName(algo));
                size_t bytes = 0;
                const convcoreStatus_t st =
                    convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x, algo, &bytes);
                if (st == CONVCORE_STATUS_NOT_SUPPORTED && a > CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM) continue;
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                std::vector<char> ws(bytes);
                std::vector<float> dx(data.x.size(), 7.0f);
                ASSERT_OK(convcoreConvolutionBackwardData(handle, &kOne, d.w, data.wm.data(), d.y, data.dym.data(),
                                                          d.conv, algo, ws.data(), bytes, &kZero, d.x, dx.data()));
                EXPECT_LE(relative_error(from_memory(dx, p.n, p.c, p.w, nwc), dx_ref),
                          declared_bound(CONVCORE_PASS_BACKWARD_DATA, a, false));
            }
            for (int a = 0; a < CONVCORE_BWD_FILTER_ALGO_COUNT; ++a) {
                const auto algo = convcoreConvolutionBwdFilterAlgo_t(a);
                SCOPED_TRACE(std::string("backward filter ") + convcoreGetBwdFilterAlgoName(algo));
                size_t bytes = 0;
                const convcoreStatus_t st =
                    convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, d.x, d.y, d.conv, d.w, algo, &bytes);
                if (st == CONVCORE_STATUS_NOT_SUPPORTED && a > CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM) continue;
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                std::vector<char> ws(bytes);
                std::vector<float> dw(data.w.size(), 7.0f);
                ASSERT_OK(convcoreConvolutionBackwardFilter(handle, &kOne, d.x, data.xm.data(), d.y, data.dym.data(),
                                                            d.conv, algo, ws.data(), bytes, &kZero, d.w, dw.data()));
                EXPECT_LE(relative_error(from_memory(dw, p.k, p.cg(), p.s, nwc), dw_ref),
                          declared_bound(CONVCORE_PASS_BACKWARD_FILTER, a, false));
            }
        }
}

// The fused 1x1 -> depthwise pair on 1-D descriptors (its inner 1x1 convolution takes x's
// dimension count), against the two 1-D convolutions of the reference.
TEST(NdConvolution1d, PointwiseDepthwisePair) {
    convcore::Handle handle;
    std::mt19937 rng(7);
    const int64_t n = 2, c = 5, w = 19, k = 8;
    const Case1d pw{n, c, w, k, 1, 0, 1, 1, 1, false}, dw{n, k, w, k, 3, 1, 2, 1, k, false};
    convcore::TensorDesc x, y;
    convcore::FilterDesc wpw, wdw;
    convcore::ConvDesc conv;
    const int64_t xd[3] = {n, c, w}, yd[3] = {n, k, dw.q()}, pwd[3] = {k, c, 1}, dwd[3] = {k, 1, 3};
    const int64_t pad[1] = {1}, stride[1] = {2}, dil[1] = {1};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(x, NHWC, F32, 3, xd));
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(y, NHWC, F32, 3, yd));
    ASSERT_OK(convcoreSetFilterNdDescriptor(wpw, F32, NCHW, 3, pwd));
    ASSERT_OK(convcoreSetFilterNdDescriptor(wdw, F32, NCHW, 3, dwd));
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv, 1, pad, stride, dil, CONVCORE_CROSS_CORRELATION));
    conv.set_groups(k);
    convcorePointwiseDepthwisePlan_t plan = nullptr;
    ASSERT_OK(convcoreCreatePointwiseDepthwisePlan(handle, x, wpw, wdw, conv, y, &plan));

    const auto xs = rounded<float>(random_vector(size_t(n * c * w), rng));
    const auto ws1 = rounded<float>(random_vector(size_t(k * c), rng));
    const auto ws2 = rounded<float>(random_vector(size_t(k * 3), rng));
    std::vector<double> mid(size_t(n * k * w), 0.0), ref(size_t(n * k * dw.q()), 0.0);
    for_each_term_1d(pw, [&](int64_t yi, int64_t xi, int64_t wi) { mid[yi] += xs[xi] * ws1[wi]; });
    for_each_term_1d(dw, [&](int64_t yi, int64_t xi, int64_t wi) { ref[yi] += mid[xi] * ws2[wi]; });
    const std::vector<float> xm = to_memory(xs, n, c, w, true), w1(ws1.begin(), ws1.end()), w2(ws2.begin(), ws2.end());
    std::vector<float> out(ref.size());
    EXPECT_OK(convcoreExecutePointwiseDepthwisePlan(plan, xm.data(), w1.data(), nullptr, CONVCORE_ACTIVATION_IDENTITY,
                                                    w2.data(), nullptr, CONVCORE_ACTIVATION_IDENTITY, out.data()));
    EXPECT_LE(relative_error(from_memory(out, n, k, dw.q(), true), ref), 1e-5);
    convcoreDestroyPointwiseDepthwisePlan(plan);
    // A 2-D depthwise filter with 1-D tensors is the caller's mistake, named.
    convcore::FilterDesc wdw2(F32, k, 1, 1, 3);
    EXPECT_STATUS(convcoreCreatePointwiseDepthwisePlan(handle, x, wpw, wdw2, conv, y, &plan), CONVCORE_STATUS_BAD_PARAM,
                  "w: 2-D filter (nbDims 4) does not match x: 1-D tensor (nbDims 3)");
}
