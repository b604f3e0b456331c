// WINOGRAD_2X2_3X3 and WINOGRAD_4X4_3X3 through the public C API, against the independent
// float64 reference (reference.hpp), with the error bounds docs/algorithms.md states:
//   ||y - ref||_2 / ||ref||_2 < 1e-5 (F(2x2,3x3)) and 5e-5 (F(4x4,3x3)) in float32,
//                               1e-13 and 1e-12 in float64.
// Plus the NOT_SUPPORTED cases, whose reasons must name the limit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "forward_case.hpp"

using namespace convcore_test;

namespace {

std::string last_error() { return convcoreGetLastErrorString(); }

const char* name(convcoreConvolutionFwdAlgo_t algo) { return convcoreGetFwdAlgoName(algo); }

// The bounds of docs/algorithms.md (relative L2 error against the float64 reference).
double bound(convcoreConvolutionFwdAlgo_t algo, bool is_double) {
    const bool f4 = algo == CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3;
    if (is_double) return f4 ? 1e-12 : 1e-13;
    return f4 ? 5e-5 : 1e-5;
}

using Case = ForwardCase;

class Winograd : public ::testing::TestWithParam<convcoreConvolutionFwdAlgo_t> {};

TEST_P(Winograd, RandomProblemsMatchFloat64Reference) {
    const auto algo = GetParam();
    std::mt19937 rng(4242 + int(algo));
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int lo, int hi) { return int64_t(lo + u(rng) % (hi - lo + 1)); };
    double worst32 = 0, worst64 = 0;
    for (int trial = 0; trial < 40; ++trial) {
        Shape p{};
        p.groups = pick(1, 3);
        p.n = pick(1, 3);
        p.c = p.groups * pick(1, 5);
        p.k = p.groups * pick(1, 5);
        p.r = p.s = 3;
        p.pad_h = pick(0, 2);
        p.pad_w = pick(0, 2);
        p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
        p.flip = trial % 2 == 1;
        p.h = pick(int(3 - 2 * p.pad_h > 1 ? 3 - 2 * p.pad_h : 1), 19);  // odd and even sizes,
        p.w = pick(int(3 - 2 * p.pad_w > 1 ? 3 - 2 * p.pad_w : 1), 19);  // down to 1 with padding
        const Case tc{p, trial % 3 == 0 ? 1.0 : -0.75, trial % 4 == 0 ? 0.5 : 0.0, trial % 5 == 0, 0};
        const double e32 = run_forward_case<float>(algo, tc, rng);
        const double e64 = run_forward_case<double>(algo, tc, rng);
        EXPECT_LT(e32, bound(algo, false)) << name(algo) << " float32 " << describe(p);
        EXPECT_LT(e64, bound(algo, true)) << name(algo) << " float64 " << describe(p);
        worst32 = std::max(worst32, e32);
        worst64 = std::max(worst64, e64);
    }
    RecordProperty("worst_rel_error_f32", std::to_string(worst32));
    RecordProperty("worst_rel_error_f64", std::to_string(worst64));
    std::printf("%s: worst relative error float32 %.3g, float64 %.3g\n", name(algo), worst32, worst64);
}

// Only the fused NHWC schedule has kernels per ISA (winograd.cpp, cpu/cpu_isa.hpp): the re-runs
// that cap the ISA (tests/cpp/CMakeLists.txt) skip the NCHW schedules' heavy tests.
#define SKIP_IN_ISA_RERUNS() \
    if (std::getenv("CONVCORE_CPU_ISA")) GTEST_SKIP() << "the NCHW schedules have no kernels per ISA"

