// The host/device Winograd code of common/winograd_tile.hpp, run on the host exactly as
// cuda/winograd.cu runs it on the GPU: tile geometry, the three transforms, the workspace
// layout (WsLayout) and the column-major batched GEMM arguments (batched_gemm_args), with the
// GEMM emulated naively in column-major order like cuBLAS. Compared with the float64
// reference convolution on random problems (odd sizes, padding 0-2, groups, both modes,
// alpha/beta with a NaN-poisoned y when beta == 0; blocks of a few tiles so several blocks
// and padded rows of V/M are exercised), float32 and float64, with the bounds of
// docs/algorithms.md. This is what makes the GPU kernels' arithmetic tested on machines
// without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/blend.hpp"
#include "common/winograd_fused.hpp"
#include "common/winograd_tile.hpp"
#include "reference.hpp"

namespace {

using convcore_test::Shape;

// C_b = A_b B_b, column-major, as cublas<t>gemmStridedBatched(N, N) with alpha 1, beta 0.
template <typename T>
void gemm_batched_colmajor(const convcore::winograd::BatchedGemm& b, const T* A, const T* B, T* C) {
    for (int64_t bt = 0; bt < b.batch; ++bt)
        for (int64_t j = 0; j < b.n; ++j)
            for (int64_t i = 0; i < b.m; ++i) {
                T acc = T(0);
                for (int64_t l = 0; l < b.k; ++l)
                    acc += A[bt * b.stride_a + l * b.lda + i] * B[bt * b.stride_b + j * b.ldb + l];
                C[bt * b.stride_c + j * b.ldc + i] = acc;
            }
}

// y = alpha * conv + beta * y through the GPU solver's steps, `block` tiles at a time.
template <class F, typename T>
void emulate_gpu(const Shape& s, const std::vector<T>& x, const std::vector<T>& w, std::vector<T>& y,
                 T alpha, T beta, int64_t block) {
    namespace wg = convcore::winograd;
    constexpr int a = F::alpha, m = F::m;
    const int64_t P = s.out_h(), Q = s.out_w(), cg = s.c / s.groups, kg = s.k / s.groups;
    const wg::TileGrid grid = wg::tile_grid(m, s.n, P, Q);
    const int64_t ldt = (block + 7) / 8 * 8;
    const wg::WsLayout ws{a * a, cg, kg, ldt};
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> U(size_t(a * a * s.k * cg), nan), V(size_t(a * a * s.c * ldt)), M(size_t(a * a * s.k * ldt));
    for (int64_t k = 0; k < s.k; ++k)
        for (int64_t c = 0; c < cg; ++c) {
            T u[a][a];
            wg::filter_transform<F>(w.data() + (k * cg + c) * 9, s.flip, u);
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) U[size_t(ws.u(k / kg, xi * a + nu, k % kg, c))] = u[xi][nu];
        }
    for (int64_t t0 = 0; t0 < grid.count; t0 += block) {
        const int64_t nt = std::min(block, grid.count - t0);
        std::fill(V.begin(), V.end(), nan);  // anything the GEMM reads must have been written
        std::fill(M.begin(), M.end(), nan);
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t tl = 0; tl < nt; ++tl) {
                const wg::TilePos tp = wg::tile_pos(grid, t0 + tl);
                T d[a][a], v[a][a];
                wg::load_input_tile<F>(x.data() + (tp.n * s.c + c) * s.h * s.w, s.h, s.w, s.pad_h,
                                       s.pad_w, tp.ty, tp.tx, d);
                wg::input_transform<F>(d, v);
                for (int xi = 0; xi < a; ++xi)
                    for (int nu = 0; nu < a; ++nu)
                        V[size_t(ws.v(c / cg, xi * a + nu, c % cg, tl))] = v[xi][nu];
            }
        gemm_batched_colmajor(wg::batched_gemm_args(ws, nt, s.groups), V.data(), U.data(), M.data());
        for (int64_t k = 0; k < s.k; ++k)
            for (int64_t tl = 0; tl < nt; ++tl) {
                const wg::TilePos tp = wg::tile_pos(grid, t0 + tl);
                T mm[a][a], yt[m][m];
                for (int xi = 0; xi < a; ++xi)
                    for (int nu = 0; nu < a; ++nu) mm[xi][nu] = M[size_t(ws.m(k / kg, xi * a + nu, k % kg, tl))];
                wg::output_transform<F>(mm, yt);
                for (int r = 0; r < m; ++r)
                    for (int c2 = 0; c2 < m; ++c2) {
                        const int64_t op = tp.ty * m + r, oq = tp.tx * m + c2;
                        if (op < P && oq < Q)
                            convcore::blend_store(&y[size_t(((tp.n * s.k + k) * P + op) * Q + oq)],
                                                  yt[r][c2], alpha, beta);
                    }
            }
    }
}

