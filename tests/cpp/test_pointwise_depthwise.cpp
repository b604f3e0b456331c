// The fused 1x1 -> depthwise pair (convcoreCreatePointwiseDepthwisePlan, cpu/pointwise_depthwise.cpp)
// against the float64 reference of the two convolutions one after the other, each with its bias
// and activation: odd sizes, channel counts on and off the vector widths (the 1x1 on its panel
// path and below it), depthwise kernels 1 to 5 with stride, padding and dilation, bands that
// split the rows in every way (1, 2 and 3 threads, images too small and too large for one band),
// float32 and float64; prepared filters and per-call ones; and the arguments it refuses.
// CMake re-runs it with CONVCORE_CPU_ISA=avx2 and baseline.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.hpp"
#include "epilogue_reference.hpp"
#include "reference.hpp"

using convcore_test::Shape;

namespace {

struct Pair {
    int64_t n, c, h, w, k;        // x: N x C x H x W; the 1x1 makes K channels
    int64_t r, s, stride, pad, dil;  // the depthwise convolution
    convcoreActivationMode_t act_pw, act_dw;
    bool bias_pw, bias_dw, flip;
};

std::string name_of(const Pair& c) {
    return "n" + std::to_string(c.n) + "c" + std::to_string(c.c) + "h" + std::to_string(c.h) + "w" +
           std::to_string(c.w) + "k" + std::to_string(c.k) + " dw" + std::to_string(c.r) + "x" +
           std::to_string(c.s) + "s" + std::to_string(c.stride) + "p" + std::to_string(c.pad) + "d" +
           std::to_string(c.dil) + " " + act_name(c.act_pw) + "/" + act_name(c.act_dw) +
           (c.bias_pw ? " bias_pw" : "") + (c.bias_dw ? " bias_dw" : "") + (c.flip ? " flip" : "");
}

Shape pw_shape(const Pair& c) { return Shape{c.n, c.c, c.h, c.w, c.k, 1, 1, 0, 0, 1, 1, 1, 1, 1, c.flip}; }
Shape dw_shape(const Pair& c) {
    return Shape{c.n, c.k, c.h, c.w, c.k, c.r, c.s, c.pad, c.pad, c.stride, c.stride, c.dil, c.dil, c.k, c.flip};
}

// act(v + bias[k]) over an NCHW tensor.
void bias_act(std::vector<double>& v, const Shape& s, const std::vector<double>& bias, convcoreActivationMode_t act) {
    const int64_t plane = s.out_h() * s.out_w();
    for (size_t i = 0; i < v.size(); ++i) {
        const int64_t k = int64_t(i) / plane % s.k;
        v[i] = act_ref(v[i] + (bias.empty() ? 0.0 : bias[k]), act);
    }
}

// The packed NHWC index of element i of a packed N x C x H x W (NCHW) tensor.
size_t nhwc_index(size_t i, int64_t c, int64_t h, int64_t w) {
    const int64_t iw = int64_t(i) % w, ih = int64_t(i) / w % h, ic = int64_t(i) / (w * h) % c, in = int64_t(i) / (w * h * c);
    return size_t(((in * h + ih) * w + iw) * c + ic);
}
template <typename T>
std::vector<T> to_nhwc(const std::vector<double>& v, int64_t c, int64_t h, int64_t w) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[nhwc_index(i, c, h, w)] = T(v[i]);
    return out;
}
template <typename T>
std::vector<double> from_nhwc(const std::vector<T>& v, int64_t c, int64_t h, int64_t w) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = double(v[nhwc_index(i, c, h, w)]);
    return out;
}

template <typename T>
convcoreDataType_t dtype() {
    return sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
}

