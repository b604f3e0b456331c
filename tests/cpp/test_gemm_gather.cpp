// The im2col element and the col2im gather of common/gemm_gather.hpp, and the operand policies
// of common/implicit_gemm_ops.hpp, run on the host: the exact index math of the CUDA
// IM2COL_GEMM (im2col, col2im) and IMPLICIT_GEMM (forward, backward data, backward filter)
// kernels, which a machine without a GPU cannot run. Forward: Y = W * col built from gather_offset must
// equal the float64 reference convolution; backward data: col2im_gather of W^T * dY must
// equal the adjoint of the reference loops, over random strides, paddings, dilations, groups
// and both modes.
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <vector>

#include "common/gemm_gather.hpp"
#include "common/im2col_gemm_plan.hpp"
#include "common/implicit_gemm_ops.hpp"
#include "common/implicit_gemm_tile.hpp"
#include "common/permute_planes.hpp"
#include "reference.hpp"

namespace {

using convcore::GemmGeom;
using convcore_test::Shape;
using convcore_test::reference_bwd_data;
using convcore_test::reference_bwd_filter;

struct Problem {  // the field names gemm_geom reads
    int64_t n, c, h, w, k, r, s, groups, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, p, q;
    bool flip;
};

Problem problem_of(const Shape& s) {
    return {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.groups, s.pad_h, s.pad_w, s.stride_h,
            s.stride_w, s.dil_h, s.dil_w, s.out_h(), s.out_w(), s.flip};
}

Shape random_shape(std::mt19937& rng) {
    auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    for (;;) {
        Shape s{};
        s.groups = pick(1, 3);
        s.n = pick(1, 3);
        s.c = s.groups * pick(1, 3);
        s.k = s.groups * pick(1, 3);
        s.h = pick(1, 9);
        s.w = pick(1, 9);
        s.r = pick(1, 4);
        s.s = pick(1, 4);
        s.pad_h = pick(0, 3);
        s.pad_w = pick(0, 3);
        s.stride_h = pick(1, 3);
        s.stride_w = pick(1, 3);
        s.dil_h = pick(1, 3);
        s.dil_w = pick(1, 3);
        s.flip = pick(0, 1) == 1;
        if (s.h + 2 * s.pad_h >= s.dil_h * (s.r - 1) + 1 && s.w + 2 * s.pad_w >= s.dil_w * (s.s - 1) + 1)
            return s;
    }
}

// Y[n, g] = W[g] * col[n, g], col's elements through column_origin + gather_offset: the
// IMPLICIT_GEMM kernel's gather and the im2col kernel's element.
std::vector<double> gemm_forward(const Shape& s, const std::vector<double>& x,
                                 const std::vector<double>& w) {
    const GemmGeom g = convcore::gemm_geom(problem_of(s));
    const int64_t L = g.rows(), pq = g.cols(), hw = s.h * s.w;
    std::vector<double> y(size_t(s.n * s.k * pq), 0.0);
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t grp = 0; grp < s.groups; ++grp)
            for (int64_t j = 0; j < pq; ++j) {
                const convcore::ColumnOrigin o = convcore::column_origin(g, j);
                for (int64_t l = 0; l < L; ++l) {
                    const int64_t off = convcore::gather_offset(g, o, l);
                    if (off < 0) continue;
                    EXPECT_LT(off, g.cg * hw);
                    const double xv = x[size_t((n * s.c + grp * g.cg) * hw + off)];
                    for (int64_t k = 0; k < g.kg; ++k)
                        y[size_t((n * s.k + grp * g.kg + k) * pq + j)] +=
                            w[size_t((grp * g.kg + k) * L + l)] * xv;
                }
            }
    return y;
}

// col[n, g] = W[g]^T * dY[n, g], then dx by col2im_gather: the CUDA backward-data path.
std::vector<double> gemm_bwd_data(const Shape& s, const std::vector<double>& w,
                                  const std::vector<double>& dy) {
    const GemmGeom g = convcore::gemm_geom(problem_of(s));
    const int64_t L = g.rows(), pq = g.cols();
    std::vector<double> dx(size_t(s.n * s.c * s.h * s.w), 0.0), col(size_t(L * pq));
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t grp = 0; grp < s.groups; ++grp) {
            for (int64_t l = 0; l < L; ++l)
                for (int64_t j = 0; j < pq; ++j) {
                    double acc = 0;
                    for (int64_t k = 0; k < g.kg; ++k)
                        acc += w[size_t((grp * g.kg + k) * L + l)] *
                               dy[size_t((n * s.k + grp * g.kg + k) * pq + j)];
                    col[size_t(l * pq + j)] = acc;
                }
            for (int64_t c = 0; c < g.cg; ++c)
                for (int64_t ih = 0; ih < s.h; ++ih)
                    for (int64_t iw = 0; iw < s.w; ++iw)
                        dx[size_t(((n * s.c + grp * g.cg + c) * s.h + ih) * s.w + iw)] =
                            convcore::col2im_gather<double>(g, col.data(), c, ih, iw);
        }
    return dx;
}

