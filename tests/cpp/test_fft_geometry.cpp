// The host/device geometry of the FFT family (common/fft_geometry.hpp), run on the host the way
// the CUDA solvers (cuda/fft.cu, fft_tiling.cu, fine_grained_fft.cu, poly_hankel.cu) run it on
// the GPU: the element functions their kernels call (plane / row / polynomial fills, the
// FINE_GRAINED_FFT row product, the tile scatter of FFT_TILING with padded chunks, the output
// reads: Eq. 12 for POLY_HANKEL), the frequency-major layouts, and the per-group column-major
// GEMM arguments of cuda::spectral_gemm (emulated naively, like cuBLAS), with naive float64
// DFTs in place of cuFFT. Compared with the float64 reference convolution on random problems
// (odd sizes, padding, stride, dilation, groups, both modes, alpha/beta). This is what tests the
// GPU kernels' index math on machines without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "common/blend.hpp"
#include "common/fft_geometry.hpp"
#include "reference.hpp"

namespace {

using convcore_test::Shape;
using cd = std::complex<double>;
namespace fftg = convcore::fftg;

const double kPi = 3.14159265358979323846;

// Naive DFTs of `count` signals of n0 x n1 (n1 == 1: 1D), in place, stored one after another.
// sign -1: forward (cuFFT's R2C/D2Z), +1: inverse, unnormalised (C2R/Z2D).
void dft(std::vector<cd>& v, int64_t count, int64_t n0, int64_t n1, int sign) {
    std::vector<cd> tmp(size_t(n0 * n1));
    for (int64_t b = 0; b < count; ++b) {
        cd* s = v.data() + b * n0 * n1;
        for (int64_t u = 0; u < n0; ++u)
            for (int64_t w = 0; w < n1; ++w) {
                cd acc = 0;
                for (int64_t i = 0; i < n0; ++i)
                    for (int64_t j = 0; j < n1; ++j)
                        acc += s[i * n1 + j] *
                               std::polar(1.0, sign * 2 * kPi * (double(u * i % n0) / n0 + double(w * j % n1) / n1));
                tmp[size_t(u * n1 + w)] = acc;
            }
        std::copy(tmp.begin(), tmp.end(), s);
    }
}

// Planes b < count (pts points each) -> frequency-major spectra: frequency f of b at f*count + b,
// the layout forward_to_freq_major gives.
std::vector<cd> to_freq_major(std::vector<cd> planes, int64_t count, int64_t n0, int64_t n1) {
    dft(planes, count, n0, n1, -1);
    const int64_t pts = n0 * n1;
    std::vector<cd> out(planes.size());
    for (int64_t b = 0; b < count; ++b)
        for (int64_t f = 0; f < pts; ++f) out[size_t(f * count + b)] = planes[size_t(b * pts + f)];
    return out;
}
// The inverse (inverse_from_freq_major): dense real planes (the real part).
std::vector<double> from_freq_major(const std::vector<cd>& spec, int64_t count, int64_t n0, int64_t n1) {
    const int64_t pts = n0 * n1;
    std::vector<cd> planes(spec.size());
    for (int64_t b = 0; b < count; ++b)
        for (int64_t f = 0; f < pts; ++f) planes[size_t(b * pts + f)] = spec[size_t(f * count + b)];
    dft(planes, count, n0, n1, +1);
    std::vector<double> out(planes.size());
    for (size_t i = 0; i < planes.size(); ++i) out[i] = planes[i].real();
    return out;
}

// cuda::spectral_gemm with cuBLAS's column-major semantics: per group, batched over frequencies,
// C = op(A) B with A = W (lda cg, stride k*cg), B = X (ldb c, stride cols*c), C = Y (ldc k,
// stride cols*k), op = conjugate transpose or transpose.
std::vector<cd> spectral_gemm(bool conj, int64_t freqs, int64_t cols, int64_t c, int64_t k, int64_t groups,
                              const std::vector<cd>& x, const std::vector<cd>& w) {
    std::vector<cd> y(size_t(freqs * cols * k), cd(std::nan(""), 0));
    const int64_t cg = c / groups, kg = k / groups;
    for (int64_t g = 0; g < groups; ++g) {
        const cd* A = w.data() + g * kg * cg;
        const cd* B = x.data() + g * cg;
        cd* C = y.data() + g * kg;
        const int64_t lda = cg, ldb = c, ldc = k, m = kg, n = cols, kk = cg;
        for (int64_t f = 0; f < freqs; ++f)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    cd acc = 0;
                    for (int64_t l = 0; l < kk; ++l) {
                        const cd a = A[f * k * cg + l + i * lda];  // op(A)(i, l) = A(l, i)
                        acc += (conj ? std::conj(a) : a) * B[f * cols * c + l + j * ldb];
                    }
                    C[f * cols * k + i + j * ldc] = acc;
                }
    }
    return y;
}