template <class F, typename T>
void check_random(unsigned seed, int count, double bound) {
    std::mt19937 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    double worst = 0;
    for (int i = 0; i < count; ++i) {
        Shape s{};
        s.groups = pick(1, 3);
        s.n = pick(1, 3);
        s.c = s.groups * pick(1, 5);
        s.k = s.groups * pick(1, 5);
        s.r = s.s = 3;
        s.pad_h = pick(0, 2);
        s.pad_w = pick(0, 2);
        s.h = pick(std::max<int64_t>(1, 3 - 2 * s.pad_h), 17);
        s.w = pick(std::max<int64_t>(1, 3 - 2 * s.pad_w), 17);
        s.stride_h = s.stride_w = s.dil_h = s.dil_w = 1;
        s.flip = pick(0, 1) == 1;
        const double alphas[] = {1.0, 0.5, -1.25};
        const double betas[] = {0.0, 0.0, 1.0, -0.75};
        const T alpha = T(alphas[pick(0, 2)]), beta = T(betas[pick(0, 3)]);
        const int64_t P = s.out_h(), Q = s.out_w();
        SCOPED_TRACE(testing::Message() << "n" << s.n << " c" << s.c << " k" << s.k << " g" << s.groups
                                        << " " << s.h << "x" << s.w << " pad " << s.pad_h << "," << s.pad_w
                                        << (s.flip ? " conv" : " xcorr") << " alpha " << alpha << " beta " << beta);
        const std::vector<double> xd = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const std::vector<double> wd = convcore_test::random_vector(size_t(s.k * (s.c / s.groups) * 9), rng);
        const std::vector<double> y0 = convcore_test::random_vector(size_t(s.n * s.k * P * Q), rng);
        std::vector<T> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), y(y0.size());
        for (size_t j = 0; j < y.size(); ++j)
            y[j] = beta == T(0) ? std::numeric_limits<T>::quiet_NaN() : T(y0[j]);
        emulate_gpu<F, T>(s, x, w, y, alpha, beta, /*block=*/pick(1, 13));
        // Reference from the rounded inputs.
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
    ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
    std::printf("worst relative error %.3g (bound %.0e)\n", worst, bound);
}

TEST(WinogradTile, F2x3Float32) { check_random<convcore::winograd::F2x3, float>(11, 60, 1e-5); }
TEST(WinogradTile, F2x3Float64) { check_random<convcore::winograd::F2x3, double>(12, 40, 1e-13); }
TEST(WinogradTile, F4x3Float32) { check_random<convcore::winograd::F4x3, float>(13, 60, 5e-5); }
TEST(WinogradTile, F4x3Float64) { check_random<convcore::winograd::F4x3, double>(14, 40, 1e-12); }