TEST(GemmGather, ForwardMatchesReference) {
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 300; ++trial) {
        const Shape s = random_shape(rng);
        const auto x = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const auto w = convcore_test::random_vector(size_t(s.k * (s.c / s.groups) * s.r * s.s), rng);
        const auto ref = convcore_test::reference_conv(s, x, w);
        EXPECT_LT(convcore_test::relative_error(gemm_forward(s, x, w), ref), 1e-13) << "trial " << trial;
    }
}

TEST(GemmGather, BackwardDataMatchesReference) {
    std::mt19937 rng(4321);
    for (int trial = 0; trial < 300; ++trial) {
        const Shape s = random_shape(rng);
        const auto w = convcore_test::random_vector(size_t(s.k * (s.c / s.groups) * s.r * s.s), rng);
        const auto dy = convcore_test::random_vector(size_t(s.n * s.k * s.out_h() * s.out_w()), rng);
        const auto ref = reference_bwd_data(s, w, dy);
        EXPECT_LT(convcore_test::relative_error(gemm_bwd_data(s, w, dy), ref), 1e-13) << "trial " << trial;
    }
}

// Padding so large that whole rows of col read only zeros, and a stride that skips inputs:
// those inputs get no gradient (exactly 0), the padding is never addressed.
TEST(GemmGather, PaddingAndSkippedInputs) {
    const Shape s{1, 1, 5, 5, 1, 1, 1, 2, 2, 3, 3, 1, 1, 1, false};
    const GemmGeom g = convcore::gemm_geom(problem_of(s));
    ASSERT_EQ(g.p, 3);
    EXPECT_EQ(convcore::gather_offset(g, convcore::column_origin(g, 0), 0), -1);  // (-2, -2)
    EXPECT_EQ(convcore::gather_offset(g, convcore::column_origin(g, 4), 0), 1 * 5 + 1);  // (1, 1)
    const std::vector<double> col(size_t(g.rows() * g.cols()), 1.0);
    EXPECT_EQ(convcore::col2im_gather<double>(g, col.data(), 0, 0, 0), 0.0);  // never read
    EXPECT_EQ(convcore::col2im_gather<double>(g, col.data(), 0, 1, 1), 1.0);
}

// The IMPLICIT_GEMM kernel's three operand policies, element by element (implicit_gemm_host
// runs exactly the a/column/b/out functions the CUDA kernel stages), against the references.
TEST(ImplicitGemmOps, AllThreePassesMatchReference) {
    std::mt19937 rng(777);
    for (int trial = 0; trial < 200; ++trial) {
        const Shape s = random_shape(rng);
        const GemmGeom g = convcore::gemm_geom(problem_of(s));
        const auto x = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const auto w = convcore_test::random_vector(size_t(s.k * g.cg * s.r * s.s), rng);
        const auto dy = convcore_test::random_vector(size_t(s.n * s.k * g.p * g.q), rng);
        std::vector<double> y(dy.size(), NAN), dx(x.size(), NAN), dw(w.size(), NAN);
        convcore::implicit_gemm_host<double>(
            convcore::ImplicitForward<double>{g, s.n, x.data(), w.data(), y.data()}, s.groups);
        convcore::implicit_gemm_host<double>(
            convcore::ImplicitBackwardData<double>{g, s.n, dy.data(), w.data(), dx.data()}, s.groups);
        convcore::implicit_gemm_host<double>(
            convcore::ImplicitBackwardFilter<double>{g, s.n, x.data(), dy.data(), dw.data()}, s.groups);
        EXPECT_LT(convcore_test::relative_error(y, convcore_test::reference_conv(s, x, w)), 1e-13)
            << "forward, trial " << trial;
        EXPECT_LT(convcore_test::relative_error(dx, reference_bwd_data(s, w, dy)), 1e-13)
            << "backward data, trial " << trial;
        EXPECT_LT(convcore_test::relative_error(dw, reference_bwd_filter(s, x, dy)), 1e-13)
            << "backward filter, trial " << trial;
    }
}