// The plan's descriptors for a case.
struct Descs {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w_pw, w_dw;
    convcore::ConvDesc conv;
    Descs(const Pair& c, convcoreDataType_t dt)
        : x(CONVCORE_TENSOR_NHWC, dt, c.n, c.c, c.h, c.w),
          y(CONVCORE_TENSOR_NHWC, dt, c.n, c.k, dw_shape(c).out_h(), dw_shape(c).out_w()),
          w_pw(dt, c.k, c.c, 1, 1),
          w_dw(dt, c.k, 1, c.r, c.s) {
        conv.set(c.pad, c.pad, c.stride, c.stride, c.dil, c.dil, c.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
        conv.set_groups(c.k);
    }
};

template <typename T>
void check_pair(const Pair& c, int threads, uint32_t seed) {
    SCOPED_TRACE(name_of(c) + (sizeof(T) == 8 ? " f64" : " f32") + " threads " + std::to_string(threads));
    std::mt19937 rng(seed);
    const Shape ps = pw_shape(c), ds = dw_shape(c);
    const auto x = convcore_test::rounded<T>(convcore_test::random_vector(size_t(c.n * c.c * c.h * c.w), rng));
    const auto w_pw = convcore_test::rounded<T>(convcore_test::random_vector(size_t(c.k * c.c), rng));
    const auto w_dw = convcore_test::rounded<T>(convcore_test::random_vector(size_t(c.k * c.r * c.s), rng));
    const auto b_pw = c.bias_pw ? convcore_test::rounded<T>(convcore_test::random_vector(size_t(c.k), rng)) : std::vector<double>{};
    const auto b_dw = c.bias_dw ? convcore_test::rounded<T>(convcore_test::random_vector(size_t(c.k), rng)) : std::vector<double>{};
    auto mid = convcore_test::reference_conv(ps, x, w_pw);
    bias_act(mid, ps, b_pw, c.act_pw);
    auto ref = convcore_test::reference_conv(ds, mid, w_dw);
    bias_act(ref, ds, b_dw, c.act_dw);

    const std::vector<T> xt = to_nhwc<T>(x, c.c, c.h, c.w);
    std::vector<T> wpt(w_pw.begin(), w_pw.end()), wdt(w_dw.begin(), w_dw.end());
    std::vector<T> bpt(b_pw.begin(), b_pw.end()), bdt(b_dw.begin(), b_dw.end());
    const int64_t P = ds.out_h(), Q = ds.out_w();
    std::vector<T> y(size_t(c.n * c.k * P * Q), T(-7));

    convcore::Handle handle;
    ASSERT_EQ(convcoreSetNumThreads(handle, threads), CONVCORE_STATUS_SUCCESS);
    Descs d(c, dtype<T>());
    convcorePointwiseDepthwisePlan_t plan = nullptr;
    ASSERT_EQ(convcoreCreatePointwiseDepthwisePlan(handle, d.x, d.w_pw, d.w_dw, d.conv,
                                                   d.y, &plan),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    const double bound = sizeof(T) == 8 ? 1e-13 : 2e-6;
    const auto run = [&] {
        std::fill(y.begin(), y.end(), T(-7));
        ASSERT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, xt.data(), wpt.data(), c.bias_pw ? bpt.data() : nullptr,
                                                        c.act_pw, wdt.data(), c.bias_dw ? bdt.data() : nullptr,
                                                        c.act_dw, y.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
    };
    run();  // filters prepared per call
    EXPECT_LT(convcore_test::relative_error(from_nhwc(y, c.k, P, Q), ref), bound) << "per call";
    ASSERT_EQ(convcorePreparePointwiseDepthwisePlanFilters(plan, wpt.data(), wdt.data()), CONVCORE_STATUS_SUCCESS);
    run();
    EXPECT_LT(convcore_test::relative_error(from_nhwc(y, c.k, P, Q), ref), bound) << "prepared";
    EXPECT_EQ(convcoreDestroyPointwiseDepthwisePlan(plan), CONVCORE_STATUS_SUCCESS);
}

constexpr auto kId = CONVCORE_ACTIVATION_IDENTITY, kRelu = CONVCORE_ACTIVATION_RELU,
               kRelu6 = CONVCORE_ACTIVATION_RELU6, kSilu = CONVCORE_ACTIVATION_SILU,
               kGelu = CONVCORE_ACTIVATION_GELU, kGeluTanh = CONVCORE_ACTIVATION_GELU_TANH;

std::vector<Pair> cases() {
    return {
        // MobileNetV2-like: 3x3 stride 1 and 2, ReLU6 after both, biases (folded batch norms)
        {1, 16, 23, 19, 96, 3, 3, 1, 1, 1, kRelu6, kRelu6, true, true, false},
        {1, 24, 20, 20, 144, 3, 3, 2, 1, 1, kRelu6, kRelu6, true, true, false},
        {2, 8, 9, 11, 40, 3, 3, 2, 1, 1, kRelu6, kRelu6, true, true, false},
        // EfficientNet-like: 5x5, SiLU
        {1, 17, 15, 13, 72, 5, 5, 1, 2, 1, kSilu, kSilu, true, true, false},
        {2, 6, 12, 10, 33, 5, 5, 2, 2, 1, kSilu, kId, false, true, false},
        // few output channels (below a panel), odd counts, no bias, other activations
        {1, 5, 7, 9, 8, 3, 3, 1, 1, 1, kRelu, kId, false, false, false},
        {3, 3, 6, 5, 13, 3, 3, 1, 0, 1, kId, kRelu, true, false, true},
        // dilation, padding larger than the kernel's reach, rectangular and 1-row kernels
        {1, 9, 17, 14, 48, 3, 3, 1, 2, 2, kRelu, kRelu6, true, true, false},
        {1, 4, 5, 6, 34, 3, 3, 1, 3, 1, kId, kId, true, true, false},
        {1, 10, 11, 21, 64, 1, 1, 2, 0, 1, kRelu6, kSilu, true, true, false},
        {1, 12, 8, 8, 32, 3, 5, 1, 1, 1, kSilu, kRelu, false, true, true},
        {1, 7, 9, 10, 40, 3, 3, 1, 1, 1, kGelu, kGeluTanh, true, true, false},
        {2, 5, 6, 7, 19, 3, 3, 2, 1, 1, kGeluTanh, kGelu, false, true, true},
        // large images: several bands per thread, rows carried from band to band
        {1, 16, 112, 112, 96, 3, 3, 2, 1, 1, kRelu6, kRelu6, true, true, false},
        {1, 24, 75, 64, 144, 3, 3, 1, 1, 1, kRelu6, kRelu6, true, true, false},
    };
}

TEST(PointwiseDepthwise, MatchesTheTwoConvolutionsFloat) {
    uint32_t seed = 1;
    for (const Pair& c : cases())
        for (int threads : {1, 2, 3}) check_pair<float>(c, threads, seed++);
}

TEST(PointwiseDepthwise, MatchesTheTwoConvolutionsDouble) {
    uint32_t seed = 100;
    for (const Pair& c : cases()) check_pair<double>(c, 2, seed++);
}

// Prepared filters are used only with the pointers they were made from: another pointer, or the
// same one after Prepare again, gives the result of the new contents.
TEST(PointwiseDepthwise, PreparedFiltersFollowThePointersAndPrepare) {
    const Pair c{1, 8, 10, 10, 32, 3, 3, 1, 1, 1, kId, kId, false, false, false};
    convcore::Handle handle;
    Descs d(c, CONVCORE_DATA_FLOAT);
    convcorePointwiseDepthwisePlan_t plan = nullptr;
    ASSERT_EQ(convcoreCreatePointwiseDepthwisePlan(handle, d.x, d.w_pw, d.w_dw, d.conv,
                                                   d.y, &plan),
              CONVCORE_STATUS_SUCCESS);
    std::vector<float> x(size_t(c.c * c.h * c.w), 1.0f), wp(size_t(c.k * c.c), 1.0f), wd(size_t(c.k * 9), 1.0f);
    std::vector<float> wd2(wd.size(), 2.0f), y(size_t(c.k * c.h * c.w));
    const auto center = [&] { return y[size_t((5 * c.w + 5) * c.k)]; };  // an interior output: 9 taps of C
    ASSERT_EQ(convcorePreparePointwiseDepthwisePlanFilters(plan, wp.data(), wd.data()), CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, x.data(), wp.data(), nullptr, kId, wd.data(), nullptr, kId,
                                                    y.data()),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(center(), 72.0f);
    ASSERT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, x.data(), wp.data(), nullptr, kId, wd2.data(), nullptr, kId,
                                                    y.data()),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(center(), 144.0f) << "another pointer: its own contents";
    std::fill(wd.begin(), wd.end(), 3.0f);
    ASSERT_EQ(convcorePreparePointwiseDepthwisePlanFilters(plan, wp.data(), wd.data()), CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, x.data(), wp.data(), nullptr, kId, wd.data(), nullptr, kId,
                                                    y.data()),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(center(), 216.0f) << "prepared again after the change";
    EXPECT_EQ(convcoreDestroyPointwiseDepthwisePlan(plan), CONVCORE_STATUS_SUCCESS);
}

// What the pair refuses, each with its status and the argument named.
TEST(PointwiseDepthwise, RefusesWhatItCannotRun) {
    convcore::Handle handle;
    const Pair c{1, 8, 10, 10, 32, 3, 3, 1, 1, 1, kId, kId, false, false, false};
    convcorePointwiseDepthwisePlan_t plan = nullptr;
    const auto create = [&](const Descs& d) {
        return convcoreCreatePointwiseDepthwisePlan(handle, d.x, d.w_pw, d.w_dw, d.conv,
                                                    d.y, &plan);
    };
    {
        Descs d(c, CONVCORE_DATA_FLOAT);
        d.x.set(CONVCORE_DATA_FLOAT, 1, 8, 10, 10);  // NCHW
        EXPECT_EQ(create(d), CONVCORE_STATUS_NOT_SUPPORTED);
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find("x packed NHWC"), std::string::npos)
            << convcoreGetLastErrorString();
        EXPECT_EQ(plan, nullptr);
    }
    {
        Descs d(c, CONVCORE_DATA_FLOAT);
        d.w_pw.set(CONVCORE_DATA_FLOAT, 32, 8, 3, 3);
        EXPECT_EQ(create(d), CONVCORE_STATUS_BAD_PARAM);
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find("wPwDesc"), std::string::npos);
    }
    {
        Descs d(c, CONVCORE_DATA_FLOAT);
        d.w_dw.set(CONVCORE_DATA_FLOAT, 32, 2, 3, 3);  // not depthwise
        d.conv.set_groups(16);
        EXPECT_NE(create(d), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(plan, nullptr);
    }
    {
        Descs d(c, CONVCORE_DATA_FLOAT);
        d.y.set(CONVCORE_DATA_FLOAT, 1, 32, 10, 10);  // NCHW y
        EXPECT_EQ(create(d), CONVCORE_STATUS_NOT_SUPPORTED);
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find("y packed NHWC"), std::string::npos);
    }
    Descs d(c, CONVCORE_DATA_FLOAT);
    ASSERT_EQ(create(d), CONVCORE_STATUS_SUCCESS);
    std::vector<float> x(size_t(8 * 100)), wp(32 * 8), wd(32 * 9), y(32 * 100);
    EXPECT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, x.data(), wp.data(), nullptr, convcoreActivationMode_t(9),
                                                    wd.data(), nullptr, kId, y.data()),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("actPw"), std::string::npos);
    EXPECT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, y.data(), wp.data(), nullptr, kId, wd.data(), nullptr, kId,
                                                    y.data()),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("y overlaps x"), std::string::npos);
    EXPECT_EQ(convcoreExecutePointwiseDepthwisePlan(plan, x.data(), nullptr, nullptr, kId, wd.data(), nullptr, kId,
                                                    y.data()),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreDestroyPointwiseDepthwisePlan(plan), CONVCORE_STATUS_SUCCESS);
}

}  // namespace
