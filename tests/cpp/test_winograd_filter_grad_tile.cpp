// The host/device code of common/winograd_filter_grad.hpp (the Winograd F(3x3,2x2) filter
// gradient), run on the host exactly as cuda/winograd_backward.cu runs it on the GPU: per
// block of tiles the dy and input transform kernels' per-item code, the column-major batched
// GEMM (op(A) = A^T) emulated naively like cuBLAS from fgrad::gemm_args, the cross-block
// accumulation (float32: block sum in float, added into a float64 M by fgrad::accumulate;
// float64: GEMM beta = 0 for the first block, 1 after), then the output kernel's store_dw.
// Compared with an independent float64 reference filter gradient (straight from the
// definition) on random problems: odd sizes, padding 0-3, groups, both modes, alpha/beta with a
// NaN-poisoned dw when beta == 0, blocks of 1-13 tiles so several blocks and the padded rows of
// U and V are exercised (U, V and M are NaN-poisoned, so reading anything unwritten fails).
// Bounds are docs/algorithms.md's for WINOGRAD_3X3_2X2 (5e-5 / 1e-11).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "common/winograd_filter_grad.hpp"
#include "reference.hpp"

namespace {

namespace fg = convcore::winograd::fgrad;
using convcore_test::Shape;

// dw[k][c][r][s] = sum_{n, i, j} dy[n][k][i][j] * x[n][g*Cg + c][i - pad_h + r'][j - pad_w + s']
// with (r', s') = (r, s), or (2 - r, 2 - s) in the true-convolution mode: the adjoint of
// reference_conv term by term (3x3, stride 1, dilation 1).
std::vector<double> reference_filter_grad(const Shape& p, const std::vector<double>& x,
                                          const std::vector<double>& dy) {
    const int64_t P = p.out_h(), Q = p.out_w(), cg = p.c / p.groups, kg = p.k / p.groups;
    std::vector<double> dw(size_t(p.k * cg * 9), 0.0);
    for (int64_t k = 0; k < p.k; ++k)
        for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < 3; ++r)
                for (int64_t s = 0; s < 3; ++s) {
                    double acc = 0;
                    const int64_t cin = (k / kg) * cg + c;
                    for (int64_t n = 0; n < p.n; ++n)
                        for (int64_t i = 0; i < P; ++i)
                            for (int64_t j = 0; j < Q; ++j) {
                                const int64_t ih = i - p.pad_h + r, iw = j - p.pad_w + s;
                                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                                acc += dy[size_t(((n * p.k + k) * P + i) * Q + j)] *
                                       x[size_t(((n * p.c + cin) * p.h + ih) * p.w + iw)];
                            }
                    const int64_t wr = p.flip ? 2 - r : r, ws = p.flip ? 2 - s : s;
                    dw[size_t((k * cg + c) * 9 + wr * 3 + ws)] = acc;
                }
    return dw;
}

// C_b = op(A_b) B_b (+ beta C_b), column-major, op(A) = A^T: cublas<t>gemmStridedBatched(T, N)
// with alpha 1 (beta == 0 never reads C). Every index it touches must lie in the buffers.
template <typename T, typename C>
void gemm_tn_colmajor(const fg::GradGemm& b, const std::vector<T>& A, const std::vector<T>& B,
                      std::vector<C>& Cm, T beta) {
    ASSERT_LE((b.batch - 1) * b.stride_a + (b.m - 1) * b.lda + b.k, int64_t(A.size()));
    ASSERT_LE((b.batch - 1) * b.stride_b + (b.n - 1) * b.ldb + b.k, int64_t(B.size()));
    ASSERT_LE((b.batch - 1) * b.stride_c + (b.n - 1) * b.ldc + b.m, int64_t(Cm.size()));
    for (int64_t bt = 0; bt < b.batch; ++bt)
        for (int64_t j = 0; j < b.n; ++j)
            for (int64_t i = 0; i < b.m; ++i) {
                T acc = T(0);
                for (int64_t l = 0; l < b.k; ++l)
                    acc += A[size_t(bt * b.stride_a + i * b.lda + l)] * B[size_t(bt * b.stride_b + j * b.ldb + l)];
                C& c = Cm[size_t(bt * b.stride_c + j * b.ldc + i)];
                c = beta == T(0) ? acc : acc + beta * T(c);
            }
}