fftg::ImageShape image_shape(const Shape& p) { return {p.h, p.w, p.pad_h, p.pad_w}; }
fftg::FilterShape filter_shape(const Shape& p) { return {p.r, p.s, p.dil_h, p.dil_w, p.flip}; }

// A complex number with cuComplex's member names, for fg_row_product.
struct D2 {
    double x, y;
};
std::vector<D2> pairs(const std::vector<cd>& v) {
    std::vector<D2> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = {v[i].real(), v[i].imag()};
    return out;
}
constexpr int kFilters = 4;  // as cuda/fine_grained_fft.cu

struct Case {
    Shape p;
    double alpha, beta;
};

Case random_case(std::mt19937& rng) {
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    for (;;) {
        Shape p{};
        p.groups = pick(1, 2);
        p.n = pick(1, 2);
        p.c = p.groups * pick(1, 3);
        p.k = p.groups * pick(1, 5);  // 5: FINE_GRAINED_FFT's blocks of 4 filters and a remainder
        p.h = pick(1, 9);
        p.w = pick(1, 9);
        p.r = pick(1, 3);
        p.s = pick(1, 3);
        p.pad_h = pick(0, 2);
        p.pad_w = pick(0, 2);
        p.stride_h = pick(1, 3);
        p.stride_w = pick(1, 3);
        p.dil_h = pick(1, 2);
        p.dil_w = pick(1, 2);
        p.flip = pick(0, 1) == 1;
        if (p.h + 2 * p.pad_h < p.dil_h * (p.r - 1) + 1 || p.w + 2 * p.pad_w < p.dil_w * (p.s - 1) + 1) continue;
        const double alphas[] = {1.0, -0.5}, betas[] = {0.0, 0.75};
        return {p, alphas[pick(0, 1)], betas[pick(0, 1)]};
    }
}

// What each emulated pipeline returns: y = alpha * conv + beta * y0 (y0 NaN when beta == 0).
struct Inputs {
    std::vector<double> x, w, y0, want;
};
Inputs prepare(const Case& tc, std::mt19937& rng) {
    const Shape& p = tc.p;
    Inputs r;
    r.x = convcore_test::random_vector(size_t(p.n * p.c * p.h * p.w), rng);
    r.w = convcore_test::random_vector(size_t(p.k * (p.c / p.groups) * p.r * p.s), rng);
    const std::vector<double> ref = convcore_test::reference_conv(p, r.x, r.w);
    r.y0 = tc.beta == 0 ? std::vector<double>(ref.size(), std::nan("")) : convcore_test::random_vector(ref.size(), rng);
    r.want.resize(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) r.want[i] = tc.alpha * ref[i] + (tc.beta == 0 ? 0.0 : tc.beta * r.y0[i]);
    return r;
}

// FFT (cuda/fft.cu) at Lh x Lw >= Hu x Wu (extra >= 0 adds to each).
std::vector<double> emulate_fft(const Case& tc, const Inputs& in, int64_t extra) {
    const Shape& p = tc.p;
    const int64_t P = p.out_h(), Q = p.out_w(), cg = p.c / p.groups;
    const int64_t hu = fftg::used_extent(P, p.stride_h, p.r, p.dil_h), wu = fftg::used_extent(Q, p.stride_w, p.s, p.dil_w);
    const int64_t lh = hu + extra, lw = wu + extra, pts = lh * lw;
    std::vector<cd> xp(size_t(p.n * p.c * pts)), wp(size_t(p.k * cg * pts));
    for (int64_t e = 0; e < int64_t(xp.size()); ++e)  // InputPlanes
        xp[size_t(e)] = fftg::fft_input_elem(in.x.data(), image_shape(p), hu, wu, lh, lw, e);
    for (int64_t e = 0; e < int64_t(wp.size()); ++e)  // FilterPlanes
        wp[size_t(e)] = fftg::filter_plane_elem(in.w.data(), filter_shape(p), lh, lw, e);
    const auto X = to_freq_major(xp, p.n * p.c, lh, lw), W = to_freq_major(wp, p.k * cg, lh, lw);
    const auto planes = from_freq_major(spectral_gemm(true, pts, p.n, p.c, p.k, p.groups, X, W), p.n * p.k, lh, lw);
    std::vector<double> y = in.y0;
    const double alpha = tc.alpha / double(pts);
    for (int64_t e = 0; e < int64_t(y.size()); ++e)  // CropOutputs
        convcore::blend_store(&y[size_t(e)], planes[size_t(fftg::fft_output_source(e, P, Q, p.stride_h, p.stride_w, lh, lw))],
                              alpha, tc.beta);
    return y;
}

