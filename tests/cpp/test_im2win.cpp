// IM2WIN through the public C API, against the independent float64 reference (reference.hpp),
// with the error bounds docs/algorithms.md states:
//   ||y - ref||_2 / ||ref||_2 < 1e-5 in float32, 1e-13 in float64,
// on random problems (odd and even sizes, padding, stride, dilation, groups, both modes,
// alpha/beta with a NaN-poisoned y when beta == 0, strided y, float32 and float64), the
// paper's layer shapes scaled down, several bands of output rows, the exact workspace.
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

constexpr convcoreConvolutionFwdAlgo_t ALGO = CONVCORE_FWD_ALGO_IM2WIN;
constexpr double BOUND_F32 = 1e-5, BOUND_F64 = 1e-13;

std::string last_error() { return convcoreGetLastErrorString(); }

using Case = ForwardCase;

// Runs IM2WIN on the case (forward_case.hpp): the relative error against the reference.
template <typename T>
double run_case(const Case& tc, std::mt19937& rng, std::vector<T>* out = nullptr) {
    return run_forward_case<T>(ALGO, tc, rng, out);
}

}  // namespace

TEST(Im2win, RandomProblemsMatchFloat64Reference) {
    std::mt19937 rng(2002);
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int64_t lo, int64_t hi) { return lo + int64_t(u(rng)) % (hi - lo + 1); };
    double worst32 = 0, worst64 = 0;
    for (int trial = 0; trial < 60; ++trial) {
        Shape p{};
        p.groups = pick(1, 3);
        p.n = pick(1, 3);
        p.c = p.groups * pick(1, 6);
        p.k = p.groups * pick(1, 40);  // one and two filter blocks, partial ones
        p.r = pick(1, 5);
        p.s = pick(1, 5);
        p.pad_h = pick(0, 3);
        p.pad_w = pick(0, 3);
        p.stride_h = pick(1, 3);
        p.stride_w = pick(1, 3);
        p.dil_h = pick(1, 2);
        p.dil_w = pick(1, 2);
        p.flip = trial % 2 == 1;
        p.h = pick(std::max<int64_t>(1, p.dil_h * (p.r - 1) + 1 - 2 * p.pad_h), 19);
        p.w = pick(std::max<int64_t>(1, p.dil_w * (p.s - 1) + 1 - 2 * p.pad_w), 40);  // > 12 columns
        const Case tc{p, trial % 3 == 0 ? 1.0 : -0.75, trial % 4 == 0 ? 0.5 : 0.0, trial % 5 == 0, 0};
        const double e32 = run_case<float>(tc, rng);
        const double e64 = run_case<double>(tc, rng);
        EXPECT_LT(e32, BOUND_F32) << "float32 " << describe(p);
        EXPECT_LT(e64, BOUND_F64) << "float64 " << describe(p);
        worst32 = std::max(worst32, e32);
        worst64 = std::max(worst64, e64);
    }
    RecordProperty("worst_rel_error_f32", std::to_string(worst32));
    RecordProperty("worst_rel_error_f64", std::to_string(worst64));
    std::printf("IM2WIN: worst relative error float32 %.3g, float64 %.3g\n", worst32, worst64);
}

// The paper's Table 2 layers, scaled down (channels / spatial size) to keep the test quick,
// with their filter sizes and strides; a depthwise layer; deep channels.
TEST(Im2win, PaperLayerShapesAndDeepChannels) {
    std::mt19937 rng(12);
    const Shape cases[] = {
        make_shape(1, 3, 47, 47, 24, 11, 11, 0, 4, 1, 1, false),  // Conv1/Conv2: 11x11, stride 4
        make_shape(1, 16, 30, 30, 16, 7, 7, 0, 2, 1, 1, false),   // Conv4: 7x7, stride 2
        make_shape(2, 24, 12, 12, 64, 5, 5, 0, 1, 1, 1, true),    // Conv5: 5x5
        make_shape(1, 64, 12, 12, 96, 3, 3, 0, 1, 1, 1, false),   // Conv6..12: 3x3
        make_shape(2, 20, 11, 13, 20, 3, 3, 1, 1, 1, 20, false),  // depthwise
        make_shape(1, 256, 6, 6, 40, 3, 3, 1, 1, 1, 1, false),    // long reduction
        make_shape(1, 8, 15, 37, 33, 3, 3, 2, 1, 3, 1, true),     // dilation 3
    };
    for (const Shape& p : cases) {
        for (double beta : {0.0, -1.5}) {
            const Case tc{p, 0.5, beta, false, 0};
            EXPECT_LT(run_case<float>(tc, rng), BOUND_F32) << describe(p);
            EXPECT_LT(run_case<double>(tc, rng), BOUND_F64) << describe(p);
        }
    }
}

// More output rows than one band of the transform holds (4 MiB): bands crossing image
// boundaries; and bands of one row shorter than the register tile (12 positions).
TEST(Im2win, SeveralBandsOfRows) {
    std::mt19937 rng(3);
    // a row: C*Wp*R = 48*130*3 floats = 73 KiB -> 56 rows per band; 3 images of 128 rows
    const Shape p = make_shape(3, 48, 130, 130, 5, 3, 3, 0, 1, 1, 1, false);
    EXPECT_LT(run_case<float>(Case{p, 1.0, 0.0, false, 0}, rng), BOUND_F32);
    // a row: 30000*12*3 floats = 4.1 MiB -> one row per band, 10 positions per row
    const Shape q = make_shape(1, 30000, 12, 12, 2, 3, 3, 0, 1, 1, 1, true);
    EXPECT_LT(run_case<float>(Case{q, 1.0, 0.5, false, 0}, rng), BOUND_F32);
}