// Deeper channels (the reduction the GEMMs do); a transformed filter bank U over 4 MiB (written
// with non-temporal stores); and more tiles than one block holds, so the blocked loop runs
// several blocks, the last one partial.
TEST_P(Winograd, DeepChannelsWideFiltersAndManyBlocks) {
    SKIP_IN_ISA_RERUNS();
    const auto algo = GetParam();
    std::mt19937 rng(99);
    const Shape deep{2, 96, 13, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    const Shape wide{1, 192, 9, 7, 200, 3, 3, 1, 2, 1, 1, 1, 1, 1, true};  // U: 36*200*192 elements
    const Shape many{3, 4, 131, 193, 6, 3, 3, 1, 0, 1, 1, 1, 1, 2, true};  // > 4096 tiles
    for (const Shape& p : {deep, wide, many}) {
        const Case tc{p, 1.0, &p == &wide ? -0.5 : 0.0, false, 0};
        EXPECT_LT(run_forward_case<float>(algo, tc, rng), bound(algo, false)) << describe(p);
        EXPECT_LT(run_forward_case<double>(algo, tc, rng), bound(algo, true)) << describe(p);
    }
}

// The filter-blocked schedule (winograd.cpp make_plan): every tile in one block and U over
// 8 MiB with at most 64 tiles, so U is made a slice of filters at a time; the last slice is
// partial. Also grouped, true convolution, with beta != 0. On 1 and 2 threads each thread
// runs its own sub-slices (deep, F(4x4,3x3): slices of 24 filters, 12 per thread, the last
// sub-slice partial); on 16 threads there are fewer than kMinOwnFilters filters per thread,
// so every stage of a slice is shared among the threads.
TEST_P(Winograd, FilterBlockedScheduleOnDeepSmallImages) {
    SKIP_IN_ISA_RERUNS();
    const auto algo = GetParam();
    std::mt19937 rng(7);
    const Shape deep{1, 512, 11, 9, 299, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};      // U: 22 / 9.8 MB
    const Shape grouped{2, 2 * 320, 7, 6, 2 * 220, 3, 3, 1, 0, 1, 1, 1, 1, 2, true};  // 20 / 9 MB
    for (const Shape& p : {deep, grouped}) {
        for (int threads : {1, 2, 16}) {
            const Case tc{p, 1.0, &p == &grouped ? 0.5 : 0.0, false, threads};
            EXPECT_LT(run_forward_case<float>(algo, tc, rng), bound(algo, false)) << describe(p);
        }
        EXPECT_LT(run_forward_case<double>(algo, Case{p, -1.5, 0.0, false, 0}, rng), bound(algo, true))
            << describe(p);
    }
}

// The two schedules of the ordinary (not filter-blocked) path, on 1 to 4 threads: private
// pieces (U up to 1.5 MiB, winograd.cpp run_private_pieces: each thread a piece of tile rows
// through every stage in its own columns of V and M; the piece size shrinks until the pieces
// fit side by side, the last piece is partial, pieces cross images), grouped, true
// convolution, beta != 0; and the block schedule (float64 U over 1.5 MiB, 288 tiles: two
// blocks of tile rows, the last partial; F(2x2,3x3) needs more channels for that U).
TEST_P(Winograd, PrivatePiecesAndBlockScheduleOnOneToFourThreads) {
    SKIP_IN_ISA_RERUNS();
    const auto algo = GetParam();
    std::mt19937 rng(31);
    const Shape pieces{3, 8, 37, 45, 12, 3, 3, 1, 1, 1, 1, 1, 1, 2, true};
    for (int threads = 1; threads <= 4; ++threads) {
        const Case tc{pieces, 1.0, threads % 2 ? 0.0 : 0.5, false, threads};
        EXPECT_LT(run_forward_case<float>(algo, tc, rng), bound(algo, false)) << describe(pieces) << threads;
        EXPECT_LT(run_forward_case<double>(algo, tc, rng), bound(algo, true)) << describe(pieces) << threads;
    }
    const bool f4 = algo == CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3;  // U: 36*74*74*8, 16*112*112*8 bytes
    const Shape blocks = f4 ? Shape{2, 74, 48, 48, 74, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}
                            : Shape{2, 112, 24, 24, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    for (int threads : {1, 3}) {
        const Case tc{blocks, 1.0, 0.0, false, threads};
        EXPECT_LT(run_forward_case<double>(algo, tc, rng), bound(algo, true)) << describe(blocks) << threads;
    }
}

TEST_P(Winograd, WorkspaceDoesNotDependOnThreadsAndRunsRepeat) {
    const auto algo = GetParam();
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 2, 6, 23, 17);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 5, 6, 3, 3);
    convcore::ConvDesc conv(1, 1);
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 2, 5, 23, 17);
    size_t bytes[3] = {};
    for (int t = 1; t <= 3; ++t) {
        convcore::Handle h;
        ASSERT_EQ(convcoreSetNumThreads(h, t), CONVCORE_STATUS_SUCCESS);
        ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, algo, &bytes[t - 1]),
                  CONVCORE_STATUS_SUCCESS)
            << last_error();
    }
    EXPECT_EQ(bytes[0], bytes[1]);
    EXPECT_EQ(bytes[0], bytes[2]);
    // The exact formula of docs/algorithms.md: (a^2*K*C/g + a^2*(C/g + K/g)*B) elements with
    // B = min(tiles rounded up to 16, the block size) = 16*ceil(2*ceil(23/m)*ceil(17/m)/16) here.
    const int64_t m = algo == CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3 ? 4 : 2, a = m + 2;
    const int64_t tiles = 2 * ((23 + m - 1) / m) * ((17 + m - 1) / m), block = (tiles + 15) / 16 * 16;
    // (The C API rounds the solver's workspace up to 64 bytes.)
    const size_t exact = size_t(a * a * 5 * 6 + a * a * (6 + 5) * block) * sizeof(float);
    EXPECT_EQ(bytes[0], (exact + 63) / 64 * 64);

    // Same thread count, same bits (the solver says it is deterministic); 1 and 2 threads agree.
    const Shape p{2, 6, 23, 17, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    std::vector<float> a1, a2, b2;
    std::mt19937 r1(5), r2(5), r3(5);
    run_forward_case<float>(algo, Case{p, 1.0, 0.0, false, 2}, r1, &a2);
    run_forward_case<float>(algo, Case{p, 1.0, 0.0, false, 2}, r2, &b2);
    run_forward_case<float>(algo, Case{p, 1.0, 0.0, false, 1}, r3, &a1);
    ASSERT_EQ(a2.size(), b2.size());
    EXPECT_EQ(std::memcmp(a2.data(), b2.data(), a2.size() * sizeof(float)), 0);
    double diff = 0;
    for (size_t i = 0; i < a1.size(); ++i) diff = std::max(diff, double(std::fabs(a1[i] - a2[i])));
    EXPECT_LT(diff, 1e-4);
}