// The fused F(2x2,3x3) kernel's block, phase by phase as the GPU runs it between barriers:
// every thread's phase 1 (load + input transform of a channel chunk), then every thread's
// phase 2 (products into its registers), ..., then phases 3 and 4 (output transform). The
// shared buffer is poisoned with NaN before each block.
template <typename T>
void emulate_fused(const Shape& s, const std::vector<T>& x, const std::vector<T>& w, std::vector<T>& y,
                   T alpha, T beta) {
    namespace wg = convcore::winograd;
    const int64_t P = s.out_h(), Q = s.out_w(), cg = s.c / s.groups, kg = s.k / s.groups;
    wg::FusedDims d{};
    d.c = s.c, d.h = s.h, d.w = s.w, d.k = s.k, d.p = P, d.q = Q, d.cg = cg, d.kg = kg;
    d.pad_h = s.pad_h, d.pad_w = s.pad_w;
    d.grid = wg::tile_grid(2, s.n, P, Q);
    d.ws = {16, cg, kg, 0};
    d.kblocks = (kg + wg::kFusedK - 1) / wg::kFusedK;
    std::vector<T> U(size_t(16 * s.k * cg));
    for (int64_t k = 0; k < s.k; ++k)
        for (int64_t c = 0; c < cg; ++c) {
            T u[4][4];
            wg::filter_transform<wg::F2x3>(w.data() + (k * cg + c) * 9, s.flip, u);
            for (int xi = 0; xi < 16; ++xi) U[size_t(d.ws.u(k / kg, xi, k % kg, c))] = u[xi / 4][xi % 4];
        }
    std::vector<T> smem(wg::kFusedSmem);
    std::vector<T> acc(size_t(wg::kFusedThreads * wg::kFusedAccK * wg::kFusedAccT));
    auto acc_of = [&](int tid) -> T(&)[wg::kFusedAccK][wg::kFusedAccT] {
        return *reinterpret_cast<T(*)[wg::kFusedAccK][wg::kFusedAccT]>(&acc[size_t(tid * wg::kFusedAccK * wg::kFusedAccT)]);
    };
    for (int64_t tile0 = 0; tile0 < d.grid.count; tile0 += wg::kFusedTiles)
        for (int64_t gk = 0; gk < d.kblocks * s.groups; ++gk) {
            const int64_t g = gk / d.kblocks, k0 = gk % d.kblocks * wg::kFusedK;
            std::fill(smem.begin(), smem.end(), std::numeric_limits<T>::quiet_NaN());
            std::fill(acc.begin(), acc.end(), T(0));
            for (int64_t c0 = 0; c0 < cg; c0 += wg::kFusedC) {
                for (int tid = 0; tid < wg::kFusedThreads; ++tid)
                    wg::fused_load_chunk(d, x.data(), U.data(), tile0, g, k0, c0, tid, smem.data());
                for (int tid = 0; tid < wg::kFusedThreads; ++tid) wg::fused_multiply(smem.data(), tid, acc_of(tid));
            }
            for (int tid = 0; tid < wg::kFusedThreads; ++tid) wg::fused_store_acc(smem.data(), tid, acc_of(tid));
            for (int tid = 0; tid < wg::kFusedThreads; ++tid)
                wg::fused_output(d, smem.data(), tile0, g, k0, tid, y.data(), alpha, beta);
        }
}

