// WINOGRAD_2X2_3X3 and WINOGRAD_4X4_3X3 on the CPU: Lavin & Gray's Algorithm 1 with the
// minimal filtering algorithms F(2x2,3x3) (4x4 input tiles) and F(4x4,3x3) (6x6 input tiles).
//
// For each group g, with a = m + 2 the input tile size and tiles numbered b over
// (image, tile row, tile column) of the output:
//   1. filter transform (once per call): u = G g_kc G^T for every (k, c), scattered to a*a
//      matrices U_xi (K/g x C/g): U[g][xi][k][c]                      (workspace)
//   2. per block of tiles (at most `block` tiles, so the workspace stays bounded):
//      a. input transform: v = BT d_cb BT^T, scattered to V_xi (C/g x block)
//      b. a*a independent GEMMs  M_xi (K/g x block) = U_xi . V_xi      (OpenBLAS)
//      c. output transform: Y_kb = AT m_kb AT^T, clipped at the right/bottom edges, stored
//         with the alpha/beta blend (beta == 0 never reads y).
// True convolution mirrors the filter while transforming it. The transform tables come from
// cpp/common/generated/winograd_tables.hpp (tools/gen_winograd.py, verified exactly).
//
// The transforms work on kLanes tiles (or filter channels) at once, lane index innermost, so
// their fixed small matrix products compile to plain vector code; the zero entries of the
// tables drop out at compile time. Those loops are compiled for AVX-512 and AVX2 besides the
// baseline (function multi-versioning) because the library is built without -march=native.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/generated/winograd_tables.hpp"
#include "core/solver.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVCORE_WINO_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CONVCORE_WINO_CLONES
#endif

namespace convcore {
namespace cpu {
namespace {

constexpr int64_t kLanes = 16;  // tiles (or filter channels) transformed together
// Tiles per block: as many as fit V and M (a*a*(C/g + K/g) elements per tile) in this many
// bytes, within [kMinBlock, kMaxBlock]. Depends on the problem only, never on the threads.
constexpr int64_t kBlockBudgetBytes = int64_t(8) << 20;
constexpr int64_t kMinBlock = 64, kMaxBlock = 4096;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Everything the run and the workspace size derive from the problem.
struct Plan {
    int64_t m, a;             // output tile (2 or 4), input tile a = m + 2
    int64_t th, tw, per_img;  // tiles per image: th x tw
    int64_t tiles;            // N * th * tw: the GEMMs' column count over the whole batch
    int64_t block;            // tiles per block, a multiple of kLanes: V's and M's row length
    int64_t u_elems, v_elems, m_elems;
};

Plan make_plan(const ConvProblem& p, int64_t m) {
    Plan pl{};
    pl.m = m;
    pl.a = m + 2;
    pl.th = ceil_div(p.p, m);
    pl.tw = ceil_div(p.q, m);
    pl.per_img = pl.th * pl.tw;
    pl.tiles = p.n * pl.per_img;
    const int64_t aa = pl.a * pl.a, cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t per_tile_bytes = aa * (cg + kg) * int64_t(p.elem_size());
    int64_t block = kBlockBudgetBytes / std::max<int64_t>(per_tile_bytes, 1);
    block = std::min(std::max(block, kMinBlock), kMaxBlock);
    block = std::min(block, ceil_div(pl.tiles, kLanes) * kLanes);
    pl.block = block / kLanes * kLanes;
    pl.u_elems = aa * p.k * cg;  // every group's U
    pl.v_elems = aa * cg * pl.block;
    pl.m_elems = aa * kg * pl.block;
    return pl;
}

const char* algo_name(int64_t m) { return m == 2 ? "WINOGRAD_2X2_3X3" : "WINOGRAD_4X4_3X3"; }

std::string why_not_m(const ConvProblem& p, int64_t m) {
    const std::string name = algo_name(m);
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return name + " runs float32 and float64 only";
    if (p.r != 3 || p.s != 3)
        return name + " needs a 3x3 filter, got " + std::to_string(p.r) + "x" + std::to_string(p.s);
    if (!p.unit_stride())
        return name + " needs stride 1, got stride " + std::to_string(p.stride_h) + "x" +
               std::to_string(p.stride_w);
    if (!p.unit_dilation())
        return name + " needs dilation 1, got dilation " + std::to_string(p.dil_h) + "x" +
               std::to_string(p.dil_w);
    if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", C/groups=" + std::to_string(p.c_per_group()) + ") exceeds the 32-bit BLAS interface";
    return "";
}

size_t workspace_bytes_m(const ConvProblem& p, int64_t m) {
    const Plan pl = make_plan(p, m);
    return size_t(pl.u_elems + pl.v_elems + pl.m_elems) * p.elem_size();
}

// ---- the transforms --------------------------------------------------------------------------

// out[i][c] = sum_j M[i][j] * in[j][c], each entry a vector of kLanes values. M is a constexpr
// table; once the loops are unrolled its entries are constants, so zero terms vanish and
// +-1 factors become plain adds.
template <int I, int J, int C, typename T, typename Mat>
inline __attribute__((always_inline)) void mul_left(const Mat& M, const T (&in)[J][C][kLanes],
                                                    T (&out)[I][C][kLanes]) {
#pragma GCC unroll 8
    for (int i = 0; i < I; ++i) {
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
            T acc[kLanes];
            bool first = true;
#pragma GCC unroll 8
            for (int j = 0; j < J; ++j) {
                const T coef = M[i][j];
                if (coef == T(0)) continue;
                if (first) {
                    for (int l = 0; l < kLanes; ++l) acc[l] = coef * in[j][c][l];
                    first = false;
                } else {
                    for (int l = 0; l < kLanes; ++l) acc[l] += coef * in[j][c][l];
                }
            }
            if (first)
                for (int l = 0; l < kLanes; ++l) acc[l] = T(0);
            for (int l = 0; l < kLanes; ++l) out[i][c][l] = acc[l];
        }
    }
}

// out[r][i] = sum_j in[r][j] * M[i][j]  (right product with M^T).
template <int R, int I, int J, typename T, typename Mat>
inline __attribute__((always_inline)) void mul_right_t(const Mat& M, const T (&in)[R][J][kLanes],
                                                       T (&out)[R][I][kLanes]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int i = 0; i < I; ++i) {
            T acc[kLanes];
            bool first = true;
#pragma GCC unroll 8
            for (int j = 0; j < J; ++j) {
                const T coef = M[i][j];
                if (coef == T(0)) continue;
                if (first) {
                    for (int l = 0; l < kLanes; ++l) acc[l] = coef * in[r][j][l];
                    first = false;
                } else {
                    for (int l = 0; l < kLanes; ++l) acc[l] += coef * in[r][j][l];
                }
            }
            if (first)
                for (int l = 0; l < kLanes; ++l) acc[l] = T(0);
            for (int l = 0; l < kLanes; ++l) out[r][i][l] = acc[l];
        }
    }
}