// The transposes of the CUDA backward-via-forward reductions, as the CUDA kernel applies them
// (dst[i] = src[permuted_source(pm, i)]), against their definitions.
std::vector<int> permuted(const convcore::PlanePermutation& pm, const std::vector<int>& src) {
    std::vector<int> dst(src.size(), -1);
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = src[size_t(convcore::permuted_source(pm, int64_t(i)))];
    return dst;
}

TEST(PermutePlanes, ReductionTransposes) {
    const int64_t groups = 3, kg = 2, cg = 4, rs = 5, n = 2, hw = 3;
    std::vector<int> w(size_t(groups * kg * cg * rs)), x(size_t(n * groups * cg * hw));
    for (size_t i = 0; i < w.size(); ++i) w[i] = int(i);
    for (size_t i = 0; i < x.size(); ++i) x[i] = int(i);
    // w'[g*Cg + c][k][e] = w[g*Kg + k][c][e]
    const auto wt = permuted(convcore::filter_transpose(groups, kg, cg, rs), w);
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t k = 0; k < kg; ++k)
            for (int64_t c = 0; c < cg; ++c)
                for (int64_t e = 0; e < rs; ++e)
                    ASSERT_EQ(wt[size_t(((g * cg + c) * kg + k) * rs + e)], w[size_t(((g * kg + k) * cg + c) * rs + e)]);
    // x'[c][g*N + n][e] = x[n][g*Cg + c][e]
    const auto xt = permuted(convcore::input_transpose(n, groups, cg, hw), x);
    for (int64_t c = 0; c < cg; ++c)
        for (int64_t g = 0; g < groups; ++g)
            for (int64_t i = 0; i < n; ++i)
                for (int64_t e = 0; e < hw; ++e)
                    ASSERT_EQ(xt[size_t(((c * groups + g) * n + i) * hw + e)], x[size_t(((i * groups + g) * cg + c) * hw + e)]);
    // dst[b][a][e] = src[a][b][e]
    const auto st = permuted(convcore::swap_outer_axes(n * groups, cg, hw), x);
    for (int64_t a = 0; a < n * groups; ++a)
        for (int64_t b = 0; b < cg; ++b)
            for (int64_t e = 0; e < hw; ++e)
                ASSERT_EQ(st[size_t((b * n * groups + a) * hw + e)], x[size_t((a * cg + b) * hw + e)]);
}

// The IMPLICIT_GEMM CUDA kernel's block-tile code (stage / multiply / store of
// common/implicit_gemm_tile.hpp), all threads of every tile run on the host, for the three
// passes, on problems large enough for several row/column tiles and depth steps (edges cut
// inside a tile), with alpha/beta and a NaN-poisoned output for beta == 0.
TEST(ImplicitGemmTile, KernelStepsOnHostMatchReference) {
    std::mt19937 rng(31337);
    auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    for (int trial = 0; trial < 12; ++trial) {
        Shape s{};
        s.groups = pick(1, 2);
        s.n = pick(1, 2);
        s.c = s.groups * pick(1, 9);
        s.k = s.groups * pick(1, 70);
        s.h = pick(4, 12);
        s.w = pick(4, 12);
        s.r = pick(1, 3);
        s.s = pick(1, 3);
        s.pad_h = pick(0, 1);
        s.pad_w = pick(0, 1);
        s.stride_h = pick(1, 2);
        s.stride_w = pick(1, 2);
        s.dil_h = pick(1, 2);
        s.dil_w = pick(1, 2);
        s.flip = trial % 2 == 1;
        if (s.out_h() < 1 || s.out_w() < 1) continue;
        const GemmGeom g = convcore::gemm_geom(problem_of(s));
        const auto x = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const auto w = convcore_test::random_vector(size_t(s.k * g.cg * s.r * s.s), rng);
        const auto dy = convcore_test::random_vector(size_t(s.n * s.k * g.p * g.q), rng);
        const double alpha = trial % 3 == 0 ? -0.5 : 1.0, beta = trial % 4 == 1 ? 0.75 : 0.0;
        auto initial = [&](size_t size) {
            return beta == 0 ? std::vector<double>(size, NAN) : convcore_test::random_vector(size, rng);
        };
        auto expect = [&](const std::vector<double>& ref, const std::vector<double>& before) {
            std::vector<double> e(ref.size());
            for (size_t i = 0; i < e.size(); ++i) e[i] = alpha * ref[i] + (beta == 0 ? 0.0 : beta * before[i]);
            return e;
        };
        std::vector<double> y = initial(dy.size()), dx = initial(x.size()), dw = initial(w.size());
        const auto y0 = y, dx0 = dx, dw0 = dw;
        namespace tile = convcore::implicit_gemm_tile;
        tile::run_on_host(convcore::ImplicitForward<double>{g, s.n, x.data(), w.data(), y.data()}, s.groups,
                          alpha, beta);
        tile::run_on_host(convcore::ImplicitBackwardData<double>{g, s.n, dy.data(), w.data(), dx.data()},
                          s.groups, alpha, beta);
        tile::run_on_host(convcore::ImplicitBackwardFilter<double>{g, s.n, x.data(), dy.data(), dw.data()},
                          s.groups, alpha, beta);
        EXPECT_LT(convcore_test::relative_error(y, expect(convcore_test::reference_conv(s, x, w), y0)), 1e-13)
            << "forward, trial " << trial;
        EXPECT_LT(convcore_test::relative_error(dx, expect(reference_bwd_data(s, w, dy), dx0)), 1e-13)
            << "backward data, trial " << trial;
        EXPECT_LT(convcore_test::relative_error(dw, expect(reference_bwd_filter(s, x, dy), dw0)), 1e-13)
            << "backward filter, trial " << trial;
    }
}

