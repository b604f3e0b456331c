// CYCLIC_MINIMAL through the public C API, against the independent float64 reference
// (reference.hpp), with the error bounds docs/algorithms.md states:
//   ||y - ref||_2 / ||ref||_2 < 1e-5 in float32, 1e-13 in float64,
// on random problems (odd and even sizes, padding 0..3, groups, both modes, alpha/beta with a
// NaN-poisoned y when beta == 0, strided y), both paths (fused: C/groups <= 4; GEMM: more),
// both tables (3x3 and 2x2 filters); plus the NOT_SUPPORTED cases with their reasons.
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
#include "forward_case.hpp"

using namespace convcore_test;

namespace {

constexpr convcoreConvolutionFwdAlgo_t ALGO = CONVCORE_FWD_ALGO_CYCLIC_MINIMAL;
constexpr double BOUND_F32 = 1e-5, BOUND_F64 = 1e-13;

std::string last_error() { return convcoreGetLastErrorString(); }

using Case = ForwardCase;

// Runs CYCLIC_MINIMAL on the case (forward_case.hpp): the relative error against the reference.
template <typename T>
double run_case(const Case& tc, std::mt19937& rng, std::vector<T>* out = nullptr) {
    return run_forward_case<T>(ALGO, tc, rng, out);
}

Shape shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t f, int64_t pad, int64_t groups,
            bool flip) {
    return Shape{n, c, h, w, k, f, f, pad, pad, 1, 1, 1, 1, groups, flip};
}

// Random problems; c_lo..c_hi channels per group picks the path (fused up to 4).
void random_problems(int64_t filter, int64_t c_lo, int64_t c_hi, unsigned seed, int trials) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int64_t lo, int64_t hi) { return lo + int64_t(u(rng)) % (hi - lo + 1); };
    double worst32 = 0, worst64 = 0;
    for (int trial = 0; trial < trials; ++trial) {
        Shape p{};
        p.groups = pick(1, 3);
        p.n = pick(1, 3);
        p.c = p.groups * pick(c_lo, c_hi);
        p.k = p.groups * pick(1, 6);
        p.r = p.s = filter;
        p.pad_h = pick(0, 3);
        p.pad_w = pick(0, 3);
        p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
        p.flip = trial % 2 == 1;
        p.h = pick(std::max<int64_t>(1, filter - 2 * p.pad_h), 21);  // odd and even, down to 1
        p.w = pick(std::max<int64_t>(1, filter - 2 * p.pad_w), 40);  // wider than a vector of tiles
        const Case tc{p, trial % 3 == 0 ? 1.0 : -0.75, trial % 4 == 0 ? 0.5 : 0.0, trial % 5 == 0, 0};
        const double e32 = run_case<float>(tc, rng);
        const double e64 = run_case<double>(tc, rng);
        EXPECT_LT(e32, BOUND_F32) << "float32 " << describe(p);
        EXPECT_LT(e64, BOUND_F64) << "float64 " << describe(p);
        worst32 = std::max(worst32, e32);
        worst64 = std::max(worst64, e64);
    }
    ::testing::Test::RecordProperty("worst_rel_error_f32", std::to_string(worst32));
    ::testing::Test::RecordProperty("worst_rel_error_f64", std::to_string(worst64));
    std::printf("CYCLIC_MINIMAL %lldx%lld, C/g %lld..%lld: worst relative error float32 %.3g, float64 %.3g\n",
                (long long)filter, (long long)filter, (long long)c_lo, (long long)c_hi, worst32, worst64);
}

}  // namespace

TEST(CyclicMinimal, Fused3x3MatchesFloat64Reference) { random_problems(3, 1, 4, 4004, 40); }
TEST(CyclicMinimal, Gemm3x3MatchesFloat64Reference) { random_problems(3, 5, 12, 4005, 24); }
TEST(CyclicMinimal, Fused2x2MatchesFloat64Reference) { random_problems(2, 1, 4, 4006, 24); }
TEST(CyclicMinimal, Gemm2x2MatchesFloat64Reference) { random_problems(2, 5, 12, 4007, 16); }

// Deep channels (long GEMM reductions), several blocks of tile rows with a partial last one,
// Pitas' single-image single-filter layer, a depthwise layer.
TEST(CyclicMinimal, DeepChannelsBlocksAndSingleImage) {
    std::mt19937 rng(77);
    const Shape cases[] = {
        shape(2, 96, 13, 11, 40, 3, 1, 1, false),
        shape(3, 8, 131, 193, 6, 3, 1, 2, true),   // > one block of tile rows
        shape(1, 1, 512, 512, 1, 3, 1, 1, false),  // Pitas: one 512x512 image, one filter
        shape(2, 24, 17, 29, 24, 3, 1, 24, false), // depthwise
        shape(1, 64, 9, 9, 64, 3, 0, 1, true),
    };
    for (const Shape& p : cases) {
        for (double beta : {0.0, 1.0}) {
            const Case tc{p, 1.0, beta, false, 0};
            EXPECT_LT(run_case<float>(tc, rng), BOUND_F32) << describe(p);
            EXPECT_LT(run_case<double>(tc, rng), BOUND_F64) << describe(p);
        }
    }
}

