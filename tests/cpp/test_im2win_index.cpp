// The host/device IM2WIN index math of common/im2win_index.hpp, run on the host the way
// cuda/im2win.cu uses it: the filter packed by filter_elem into [g][j][kp] (zero padded), the
// window-order strips of bands of output rows built element by element by strip_source, and
// every output computed from window_start + window_elem, against the float64 reference
// convolution on random problems (odd sizes, padding 0-2, stride 1-3, dilation 1-2, filters
// 1-5, groups, both modes; bands of 1-3 rows so rows of several images share a band). The tiled
// kernel around this math is not run here (no GPU); test_cuda_winograd_family does that.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/im2win_index.hpp"
#include "reference.hpp"

namespace {

using convcore_test::Shape;

TEST(Im2winIndex, EmulatedGpuPathMatchesTheReference) {
    namespace iw = convcore::im2win;
    std::mt19937 rng(31);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    for (int it = 0; it < 80; ++it) {
        Shape s{};
        for (;;) {
            s.groups = pick(1, 3);
            s.n = pick(1, 3);
            s.c = s.groups * pick(1, 4);
            s.k = s.groups * pick(1, 4);
            s.h = pick(1, 15);
            s.w = pick(1, 15);
            s.r = pick(1, 5);
            s.s = pick(1, 5);
            s.pad_h = pick(0, 2);
            s.pad_w = pick(0, 2);
            s.stride_h = pick(1, 3);
            s.stride_w = pick(1, 3);
            s.dil_h = pick(1, 2);
            s.dil_w = pick(1, 2);
            if (s.h + 2 * s.pad_h >= s.dil_h * (s.r - 1) + 1 && s.w + 2 * s.pad_w >= s.dil_w * (s.s - 1) + 1) break;
        }
        s.flip = pick(0, 1) == 1;
        const int64_t P = s.out_h(), Q = s.out_w(), cg = s.c / s.groups, kg = s.k / s.groups;
        SCOPED_TRACE(testing::Message() << "n" << s.n << " c" << s.c << " k" << s.k << " g" << s.groups << " "
                                        << s.h << "x" << s.w << " f" << s.r << "x" << s.s << " pad " << s.pad_h
                                        << "," << s.pad_w << " stride " << s.stride_h << "," << s.stride_w
                                        << " dil " << s.dil_h << "," << s.dil_w << (s.flip ? " conv" : " xcorr"));
        const std::vector<double> x = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const std::vector<double> w = convcore_test::random_vector(size_t(s.k * cg * s.r * s.s), rng);
        const std::vector<double> ref = convcore_test::reference_conv(s, x, w);

        const int64_t wp = iw::strip_cols(Q, s.s, s.stride_w, s.dil_w);
        ASSERT_EQ(wp, (Q - 1) * s.stride_w + (s.s - 1) * s.dil_w + 1);
        const int64_t crs = cg * s.r, len = s.s * crs, len_pad = len + pick(0, 5), kp = kg + pick(0, 3);
        std::vector<double> wpk(size_t(s.groups * len_pad * kp));
        for (int64_t e = 0; e < int64_t(wpk.size()); ++e) {
            const int64_t k = e % kp, j = e / kp % len_pad, g = e / (kp * len_pad);
            wpk[size_t(e)] = k < kg && j < len ? w[size_t((g * kg + k) * cg * s.r * s.s +
                                                          iw::filter_elem(j, cg, s.r, s.s, s.flip))]
                                               : 0.0;
        }
        const iw::StripDims sd{s.c, s.h, s.w, P, cg, s.r, s.groups, s.pad_h, s.pad_w, s.stride_h, s.dil_h, wp};
        const int64_t band = pick(1, 3), rows_total = s.n * P, row_elems = s.c * wp * s.r;
        std::vector<double> y(ref.size(), 0.0), win(size_t(band * row_elems));
        for (int64_t gr0 = 0; gr0 < rows_total; gr0 += band) {
            const int64_t rows = std::min(band, rows_total - gr0);
            for (int64_t e = 0; e < rows * row_elems; ++e) {
                const int64_t src = iw::strip_source(sd, gr0, e);
                win[size_t(e)] = src >= 0 ? x[size_t(src)] : 0.0;
            }
            for (int64_t pos = 0; pos < rows * Q; ++pos)
                for (int64_t g = 0; g < s.groups; ++g)
                    for (int64_t k = 0; k < kg; ++k) {
                        const int64_t start = iw::window_start(pos / Q, g, pos % Q, s.groups, wp, crs, s.stride_w);
                        double acc = 0;
                        for (int64_t j = 0; j < len; ++j)
                            acc += wpk[size_t((g * len_pad + j) * kp + k)] * win[size_t(start + iw::window_elem(j, crs, s.dil_w))];
                        const int64_t gr = gr0 + pos / Q, n = gr / P, op = gr % P;
                        y[size_t(((n * s.k + g * kg + k) * P + op) * Q + pos % Q)] = acc;
                    }
        }
        EXPECT_LT(convcore_test::relative_error(y, ref), 1e-14);
    }
}

}  // namespace