// Expects NOT_SUPPORTED from both the workspace query and the run, with a reason containing
// `fragment`, and the output left alone.
void expect_not_supported(convcoreConvolutionFwdAlgo_t algo, int64_t r, int64_t stride, int64_t dil,
                          convcoreDataType_t dt, const std::string& fragment) {
    convcore::Handle h;
    convcore::TensorDesc xd(dt, 1, 2, 12, 12);
    convcore::FilterDesc wd(dt, 3, 2, r, r);
    convcore::ConvDesc conv;
    conv.set(1, 1, stride, stride, dil, dil);
    int64_t n, k, p, q;
    ASSERT_EQ(convcoreGetConvolution2dForwardOutputDim(conv, xd, wd, &n, &k, &p, &q), CONVCORE_STATUS_SUCCESS);
    convcore::TensorDesc yd(dt, n, k, p, q);
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, algo, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find(fragment), std::string::npos) << "reason '" << last_error() << "' lacks '"
                                                              << fragment << "'";
    std::vector<double> x(1 * 2 * 12 * 12, 0.5), w(size_t(3 * 2 * r * r), 0.25), y(size_t(n * k * p * q), -7.0);
    const double one = 1, zero = 0;
    const float onef = 1, zerof = 0;
    const void* alpha = dt == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&one) : &onef;
    const void* beta = dt == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&zero) : &zerof;
    EXPECT_EQ(convcoreConvolutionForward(h, alpha, xd, x.data(), wd, w.data(), conv, algo, nullptr, 0, beta, yd,
                                         y.data()),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find(fragment), std::string::npos) << last_error();
    EXPECT_EQ(y[0], -7.0) << "an unsupported run wrote the output";
}