TEST(CyclicMinimal, WorkspaceIsExactAndDoesNotDependOnThreads) {
    struct W {
        int64_t c, k, h, w, groups;
    };
    for (const W& t : {W{3, 5, 23, 17, 1}, W{16, 8, 23, 17, 2}, W{64, 32, 200, 300, 1}}) {
        convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 2, t.c, t.h, t.w);
        convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, t.k, t.c / t.groups, 3, 3);
        convcore::ConvDesc conv(1, 1, 1, t.groups);
        convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 2, t.k, t.h, t.w);
        size_t bytes[3] = {};
        for (int th = 1; th <= 3; ++th) {
            convcore::Handle h;
            ASSERT_EQ(convcoreSetNumThreads(h, th), CONVCORE_STATUS_SUCCESS);
            ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, ALGO, &bytes[th - 1]),
                      CONVCORE_STATUS_SUCCESS)
                << last_error();
        }
        EXPECT_EQ(bytes[0], bytes[1]);
        EXPECT_EQ(bytes[0], bytes[2]);
        // docs/algorithms.md: 22*K*(C/g) elements (fused path, C/g <= 4), plus
        // 22*(C/g + K/g)*T + 16 with T = tiles per block (GEMM path):
        // T = tiles_w * clamp(max(256, 8 MiB / (22*(C/g + K/g)*4)) / tiles_w, 1, N*tiles_h).
        const int64_t cg = t.c / t.groups, kg = t.k / t.groups;
        int64_t elems = 22 * t.k * cg;
        if (cg > 4) {
            const int64_t tiles_w = (t.w + 1) / 2, tiles_h = (t.h + 1) / 2;
            const int64_t target = std::max<int64_t>(256, (int64_t(8) << 20) / (22 * (cg + kg) * 4));
            const int64_t rows = std::clamp<int64_t>(target / tiles_w, 1, 2 * tiles_h);
            elems += 22 * (cg + kg) * rows * tiles_w + 16;
        }
        const size_t exact = size_t(elems) * sizeof(float);
        EXPECT_EQ(bytes[0], (exact + 63) / 64 * 64) << "c" << t.c << " k" << t.k << " g" << t.groups;
    }
}

// 1 x 3 and 1 x 2 filters: the 4-point cyclic convolution along W (cpu/bilinear_1d.hpp): 1-D
// convolutions (H = 1) and 2-D layers with row filters (a stride along H), odd widths down to
// 1, padding 0-3 along W, groups, both modes, alpha/beta, a strided y, NCHW and NHWC, one to
// three threads; bit-identical on 1, 2 and 3 threads. Trials 20-29 transpose the problem: 3 x 1
// and 2 x 1 filters, the tiles along H.
TEST(CyclicMinimal, RowFiltersRunTheFourPointCyclicConvolution) {
    for (int64_t taps : {3, 2}) {
        std::mt19937 rng(unsigned(4100 + taps));
        std::uniform_int_distribution<int> u(0, 1 << 20);
        auto pick = [&](int64_t lo, int64_t hi) { return lo + int64_t(u(rng)) % (hi - lo + 1); };
        double worst32 = 0, worst64 = 0;
        for (int trial = 0; trial < 30; ++trial) {
            Shape p{};
            p.groups = pick(1, 3);
            p.n = pick(1, 3);
            p.c = p.groups * pick(1, 6);
            p.k = p.groups * pick(1, 6);
            p.r = 1;
            p.s = taps;
            p.pad_h = 0;
            p.pad_w = pick(0, 3);
            p.stride_h = trial % 3 == 0 ? 2 : 1;
            p.stride_w = p.dil_h = p.dil_w = 1;
            p.flip = trial % 2 == 1;
            p.h = trial % 4 == 0 ? pick(2, 5) : 1;
            p.w = pick(std::max<int64_t>(1, taps - 2 * p.pad_w), 45);
            if (trial >= 20) {  // the column filter
                std::swap(p.h, p.w);
                std::swap(p.r, p.s);
                std::swap(p.pad_h, p.pad_w);
                std::swap(p.stride_h, p.stride_w);
            }
            const Case tc{p, trial % 3 == 0 ? 1.0 : -0.75, trial % 4 == 1 ? 0.5 : 0.0,
                          trial % 5 == 0 && trial % 2 == 0, 1 + trial % 3, 0, trial % 5 != 0 && trial % 2 == 0};
            const double e32 = run_case<float>(tc, rng), e64 = run_case<double>(tc, rng);
            EXPECT_LT(e32, BOUND_F32) << "float32 " << describe(p);
            EXPECT_LT(e64, BOUND_F64) << "float64 " << describe(p);
            worst32 = std::max(worst32, e32);
            worst64 = std::max(worst64, e64);
        }
        std::printf("CYCLIC_MINIMAL 1x%lld: worst relative error float32 %.3g, float64 %.3g\n", (long long)taps,
                    worst32, worst64);
    }
    Shape p = shape(2, 40, 1, 1500, 24, 3, 1, 1, false);
    p.r = 1;
    p.pad_h = 0;
    std::vector<float> first;
    for (int threads = 1; threads <= 3; ++threads) {
        std::mt19937 same(5);
        std::vector<float> y;
        run_case<float>(Case{p, 1.0, 0.0, false, threads}, same, &y);
        if (threads == 1)
            first = y;
        else
            EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0) << threads << " threads";
    }
}

