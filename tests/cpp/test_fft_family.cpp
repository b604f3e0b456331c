// The CPU FFT family (FFT, FFT_TILING, FINE_GRAINED_FFT, POLY_HANKEL) through the public C
// API against the independent float64 reference: random problems (odd sizes, padding, groups,
// both modes, stride and dilation, alpha/beta with a NaN-poisoned output when beta == 0),
// single-channel images, large filters, float32 and float64, each under the error bound
// docs/algorithms.md states; the NOT_SUPPORTED paths; and a numerical check of the PolyHankel
// paper's exponent formulas (Eq. 10-12).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "forward_case.hpp"

using namespace convcore_test;

namespace {

std::string last_error() { return convcoreGetLastErrorString(); }

// The bounds docs/algorithms.md states: ||y - ref|| / ||ref|| on uniform [-1, 1] data.
struct Bound {
    double f32, f64;
};
Bound bound_of(convcoreConvolutionFwdAlgo_t algo) {
    switch (algo) {
        case CONVCORE_FWD_ALGO_POLY_HANKEL: return {1e-5, 1e-13};  // one long 1D FFT per plane
        default: return {5e-6, 1e-13};
    }
}

// Largest error seen per algorithm and type (printed at the end, for the docs).
std::map<std::string, double>& worst() {
    static std::map<std::string, double> m;
    return m;
}

using Case = ForwardCase;

// Runs the case (forward_case.hpp) and checks the algorithm's bound; records the worst error.
template <typename T>
double run_case(convcoreConvolutionFwdAlgo_t algo, const Case& tc, std::mt19937& rng,
                std::vector<T>* out = nullptr) {
    const double err = run_forward_case<T>(algo, tc, rng, out);
    const Bound b = bound_of(algo);
    EXPECT_LT(err, sizeof(T) == 8 ? b.f64 : b.f32)
        << convcoreGetFwdAlgoName(algo) << (sizeof(T) == 8 ? " f64 " : " f32 ") << describe(tc.shape)
        << " alpha" << tc.alpha << " beta" << tc.beta;
    double& wv = worst()[std::string(convcoreGetFwdAlgoName(algo)) + (sizeof(T) == 8 ? " f64" : " f32")];
    wv = std::max(wv, err);
    return err;
}

class FftFamily : public ::testing::TestWithParam<convcoreConvolutionFwdAlgo_t> {};


}  // namespace

TEST_P(FftFamily, RandomProblemsMatchFloat64Reference) {
    const convcoreConvolutionFwdAlgo_t algo = GetParam();
    std::mt19937 rng(4321 + int(algo));
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int lo, int hi) { return int64_t(lo + u(rng) % (hi - lo + 1)); };
    for (int trial = 0; trial < 40; ++trial) {
        Shape p{};
        p.groups = pick(1, 3);
        p.n = pick(1, 3);
        p.c = p.groups * pick(1, 4);
        p.k = p.groups * pick(1, 5);
        p.r = pick(1, 7);
        p.s = pick(1, 7);
        p.pad_h = pick(0, 4);
        p.pad_w = pick(0, 4);
        p.stride_h = trial % 3 == 0 ? pick(1, 3) : 1;
        p.stride_w = trial % 3 == 0 ? pick(1, 3) : 1;
        p.dil_h = trial % 4 == 1 ? pick(1, 3) : 1;
        p.dil_w = trial % 4 == 1 ? pick(1, 3) : 1;
        p.flip = trial % 2 == 1;
        p.h = pick(int(std::max<int64_t>(1, p.dil_h * (p.r - 1) + 1 - 2 * p.pad_h)), 29);
        p.w = pick(int(std::max<int64_t>(1, p.dil_w * (p.s - 1) + 1 - 2 * p.pad_w)), 29);
        const Case tc{p, trial % 3 == 0 ? 1.0 : 0.75, trial % 4 == 0 ? 0.5 : 0.0, false, 0, 0};
        run_case<float>(algo, tc, rng);
        run_case<double>(algo, tc, rng);
    }
}