// The private schedule (units of output rows, each made and computed by one thread in its
// slot of the band buffer; cpu/im2win.cpp unit_rows): units that cross image boundaries,
// several units per thread, groups, a partial last tile per unit, beta != 0; one to four
// threads (slots and unit sizes change with the count), against the shared schedule's
// problems of the same shapes (small outputs: under 192 positions per unit).
TEST(Im2win, PrivateScheduleUnitsAcrossImagesAndThreads) {
    std::mt19937 rng(77);
    const Shape cases[] = {
        make_shape(3, 4, 60, 50, 40, 3, 3, 0, 1, 1, 1, false),    // 58 rows per image, Q = 48
        make_shape(2, 6, 45, 71, 20, 5, 3, 2, 2, 1, 2, true),     // stride 2, groups 2, Q = 35
        make_shape(1, 3, 101, 101, 64, 7, 7, 3, 2, 1, 1, false),  // a ResNet-like first layer
    };
    for (const Shape& p : cases)
        for (int threads = 1; threads <= 4; ++threads) {
            const Case tc{p, 1.0, threads % 2 ? 0.0 : 0.5, false, threads};
            EXPECT_LT(run_case<float>(tc, rng), BOUND_F32) << describe(p) << " threads " << threads;
            EXPECT_LT(run_case<double>(tc, rng), BOUND_F64) << describe(p) << " threads " << threads;
        }
}

TEST(Im2win, WorkspaceIsExactAndDoesNotDependOnThreads) {
    struct W {
        int64_t n, c, h, w, k, r, s, pad, stride, dil, groups;
        convcoreDataType_t dt;
    };
    for (const W& t : {W{2, 6, 23, 17, 5, 3, 3, 1, 1, 1, 1, CONVCORE_DATA_FLOAT},
                       W{3, 8, 19, 21, 40, 5, 3, 2, 2, 2, 2, CONVCORE_DATA_DOUBLE},
                       W{3, 48, 130, 130, 5, 3, 3, 0, 1, 1, 1, CONVCORE_DATA_FLOAT},
                       W{1, 4, 20, 20, 40, 3, 3, 1, 1, 1, 1, CONVCORE_DATA_FLOAT}}) {
        convcore::TensorDesc xd(t.dt, t.n, t.c, t.h, t.w);
        convcore::FilterDesc wd(t.dt, t.k, t.c / t.groups, t.r, t.s);
        convcore::ConvDesc conv(t.pad, t.stride, t.dil, t.groups);
        const auto o = conv.output_dims(xd, wd);
        convcore::TensorDesc yd(t.dt, o[0], o[1], o[2], o[3]);
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
        // docs/algorithms.md: B*C*Wp*R + groups*ceil((K/g)/KB)*KB*S*(C/g)*R elements,
        // Wp = (Q-1)*stride + (S-1)*dil + 1, KB = 32 (float32) / 16 (float64, or K/g <= 16),
        // B = clamp(4 MiB / (C*Wp*R*elem), 1, N*P) output rows per band.
        const int64_t elem = t.dt == CONVCORE_DATA_DOUBLE ? 8 : 4;
        const int64_t kb = elem == 8 || t.k / t.groups <= 16 ? 16 : 32;
        const int64_t P = o[2], Q = o[3], wp = (Q - 1) * t.stride + (t.s - 1) * t.dil + 1;
        const int64_t row = t.c * wp * t.r;
        const int64_t band = std::clamp<int64_t>((int64_t(4) << 20) / (row * elem), 1, t.n * P);
        const int64_t kg = t.k / t.groups, cg = t.c / t.groups;
        const int64_t elems = band * row + t.groups * ((kg + kb - 1) / kb) * kb * t.s * cg * t.r;
        const size_t exact = size_t(elems * elem);
        EXPECT_EQ(bytes[0], (exact + 63) / 64 * 64) << "k" << t.k;
    }
}

TEST(Im2win, DeterministicAndThreadCountIndependent) {
    const Shape p = make_shape(2, 6, 23, 37, 35, 3, 3, 1, 1, 1, 1, false);
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

// IM2WIN has no NOT_SUPPORTED case for float32/float64 problems: the window layout takes any
// stride, padding, dilation and group count. Extreme shapes: a filter wider than the input
// (padding only), one output, large dilation and stride, 1x1 filters, depthwise with a
// channel multiplier, non-square everything.
TEST(Im2win, AppliesToEveryProblem) {
    std::mt19937 rng(8);
    const Shape cases[] = {
        Shape{1, 2, 3, 2, 3, 5, 7, 2, 3, 1, 1, 1, 1, 1, false},   // filter larger than the input
        Shape{2, 3, 9, 9, 4, 9, 9, 0, 0, 1, 1, 1, 1, 1, true},    // one output position
        Shape{1, 4, 23, 19, 6, 3, 2, 1, 0, 5, 4, 4, 3, 2, false}, // stride 5x4, dilation 4x3, groups
        Shape{3, 6, 7, 5, 9, 1, 1, 0, 0, 1, 1, 1, 1, 3, true},    // 1x1
        Shape{1, 8, 10, 31, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8, false},// depthwise, multiplier 2
    };
    for (const Shape& p : cases) {
        const Case tc{p, 1.0, 0.0, false, 0};
        EXPECT_LT(run_case<float>(tc, rng), BOUND_F32) << describe(p);
        EXPECT_LT(run_case<double>(tc, rng), BOUND_F64) << describe(p);
    }
}