TEST(WinogradTile, FusedF2x3BlockFloat32) {
    std::mt19937 rng(15);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    double worst = 0;
    for (int i = 0; i < 40; ++i) {
        Shape s{};
        s.groups = pick(1, 3);
        s.n = pick(1, 3);
        s.c = s.groups * pick(1, 20);  // one and several channel chunks, partial ones
        s.k = s.groups * pick(1, 40);  // one and several output-channel blocks
        s.r = s.s = 3;
        s.pad_h = pick(0, 2);
        s.pad_w = pick(0, 2);
        s.h = pick(std::max<int64_t>(1, 3 - 2 * s.pad_h), 21);
        s.w = pick(std::max<int64_t>(1, 3 - 2 * s.pad_w), 21);
        s.stride_h = s.stride_w = s.dil_h = s.dil_w = 1;
        s.flip = pick(0, 1) == 1;
        const float alpha = pick(0, 1) ? 1.0f : -0.5f, beta = pick(0, 1) ? 0.0f : 0.75f;
        const int64_t P = s.out_h(), Q = s.out_w();
        SCOPED_TRACE(testing::Message() << "n" << s.n << " c" << s.c << " k" << s.k << " g" << s.groups << " "
                                        << s.h << "x" << s.w << " pad " << s.pad_h << "," << s.pad_w);
        const std::vector<double> xd = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const std::vector<double> wd = convcore_test::random_vector(size_t(s.k * (s.c / s.groups) * 9), rng);
        const std::vector<double> y0 = convcore_test::random_vector(size_t(s.n * s.k * P * Q), rng);
        std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), y(y0.size());
        for (size_t j = 0; j < y.size(); ++j) y[j] = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : float(y0[j]);
        emulate_fused<float>(s, x, w, y, alpha, beta);
        const std::vector<double> xr(x.begin(), x.end()), wr(w.begin(), w.end());
        std::vector<double> ref = convcore_test::reference_conv(s, xr, wr);
        for (size_t j = 0; j < ref.size(); ++j)
            ref[j] = double(alpha) * ref[j] + (beta == 0.0f ? 0.0 : double(beta) * double(float(y0[j])));
        const std::vector<double> got(y.begin(), y.end());
        for (size_t j = 0; j < got.size(); ++j) ASSERT_TRUE(std::isfinite(got[j])) << "element " << j;
        const double err = convcore_test::relative_error(got, ref);
        worst = std::max(worst, err);
        EXPECT_LT(err, 1e-5);
    }
    std::printf("fused: worst relative error %.3g (bound 1e-05)\n", worst);
}

// A wrong tile geometry or layout must fail: a test that cannot fail is a defect. Swapping
// two transform positions in the output (as a wrong M index would) gives a large error.
TEST(WinogradTile, DetectsAWrongLayout) {
    namespace wg = convcore::winograd;
    std::mt19937 rng(3);
    double d[4][4], g[9], u[4][4], v[4][4], mm[4][4], y[2][2];
    for (auto& row : d)
        for (double& e : row) e = std::uniform_real_distribution<double>(-1, 1)(rng);
    for (double& e : g) e = std::uniform_real_distribution<double>(-1, 1)(rng);
    wg::filter_transform<wg::F2x3>(g, false, u);
    wg::input_transform<wg::F2x3>(d, v);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) mm[i][j] = u[i][j] * v[i][j];
    wg::output_transform<wg::F2x3>(mm, y);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            double ref = 0;
            for (int r = 0; r < 3; ++r)
                for (int s = 0; s < 3; ++s) ref += d[i + r][j + s] * g[r * 3 + s];
            EXPECT_NEAR(y[i][j], ref, 1e-14);
        }
    std::swap(mm[1][2], mm[2][1]);
    wg::output_transform<wg::F2x3>(mm, y);
    double diff = 0;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            double ref = 0;
            for (int r = 0; r < 3; ++r)
                for (int s = 0; s < 3; ++s) ref += d[i + r][j + s] * g[r * 3 + s];
            diff = std::max(diff, std::fabs(y[i][j] - ref));
        }
    EXPECT_GT(diff, 1e-3);
}

// The tile grid and positions: every output covered exactly once.
TEST(WinogradTile, TileGridCoversTheOutput) {
    namespace wg = convcore::winograd;
    for (int64_t m : {2, 4})
        for (int64_t p : {1, 2, 3, 5, 8, 13})
            for (int64_t q : {1, 4, 7}) {
                const wg::TileGrid g = wg::tile_grid(m, 2, p, q);
                std::vector<int> hits(size_t(2 * p * q), 0);
                for (int64_t t = 0; t < g.count; ++t) {
                    const wg::TilePos tp = wg::tile_pos(g, t);
                    ASSERT_LT(tp.n, 2);
                    for (int64_t i = 0; i < m; ++i)
                        for (int64_t j = 0; j < m; ++j)
                            if (tp.ty * m + i < p && tp.tx * m + j < q)
                                ++hits[size_t((tp.n * p + tp.ty * m + i) * q + tp.tx * m + j)];
                }
                for (int h : hits) ASSERT_EQ(h, 1);
            }
}

}  // namespace
