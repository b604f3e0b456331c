// The fused epilogue y = act(alpha1 * conv(x, w) + alpha2 * z + bias)
// (convcoreConvolutionBiasActivationForward, convcoreExecuteConvolutionPlanBiasActivation) on the
// CPU: every forward algorithm that runs the problem, every activation, with and without bias
// and z, z == y in place, NCHW and NHWC, float and double, against the float64 reference. DIRECT,
// and in NHWC Winograd's fused schedule, the NHWC GEMM (IMPLICIT_GEMM, POINTWISE) and DEPTHWISE,
// fuse the epilogue in their stores (the fused contract; for DEPTHWISE test_depthwise_epilogue.cpp
// checks it at the solver); the others get the core's pass after the convolution. Bad arguments
// are BAD_PARAM with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "cpu/epilogue_store.hpp"
#include "epilogue_reference.hpp"
#include "layout_check.hpp"  // at(): packed NCHW index -> NHWC storage index
#include "reference.hpp"

using namespace convcore_test;

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << convcoreGetLastErrorString()

enum class Residual { None, Separate, InPlace };  // z: absent, its own buffer, y itself

struct EpilogueCase {
    Shape shape;
    convcoreActivationMode_t act;
    bool bias;
    Residual z;
    bool nhwc;  // x and y (and z) NHWC
    bool f64;
};

std::string describe(const EpilogueCase& c) {
    return std::string(act_name(c.act)) + (c.bias ? " bias" : " no-bias") +
           (c.z == Residual::None ? " no-z" : c.z == Residual::Separate ? " z" : " z==y") + (c.nhwc ? " NHWC" : " NCHW") +
           (c.f64 ? " f64" : " f32");
}