// NHWC x and y: the fused schedule (cpu/winograd_nhwc.hpp). Channel counts that leave partial
// vectors and column panels, rows 2 KiB apart (C = 512: V's rows padded), output channels over
// several panel groups, more tiles than a block and than a task, padding 0-2 and true
// convolution, alpha/beta, one to three threads (the tasks split tiles or panels), float32 and
// float64; two groups take the NCHW schedule. Stride 2x2 (F(m,3) at stride 2 per axis): odd and
// even sizes, padding 0-2, input rows the last tile reads past the image.
TEST_P(Winograd, NhwcFusedScheduleMatchesTheReference) {
    const auto algo = GetParam();
    std::mt19937 rng(77 + int(algo));
    const Shape shapes[] = {
        make_shape(1, 5, 7, 9, 37, 3, 3, 1),
        make_shape(2, 19, 13, 11, 70, 3, 3, 0, 1, 1, 1, true),
        make_shape(1, 512, 6, 5, 40, 3, 3, 1),
        make_shape(3, 24, 30, 29, 48, 3, 3, 2),
        make_shape(1, 300, 10, 10, 300, 3, 3, 1),
        make_shape(1, 8, 9, 9, 8, 3, 3, 1, 1, 1, 2),
        make_shape(2, 19, 13, 11, 70, 3, 3, 1, 2),
        make_shape(1, 24, 30, 29, 48, 3, 3, 0, 2, 1, 1, true),
        make_shape(1, 512, 9, 10, 40, 3, 3, 1, 2),
        make_shape(3, 17, 8, 5, 33, 3, 3, 2, 2),
        make_shape(1, 16, 3, 4, 5, 3, 3, 0, 2),
    };
    int trial = 0;
    for (const Shape& p : shapes)
        for (int threads = 1; threads <= 3; ++threads, ++trial) {
            const ForwardCase tc{p, trial % 2 ? -0.75 : 1.0, trial % 3 == 1 ? 0.5 : 0.0, false, threads, 0, true};
            EXPECT_LT(run_forward_case<float>(algo, tc, rng), bound(algo, false))
                << name(algo) << " float32 " << describe(p) << " threads " << threads;
            if (threads == 2)
                EXPECT_LT(run_forward_case<double>(algo, tc, rng), bound(algo, true))
                    << name(algo) << " float64 " << describe(p);
        }
}

// A 1x3 filter: F(2,3) / F(4,3) along W (cpu/winograd_1d.cpp), and with stride 2 along W
// F(2,2) / F(4,2) on the even inputs, for 1-D convolutions (H = 1) and 2-D layers with 1x3
// filters: odd widths down to 1, padding 0-2 along W, a stride along H (R = 1 reads every
// stride_h-th row), groups, true convolution, alpha/beta, a strided y, NCHW and NHWC, one to
// three threads, float32 and float64. The second half of the trials transposes each problem: a
// 3x1 filter, the tiles along H.
TEST_P(Winograd, RowFiltersRunTheOneDimensionalAlgorithm) {
    const auto algo = GetParam();
    std::mt19937 rng(99 + int(algo));
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int lo, int hi) { return int64_t(lo + u(rng) % (hi - lo + 1)); };
    for (int trial = 0; trial < 36; ++trial) {
        Shape p{};
        p.groups = pick(1, 3);
        p.n = pick(1, 3);
        p.c = p.groups * pick(1, 5);
        p.k = p.groups * pick(1, 6);
        p.r = 1;
        p.s = 3;
        p.pad_h = 0;
        p.pad_w = pick(0, 2);
        p.stride_h = trial % 3 == 0 ? 2 : 1;
        p.stride_w = trial % 3 == 2 || trial % 6 == 3 ? 2 : 1;
        p.dil_h = p.dil_w = 1;
        p.flip = trial % 2 == 1;
        p.h = trial % 4 == 0 ? pick(2, 5) : 1;
        p.w = pick(int(std::max<int64_t>(3 - 2 * p.pad_w, 1)), 41);
        if (trial >= 18) {  // the column filter
            std::swap(p.h, p.w);
            std::swap(p.r, p.s);
            std::swap(p.pad_h, p.pad_w);
            std::swap(p.stride_h, p.stride_w);
        }
        const ForwardCase tc{p, trial % 3 == 0 ? 1.0 : -0.75, trial % 4 == 1 ? 0.5 : 0.0, trial % 5 == 0 && trial % 2 == 0,
                             1 + trial % 3, 0, trial % 5 != 0 && trial % 2 == 0};
        EXPECT_LT(run_forward_case<float>(algo, tc, rng), bound(algo, false)) << name(algo) << " float32 " << describe(p);
        EXPECT_LT(run_forward_case<double>(algo, tc, rng), bound(algo, true)) << name(algo) << " float64 " << describe(p);
    }
    // Bit-identical results on 1, 2 and 3 threads: each output is one GEMM dot product and a
    // fixed transform.
    for (int64_t stride : {1, 2}) {
        Shape p = make_shape(2, 40, 1, 1500 * stride, 24, 1, 3, 1);
        p.pad_h = 0;
        p.stride_w = stride;
        std::vector<float> first;
        for (int threads = 1; threads <= 3; ++threads) {
            std::mt19937 same(5);
            std::vector<float> y;
            run_forward_case<float>(algo, ForwardCase{p, 1.0, 0.0, false, threads}, same, &y);
            if (threads == 1)
                first = y;
            else
                EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
                    << threads << " threads, stride " << stride;
        }
    }
}