// dw = alpha * grad + beta * dw through the GPU solver's steps, `block` tiles at a time.
template <typename T>
void emulate_gpu(const Shape& s, const std::vector<T>& x, const std::vector<T>& dy, std::vector<T>& dw,
                 T alpha, T beta, int64_t block) {
    constexpr int a = fg::kA;
    const int64_t P = s.out_h(), Q = s.out_w(), cg = s.c / s.groups, kg = s.k / s.groups;
    const convcore::winograd::TileGrid grid = fg::grid(s.n, P, Q);
    const int64_t ldt = (block + 7) / 8 * 8;
    const fg::Layout ws{cg, kg, ldt};
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const size_t m_elems = size_t(fg::kXi * s.k * cg);
    std::vector<T> U(size_t(fg::kXi * s.k * ldt)), V(size_t(fg::kXi * s.c * ldt)), Mb(m_elems);
    std::vector<double> M(m_elems, std::numeric_limits<double>::quiet_NaN());  // first block overwrites
    for (int64_t t0 = 0; t0 < grid.count; t0 += block) {
        const int64_t nt = std::min(block, grid.count - t0);
        const bool first = t0 == 0;
        std::fill(U.begin(), U.end(), nan);  // anything the GEMM reads must have been written
        std::fill(V.begin(), V.end(), nan);
        std::fill(Mb.begin(), Mb.end(), nan);
        for (int64_t k = 0; k < s.k; ++k)  // dy_transform_kernel
            for (int64_t tl = 0; tl < nt; ++tl) {
                const convcore::winograd::TilePos tp = convcore::winograd::tile_pos(grid, t0 + tl);
                T g[4], u[a][a];
                fg::load_dy_tile(dy.data() + (tp.n * s.k + k) * P * Q, P, Q, tp.ty, tp.tx, g);
                fg::dy_transform(g, u);
                for (int xi = 0; xi < a; ++xi)
                    for (int nu = 0; nu < a; ++nu) U[size_t(ws.u(k / kg, xi * a + nu, k % kg, tl))] = u[xi][nu];
            }
        for (int64_t c = 0; c < s.c; ++c)  // x_transform_kernel
            for (int64_t tl = 0; tl < nt; ++tl) {
                const convcore::winograd::TilePos tp = convcore::winograd::tile_pos(grid, t0 + tl);
                T d[a][a], v[a][a];
                fg::load_x_tile(x.data() + (tp.n * s.c + c) * s.h * s.w, s.h, s.w, s.pad_h, s.pad_w, tp.ty,
                                tp.tx, d);
                fg::x_transform(d, v);
                for (int xi = 0; xi < a; ++xi)
                    for (int nu = 0; nu < a; ++nu) V[size_t(ws.v(c / cg, xi * a + nu, c % cg, tl))] = v[xi][nu];
            }
        const fg::GradGemm gemm = fg::gemm_args(ws, nt, s.groups);
        if constexpr (std::is_same<T, double>::value) {
            gemm_tn_colmajor(gemm, V, U, M, first ? 0.0 : 1.0);
        } else {
            gemm_tn_colmajor(gemm, V, U, Mb, T(0));
            for (size_t i = 0; i < m_elems; ++i) fg::accumulate(M[i], Mb[i], first);  // accumulate_kernel
        }
    }
    if (grid.count == 0) {  // the solver's empty-sum path: dw = beta * dw
        for (T& e : dw) e = beta == T(0) ? T(0) : beta * e;
        return;
    }
    for (int64_t k = 0; k < s.k; ++k)  // output_kernel
        for (int64_t c = 0; c < cg; ++c) {
            double mm[a][a];
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) mm[xi][nu] = M[size_t(ws.m(k / kg, xi * a + nu, k % kg, c))];
            fg::store_dw(mm, dw.data() + (k * cg + c) * 9, s.flip, alpha, beta);
        }
}

Shape random_shape(std::mt19937& rng) {
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    Shape s{};
    s.groups = pick(1, 3);
    s.n = pick(1, 3);
    s.c = s.groups * pick(1, 5);
    s.k = s.groups * pick(1, 5);
    s.r = s.s = 3;
    s.pad_h = pick(0, 3);
    s.pad_w = pick(0, 3);
    s.h = pick(std::max<int64_t>(1, 3 - 2 * s.pad_h), 17);
    s.w = pick(std::max<int64_t>(1, 3 - 2 * s.pad_w), 17);
    s.stride_h = s.stride_w = s.dil_h = s.dil_w = 1;
    s.flip = pick(0, 1) == 1;
    return s;
}