// ---- IM2COL_GEMM on CUDA: its cuBLAS calls replayed on the host ----------------------------------

namespace plan = convcore::im2col_plan;

// cublas<t>gemmStridedBatched, column-major, with cuBLAS's argument checks.
void host_gemm(const plan::GemmCall& c, double alpha, double beta, double* const buf[5]) {
    ASSERT_TRUE(c.m >= 1 && c.n >= 1 && c.k >= 1 && c.batch >= 1);
    ASSERT_TRUE(c.m <= INT_MAX && c.n <= INT_MAX && c.k <= INT_MAX && c.batch <= INT_MAX);
    ASSERT_GE(c.a.ld, c.trans_a ? c.k : c.m);
    ASSERT_GE(c.b.ld, c.trans_b ? c.n : c.k);
    ASSERT_GE(c.c.ld, c.m);
    for (int64_t bt = 0; bt < c.batch; ++bt) {
        const double* A = buf[c.a.buffer] + c.a.offset + bt * c.a.stride;
        const double* B = buf[c.b.buffer] + c.b.offset + bt * c.b.stride;
        double* C = buf[c.c.buffer] + c.c.offset + bt * c.c.stride;
        for (int64_t j = 0; j < c.n; ++j)
            for (int64_t i = 0; i < c.m; ++i) {
                double acc = 0;
                for (int64_t p = 0; p < c.k; ++p)
                    acc += (c.trans_a ? A[p + i * c.a.ld] : A[i + p * c.a.ld]) *
                           (c.trans_b ? B[j + p * c.b.ld] : B[p + j * c.b.ld]);
                double& out = C[i + j * c.c.ld];
                out = beta == 0 ? alpha * acc : alpha * acc + beta * out;
            }
    }
}

// The three CUDA pipelines (cuda/im2col_gemm*.cu) with the device kernels' elements, in chunks
// of `chunk` images.
struct Im2colPipelines {
    Shape s;
    GemmGeom g;
    int64_t chunk;
    double alpha, beta;