// 1x3 and 3x1 filters with one group and at least a vector of channels run the fused schedule
// (cpu/winograd_nhwc.hpp) with tiles of 1 x m / m x 1 outputs, on NHWC memory as it is and on
// NCHW memory through transposes: channels over and between whole vectors, lengths down to 1
// along the tiles, padding 0-2 there, stride 1 or 2 along them, rows across, true convolution,
// alpha/beta, a strided y, one to three threads, float32 and float64.
TEST_P(Winograd, RowAndColumnFiltersWithAVectorOfChannelsRunTheFusedSchedule) {
    const auto algo = GetParam();
    std::mt19937 rng(7 + int(algo));
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int lo, int hi) { return int64_t(lo + u(rng) % (hi - lo + 1)); };
    for (int trial = 0; trial < 16; ++trial) {
        Shape p{};
        p.groups = 1;
        p.n = pick(1, 2);
        p.c = pick(16, 40);
        p.k = pick(1, 37);
        p.r = 1;
        p.s = 3;
        p.pad_h = 0;
        p.pad_w = pick(0, 2);
        p.stride_h = p.dil_h = p.dil_w = 1;
        p.stride_w = trial % 4 >= 2 ? 2 : 1;
        p.flip = trial % 3 == 1;
        p.h = pick(1, 6);
        p.w = pick(int(std::max<int64_t>(3 - 2 * p.pad_w, 1)), 29);
        if (trial % 2 == 1) {  // the column filter
            std::swap(p.h, p.w);
            std::swap(p.r, p.s);
            std::swap(p.pad_h, p.pad_w);
            std::swap(p.stride_h, p.stride_w);
        }
        for (bool nhwc : {true, false}) {
            const ForwardCase tc{p, trial % 3 == 0 ? 1.0 : -0.75, trial % 4 == 1 ? 0.5 : 0.0, nhwc && trial % 5 == 2,
                                 1 + trial % 3, 0, nhwc};
            EXPECT_LT(run_forward_case<float>(algo, tc, rng), bound(algo, false))
                << name(algo) << " float32 " << describe(p) << (nhwc ? " NHWC" : " NCHW");
            EXPECT_LT(run_forward_case<double>(algo, tc, rng), bound(algo, true))
                << name(algo) << " float64 " << describe(p) << (nhwc ? " NHWC" : " NCHW");
        }
    }
}

TEST_P(Winograd, RowFiltersNameTheirLimits) {
    const auto algo = GetParam();
    convcore::Handle h;
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, 2, 1, 12);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 3, 2, 1, 3);
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 1, 3, 1, 4);
    convcore::ConvDesc conv;
    conv.set(0, 0, 1, 3, 1, 1);
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, algo, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("on a 1x3 filter"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("needs stride 1 or 2 and dilation 1 along W, got stride 3"), std::string::npos)
        << last_error();
    // the column filter: stride 3 along H
    convcore::TensorDesc xc(CONVCORE_DATA_FLOAT, 1, 2, 12, 1);
    convcore::FilterDesc wc(CONVCORE_DATA_FLOAT, 3, 2, 3, 1);
    convcore::TensorDesc yc(CONVCORE_DATA_FLOAT, 1, 3, 4, 1);
    conv.set(0, 0, 3, 1, 1, 1);
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xc, wc, conv, yc, algo, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("on a 3x1 filter"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("along H"), std::string::npos) << last_error();
}