// POLY_HANKEL (cuda/poly_hankel.cu) at cyclic length L = Hu*Iw + extra.
std::vector<double> emulate_poly(const Case& tc, const Inputs& in, int64_t extra) {
    const Shape& p = tc.p;
    const int64_t P = p.out_h(), Q = p.out_w(), cg = p.c / p.groups;
    const int64_t kh = fftg::dilated_extent(p.r, p.dil_h), kw = fftg::dilated_extent(p.s, p.dil_w);
    const int64_t hu = fftg::used_extent(P, p.stride_h, p.r, p.dil_h), iw = fftg::used_extent(Q, p.stride_w, p.s, p.dil_w);
    const int64_t len = hu * iw + extra;
    std::vector<cd> xa(size_t(p.n * p.c * len)), wu(size_t(p.k * cg * len));
    for (int64_t e = 0; e < int64_t(xa.size()); ++e)  // InputPolys
        xa[size_t(e)] = fftg::poly_input_elem(in.x.data(), image_shape(p), hu, iw, len, e);
    for (int64_t e = 0; e < int64_t(wu.size()); ++e)  // FilterPolys
        wu[size_t(e)] = fftg::poly_filter_elem(in.w.data(), filter_shape(p), iw, len, e);
    const auto X = to_freq_major(xa, p.n * p.c, len, 1), W = to_freq_major(wu, p.k * cg, len, 1);
    const auto polys = from_freq_major(spectral_gemm(false, len, p.n, p.c, p.k, p.groups, X, W), p.n * p.k, len, 1);
    std::vector<double> y = in.y0;
    const double alpha = tc.alpha / double(len);
    for (int64_t e = 0; e < int64_t(y.size()); ++e) {  // ReadOutputs (Eq. 12)
        const int64_t src = fftg::poly_output_source(e, P, Q, p.stride_h, p.stride_w, iw, kh, kw, len);
        EXPECT_LT(src % len, hu * iw);  // the last output coefficient is Hu*Iw - 1
        convcore::blend_store(&y[size_t(e)], polys[size_t(src)], alpha, tc.beta);
    }
    return y;
}

// FFT_TILING (cuda/fft_tiling.cu) with th x tw tiles and jb jobs per chunk.
std::vector<double> emulate_tiling(const Case& tc, const Inputs& in, int64_t th, int64_t tw, int64_t jb) {
    const Shape& p = tc.p;
    const int64_t P = p.out_h(), Q = p.out_w(), cg = p.c / p.groups;
    const int64_t rd = fftg::dilated_extent(p.r, p.dil_h), sd = fftg::dilated_extent(p.s, p.dil_w);
    const int64_t ah = fftg::stride1_outputs(P, p.stride_h), aw = fftg::stride1_outputs(Q, p.stride_w);
    const fftg::TileGrid tg = fftg::tile_grid(th, tw, rd, sd, ah, aw);
    const int64_t pts = th * tw, tiles = tg.nth * tg.ntw, jobs = p.n * tiles;
    std::vector<cd> wp(size_t(p.k * cg * pts));
    for (int64_t e = 0; e < int64_t(wp.size()); ++e)  // FilterPlanes
        wp[size_t(e)] = fftg::filter_plane_elem(in.w.data(), filter_shape(p), th, tw, e);
    const auto W = to_freq_major(wp, p.k * cg, th, tw);
    std::vector<double> y = in.y0;
    std::vector<int> written(y.size(), 0);
    const double alpha = tc.alpha / double(pts);
    for (int64_t j0 = 0; j0 < jobs; j0 += jb) {
        const fftg::TileChunk chunk{tg, j0, jobs};
        std::vector<cd> xp(size_t(jb * p.c * pts));
        for (int64_t e = 0; e < int64_t(xp.size()); ++e)  // TileInputs
            xp[size_t(e)] = fftg::tile_input_elem(in.x.data(), image_shape(p), p.c, chunk, e);
        const auto X = to_freq_major(xp, jb * p.c, th, tw);
        const auto planes = from_freq_major(spectral_gemm(true, pts, jb, p.c, p.k, p.groups, X, W), jb * p.k, th, tw);
        for (int64_t e = 0; e < jb * p.k * tg.oh * tg.ow; ++e) {  // TileOutputs
            int64_t src = -1;
            const int64_t dst = fftg::tile_output_target(e, chunk, p.k, P, Q, p.stride_h, p.stride_w, &src);
            if (dst < 0) continue;
            ++written[size_t(dst)];
            convcore::blend_store(&y[size_t(dst)], planes[size_t(src)], alpha, tc.beta);
        }
    }
    for (size_t i = 0; i < written.size(); ++i) EXPECT_EQ(written[i], 1) << "output " << i;
    return y;
}