TEST_P(FftFamily, SingleChannelAndLargeFilters) {
    const convcoreConvolutionFwdAlgo_t algo = GetParam();
    std::mt19937 rng(99);
    const Shape shapes[] = {
        make_shape(1, 1, 128, 128, 1, 3, 3, 1),          // one channel, 3x3
        make_shape(1, 1, 97, 131, 1, 11, 11, 5),         // 11x11, odd sizes
        make_shape(2, 3, 61, 59, 2, 25, 25, 12),         // 25x25
        make_shape(1, 2, 40, 40, 3, 25, 25, 0),          // 25x25, valid only
        make_shape(1, 1, 45, 45, 1, 11, 11, 0, 1, 1, 1, true),
        make_shape(2, 4, 33, 35, 4, 9, 7, 4, 2, 1, 2),   // strided, grouped
        make_shape(1, 2, 37, 41, 2, 5, 5, 6, 1, 3, 1),   // dilated, padding larger than the filter
        make_shape(1, 6, 17, 19, 6, 3, 3, 1, 1, 1, 6),   // depthwise
        make_shape(1, 3, 56, 56, 4, 9, 9, 4),            // 64-row planes: the 4-way split filter DFT
        make_shape(1, 2, 52, 52, 3, 5, 5, 4, 1, 3),      // ... with dilation 3 (every split class)
        make_shape(3, 2, 1, 37, 2, 1, 5, 0),             // one-row image
        make_shape(1, 1, 1, 1, 1, 1, 1, 0),              // 1x1 everything
    };
    for (const Shape& s : shapes) {
        run_case<float>(algo, {s, 1.0, 0.0, false, 0, 0}, rng);
        run_case<double>(algo, {s, 1.0, 0.0, false, 0, 0}, rng);
    }
    // a larger image (one channel, 3x3) in float32 and a 15x15 64-channel-ish layer, smaller
    run_case<float>(algo, {make_shape(1, 1, 300, 257, 1, 3, 3, 1), 1.0, 0.0, false, 0, 0}, rng);
    run_case<float>(algo, {make_shape(1, 8, 30, 30, 8, 15, 15, 7), 1.0, 0.0, false, 0, 0}, rng);
}

TEST_P(FftFamily, AlphaBetaAndMisalignedWorkspace) {
    const convcoreConvolutionFwdAlgo_t algo = GetParam();
    std::mt19937 rng(7);
    const Shape s = make_shape(2, 3, 23, 21, 4, 5, 3, 2);
    run_case<float>(algo, {s, 2.5, -1.5, false, 0, 0}, rng);
    run_case<double>(algo, {s, -0.5, 3.0, false, 0, 0}, rng);
    run_case<float>(algo, {s, 1.0, 0.0, false, 0, 16}, rng);  // NumPy-like 16-byte base
    run_case<double>(algo, {s, 1.0, 0.0, false, 0, 8}, rng);
    run_case<float>(algo, {s, 1.0, 0.0, false, 0, 4}, rng);
}

TEST_P(FftFamily, SameResultForAnyThreadCount) {
    const convcoreConvolutionFwdAlgo_t algo = GetParam();
    const Shape s = make_shape(3, 5, 31, 29, 7, 5, 5, 2, 1, 1, 1, true);
    std::vector<float> a, b, c;
    std::mt19937 r1(5), r2(5), r3(5);
    run_case<float>(algo, {s, 1.0, 0.0, false, 1, 0}, r1, &a);
    run_case<float>(algo, {s, 1.0, 0.0, false, 2, 0}, r2, &b);
    run_case<float>(algo, {s, 1.0, 0.0, false, 3, 0}, r3, &c);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
}

TEST_P(FftFamily, WorkspaceCapSaysNotSupported) {
    const convcoreConvolutionFwdAlgo_t algo = GetParam();
    convcore::Handle h;
    // Spectra past any sane cap even for FFT_TILING's bounded workspace (one tile of every
    // channel): a million channels, a big filter.
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 2, int64_t(1) << 20, 300, 300);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 2, int64_t(1) << 20, 129, 129);
    convcore::ConvDesc conv(64);
    const auto o = conv.output_dims(xd, wd);
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, o[0], o[1], o[2], o[3]);
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, algo, &bytes),
              CONVCORE_STATUS_NOT_SUPPORTED);
    const std::string why = last_error();
    EXPECT_NE(why.find("GB of workspace"), std::string::npos) << why;
    EXPECT_NE(why.find("4 GiB"), std::string::npos) << why;
    EXPECT_NE(why.find(convcoreGetFwdAlgoName(algo)), std::string::npos) << why;
    // Forward refuses before touching any data.
    float one = 1, zero = 0, dummy = 0;
    EXPECT_EQ(convcoreConvolutionForward(h, &one, xd, &dummy, wd, &dummy + 1, conv, algo, nullptr, 0, &zero, yd,
                                         &dummy + 2),
              CONVCORE_STATUS_NOT_SUPPORTED);
}