TEST_P(Winograd, NotSupportedNamesTheLimit) {
    const auto algo = GetParam();
    const std::string n = name(algo);
    expect_not_supported(algo, 5, 1, 1, CONVCORE_DATA_FLOAT, n + " needs a 3x3 filter, got 5x5");
    expect_not_supported(algo, 1, 1, 1, CONVCORE_DATA_DOUBLE, n + " needs a 3x3 filter, got 1x1");
    expect_not_supported(algo, 3, 2, 1, CONVCORE_DATA_FLOAT,
                         n + " needs stride 1, got stride 2x2 (stride 2x2 runs on NHWC tensors with one group and at "
                             "least ");  // (a vector of input channels: 4 to 16 by the ISA)
    expect_not_supported(algo, 3, 3, 1, CONVCORE_DATA_FLOAT, n + " needs stride 1, got stride 3x3");
    expect_not_supported(algo, 3, 1, 2, CONVCORE_DATA_FLOAT, n + " needs dilation 1, got dilation 2x2");
}

TEST_P(Winograd, RankedAsApplicableForVggLayer) {
    // A VGG-like 3x3 layer: the heuristic must list the algorithm among the applicable ones.
    const auto algo = GetParam();
    convcore::Handle h;
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, 64, 56, 56);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 64, 64, 3, 3);
    convcore::ConvDesc conv(1, 1);
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 1, 64, 56, 56);
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int returned = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(h, xd, wd, conv, yd, CONVCORE_FWD_ALGO_COUNT, &returned, perf),
              CONVCORE_STATUS_SUCCESS);
    bool found = false;
    for (int i = 0; i < returned; ++i)
        if (perf[i].algo == algo) {
            found = true;
            EXPECT_EQ(perf[i].status, CONVCORE_STATUS_SUCCESS);
            EXPECT_GT(perf[i].memory, 0u);
        }
    EXPECT_TRUE(found);
}

// NHWC: the fused schedule is timed by "auto" whatever the model, fitted on NCHW runs, predicts
// (DenseNet's 128 -> 32 at 14x14, where the model alone ranked it out): the Winograd solvers are
// made for 3x3 problems (core/solver.hpp, made_for), and the find-db holds their time.
TEST_P(Winograd, TimedByAutoInNhwc) {
    const auto algo = GetParam();
    char dir[] = "/tmp/convcore_winograd_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string db = std::string(dir) + "/find-db.txt";
    setenv("CONVCORE_FIND_DB", db.c_str(), 1);
    convcoreClearFindCache();
    convcore::Handle h;
    convcore::TensorDesc xd(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 1, 128, 14, 14);
    convcore::TensorDesc yd(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 1, 32, 14, 14);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 32, 128, 3, 3);
    convcore::ConvDesc conv(1, 1);
    convcoreConvolutionFwdAlgo_t chosen{};
    const convcoreStatus_t status = convcoreSelectConvolutionForwardAlgorithm(
        h, xd, nullptr, wd, nullptr, conv, yd, nullptr, CONVCORE_SELECT_MEASURED, &chosen);
    std::ifstream in(db);
    std::stringstream text;
    text << in.rdbuf();
    unsetenv("CONVCORE_FIND_DB");
    convcoreClearFindCache();
    std::system((std::string("rm -rf ") + dir).c_str());
    ASSERT_EQ(status, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    EXPECT_NE(text.str().find(std::string("\t") + convcoreGetFwdAlgoName(algo) + "\tSUCCESS"), std::string::npos)
        << text.str();
}

INSTANTIATE_TEST_SUITE_P(Cpu, Winograd,
                         ::testing::Values(CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3),
                         [](const auto& info) { return std::string(name(info.param)); });

}  // namespace