// FINE_GRAINED_FFT (cuda/fine_grained_fft.cu) at row length L = Wu + extra, nb images per chunk.
std::vector<double> emulate_fine_grained(const Case& tc, const Inputs& in, int64_t extra, int64_t nb) {
    const Shape& p = tc.p;
    const int64_t P = p.out_h(), Q = p.out_w(), cg = p.c / p.groups, kg = p.k / p.groups;
    const int64_t hu = fftg::used_extent(P, p.stride_h, p.r, p.dil_h), wu = fftg::used_extent(Q, p.stride_w, p.s, p.dil_w);
    const int64_t len = wu + extra, wrows = p.k * cg * p.r;
    std::vector<cd> wr(size_t(wrows * len));
    for (int64_t e = 0; e < int64_t(wr.size()); ++e)  // FilterRows
        wr[size_t(e)] = fftg::fg_filter_elem(in.w.data(), filter_shape(p), len, e);
    dft(wr, wrows, len, 1, -1);  // dense row spectra
    std::vector<double> y = in.y0;
    const double alpha = tc.alpha / double(len);
    for (int64_t n0 = 0; n0 < p.n; n0 += nb) {
        std::vector<cd> xr(size_t(nb * p.c * hu * len));
        for (int64_t e = 0; e < int64_t(xr.size()); ++e)  // InputRows
            xr[size_t(e)] = fftg::fg_input_elem(in.x.data(), image_shape(p), p.c, hu, wu, len, n0, p.n, e);
        dft(xr, nb * p.c * hu, len, 1, -1);
        // RowProduct: the kernel's element function on {x, y} pairs like cuComplex
        const int64_t kblocks = (kg + kFilters - 1) / kFilters;
        const fftg::FgProduct sh{len, p.c, p.k, cg, kg, p.r, P, hu, p.stride_h, p.dil_h, kblocks};
        const std::vector<D2> xs = pairs(xr), ws = pairs(wr);
        std::vector<D2> ys(size_t(nb * p.k * P * len), D2{std::nan(""), 0.0});
        for (int64_t e = 0; e < nb * p.groups * kblocks * P * len; ++e)
            fftg::fg_row_product<kFilters>(xs.data(), ws.data(), ys.data(), sh, e);
        std::vector<cd> yr(ys.size());
        for (size_t i = 0; i < ys.size(); ++i) yr[i] = cd(ys[i].x, ys[i].y);
        dft(yr, nb * p.k * P, len, 1, +1);
        for (int64_t e = 0; e < nb * p.k * P * Q; ++e) {  // RowOutputs
            int64_t src = -1;
            const int64_t dst = fftg::fg_output_target(e, p.k, P, Q, p.stride_w, len, n0, p.n, &src);
            if (dst >= 0) convcore::blend_store(&y[size_t(dst)], yr[size_t(src)].real(), alpha, tc.beta);
        }
    }
    return y;
}

constexpr double kBound = 1e-12;  // float64 DFTs of a few hundred points

TEST(FftGeometry, FftPipelineMatchesReference) {
    std::mt19937 rng(11);
    for (int it = 0; it < 40; ++it) {
        const Case tc = random_case(rng);
        const Inputs in = prepare(tc, rng);
        SCOPED_TRACE(it);
        EXPECT_LT(convcore_test::relative_error(emulate_fft(tc, in, it % 3), in.want), kBound);
    }
}

TEST(FftGeometry, PolyHankelPipelineMatchesReference) {
    std::mt19937 rng(12);
    for (int it = 0; it < 40; ++it) {
        const Case tc = random_case(rng);
        const Inputs in = prepare(tc, rng);
        SCOPED_TRACE(it);
        // L = Hu*Iw exactly (the cyclic claim at its limit), and longer odd / even lengths
        EXPECT_LT(convcore_test::relative_error(emulate_poly(tc, in, it % 3), in.want), kBound);
    }
}