INSTANTIATE_TEST_SUITE_P(Cpu, FftFamily,
                         ::testing::Values(CONVCORE_FWD_ALGO_FFT, CONVCORE_FWD_ALGO_FFT_TILING, CONVCORE_FWD_ALGO_FINE_GRAINED_FFT,
                                           CONVCORE_FWD_ALGO_POLY_HANKEL),
                         [](const auto& info) { return std::string(convcoreGetFwdAlgoName(info.param)); });

// Prints the largest errors seen (for docs/algorithms.md) after all tests.
namespace {
struct PrintWorst : ::testing::Environment {
    void TearDown() override {
        for (const auto& [name, err] : worst()) std::printf("worst error %-22s %.3g\n", name.c_str(), err);
    }
};
const auto* const print_worst = ::testing::AddGlobalTestEnvironment(new PrintWorst);
}  // namespace

// ---- PolyHankel (paper 000), Section 2.2: the exponents, checked by exact polynomial products ----

namespace {

// d (Oh x Ow) from the coefficients of A(t) * U(t) with A from Eq. 10 (row stride Iw) and the
// kernel exponent `uexp(i, j)`, reading d[i][j] = p[dexp(i, j)] (Eq. 12).
template <typename UExp, typename DExp>
std::vector<double> poly_conv(const std::vector<double>& a, int64_t ih, int64_t iw, const std::vector<double>& u,
                              int64_t kh, int64_t kw, UExp uexp, DExp dexp) {
    const int64_t oh = ih - kh + 1, ow = iw - kw + 1;
    std::map<int64_t, double> prod;
    for (int64_t i = 0; i < ih; ++i)
        for (int64_t j = 0; j < iw; ++j)
            for (int64_t r = 0; r < kh; ++r)
                for (int64_t s = 0; s < kw; ++s) prod[iw * i + j + uexp(r, s)] += a[i * iw + j] * u[r * kw + s];
    std::vector<double> d(size_t(oh * ow));
    for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) d[size_t(i * ow + j)] = prod[dexp(i, j)];
    return d;
}

}  // namespace

TEST(PolyHankelPaper, Eq11IsOffByOneAndTheCorrectedFormMatches) {
    std::mt19937 rng(11);
    for (const auto& dims : {std::array<int64_t, 4>{5, 5, 3, 3}, {7, 9, 3, 2}, {6, 11, 4, 5}}) {
        const int64_t ih = dims[0], iw = dims[1], kh = dims[2], kw = dims[3];  // captured by the lambdas
        const int64_t oh = ih - kh + 1, ow = iw - kw + 1;
        const auto a = random_vector(size_t(ih * iw), rng), u = random_vector(size_t(kh * kw), rng);
        const Shape s{1, 1, ih, iw, 1, kh, kw, 0, 0, 1, 1, 1, 1, 1, false};
        const auto ref = reference_conv(s, a, u);
        const int64_t I = ow + kw - 1;  // the paper's row stride O_w + K_w - 1 = I_w
        auto eq12 = [&](int64_t i, int64_t j) { return I * i + j + I * kh - ow; };
        // Eq. 11 as printed: -(Ow+Kw-1) i - j + (Ow+Kw-1) Kh - Oh - 1
        auto eq11 = [&](int64_t i, int64_t j) { return -I * i - j + I * kh - oh - 1; };
        // corrected: Iw (Kh-1-i) + (Kw-1-j), i.e. ... + Iw Kh - Ow
        auto fixed = [&](int64_t i, int64_t j) { return I * (kh - 1 - i) + (kw - 1 - j); };
        EXPECT_LT(relative_error(poly_conv(a, ih, iw, u, kh, kw, fixed, eq12), ref), 1e-14);
        EXPECT_GT(relative_error(poly_conv(a, ih, iw, u, kh, kw, eq11, eq12), ref), 0.1)
            << "Eq. 11 as printed should not give the convolution";
    }
}