TEST(CyclicMinimal, DeterministicAndThreadCountIndependent) {
    const Shape p = shape(2, 6, 23, 37, 5, 3, 1, 1, false);
    std::vector<float> a1, a2, b2;
    std::mt19937 r1(5), r2(5), r3(5);
    run_case<float>(Case{p, 1.0, 0.0, false, 2}, r1, &a2);
    run_case<float>(Case{p, 1.0, 0.0, false, 2}, r2, &b2);
    run_case<float>(Case{p, 1.0, 0.0, false, 1}, r3, &a1);
    ASSERT_EQ(a2.size(), b2.size());
    EXPECT_EQ(std::memcmp(a2.data(), b2.data(), a2.size() * sizeof(float)), 0);
    ASSERT_EQ(a1.size(), a2.size());
    EXPECT_EQ(std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float)), 0);
}

namespace {

// Expects NOT_SUPPORTED from both the workspace query and the run, with a reason containing
// `fragment`, and y left alone.
void expect_not_supported(int64_t r, int64_t s, int64_t stride, int64_t dil, convcoreDataType_t dt,
                          const std::string& fragment) {
    convcore::Handle h;
    convcore::TensorDesc xd(dt, 1, 2, 12, 12);
    convcore::FilterDesc wd(dt, 3, 2, r, s);
    convcore::ConvDesc conv;
    conv.set(1, 1, stride, stride, dil, dil);
    int64_t n, k, p, q;
    ASSERT_EQ(convcoreGetConvolution2dForwardOutputDim(conv, xd, wd, &n, &k, &p, &q), CONVCORE_STATUS_SUCCESS);
    convcore::TensorDesc yd(dt, n, k, p, q);
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, ALGO, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find(fragment), std::string::npos)
        << "reason '" << last_error() << "' lacks '" << fragment << "'";
    const size_t elem = dt == CONVCORE_DATA_DOUBLE ? 8 : 4;
    std::vector<char> x(size_t(2 * 12 * 12) * elem, 0), w(size_t(3 * 2 * r * s) * elem, 0);
    std::vector<char> y(size_t(n * k * p * q) * elem, 0x5a);
    std::vector<char> ws(1 << 20);
    const double one64 = 1, zero64 = 0;
    const float one32 = 1, zero32 = 0;
    const void* alpha = dt == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&one64) : &one32;
    const void* beta = dt == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&zero64) : &zero32;
    EXPECT_EQ(convcoreConvolutionForward(h, alpha, xd, x.data(), wd, w.data(), conv, ALGO, ws.data(), ws.size(),
                                         beta, yd, y.data()),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find(fragment), std::string::npos) << last_error();
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](char c) { return c == 0x5a; })) << "y was written";
}

}  // namespace

TEST(CyclicMinimal, NotSupportedSaysWhy) {
    expect_not_supported(5, 5, 1, 1, CONVCORE_DATA_FLOAT, "3x3 filter");
    expect_not_supported(3, 2, 1, 1, CONVCORE_DATA_FLOAT, "got 3x2");
    expect_not_supported(3, 1, 1, 1, CONVCORE_DATA_FLOAT, "on a 3x1 filter needs no padding along W, got 1");
    expect_not_supported(1, 1, 1, 1, CONVCORE_DATA_DOUBLE, "3x3 filter");
    expect_not_supported(3, 3, 2, 1, CONVCORE_DATA_FLOAT, "stride 1");
    expect_not_supported(3, 3, 1, 2, CONVCORE_DATA_DOUBLE, "dilation 1");
    expect_not_supported(1, 3, 1, 1, CONVCORE_DATA_FLOAT, "no padding along H");  // (pad 1 both ways)
    expect_not_supported(1, 3, 2, 1, CONVCORE_DATA_FLOAT, "1x3 filter (the 4-point cyclic convolution");
}