// Problem sizes the transform workers need (plain data, passed by value).
struct Dims {
    int64_t n, c, h, w, k, p, q, cg, kg, pad_h, pad_w;
    int64_t tw, per_img, ldv;
    bool flip;
};

Dims make_dims(const ConvProblem& p, const Plan& pl) {
    return {p.n,  p.c,  p.h,     p.w,     p.k,  p.p, p.q, p.c_per_group(), p.k_per_group(),
            p.pad_h, p.pad_w, pl.tw, pl.per_img, pl.block, p.flip};
}

template <typename T, class F>
struct Wino {
    static constexpr int m = F::m, r = F::r, a = F::alpha;
    using Tab = typename F::template table<T>;

    // U[g][xi][k][c] for the filter items [i0, i1): item = (global k) * ceil(Cg/L) + channel block.
    CONVCORE_WINO_CLONES
    static void filter_items(const Dims d, const T* __restrict w, T* __restrict U, int64_t i0,
                             int64_t i1) {
        const int64_t cblocks = ceil_div(d.cg, kLanes);
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t kk = item / cblocks, c0 = item % cblocks * kLanes;
            const int64_t g = kk / d.kg, k = kk % d.kg;
            const int64_t nl = std::min(kLanes, d.cg - c0);
            T gf[r][r][kLanes], t1[a][r][kLanes], u[a][a][kLanes];
            const T* wk = w + (kk * d.cg + c0) * r * r;
            for (int64_t l = 0; l < kLanes; ++l)
                for (int i = 0; i < r; ++i)
                    for (int j = 0; j < r; ++j) {
                        const int fi = d.flip ? r - 1 - i : i, fj = d.flip ? r - 1 - j : j;
                        gf[i][j][l] = l < nl ? wk[(l * r + fi) * r + fj] : T(0);
                    }
            mul_left<a, r, r>(Tab::G, gf, t1);
            mul_right_t<a, a, r>(Tab::G, t1, u);
            T* Ug = U + g * a * a * d.kg * d.cg + k * d.cg + c0;
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) {
                    T* dst = Ug + (xi * a + nu) * d.kg * d.cg;
                    for (int64_t l = 0; l < nl; ++l) dst[l] = u[xi][nu][l];
                }
        }
    }

    // V[xi][c][ldv] for the input items [i0, i1) of tiles [b0, b0 + nb) of group g:
    // item = lane group j * Cg + c (channels fastest, so a lane group's tile origins are
    // computed once per run of channels).
    CONVCORE_WINO_CLONES
    static void input_items(const Dims d, const T* __restrict x, T* __restrict V, int64_t g,
                            int64_t b0, int64_t nb, int64_t i0, int64_t i1) {
        int64_t cur_j = -1, nl = 0;
        int64_t base[kLanes], ih0[kLanes], iw0[kLanes];
        bool inside[kLanes];
        const int64_t hw = d.h * d.w;
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t j = item / d.cg, c = item % d.cg;
            if (j != cur_j) {
                cur_j = j;
                nl = std::min(kLanes, nb - j * kLanes);
                for (int64_t l = 0; l < nl; ++l) {
                    const int64_t b = b0 + j * kLanes + l;
                    const int64_t n = b / d.per_img, t = b % d.per_img;
                    ih0[l] = t / d.tw * m - d.pad_h;
                    iw0[l] = t % d.tw * m - d.pad_w;
                    base[l] = (n * d.c + g * d.cg) * hw;
                    inside[l] = ih0[l] >= 0 && ih0[l] + a <= d.h && iw0[l] >= 0 && iw0[l] + a <= d.w;
                }
            }
            T dt[a][a][kLanes], t1[a][a][kLanes], v[a][a][kLanes];
            for (int64_t l = 0; l < kLanes; ++l) {
                if (l >= nl) {
                    for (int i = 0; i < a; ++i)
                        for (int jj = 0; jj < a; ++jj) dt[i][jj][l] = T(0);
                    continue;
                }
                const T* xc = x + base[l] + c * hw;
                if (inside[l]) {
                    const T* src = xc + ih0[l] * d.w + iw0[l];
                    for (int i = 0; i < a; ++i)
                        for (int jj = 0; jj < a; ++jj) dt[i][jj][l] = src[i * d.w + jj];
                } else {
                    for (int i = 0; i < a; ++i) {
                        const int64_t ih = ih0[l] + i;
                        const bool row_ok = ih >= 0 && ih < d.h;
                        for (int jj = 0; jj < a; ++jj) {
                            const int64_t iw = iw0[l] + jj;
                            dt[i][jj][l] = row_ok && iw >= 0 && iw < d.w ? xc[ih * d.w + iw] : T(0);
                        }
                    }
                }
            }
            mul_left<a, a, a>(Tab::BT, dt, t1);
            mul_right_t<a, a, a>(Tab::BT, t1, v);
            T* dst = V + c * d.ldv + j * kLanes;
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) {
                    T* row = dst + (xi * a + nu) * d.cg * d.ldv;
                    for (int64_t l = 0; l < kLanes; ++l) row[l] = v[xi][nu][l];
                }
        }
    }

    // y for the output items [i0, i1) of tiles [b0, b0 + nb) of group g from M[xi][k][ldv]:
    // item = lane group j * Kg + k.
    CONVCORE_WINO_CLONES
    static void output_items(const Dims d, const T* __restrict M, T* __restrict y, int64_t g,
                             int64_t b0, int64_t nb, int64_t i0, int64_t i1, T alpha, T beta) {
        int64_t cur_j = -1, nl = 0;
        int64_t base[kLanes], oh0[kLanes], ow0[kLanes];
        const int64_t pq = d.p * d.q;
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t j = item / d.kg, k = item % d.kg;
            if (j != cur_j) {
                cur_j = j;
                nl = std::min(kLanes, nb - j * kLanes);
                for (int64_t l = 0; l < nl; ++l) {
                    const int64_t b = b0 + j * kLanes + l;
                    const int64_t n = b / d.per_img, t = b % d.per_img;
                    oh0[l] = t / d.tw * m;
                    ow0[l] = t % d.tw * m;
                    base[l] = (n * d.k + g * d.kg) * pq;
                }
            }
            T mm[a][a][kLanes], t1[m][a][kLanes], yt[m][m][kLanes];
            const T* src = M + k * d.ldv + j * kLanes;
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) {
                    const T* row = src + (xi * a + nu) * d.kg * d.ldv;
                    for (int64_t l = 0; l < kLanes; ++l) mm[xi][nu][l] = row[l];
                }
            mul_left<m, a, a>(Tab::AT, mm, t1);
            mul_right_t<m, m, a>(Tab::AT, t1, yt);
            for (int64_t l = 0; l < nl; ++l) {
                T* yk = y + base[l] + k * pq + oh0[l] * d.q + ow0[l];
                const int64_t mh = std::min<int64_t>(m, d.p - oh0[l]);
                const int64_t mw = std::min<int64_t>(m, d.q - ow0[l]);
                if (mh == m && mw == m) {
                    for (int i = 0; i < m; ++i)
                        for (int jj = 0; jj < m; ++jj)
                            blend_store(yk + i * d.q + jj, yt[i][jj][l], alpha, beta);
                } else {
                    for (int64_t i = 0; i < mh; ++i)
                        for (int64_t jj = 0; jj < mw; ++jj)
                            blend_store(yk + i * d.q + jj, yt[i][jj][l], alpha, beta);
                }
            }
        }
    }
};