// The emulated GPU result's relative error against the reference; `wrong_flip` runs the
// emulation in the other mode (a test that cannot fail is a defect).
template <typename T>
double run_case(const Shape& s, std::mt19937& rng, double alpha_d, double beta_d, int64_t block,
                bool wrong_flip = false) {
    const int64_t P = s.out_h(), Q = s.out_w();
    const std::vector<double> xd = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
    const std::vector<double> dyd = convcore_test::random_vector(size_t(s.n * s.k * P * Q), rng);
    const std::vector<double> dw0 = convcore_test::random_vector(size_t(s.k * (s.c / s.groups) * 9), rng);
    const T alpha = T(alpha_d), beta = T(beta_d);
    std::vector<T> x(xd.begin(), xd.end()), dy(dyd.begin(), dyd.end()), dw(dw0.size());
    for (size_t j = 0; j < dw.size(); ++j) dw[j] = beta == T(0) ? std::numeric_limits<T>::quiet_NaN() : T(dw0[j]);
    Shape run_shape = s;
    if (wrong_flip) run_shape.flip = !s.flip;
    emulate_gpu<T>(run_shape, x, dy, dw, alpha, beta, block);
    // Reference from the rounded inputs.
    const std::vector<double> xr(x.begin(), x.end()), dyr(dy.begin(), dy.end());
    std::vector<double> ref = reference_filter_grad(s, xr, dyr);
    for (size_t j = 0; j < ref.size(); ++j)
        ref[j] = double(alpha) * ref[j] + (beta == T(0) ? 0.0 : double(beta) * double(T(dw0[j])));
    const std::vector<double> got(dw.begin(), dw.end());
    for (size_t j = 0; j < got.size(); ++j)
        if (!std::isfinite(got[j])) {
            ADD_FAILURE() << "dw element " << j << " is not finite";
            return std::numeric_limits<double>::infinity();
        }
    return convcore_test::relative_error(got, ref);
}

template <typename T>
void check_random(unsigned seed, int count, double bound) {
    std::mt19937 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    double worst = 0;
    for (int i = 0; i < count; ++i) {
        const Shape s = random_shape(rng);
        const double alphas[] = {1.0, 0.5, -1.25};
        const double betas[] = {0.0, 0.0, 1.0, -0.75};
        const double alpha = alphas[pick(0, 2)], beta = betas[pick(0, 3)];
        const int64_t block = pick(1, 13);
        SCOPED_TRACE(testing::Message() << "n" << s.n << " c" << s.c << " k" << s.k << " g" << s.groups << " "
                                        << s.h << "x" << s.w << " pad " << s.pad_h << "," << s.pad_w
                                        << (s.flip ? " conv" : " xcorr") << " alpha " << alpha << " beta " << beta
                                        << " block " << block);
        const double err = run_case<T>(s, rng, alpha, beta, block);
        worst = std::max(worst, err);
        EXPECT_LT(err, bound);
    }
    ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
    std::printf("worst relative error %.3g (bound %.0e)\n", worst, bound);
}

TEST(WinogradFilterGradTile, Float32) { check_random<float>(21, 80, 5e-5); }
TEST(WinogradFilterGradTile, Float64) { check_random<double>(22, 60, 1e-11); }

// One block holding every tile, and blocks of one tile (the most cross-block accumulation).
TEST(WinogradFilterGradTile, BlockExtremes) {
    std::mt19937 rng(23);
    Shape s{};
    s.n = 2, s.c = 6, s.k = 4, s.groups = 2, s.r = s.s = 3, s.h = 9, s.w = 8, s.pad_h = 1, s.pad_w = 2;
    s.stride_h = s.stride_w = s.dil_h = s.dil_w = 1;
    s.flip = false;
    const int64_t tiles = s.n * ((s.out_h() + 1) / 2) * ((s.out_w() + 1) / 2);
    for (int64_t block : {int64_t(1), tiles, tiles + 5}) {
        EXPECT_LT(run_case<float>(s, rng, 1.0, 0.0, block), 5e-5) << "block " << block;
        EXPECT_LT(run_case<double>(s, rng, -0.5, 0.25, block), 1e-11) << "block " << block;
    }
}

// The check above can fail: the mirrored taps (the other mode) give a large error.
TEST(WinogradFilterGradTile, DetectsWrongTaps) {
    std::mt19937 rng(24);
    for (int i = 0; i < 5; ++i) {
        const Shape s = random_shape(rng);
        EXPECT_GT(run_case<double>(s, rng, 1.0, 0.0, 5, /*wrong_flip=*/true), 1e-2);
    }
}

}  // namespace
