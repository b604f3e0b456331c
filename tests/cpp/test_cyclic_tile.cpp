// The host/device CYCLIC_MINIMAL code of common/cyclic_tile.hpp (the CUDA kernels' bodies:
// cyclic::filter_transform per (k, c) and cyclic::tile_item per thread), run on the host over
// every item exactly as cuda/cyclic_minimal.cu launches them, against the float64 reference
// convolution: random problems (odd sizes, padding 0-2, groups, both modes, alpha/beta with a
// NaN-poisoned y when beta == 0), float32 with 4 and 1 and float64 with 2 output channels per
// thread (the kernel's choices) and the bounds of docs/algorithms.md. This is what tests the
// GPU kernels' arithmetic on machines without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/cyclic_tile.hpp"
#include "reference.hpp"

namespace {

using convcore_test::Shape;
using Tab = convcore::cyclic::C4F3;

template <typename T, int KT>
void check_random(unsigned seed, int count, double bound) {
    namespace cy = convcore::cyclic;
    std::mt19937 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    double worst = 0;
    for (int i = 0; i < count; ++i) {
        Shape s{};
        s.groups = pick(1, 3);
        s.n = pick(1, 2);
        s.c = s.groups * pick(1, 6);
        s.k = s.groups * pick(1, 7);
        s.r = s.s = 3;
        s.pad_h = pick(0, 2);
        s.pad_w = pick(0, 2);
        s.h = pick(std::max<int64_t>(1, 3 - 2 * s.pad_h), 19);
        s.w = pick(std::max<int64_t>(1, 3 - 2 * s.pad_w), 19);
        s.stride_h = s.stride_w = s.dil_h = s.dil_w = 1;
        s.flip = pick(0, 1) == 1;
        const double alphas[] = {1.0, 0.5, -1.25};
        const double betas[] = {0.0, 0.0, 1.0, -0.75};
        const T alpha = T(alphas[pick(0, 2)]), beta = T(betas[pick(0, 3)]);
        const int64_t P = s.out_h(), Q = s.out_w(), cg = s.c / s.groups;
        SCOPED_TRACE(testing::Message() << "n" << s.n << " c" << s.c << " k" << s.k << " g" << s.groups
                                        << " " << s.h << "x" << s.w << " pad " << s.pad_h << "," << s.pad_w
                                        << (s.flip ? " conv" : " xcorr") << " alpha " << alpha << " beta " << beta);
        const std::vector<double> xd = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const std::vector<double> wd = convcore_test::random_vector(size_t(s.k * cg * 9), rng);
        const std::vector<double> y0 = convcore_test::random_vector(size_t(s.n * s.k * P * Q), rng);
        std::vector<T> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), y(y0.size());
        for (size_t j = 0; j < y.size(); ++j)
            y[j] = beta == T(0) ? std::numeric_limits<T>::quiet_NaN() : T(y0[j]);

        // The two kernels, item by item.
        std::vector<T> U(size_t(Tab::M * s.k * cg));
        for (int64_t f = 0; f < s.k * cg; ++f) {
            T u[Tab::M];
            cy::filter_transform<Tab>(w.data() + f * 9, s.flip, u);
            for (int m = 0; m < Tab::M; ++m) U[size_t(f * Tab::M + m)] = u[m];
        }
        const cy::Dims d = cy::make_dims<Tab>(s.n, s.c, s.h, s.w, s.k, P, Q, s.groups, s.pad_h, s.pad_w, KT);
        for (int64_t item = 0; item < d.items; ++item)
            cy::tile_item<Tab, KT>(d, x.data(), U.data(), y.data(), item, alpha, beta);

        const std::vector<double> xr(x.begin(), x.end()), wr(w.begin(), w.end());
        std::vector<double> ref = convcore_test::reference_conv(s, xr, wr);
        for (size_t j = 0; j < ref.size(); ++j)
            ref[j] = double(alpha) * ref[j] + (beta == T(0) ? 0.0 : double(beta) * double(T(y0[j])));
        const std::vector<double> got(y.begin(), y.end());
        for (size_t j = 0; j < got.size(); ++j) ASSERT_TRUE(std::isfinite(got[j])) << "element " << j;
        const double err = convcore_test::relative_error(got, ref);
        worst = std::max(worst, err);
        EXPECT_LT(err, bound);
    }
    std::printf("worst relative error %.3g (bound %.0e)\n", worst, bound);
}

TEST(CyclicTile, Float32FourChannelsPerThread) { check_random<float, 4>(21, 60, 1e-5); }
TEST(CyclicTile, Float64TwoChannelsPerThread) { check_random<double, 2>(22, 40, 1e-13); }
TEST(CyclicTile, Float32OneChannelPerThread) { check_random<float, 1>(23, 30, 1e-5); }  // K/g == 1 path

// One tile by hand: the 2x2 outputs of a 4x4 tile against the definition, and a wrong
// operand (one product dropped) must show.
TEST(CyclicTile, OneTileAndAMutation) {
    namespace cy = convcore::cyclic;
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> uni(-1, 1);
    double d[16], g[9], v[Tab::M], u[Tab::M], prod[Tab::M], out[4];
    for (double& e : d) e = uni(rng);
    for (double& e : g) e = uni(rng);
    cy::input_transform<Tab>(d, v);
    cy::filter_transform<Tab>(g, false, u);
    for (int m = 0; m < Tab::M; ++m) prod[m] = u[m] * v[m];
    cy::output_transform<Tab>(prod, out);
    double ref[4] = {0, 0, 0, 0};
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
            for (int r = 0; r < 3; ++r)
                for (int s = 0; s < 3; ++s) ref[a * 2 + b] += d[(a + r) * 4 + b + s] * g[r * 3 + s];
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], ref[i], 1e-14);
    prod[7] = 0;
    cy::output_transform<Tab>(prod, out);
    double diff = 0;
    for (int i = 0; i < 4; ++i) diff = std::max(diff, std::fabs(out[i] - ref[i]));
    EXPECT_GT(diff, 1e-4);
}

}  // namespace