// Runs fn(i0, i1) on `threads` threads over contiguous static chunks of [0, count).
template <typename Fn>
void parallel_ranges(int64_t count, int threads, Fn fn) {
    if (count <= 0) return;
    const int nt = int(std::min<int64_t>(threads, count));
    if (nt <= 1) {
        fn(int64_t(0), count);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        const int64_t t = omp_get_thread_num(), chunk = ceil_div(count, nt);
        const int64_t i0 = std::min(count, t * chunk), i1 = std::min(count, i0 + chunk);
        if (i0 < i1) fn(i0, i1);
    }
}

void gemm(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemm(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// The OpenMP build of OpenBLAS sizes its team from omp_get_max_threads() of the calling
// thread: the handle's count for the call, restored after.
struct BlasThreads {
    int saved;
    explicit BlasThreads(int threads) : saved(omp_get_max_threads()) { omp_set_num_threads(threads); }
    ~BlasThreads() { omp_set_num_threads(saved); }
};

template <typename T, class F>
void run_typed(const ConvArgs& args) {
    using W = Wino<T, F>;
    constexpr int64_t a = F::alpha, aa = a * a;
    const ConvProblem& p = args.prob;
    const Plan pl = make_plan(p, F::m);
    const Dims d = make_dims(p, pl);
    const int threads = args.ctx.threads();
    const T* x = static_cast<const T*>(args.x);
    const T* w = static_cast<const T*>(args.w);
    T* y = static_cast<T*>(args.y);
    T* U = static_cast<T*>(args.workspace);
    T* V = U + pl.u_elems;
    T* M = V + pl.v_elems;
    const T alpha = T(args.alpha), beta = T(args.beta);
    BlasThreads blas_threads(threads);

    parallel_ranges(p.k * ceil_div(d.cg, kLanes), threads,
                    [&](int64_t i0, int64_t i1) { W::filter_items(d, w, U, i0, i1); });
    for (int64_t g = 0; g < p.groups; ++g) {
        const T* Ug = U + g * aa * d.kg * d.cg;
        for (int64_t b0 = 0; b0 < pl.tiles; b0 += pl.block) {
            const int64_t nb = std::min(pl.block, pl.tiles - b0);
            const int64_t lane_groups = ceil_div(nb, kLanes);
            parallel_ranges(lane_groups * d.cg, threads, [&](int64_t i0, int64_t i1) {
                W::input_items(d, x, V, g, b0, nb, i0, i1);
            });
            for (int64_t xi = 0; xi < aa; ++xi)
                gemm(int(d.kg), int(nb), int(d.cg), Ug + xi * d.kg * d.cg, int(d.cg),
                     V + xi * d.cg * d.ldv, int(d.ldv), M + xi * d.kg * d.ldv, int(d.ldv));
            parallel_ranges(lane_groups * d.kg, threads, [&](int64_t i0, int64_t i1) {
                W::output_items(d, M, y, g, b0, nb, i0, i1, alpha, beta);
            });
        }
    }
}

template <class F>
void run_f(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double, F>(a);
    else
        run_typed<float, F>(a);
}

std::string why_not_2(const ConvProblem& p) { return why_not_m(p, 2); }
std::string why_not_4(const ConvProblem& p) { return why_not_m(p, 4); }
size_t workspace_2(const ConvProblem& p) { return workspace_bytes_m(p, 2); }
size_t workspace_4(const ConvProblem& p) { return workspace_bytes_m(p, 4); }
void run_2(const ConvArgs& a) { run_f<winograd::F2x3>(a); }
void run_4(const ConvArgs& a) { run_f<winograd::F4x3>(a); }

}  // namespace

extern const Solver winograd_2x2_3x3_solver;
const Solver winograd_2x2_3x3_solver = {CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, CONVCORE_DEVICE_CPU,
                                        /*deterministic=*/true, why_not_2, workspace_2, run_2};
extern const Solver winograd_4x4_3x3_solver;
const Solver winograd_4x4_3x3_solver = {CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3, CONVCORE_DEVICE_CPU,
                                        /*deterministic=*/true, why_not_4, workspace_4, run_4};

}  // namespace cpu
}  // namespace convcore