    void forward(const std::vector<double>& x, const std::vector<double>& w, std::vector<double>& y) {
        const bool direct = plan::x_is_col(g);
        std::vector<double> col(size_t(chunk * s.groups * g.rows() * g.cols()));
        double* const buf[5] = {const_cast<double*>(x.data()), const_cast<double*>(w.data()), y.data(),
                                col.data(), nullptr};
        for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
            const int64_t count = std::min(chunk, s.n - n0);
            if (!direct)
                for (int64_t i = 0; i < count * s.groups * g.rows() * g.cols(); ++i) {
                    const int64_t src = plan::im2col_source(g, s.groups, n0, count, false, i);
                    col[size_t(i)] = src < 0 ? 0.0 : x[size_t(src)];
                }
            for (const auto& call : plan::forward_calls(g, s.groups, n0, count, direct))
                host_gemm(call, alpha, beta, buf);
        }
    }

    void backward_data(const std::vector<double>& dy, const std::vector<double>& w, std::vector<double>& dx) {
        const bool direct = plan::x_is_col(g);
        std::vector<double> col(size_t(chunk * s.groups * g.rows() * g.cols()));
        double* const buf[5] = {dx.data(), const_cast<double*>(w.data()), const_cast<double*>(dy.data()),
                                col.data(), nullptr};
        const int64_t image = s.c * s.h * s.w;
        for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
            const int64_t count = std::min(chunk, s.n - n0);
            for (const auto& call : plan::backward_data_calls(g, s.groups, n0, count, direct))
                host_gemm(call, direct ? alpha : 1.0, direct ? beta : 0.0, buf);
            if (!direct)
                for (int64_t i = 0; i < count * image; ++i)
                    convcore::blend_store(&dx[size_t(n0 * image + i)],
                                          plan::col2im_value(g, s.groups, col.data(), i), alpha, beta);
        }
    }

    void backward_filter(const std::vector<double>& x, const std::vector<double>& dy, std::vector<double>& dw) {
        const int64_t pq = g.cols();
        std::vector<double> col(size_t(chunk * s.groups * g.rows() * pq)), dyt(size_t(chunk * s.k * pq));
        double* const buf[5] = {const_cast<double*>(x.data()), dw.data(), const_cast<double*>(dy.data()),
                                col.data(), dyt.data()};
        for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
            const int64_t count = std::min(chunk, s.n - n0);
            for (int64_t i = 0; i < count * s.groups * g.rows() * pq; ++i) {
                const int64_t src = plan::im2col_source(g, s.groups, n0, count, true, i);
                col[size_t(i)] = src < 0 ? 0.0 : x[size_t(src)];
            }
            const convcore::PlanePermutation swap = convcore::swap_outer_axes(count, s.k, pq);
            for (int64_t i = 0; i < count * s.k * pq; ++i)
                dyt[size_t(i)] = dy[size_t(n0 * s.k * pq + convcore::permuted_source(swap, i))];
            host_gemm(plan::backward_filter_call(g, s.groups, count), alpha, n0 == 0 ? beta : 1.0, buf);
        }
    }
};

TEST(Im2colGemmPlan, CublasCallsOnHostMatchReference) {
    std::mt19937 rng(2718);
    for (int trial = 0; trial < 150; ++trial) {
        Shape s = random_shape(rng);
        if (trial % 5 == 0) {  // the no-unfolding path: 1x1, stride 1, no padding
            s.r = s.s = 1;
            s.stride_h = s.stride_w = 1;
            s.pad_h = s.pad_w = 0;
        }
        s.n = 1 + trial % 4;
        const GemmGeom g = convcore::gemm_geom(problem_of(s));
        const auto x = convcore_test::random_vector(size_t(s.n * s.c * s.h * s.w), rng);
        const auto w = convcore_test::random_vector(size_t(s.k * g.cg * s.r * s.s), rng);
        const auto dy = convcore_test::random_vector(size_t(s.n * s.k * g.p * g.q), rng);
        const double alpha = trial % 3 == 0 ? 2.0 : 1.0, beta = trial % 4 == 1 ? -0.5 : 0.0;
        Im2colPipelines run{s, g, 1 + trial % 3, alpha, beta};
        auto initial = [&](size_t size) {
            return beta == 0 ? std::vector<double>(size, NAN) : convcore_test::random_vector(size, rng);
        };
        auto expect = [&](const std::vector<double>& ref, const std::vector<double>& before) {
            std::vector<double> e(ref.size());
            for (size_t i = 0; i < e.size(); ++i) e[i] = alpha * ref[i] + (beta == 0 ? 0.0 : beta * before[i]);
            return e;
        };
        std::vector<double> y = initial(dy.size()), dx = initial(x.size()), dw = initial(w.size());
        const auto y0 = y, dx0 = dx, dw0 = dw;
        run.forward(x, w, y);
        run.backward_data(dy, w, dx);
        run.backward_filter(x, dy, dw);
        if (HasFatalFailure()) return;
        EXPECT_LT(convcore_test::relative_error(y, expect(convcore_test::reference_conv(s, x, w), y0)), 1e-13)
            << "forward, trial " << trial;
        EXPECT_LT(convcore_test::relative_error(dx, expect(reference_bwd_data(s, w, dy), dx0)), 1e-13)
            << "backward data, trial " << trial;
        EXPECT_LT(convcore_test::relative_error(dw, expect(reference_bwd_filter(s, x, dy), dw0)), 1e-13)
            << "backward filter, trial " << trial;
    }
}

}  // namespace