TEST(FftGeometry, TilingPipelineMatchesReference) {
    std::mt19937 rng(13);
    for (int it = 0; it < 40; ++it) {
        const Case tc = random_case(rng);
        const Inputs in = prepare(tc, rng);
        SCOPED_TRACE(it);
        const int64_t rd = fftg::dilated_extent(tc.p.r, tc.p.dil_h), sd = fftg::dilated_extent(tc.p.s, tc.p.dil_w);
        // small tiles (many per image, ragged last tile), a chunk of 1-3 jobs (padded last chunk)
        const int64_t th = rd + it % 3, tw = sd + (it / 3) % 3;
        EXPECT_LT(convcore_test::relative_error(emulate_tiling(tc, in, th, tw, 1 + it % 3), in.want), kBound);
    }
}

TEST(FftGeometry, FineGrainedPipelineMatchesReference) {
    std::mt19937 rng(14);
    for (int it = 0; it < 40; ++it) {
        const Case tc = random_case(rng);
        const Inputs in = prepare(tc, rng);
        SCOPED_TRACE(it);
        EXPECT_LT(convcore_test::relative_error(emulate_fine_grained(tc, in, it % 3, 1 + it % 2), in.want), kBound);
    }
}

// spectral_gemm's custom kernel for small grouped reductions against its cuBLAS form.
TEST(FftGeometry, GroupedProductMatchesTheGemm) {
    std::mt19937 rng(15);
    for (const bool conj : {true, false})
        for (const int64_t groups : {1, 2, 5}) {
            const int64_t freqs = 7, cols = 3, c = groups * 3, k = groups * 2;
            auto random_spectra = [&](int64_t count) {
                const std::vector<double> v = convcore_test::random_vector(size_t(2 * count), rng);
                std::vector<cd> out(static_cast<size_t>(count));
                for (size_t i = 0; i < out.size(); ++i) out[i] = cd(v[2 * i], v[2 * i + 1]);
                return out;
            };
            const std::vector<cd> x = random_spectra(freqs * cols * c), w = random_spectra(freqs * k * (c / groups));
            const std::vector<cd> want = spectral_gemm(conj, freqs, cols, c, k, groups, x, w);
            const std::vector<D2> xs = pairs(x), ws = pairs(w);
            std::vector<D2> ys(want.size(), D2{std::nan(""), 0.0});
            for (int64_t e = 0; e < int64_t(ys.size()); ++e)
                fftg::grouped_product(xs.data(), ws.data(), ys.data(), cols, c, k, groups, conj, e);
            for (size_t i = 0; i < ys.size(); ++i)
                EXPECT_LT(std::abs(cd(ys[i].x, ys[i].y) - want[i]), 1e-12) << "conj " << conj << " groups " << groups;
        }
}

TEST(FftGeometry, GpuTileSize) {
    EXPECT_EQ(fftg::gpu_tile_size(3, 1000), 32);
    EXPECT_EQ(fftg::gpu_tile_size(16, 1000), 32);
    EXPECT_EQ(fftg::gpu_tile_size(17, 1000), 64);
    EXPECT_EQ(fftg::gpu_tile_size(25, 1000), 64);
    EXPECT_EQ(fftg::gpu_tile_size(3, 20), 20);  // the whole extent when smaller
    EXPECT_EQ(fftg::gpu_tile_size(40, 100), 100);
    // a tile always holds the filter and at least one output
    for (int64_t ext = 1; ext < 300; ++ext)
        for (int64_t outs : {int64_t(1), int64_t(7), int64_t(500)}) {
            const int64_t t = fftg::gpu_tile_size(ext, outs + ext - 1);
            EXPECT_GE(t, ext);
            EXPECT_GE(t - ext + 1, 1);
        }
}

TEST(FftGeometry, SectionsAreAlignedAndDisjoint) {
    fftg::Sections s;
    const size_t a = s.add(3, 4), b = s.add(1000, 8), c = s.add(0, 8), d = s.add(1, 1);
    EXPECT_EQ(a, 0u);
    EXPECT_EQ(b, 256u);
    EXPECT_EQ(c, 256u + 8192u);
    EXPECT_EQ(d, c);
    EXPECT_EQ(s.total() , double(c + 256));
    EXPECT_FALSE(s.overflow);
    for (size_t off : {a, b, c, d}) EXPECT_EQ(off % 256, 0u);
    fftg::Sections big;
    big.add(1e19, 8);
    EXPECT_TRUE(big.overflow);
    EXPECT_GE(big.total(), 8e19);
}

}  // namespace
