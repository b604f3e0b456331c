// Tensor formats and filter layouts through a plan on any device: x, y (dx, dy) in NHWC and w
// (dw) in KRSC, alone and mixed with NCHW / KCRS, every applicable algorithm of every pass,
// against the float64 reference (the bound the algorithm list declares), with alpha/beta.
// Used by test_layouts (CPU) and test_cuda_layouts (CUDA).
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

namespace convcore_test {

#define CC_LAYOUT_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << convcoreGetLastErrorString()

// A copy of a host vector in the handle's memory (convcoreMalloc: device memory on a CUDA handle).
struct DeviceBuffer {
    convcoreHandle_t h;
    void* ptr = nullptr;
    size_t bytes;
    DeviceBuffer(convcoreHandle_t handle, const std::vector<float>& v) : h(handle), bytes(v.size() * sizeof(float)) {
        EXPECT_EQ(convcoreMalloc(h, &ptr, bytes), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreMemcpyToDevice(h, ptr, v.data(), bytes), CONVCORE_STATUS_SUCCESS);
    }
    ~DeviceBuffer() { convcoreFree(h, ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    std::vector<float> host() const {
        std::vector<float> v(bytes / sizeof(float));
        EXPECT_EQ(convcoreMemcpyToHost(h, v.data(), ptr, bytes), CONVCORE_STATUS_SUCCESS);
        return v;
    }
};

// Where element (a, b, c, d) of a packed A x B x C x D tensor lives in the other layout: NHWC
// (KRSC for filters) puts the second axis last.
inline size_t at(bool channels_last, const int64_t dims[4], size_t i) {
    const int64_t d3 = int64_t(i) % dims[3], d2 = int64_t(i) / dims[3] % dims[2];
    const int64_t d1 = int64_t(i) / (dims[3] * dims[2]) % dims[1], d0 = int64_t(i) / (dims[3] * dims[2] * dims[1]);
    if (!channels_last) return i;
    return size_t(((d0 * dims[2] + d2) * dims[3] + d3) * dims[1] + d1);
}

inline std::vector<float> to_layout(const std::vector<double>& packed, bool channels_last, const int64_t dims[4]) {
    std::vector<float> out(packed.size());
    for (size_t i = 0; i < packed.size(); ++i) out[at(channels_last, dims, i)] = float(packed[i]);
    return out;
}
inline std::vector<double> from_layout(const std::vector<float>& v, bool channels_last, const int64_t dims[4]) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[at(channels_last, dims, i)];
    return out;
}

inline int algo_count(convcoreConvolutionPass_t pass) {
    if (pass == CONVCORE_PASS_FORWARD) return CONVCORE_FWD_ALGO_COUNT;
    if (pass == CONVCORE_PASS_BACKWARD_DATA) return CONVCORE_BWD_DATA_ALGO_COUNT;
    return CONVCORE_BWD_FILTER_ALGO_COUNT;
}

inline convcoreTensorFormat_t fmt(bool channels_last) { return channels_last ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW; }

struct Layouts {
    bool x_nhwc, y_nhwc, w_krsc;
};

// out = 2 * pass(in0, in1) - 0.5 * out for every applicable algorithm of the pass, in the given
// layouts, against the reference.
inline void check_pass(convcoreHandle_t h, convcoreConvolutionPass_t pass, const Shape& s, const Layouts& l, uint32_t seed) {
    convcoreTensorDescriptor_t x, y;
    convcoreFilterDescriptor_t w;
    CC_LAYOUT_ASSERT_OK(convcoreCreateTensorDescriptor(&x));
    CC_LAYOUT_ASSERT_OK(convcoreCreateTensorDescriptor(&y));
    CC_LAYOUT_ASSERT_OK(convcoreCreateFilterDescriptor(&w));
    const int64_t P = s.out_h(), Q = s.out_w(), cg = s.c / s.groups;
    const int64_t xd[4] = {s.n, s.c, s.h, s.w}, yd[4] = {s.n, s.k, P, Q}, wd[4] = {s.k, cg, s.r, s.s};
    CC_LAYOUT_ASSERT_OK(convcoreSetTensor4dDescriptorWithFormat(x, fmt(l.x_nhwc), CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w));
    CC_LAYOUT_ASSERT_OK(convcoreSetTensor4dDescriptorWithFormat(y, fmt(l.y_nhwc), CONVCORE_DATA_FLOAT, s.n, s.k, P, Q));
    CC_LAYOUT_ASSERT_OK(convcoreSetFilter4dDescriptorWithFormat(w, fmt(l.w_krsc), CONVCORE_DATA_FLOAT, s.k, cg, s.r, s.s));
    convcore::ConvDesc conv(s.pad_h, s.stride_h, s.dil_h, s.groups, s.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
    std::mt19937 rng(seed);
    std::vector<double> xr = random_vector(size_t(s.n * s.c * s.h * s.w), rng);
    std::vector<double> wr = random_vector(size_t(s.k * cg * s.r * s.s), rng);
    std::vector<double> yr = random_vector(size_t(s.n * s.k * P * Q), rng);
    for (auto* v : {&xr, &wr, &yr})
        for (double& e : *v) e = float(e);
    const std::vector<float> xv = to_layout(xr, l.x_nhwc, xd), wv = to_layout(wr, l.w_krsc, wd),
                             yv = to_layout(yr, l.y_nhwc, yd);
    const DeviceBuffer xb(h, xv), wb(h, wv), yb(h, yv);
    const void* in0 = pass == CONVCORE_PASS_BACKWARD_DATA ? yb.ptr : xb.ptr;
    const void* in1 = pass == CONVCORE_PASS_BACKWARD_FILTER ? yb.ptr : wb.ptr;
    std::vector<double> expected, previous;
    const int64_t* od = yd;
    bool out_last = l.y_nhwc;
    if (pass == CONVCORE_PASS_FORWARD) {
        expected = reference_conv(s, xr, wr);
    } else if (pass == CONVCORE_PASS_BACKWARD_DATA) {
        expected = reference_bwd_data(s, wr, yr);
        od = xd, out_last = l.x_nhwc;
    } else {
        expected = reference_bwd_filter(s, xr, yr);
        od = wd, out_last = l.w_krsc;
    }
    previous = random_vector(expected.size(), rng);
    for (double& e : previous) e = float(e);
    std::vector<double> want(expected.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = 2.0 * expected[i] - 0.5 * previous[i];
    int ran = 0;
    for (int algo = 0; algo < algo_count(pass); ++algo) {
        convcoreConvolutionPlan_t plan = nullptr;
        const convcoreStatus_t st = convcoreCreateConvolutionPlan(h, pass, x, w, conv, y, algo, &plan);
        if (st == CONVCORE_STATUS_NOT_SUPPORTED) continue;
        CC_LAYOUT_ASSERT_OK(st);
        size_t bytes = 0;
        CC_LAYOUT_ASSERT_OK(convcoreGetConvolutionPlanWorkspaceSize(plan, &bytes));
        const DeviceBuffer ws(h, std::vector<float>(bytes / sizeof(float) + 1));
        DeviceBuffer outb(h, to_layout(previous, out_last, od));
        const float alpha = 2.0f, beta = -0.5f;
        CC_LAYOUT_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &alpha, in0, in1, &beta, outb.ptr, ws.ptr, bytes));
        CC_LAYOUT_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
        const std::vector<float> out = outb.host();
        EXPECT_LE(relative_error(from_layout(out, out_last, od), want), declared_bound(pass, algo, false))
            << "pass " << int(pass) << " algo " << algo;
        ++ran;
    }
    EXPECT_GE(ran, 3) << "the classic algorithms apply to every problem";
    convcoreDestroyTensorDescriptor(x);
    convcoreDestroyTensorDescriptor(y);
    convcoreDestroyFilterDescriptor(w);
}

// Every pass on the handle's device, for twelve shapes (on the CPU nineteen: more for its NHWC
// GEMM's stem and packed-group paths) and four mixes of layouts.
inline void check_layouts(convcoreHandle_t h, convcoreConvolutionPass_t pass) {
    std::vector<Shape> shapes = {
        {2, 6, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // 3x3 stride 1: every family applies
        {1, 4, 11, 10, 6, 3, 3, 2, 2, 2, 2, 1, 1, 2, true},  // stride, groups, true convolution
        {2, 8, 7, 5, 6, 1, 1, 0, 0, 1, 1, 1, 1, 2, false},   // pointwise: x itself is the GEMM's matrix
        {1, 6, 9, 8, 10, 1, 1, 0, 0, 2, 2, 1, 1, 1, false},  // strided pointwise
        {1, 32, 9, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 4, false},  // 8 channels per group: 2 groups per vector
        {1, 16, 7, 9, 16, 3, 3, 1, 1, 2, 2, 1, 1, 4, true},   // 4 per group, stride, true convolution
        {1, 16, 6, 6, 16, 3, 3, 2, 2, 1, 1, 2, 2, 8, false},  // 2 per group, dilation
        {1, 12, 6, 7, 18, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},  // 4 in, 6 out per group: one group per vector
        {1, 24, 7, 6, 24, 3, 3, 1, 1, 1, 1, 1, 1, 6, false},  // 4 per group, 6 groups: a partial vector of them
        {1, 40, 5, 7, 40, 3, 3, 1, 1, 2, 2, 1, 1, 5, true},   // 8 per group, 5 groups
        {1, 16, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},   // output channels past two vectors
        {1, 80, 5, 6, 40, 3, 3, 2, 2, 1, 1, 2, 2, 1, false},  // one group, A rows past L1: NHWC copies them
    };
    convcoreDeviceType_t device = CONVCORE_DEVICE_CPU;
    int index = 0;
    CC_LAYOUT_ASSERT_OK(convcoreGetDevice(h, &device, &index));
    if (device == CONVCORE_DEVICE_CPU)  // the NHWC GEMM reads filter rows in place for few channels
        shapes.insert(shapes.end(), {
            {2, 3, 23, 21, 40, 7, 7, 3, 3, 2, 2, 1, 1, 1, false},  // a stem
            {1, 3, 9, 40, 40, 7, 7, 3, 3, 2, 2, 1, 1, 1, true},    // a wider one: blocks of one output row
            {1, 5, 9, 10, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},    // few channels, a partial panel
            // packed groups along rows wide enough for whole sliding blocks and the rest after them
            {1, 32, 5, 40, 32, 3, 3, 1, 1, 1, 1, 1, 1, 4, false},  // 8 per group
            {1, 32, 6, 41, 32, 3, 3, 1, 1, 2, 2, 1, 1, 4, true},   // 8 per group, stride 2, true convolution
            {1, 16, 5, 37, 16, 3, 3, 0, 0, 1, 1, 1, 1, 4, false},  // 4 per group, no padding
            {2, 16, 4, 35, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8, false},  // 2 per group, two images
        });
    const Layouts layouts[] = {{true, true, true}, {true, false, false}, {false, true, false}, {false, false, true}};
    uint32_t seed = 7;
    for (const Shape& s : shapes)
        for (const Layouts& l : layouts) {
            SCOPED_TRACE(std::string("x ") + (l.x_nhwc ? "NHWC" : "NCHW") + ", y " + (l.y_nhwc ? "NHWC" : "NCHW") +
                         ", w " + (l.w_krsc ? "KRSC" : "KCRS") + ", groups " + std::to_string(s.groups));
            check_pass(h, pass, s, l, seed++);
        }
}

}  // namespace convcore_test