// Runs `algo` on the case through a plan (plan = true) or the descriptor-style call; returns
// ||y - ref|| / ||ref||, or -1 when the algorithm cannot run the problem.
template <typename T>
double run_case(convcoreHandle_t h, int algo, const EpilogueCase& c, bool plan_api, uint32_t seed) {
    const Shape& s = c.shape;
    const convcoreDataType_t dt = c.f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    const convcoreTensorFormat_t fmt = c.nhwc ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW;
    const int64_t P = s.out_h(), Q = s.out_w();
    convcore::TensorDesc xd(fmt, dt, s.n, s.c, s.h, s.w), yd(fmt, dt, s.n, s.k, P, Q), zd(fmt, dt, s.n, s.k, P, Q);
    convcore::TensorDesc bd(dt, 1, s.k, 1, 1);
    convcore::FilterDesc wd(dt, s.k, s.c / s.groups, s.r, s.s);
    convcore::ConvDesc conv(0, 1, 1, s.groups);
    conv.set(s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.dil_h, s.dil_w,
             s.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
    size_t bytes = 0;
    const convcoreStatus_t st =
        convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, convcoreConvolutionFwdAlgo_t(algo), &bytes);
    if (st == CONVCORE_STATUS_NOT_SUPPORTED) return -1;
    EXPECT_EQ(st, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();

    std::mt19937 rng(seed);
    auto round = [](std::vector<double> v) {
        for (double& e : v) e = double(T(e));
        return v;
    };
    const std::vector<double> xr = round(random_vector(size_t(s.n * s.c * s.h * s.w), rng));
    const std::vector<double> wr = round(random_vector(size_t(s.k * (s.c / s.groups) * s.r * s.s), rng));
    std::vector<double> zr = round(random_vector(size_t(s.n * s.k * P * Q), rng));
    std::vector<double> br = round(random_vector(size_t(s.k), rng));
    for (double& b : br) b = double(T(3 * b));  // large enough to move values across ReLU6's bounds
    const int64_t xdims[4] = {s.n, s.c, s.h, s.w}, ydims[4] = {s.n, s.k, P, Q};
    std::vector<T> x(xr.size()), w(wr.begin(), wr.end()), y(zr.size()), z(zr.size()), b(br.begin(), br.end());
    for (size_t i = 0; i < xr.size(); ++i) x[at(c.nhwc, xdims, i)] = T(xr[i]);
    for (size_t i = 0; i < zr.size(); ++i) z[at(c.nhwc, ydims, i)] = T(zr[i]);
    // y is never read unless it is z: NaN would leak into the result.
    for (size_t i = 0; i < y.size(); ++i)
        y[i] = c.z == Residual::InPlace ? z[i] : std::numeric_limits<T>::quiet_NaN();

    const double alpha1 = 1.5, alpha2 = c.z == Residual::None ? 0.0 : -0.75;
    const std::vector<double> conv_ref = reference_conv(s, xr, wr);
    std::vector<double> ref(conv_ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
        const int64_t k = int64_t(i) / (P * Q) % s.k;
        ref[i] = act_ref(alpha1 * conv_ref[i] + alpha2 * zr[i] + (c.bias ? br[size_t(k)] : 0.0), c.act);
    }

    const T a1 = T(alpha1), a2 = T(alpha2);
    const void* zp = c.z == Residual::None ? nullptr : c.z == Residual::InPlace ? y.data() : z.data();
    const void* bp = c.bias ? b.data() : nullptr;
    std::vector<char> ws(bytes + 64);
    void* wsp = bytes ? ws.data() : nullptr;
    convcoreStatus_t run;
    if (plan_api) {
        convcoreConvolutionPlan_t plan = nullptr;
        EXPECT_EQ(convcoreCreateConvolutionPlan(h, CONVCORE_PASS_FORWARD, xd, wd, conv, yd, algo, &plan),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        size_t plan_bytes = 0;
        EXPECT_EQ(convcoreGetConvolutionPlanWorkspaceSize(plan, &plan_bytes), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(plan_bytes, bytes);
        run = convcoreExecuteConvolutionPlanBiasActivation(plan, &a1, x.data(), w.data(), &a2, zp, bp, c.act, y.data(),
                                                           wsp, bytes);
        convcoreDestroyConvolutionPlan(plan);
    } else {
        run = convcoreConvolutionBiasActivationForward(h, &a1, xd, x.data(), wd, w.data(), conv,
                                                       convcoreConvolutionFwdAlgo_t(algo), wsp, bytes, &a2, zd, zp, bd,
                                                       bp, c.act, yd, y.data());
    }
    EXPECT_EQ(run, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    if (run != CONVCORE_STATUS_SUCCESS) return INFINITY;
    std::vector<double> got(y.size());
    for (size_t i = 0; i < got.size(); ++i) got[i] = double(y[at(c.nhwc, ydims, i)]);
    return relative_error(got, ref);
}

const convcoreActivationMode_t kActivations[] = {CONVCORE_ACTIVATION_IDENTITY, CONVCORE_ACTIVATION_RELU,
                                                 CONVCORE_ACTIVATION_RELU6,    CONVCORE_ACTIVATION_SILU,
                                                 CONVCORE_ACTIVATION_GELU,     CONVCORE_ACTIVATION_GELU_TANH};

// Every forward algorithm that runs the shape, through the plan and the descriptor-style call.
// `only` (if not empty): those algorithms alone, in NHWC alone unless `both_layouts`.
void check_all_algorithms(const Shape& shape, uint32_t seed, int min_algos = 3, const std::vector<int>& only = {},
                          bool both_layouts = false) {
    convcore::Handle h;
    const std::vector<bool> layouts =
        only.empty() || both_layouts ? std::vector<bool>{false, true} : std::vector<bool>{true};
    for (const bool f64 : {false, true})
        for (const bool nhwc : layouts)
            for (const Residual z : {Residual::None, Residual::Separate, Residual::InPlace})
                for (const bool bias : {false, true})
                    for (const convcoreActivationMode_t act : kActivations) {
                        const EpilogueCase c{shape, act, bias, z, nhwc, f64};
                        int ran = 0;
                        for (int algo = 0; algo < CONVCORE_FWD_ALGO_COUNT; ++algo) {
                            if (!only.empty() && std::find(only.begin(), only.end(), algo) == only.end()) continue;
                            const bool plan_api = (algo + int(act)) % 2 == 0;  // both entry points, alternating
                            const double err = f64 ? run_case<double>(h, algo, c, plan_api, seed + uint32_t(algo))
                                                   : run_case<float>(h, algo, c, plan_api, seed + uint32_t(algo));
                            if (err < 0) continue;
                            ++ran;
                            // The activations are 1-Lipschitz (SiLU: 1.1); ReLU may halve ||ref||.
                            const double bound = 4 * declared_bound(CONVCORE_PASS_FORWARD, algo, f64);
                            EXPECT_LE(err, bound) << convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(algo)) << " "
                                                  << describe(c) << (plan_api ? " (plan)" : " (descriptors)");
                        }
                        EXPECT_GE(ran, min_algos) << describe(c);
                    }
}

TEST(Epilogue, Every3x3AlgorithmMatchesTheReference) {
    check_all_algorithms({2, 6, 9, 8, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, 7, 11);  // every 3x3 stride-1 family
    // Output channels over whole vectors and a partial one: the fused stores' vector path (NHWC
    // Winograd fuses the epilogue).
    check_all_algorithms({1, 20, 9, 10, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, 19, 11);
}

// The fused NHWC Winograd's 1-D tiles (1x3 and 3x1 filters) fuse the epilogue too, and so do
// NCHW tensors that run them through transposes (the bias and activation in the stores, a
// residual after the transpose back), at stride 1 and 2.
TEST(Epilogue, RowAndColumnWinogradMatchTheReference) {
    const std::vector<int> winograd = {CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3};
    check_all_algorithms({1, 20, 9, 10, 40, 3, 1, 0, 0, 1, 1, 1, 1, 1, false}, 43, 2, winograd, true);
    check_all_algorithms({2, 17, 5, 11, 21, 1, 3, 0, 0, 1, 1, 1, 1, 1, true}, 47, 2, winograd, true);
    check_all_algorithms({1, 24, 1, 29, 19, 1, 3, 0, 1, 1, 2, 1, 1, 1, false}, 53, 2, winograd, true);
}

TEST(Epilogue, StridedGroupedAndPointwiseMatchTheReference) {
    check_all_algorithms({1, 4, 11, 10, 6, 3, 3, 2, 2, 2, 2, 1, 1, 2, true}, 11);
    check_all_algorithms({2, 8, 7, 5, 6, 1, 1, 0, 0, 1, 1, 1, 1, 1, false}, 13, 4);  // POINTWISE too
    check_all_algorithms({1, 8, 6, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, false}, 17, 4);  // DEPTHWISE too
}

// The NHWC GEMM's store paths, each with the epilogue in its stores: packed groups of 2, 4 and 8
// channels (the grouped kernels; rows with at least 17 interior outputs, so that the sliding
// kernel's blocks of 16 pixels (AVX-512, float) and 11 (AVX2) run at stride 1 and 2, beside the
// pixel blocks), a stem on the panel path (row runs, rows past the last pixel into a sink), and
// a reduction long enough to run in chunks (the epilogue on the last; z == y read by the first),
// and POINTWISE's dot products (1x1 to at most 4 output channels).
// The NHWC GEMM runs IMPLICIT_GEMM and POINTWISE in channels-last (the other algorithms' fused
// stores are checked above). CMake re-runs this test with CONVCORE_CPU_ISA=avx2 and baseline.
TEST(Epilogue, NhwcGemmPathsMatchTheReference) {
    const std::vector<int> gemm = {CONVCORE_FWD_ALGO_IMPLICIT_GEMM, CONVCORE_FWD_ALGO_POINTWISE};
    check_all_algorithms({1, 32, 5, 21, 32, 3, 3, 1, 1, 1, 1, 1, 1, 16, false}, 23, 1, gemm);
    check_all_algorithms({1, 32, 5, 37, 32, 3, 3, 1, 1, 2, 2, 1, 1, 8, false}, 29, 1, gemm);
    check_all_algorithms({1, 64, 4, 20, 64, 3, 3, 1, 1, 1, 1, 1, 1, 8, false}, 31, 1, gemm);
    check_all_algorithms({1, 3, 17, 19, 20, 7, 7, 3, 3, 2, 2, 1, 1, 1, false}, 37, 1, gemm);
    check_all_algorithms({1, 600, 4, 5, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, 41, 1, gemm);
    check_all_algorithms({1, 40, 5, 19, 36, 1, 1, 0, 0, 1, 1, 1, 1, 1, false}, 43, 2, gemm);  // POINTWISE too
    // POINTWISE's dot products for at most 4 output channels, padded pixels included
    check_all_algorithms({2, 37, 5, 7, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}, 53, 2, gemm);
    check_all_algorithms({1, 20, 6, 5, 4, 1, 1, 0, 0, 2, 2, 1, 1, 1, false}, 59, 2, gemm);
}

// DEPTHWISE in NHWC applies the epilogue in its own stores: the sliding kernel (3, 5 and 7 taps,
// stride 1 and 2), the pixel blocks, the row ends, channels past the last whole vector (37 is
// none of the vector widths' multiples) and channel multipliers, through both entry points.
// CMake re-runs this test with CONVCORE_CPU_ISA=avx2 and baseline.
TEST(Epilogue, DepthwiseNhwcMatchesTheReference) {
    // n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, flip
    const Shape shapes[] = {
        {1, 37, 5, 41, 37, 3, 3, 1, 1, 1, 1, 1, 1, 37, false},  // 3 taps: whole sliding blocks of 16 pixels
        {2, 37, 6, 35, 37, 3, 3, 1, 1, 2, 2, 1, 1, 37, true},   // stride 2, true convolution
        {1, 21, 5, 30, 21, 5, 5, 2, 2, 2, 2, 1, 1, 21, false},  // 5 taps, stride 2
        {1, 19, 7, 33, 19, 7, 7, 3, 3, 1, 1, 1, 1, 19, false},  // 7 taps
        {1, 75, 5, 12, 75, 3, 3, 2, 2, 1, 1, 2, 2, 75, false},  // dilation 2: pixel blocks of 4, 2, 1 vectors
        {1, 5, 6, 7, 10, 3, 3, 1, 1, 2, 2, 1, 1, 5, false},     // multiplier 2
    };
    convcore::Handle h;
    uint32_t seed = 31;
    for (const Shape& shape : shapes)
        for (const bool f64 : {false, true})
            for (const Residual z : {Residual::None, Residual::Separate, Residual::InPlace})
                for (const bool bias : {false, true})
                    for (const convcoreActivationMode_t act : kActivations)
                        for (const bool plan_api : {false, true}) {
                            const EpilogueCase c{shape, act, bias, z, /*nhwc=*/true, f64};
                            const int algo = CONVCORE_FWD_ALGO_DEPTHWISE;
                            const double err = f64 ? run_case<double>(h, algo, c, plan_api, ++seed)
                                                   : run_case<float>(h, algo, c, plan_api, ++seed);
                            EXPECT_GE(err, 0) << "DEPTHWISE refused c=" << shape.c;
                            EXPECT_LE(err, 4 * declared_bound(CONVCORE_PASS_FORWARD, algo, f64))
                                << "DEPTHWISE c=" << shape.c << " " << shape.r << "x" << shape.s << " stride "
                                << shape.stride_w << " " << describe(c) << (plan_api ? " (plan)" : " (descriptors)");
                        }
}

// A larger output runs the epilogue's parallel loops (the small cases above run on one thread).
TEST(Epilogue, LargeOutputUsesEveryThread) {
    convcore::Handle h;
    const Shape s{2, 8, 40, 40, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    for (const bool nhwc : {false, true})
        for (const Residual z : {Residual::Separate, Residual::InPlace}) {
            const EpilogueCase c{s, CONVCORE_ACTIVATION_RELU, true, z, nhwc, false};
            const double err = run_case<float>(h, CONVCORE_FWD_ALGO_IM2COL_GEMM, c, true, 5);
            EXPECT_LE(err, 4 * declared_bound(CONVCORE_PASS_FORWARD, CONVCORE_FWD_ALGO_IM2COL_GEMM, false)) << describe(c);
        }
}

// The CPU kernels' activations computed from exp (epilogue_store::exp_activation_span: exp by
// range reduction and a polynomial, GELU's erfc by tools/gen_erfc.py's polynomial, in vectors of
// 16, 32 and 64 bytes) against act_ref in double, element by element, within a relative bound of
// a few float ulps that grows with the exp's argument (its rounding in float: |v| for SiLU, 2|z|
// for GELU_TANH, u^2 = v^2 / 2 for GELU's tail v < 0, which also rounds u), or the smallest
// subnormal; 2e-36 absolutely where the argument is below -86 (exp's flush to 0 at -87, the
// polynomial's part of GELU's argument ~ -0.6); exact at +infinity, NaN for NaN and -infinity
// (as -inf * 0).
// Spans of every length up to 3 vectors: whole vectors and the tail.
template <int VB>
void check_exp_activation_span(convcoreActivationMode_t act) {
    std::vector<float> values = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, -1e-6f, 0.5f, -0.5f, 1.0f, -1.0f,
                                 10.0f, -10.0f, 20.0f, -20.0f, 86.9f, -86.9f, 87.1f, -87.1f, 88.7f, -88.7f,
                                 100.0f, -100.0f, 3e38f, -3e38f, std::numeric_limits<float>::denorm_min(),
                                 -13.0f, -13.2f, -13.5f, -5.0f, -3.0f, 3.0f, 5.0f};
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> wide(-90.0f, 90.0f), near(-4.0f, 4.0f), tail(-14.0f, 0.0f);
    for (int i = 0; i < 6000; ++i) values.push_back(i % 3 == 0 ? wide(rng) : i % 3 == 1 ? near(rng) : tail(rng));
    std::vector<float> y = values;
    convcore::cpu::epilogue_store::exp_activation_span<float, VB>(y.data(), int64_t(y.size()), act);
    double worst = 0;  // the largest error in units of the relative bound's first term
    for (size_t i = 0; i < values.size(); ++i) {
        const double v = values[i], want = act_ref(v, act);
        // the exp's argument, whose rounding sets the error of the result's tail
        const double arg = act == CONVCORE_ACTIVATION_SILU ? -std::fabs(v)
                           : act == CONVCORE_ACTIVATION_GELU
                               ? (v < 0 ? -v * v / 2 : 0.0)
                               : -2 * std::fabs(0.7978845608028654 * (v + 0.044715 * v * v * v));
        const double relative = (6 + (act == CONVCORE_ACTIVATION_SILU ? 2 : 4) * std::fabs(arg)) * 0x1p-24;
        const double bound = arg > -86.0 ? std::max(relative * std::fabs(want), 0x1p-149) : 2e-36;
        const double err = std::fabs(double(y[i]) - want);
        if (arg > -86.0 && std::fabs(want) > 1e-30) worst = std::max(worst, err / (0x1p-24 * std::fabs(want)));
        EXPECT_LE(err, bound) << act_name(act) << "(" << v << ") = " << y[i] << ", want " << want << " ("
                              << VB << "-byte vectors)";
    }
    if (VB == 64) std::printf("%s: worst error %.1f float ulps (relative)\n", act_name(act), worst);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t n = 1; n <= 3 * VB / 4; ++n) {  // every tail length: the same values wherever they sit
        std::vector<float> span(size_t(n), inf);
        span[size_t(n - 1)] = -inf;
        if (n > 2) span[0] = nan;
        convcore::cpu::epilogue_store::exp_activation_span<float, VB>(span.data(), n, act);
        EXPECT_TRUE(std::isnan(span[size_t(n - 1)])) << act_name(act) << "(-inf), n = " << n;
        if (n > 1) EXPECT_EQ(span[size_t(n - 2)], inf) << act_name(act) << "(inf), n = " << n;
        if (n > 2) EXPECT_TRUE(std::isnan(span[0])) << act_name(act) << "(nan), n = " << n;
        std::vector<float> ramp(static_cast<size_t>(n), 0.0f);
        for (int64_t i = 0; i < n; ++i) ramp[size_t(i)] = float(i) * 0.37f - 3.0f;
        std::vector<float> one = ramp;
        convcore::cpu::epilogue_store::exp_activation_span<float, VB>(ramp.data(), n, act);
        for (int64_t i = 0; i < n; ++i) {
            convcore::cpu::epilogue_store::exp_activation_span<float, VB>(&one[size_t(i)], 1, act);
            EXPECT_EQ(ramp[size_t(i)], one[size_t(i)]) << act_name(act) << " element " << i << " of " << n;
        }
    }
}

TEST(Epilogue, VectorExpActivationsMatchTheReference) {
    for (const convcoreActivationMode_t act :
         {CONVCORE_ACTIVATION_SILU, CONVCORE_ACTIVATION_GELU, CONVCORE_ACTIVATION_GELU_TANH}) {
        check_exp_activation_span<16>(act);
        check_exp_activation_span<32>(act);
        check_exp_activation_span<64>(act);
    }
}

// ---- bad arguments --------------------------------------------------------------------------

struct BadArgs : ::testing::Test {
    convcore::Handle h;
    convcore::TensorDesc xd{CONVCORE_DATA_FLOAT, 1, 4, 6, 6}, yd{CONVCORE_DATA_FLOAT, 1, 3, 6, 6};
    convcore::TensorDesc zd{CONVCORE_DATA_FLOAT, 1, 3, 6, 6}, bd{CONVCORE_DATA_FLOAT, 1, 3, 1, 1};
    convcore::FilterDesc wd{CONVCORE_DATA_FLOAT, 3, 4, 3, 3};
    convcore::ConvDesc conv{1};
    std::vector<float> x = std::vector<float>(4 * 36, 1.0f), w = std::vector<float>(3 * 4 * 9, 1.0f);
    std::vector<float> y = std::vector<float>(3 * 36, 0.0f), z = std::vector<float>(3 * 36, 1.0f);
    std::vector<float> b = std::vector<float>(3, 1.0f);
    const float one = 1.0f;

    convcoreStatus_t call(convcoreTensorDescriptor_t zdesc, const void* zp, convcoreTensorDescriptor_t bdesc,
                          const void* bp, convcoreActivationMode_t act = CONVCORE_ACTIVATION_RELU,
                          const void* alpha2 = nullptr, void* yp = nullptr) {
        return convcoreConvolutionBiasActivationForward(h, &one, xd, x.data(), wd, w.data(), conv,
                                                        CONVCORE_FWD_ALGO_DIRECT, nullptr, 0,
                                                        alpha2 ? alpha2 : &one, zdesc, zp, bdesc, bp, act, yd,
                                                        yp ? yp : y.data());
    }
    void expect_bad(convcoreStatus_t st, const std::string& words) {
        EXPECT_EQ(st, CONVCORE_STATUS_BAD_PARAM);
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find(words), std::string::npos)
            << "reason: " << convcoreGetLastErrorString() << "; expected it to mention: " << words;
    }
};

TEST_F(BadArgs, NullZAndBiasNeedNoDescriptors) {
    size_t bytes = 0;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, CONVCORE_FWD_ALGO_DIRECT, &bytes));
    ASSERT_EQ(bytes, 0u);  // the calls here pass no workspace
    CC_ASSERT_OK(call(nullptr, nullptr, nullptr, nullptr));
    CC_ASSERT_OK(call(zd, z.data(), bd, b.data()));
}

TEST_F(BadArgs, WrongBiasDescriptor) {
    convcore::TensorDesc wrong_k(CONVCORE_DATA_FLOAT, 1, 4, 1, 1), wrong_dtype(CONVCORE_DATA_DOUBLE, 1, 3, 1, 1);
    convcore::TensorDesc spatial(CONVCORE_DATA_FLOAT, 1, 3, 2, 1), strided(CONVCORE_DATA_FLOAT, 1, 1, 1, 1);
    strided.set_strided(CONVCORE_DATA_FLOAT, {1, 3, 1, 1}, {6, 2, 1, 1});
    expect_bad(call(nullptr, nullptr, wrong_k, b.data()), "biasDesc: dims 1x4x1x1 must be 1x3x1x1");
    expect_bad(call(nullptr, nullptr, spatial, b.data()), "biasDesc: dims 1x3x2x1");
    expect_bad(call(nullptr, nullptr, wrong_dtype, b.data()), "biasDesc: data type CONVCORE_DATA_DOUBLE");
    expect_bad(call(nullptr, nullptr, strided, b.data()), "biasDesc: cStride=2 must be 1");
    expect_bad(call(nullptr, nullptr, nullptr, b.data()), "biasDesc (bias is given) is NULL");
}

TEST_F(BadArgs, WrongZDescriptor) {
    convcore::TensorDesc wrong_dims(CONVCORE_DATA_FLOAT, 1, 3, 6, 5), wrong_dtype(CONVCORE_DATA_DOUBLE, 1, 3, 6, 6);
    convcore::TensorDesc nhwc(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 1, 3, 6, 6);
    expect_bad(call(wrong_dims, z.data(), nullptr, nullptr), "zDesc: dims 1x3x6x5 do not match y's 1x3x6x6");
    expect_bad(call(wrong_dtype, z.data(), nullptr, nullptr), "zDesc: data type CONVCORE_DATA_DOUBLE");
    expect_bad(call(nhwc, z.data(), nullptr, nullptr), "z must be laid out as y");
    expect_bad(call(nullptr, z.data(), nullptr, nullptr), "zDesc (z is given) is NULL");
}

TEST_F(BadArgs, UnknownActivationAndMissingAlpha2) {
    // Any int is valid C; the test passes it straight to the C API, as a C caller would.
    const int seven = 7;
    convcoreActivationMode_t bad;
    std::memcpy(&bad, &seven, sizeof bad);
    expect_bad(convcoreConvolutionBiasActivationForward(h, &one, xd, x.data(), wd, w.data(), conv,
                                                        CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &one, nullptr, nullptr,
                                                        nullptr, nullptr, bad, yd, y.data()),
               "activationMode 7 is not a convcoreActivationMode_t");
    const convcoreStatus_t st = convcoreConvolutionBiasActivationForward(
        h, &one, xd, x.data(), wd, w.data(), conv, CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, nullptr, zd, z.data(),
        nullptr, nullptr, CONVCORE_ACTIVATION_RELU, yd, y.data());
    expect_bad(st, "alpha2 (z is given) is NULL");
}

TEST_F(BadArgs, OverlappingBuffers) {
    // z inside x, inside w, partly over y; bias inside y.
    std::vector<float> big(4 * 36 + 3 * 36, 1.0f);
    const float* x_as_z = x.data();
    expect_bad(call(zd, x_as_z, nullptr, nullptr), "z overlaps x");
    std::vector<float> wz(3 * 36 + 3 * 4 * 9, 1.0f);
    expect_bad(convcoreConvolutionBiasActivationForward(h, &one, xd, x.data(), wd, wz.data(), conv,
                                                        CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &one, zd,
                                                        wz.data() + 4, nullptr, nullptr, CONVCORE_ACTIVATION_RELU, yd,
                                                        y.data()),
               "z overlaps w");
    std::vector<float> yz(3 * 36 + 8, 1.0f);
    expect_bad(call(zd, yz.data() + 4, nullptr, nullptr, CONVCORE_ACTIVATION_RELU, &one, yz.data()),
               "z overlaps y without being y");
    expect_bad(call(nullptr, nullptr, bd, yz.data() + 10, CONVCORE_ACTIVATION_RELU, &one, yz.data()),
               "bias overlaps y");
    // z == y is the in-place residual: allowed.
    CC_ASSERT_OK(call(zd, y.data(), bd, b.data()));
}

TEST_F(BadArgs, PlanOfAnotherPass) {
    convcoreConvolutionPlan_t plan = nullptr;
    CC_ASSERT_OK(convcoreCreateConvolutionPlan(h, CONVCORE_PASS_BACKWARD_DATA, xd, wd, conv, yd,
                                               CONVCORE_BWD_DATA_ALGO_DIRECT, &plan));
    expect_bad(convcoreExecuteConvolutionPlanBiasActivation(plan, &one, x.data(), w.data(), nullptr, nullptr, b.data(),
                                                            CONVCORE_ACTIVATION_RELU, y.data(), nullptr, 0),
               "forward plans");
    convcoreDestroyConvolutionPlan(plan);
    EXPECT_EQ(convcoreExecuteConvolutionPlanBiasActivation(nullptr, &one, x.data(), w.data(), nullptr, nullptr, nullptr,
                                                           CONVCORE_ACTIVATION_RELU, y.data(), nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
}

}  // namespace
