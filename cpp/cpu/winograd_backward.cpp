// WINOGRAD_3X3_2X2 backward filter on the CPU (paper 001, Lavin & Gray section 4.2): the
// 3x3 filter gradient with Winograd's F(3x3,2x2). (Backward data with F(2x2,3x3) is the
// reduction of core/backward_via_forward.cpp to the forward WINOGRAD_2X2_3X3 solver, one
// line in convcore/algorithms.def: it is a forward convolution of dy with the flipped, transposed
// filter, as the paper says.)
//
// For stride 1 and dilation 1 the correlation gradient is
//   dw[k, c, r, s] = sum_n sum_{p, q} dy[n, k, p, q] * x[n, g*Cg + c, p - pad_h + r, q - pad_w + s].
// Cut dy into 2x2 tiles at (2a, 2b): each tile's contribution is the correlation of the 4x4
// input tile d = x[2a - pad_h .. +3, 2b - pad_w .. +3] (zero outside the image) with the 2x2
// "filter" g = the dy tile (zero beyond P, Q), whose 3x3 output is F(3x3,2x2):
//   Y = AT [(G g G^T) (.) (BT d B)] A        (tables: common/generated/winograd_tables.hpp, F3x2)
// Summing over tiles commutes with AT . A, so for each of the 16 transform points xi:
//   M_xi (Kg x Cg) = sum_tiles U_xi[k][tile] V_xi[c][tile]   -- 16 GEMMs per block of tiles --
// and dw = AT M A once per (k, c): 16 multiplications per tile and (k, c) instead of 36.
// Tiles go in blocks of kBlock; each block's GEMMs (BLAS) are added into a float64 M, so
// float32 error does not grow with the number of tiles. The true-convolution mode stores the
// mirrored taps. Workspace: per block U (16 x Kg x B), V (16 x Cg x B), the block's M, and the
// float64 M (16 x Kg x Cg), reused group after group.
// Channels-last x and dy run natively: the transforms then work on one tile at a time, vectorised
// along its channels (contiguous in NHWC), and store U and V as [xi][tile][channel], so that
// M_xi = U_xi^T V_xi.
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/generated/winograd_tables.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/blas_gemm.hpp"
#include "cpu/blas_threads.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {

namespace {

// thread_vector sites
struct TileRuns;

using Tab = winograd::F3x2;  // m = 3 outputs, r = 2 taps, alpha = 4
constexpr int64_t kA = Tab::alpha, kXi = kA * kA;
constexpr int64_t kBlock = 1024;  // tiles per block
constexpr int64_t kRun = 32;     // tiles per run (one tile row) in the transforms

// Consecutive tiles of one tile row: tiles (n, aa, b .. b + len) at block columns j .. j + len.
struct Run {
    int64_t n, aa, b, j, len;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string why_not(const ConvProblem& p) {
    const std::string name = "WINOGRAD_3X3_2X2";
    if (const std::string shape = winograd_shape_why_not(name, p); !shape.empty()) return shape;
    if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", C/groups=" + std::to_string(p.c_per_group()) + ") exceeds the 32-bit BLAS interface";
    return "";
}

struct Plan {
    int64_t ta, tb, tiles, block;  // tiles per column / row of dy, in all, per block
    int64_t u_elems, v_elems, m_elems;
    size_t bytes(size_t elem) const {
        const auto up = [](size_t v) { return (v + 63) / 64 * 64; };
        return up(size_t(u_elems) * elem) + up(size_t(v_elems) * elem) + up(size_t(m_elems) * elem) +
               size_t(m_elems) * 8;
    }
};

Plan plan_of(const ConvProblem& p) {
    Plan pl;
    pl.ta = ceil_div(p.p, 2);
    pl.tb = ceil_div(p.q, 2);
    pl.tiles = p.n * pl.ta * pl.tb;
    pl.block = std::min(kBlock, pl.tiles);
    pl.u_elems = kXi * p.k_per_group() * pl.block;
    pl.v_elems = kXi * p.c_per_group() * pl.block;
    pl.m_elems = kXi * p.k_per_group() * p.c_per_group();
    return pl;
}

size_t workspace_bytes(const ConvProblem& p) { return plan_of(p).bytes(p.elem_size()); }

bool runs_nhwc(const ConvProblem&) { return true; }

constexpr int64_t kChannels = 64;  // channels per step of the NHWC transforms

// NHWC: U[xi][j][k] = (G g G^T)[xi] of the dy tile (n, aa, b) (2x2 pixels, zero beyond P x Q),
// for group g's channels; j is the tile's row in the block.
template <typename T>
void dy_tile_nhwc(const ConvProblem& p, const T* dy, int64_t g, int64_t n, int64_t aa, int64_t b, T* U,
                  int64_t j, int64_t block) {
    const int64_t kg = p.k_per_group();
    for (int64_t k0 = 0; k0 < kg; k0 += kChannels) {
        const int64_t len = std::min(kChannels, kg - k0);
        T tile[2][2][kChannels];
        for (int i = 0; i < 2; ++i)
            for (int jj = 0; jj < 2; ++jj) {
                const int64_t pp = 2 * aa + i, qq = 2 * b + jj;
                if (pp < p.p && qq < p.q)
                    std::copy_n(dy + ((n * p.p + pp) * p.q + qq) * p.k + g * kg + k0, len, tile[i][jj]);
                else
                    std::fill_n(tile[i][jj], len, T(0));
            }
        T gt[kA][2][kChannels];  // G g
        for (int u = 0; u < kA; ++u)
            for (int jj = 0; jj < 2; ++jj)
#pragma omp simd
                for (int64_t e = 0; e < len; ++e)
                    gt[u][jj][e] = Tab::g<T>(u, 0) * tile[0][jj][e] + Tab::g<T>(u, 1) * tile[1][jj][e];
        for (int u = 0; u < kA; ++u)
            for (int v = 0; v < kA; ++v) {
                T* dst = U + ((u * kA + v) * block + j) * kg + k0;
#pragma omp simd
                for (int64_t e = 0; e < len; ++e)
                    dst[e] = gt[u][0][e] * Tab::g<T>(v, 0) + gt[u][1][e] * Tab::g<T>(v, 1);
            }
    }
}

// NHWC: V[xi][j][c] = (BT d B)[xi] of the 4x4 input tile under dy tile (n, aa, b) (zero outside
// the image), for group g's channels.
template <typename T>
void x_tile_nhwc(const ConvProblem& p, const T* x, int64_t g, int64_t n, int64_t aa, int64_t b, T* V, int64_t j,
                 int64_t block) {
    const int64_t cg = p.c_per_group(), h0 = 2 * aa - p.pad_h, w0 = 2 * b - p.pad_w;
    for (int64_t c0 = 0; c0 < cg; c0 += kChannels) {
        const int64_t len = std::min(kChannels, cg - c0);
        T d[kA][kA][kChannels];
        for (int i = 0; i < kA; ++i)
            for (int jj = 0; jj < kA; ++jj) {
                const int64_t ih = h0 + i, iw = w0 + jj;
                if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w)
                    std::copy_n(x + ((n * p.h + ih) * p.w + iw) * p.c + g * cg + c0, len, d[i][jj]);
                else
                    std::fill_n(d[i][jj], len, T(0));
            }
        T bd[kA][kA][kChannels];  // BT d
        for (int u = 0; u < kA; ++u)
            for (int jj = 0; jj < kA; ++jj)
#pragma omp simd
                for (int64_t e = 0; e < len; ++e)
                    bd[u][jj][e] = Tab::bt<T>(u, 0) * d[0][jj][e] + Tab::bt<T>(u, 1) * d[1][jj][e] +
                                   Tab::bt<T>(u, 2) * d[2][jj][e] + Tab::bt<T>(u, 3) * d[3][jj][e];
        for (int u = 0; u < kA; ++u)
            for (int v = 0; v < kA; ++v) {
                T* dst = V + ((u * kA + v) * block + j) * cg + c0;
#pragma omp simd
                for (int64_t e = 0; e < len; ++e)
                    dst[e] = bd[u][0][e] * Tab::bt<T>(v, 0) + bd[u][1][e] * Tab::bt<T>(v, 1) +
                             bd[u][2][e] * Tab::bt<T>(v, 2) + bd[u][3][e] * Tab::bt<T>(v, 3);
            }
    }
}

template <typename T>
void run_typed(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    const Plan pl = plan_of(p);
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), hw = p.h * p.w, pq = p.p * p.q;
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);
    const auto up = [](size_t v) { return (v + 63) / 64 * 64; };
    char* ws = static_cast<char*>(a.workspace);
    T* U = reinterpret_cast<T*>(ws);  // [xi][k][tile of block] (NHWC: [xi][tile][k])
    ws += up(size_t(pl.u_elems) * sizeof(T));
    T* V = reinterpret_cast<T*>(ws);  // [xi][c][tile of block] (NHWC: [xi][tile][c])
    ws += up(size_t(pl.v_elems) * sizeof(T));
    T* Mb = reinterpret_cast<T*>(ws);  // [xi][k][c], this block
    ws += up(size_t(pl.m_elems) * sizeof(T));
    double* M = reinterpret_cast<double*>(ws);  // [xi][k][c], all blocks
    const auto& AT = Tab::table<T>::AT;
    std::vector<Run>& runs = thread_vector<Run, TileRuns>();
    const T alpha = T(a.alpha), beta = T(a.beta);
    BlasThreads blas_threads(threads);

    for (int64_t g = 0; g < p.groups; ++g) {
        std::fill(M, M + pl.m_elems, 0.0);
        for (int64_t t0 = 0; t0 < pl.tiles; t0 += pl.block) {
            const int64_t bt = std::min(pl.block, pl.tiles - t0);
            if (p.nhwc) {
#pragma omp parallel for num_threads(threads) schedule(static)
                for (int64_t j = 0; j < bt; ++j) {
                    const int64_t t = t0 + j, b = t % pl.tb, aa = t / pl.tb % pl.ta, n = t / (pl.tb * pl.ta);
                    dy_tile_nhwc(p, dy, g, n, aa, b, U, j, pl.block);
                    x_tile_nhwc(p, x, g, n, aa, b, V, j, pl.block);
                }
                // M_xi = U_xi^T (Kg x bt) V_xi (bt x Cg): the 16 GEMMs side by side, one thread each
                // (BLAS runs single-threaded inside a parallel region)
#pragma omp parallel for num_threads(threads) schedule(static)
                for (int64_t xi = 0; xi < kXi; ++xi)
                    gemm(true, false, int(kg), int(cg), int(bt), T(1), U + xi * pl.block * kg, int(kg),
                         V + xi * pl.block * cg, int(cg), T(0), Mb + xi * kg * cg, int(cg));
            } else {
                // The block's tiles as runs of one tile row (n, aa) and consecutive columns b: the
                // transforms below work on a run at a time, vectorised along it.
                runs.clear();
                for (int64_t j = 0; j < bt;) {
                    const int64_t t = t0 + j, b = t % pl.tb, aa = t / pl.tb % pl.ta, n = t / (pl.tb * pl.ta);
                    const int64_t len = std::min({bt - j, pl.tb - b, kRun});
                    runs.push_back({n, aa, b, j, len});
                    j += len;
                }
                const int64_t n_runs = int64_t(runs.size());
                // U = G g G^T of each dy tile g (2x2, zero beyond P x Q).
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static)
                for (int64_t k = 0; k < kg; ++k)
                    for (int64_t ri = 0; ri < n_runs; ++ri) {
                        const Run& run = runs[ri];
                        const T* d = dy + (run.n * p.k + g * kg + k) * pq;
                        T tile[2][2][kRun];
                        for (int i = 0; i < 2; ++i) {
                            const int64_t pp = 2 * run.aa + i;
                            for (int jj = 0; jj < 2; ++jj)
                                for (int64_t e = 0; e < run.len; ++e) {
                                    const int64_t qq = 2 * (run.b + e) + jj;
                                    tile[i][jj][e] = pp < p.p && qq < p.q ? d[pp * p.q + qq] : T(0);
                                }
                        }
                        T gt[kA][2][kRun];  // G g
#pragma GCC unroll 4
                        for (int u = 0; u < kA; ++u)
#pragma GCC unroll 2
                            for (int jj = 0; jj < 2; ++jj)
                                for (int64_t e = 0; e < run.len; ++e)
                                    gt[u][jj][e] = Tab::g<T>(u, 0) * tile[0][jj][e] + Tab::g<T>(u, 1) * tile[1][jj][e];
#pragma GCC unroll 4
                        for (int u = 0; u < kA; ++u)
#pragma GCC unroll 4
                            for (int v = 0; v < kA; ++v) {
                                T* dst = U + ((u * kA + v) * kg + k) * pl.block + run.j;
                                for (int64_t e = 0; e < run.len; ++e)
                                    dst[e] = gt[u][0][e] * Tab::g<T>(v, 0) + gt[u][1][e] * Tab::g<T>(v, 1);
                            }
                    }
                // V = BT d B of each 4x4 input tile d (zero outside the image).
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static)
                for (int64_t c = 0; c < cg; ++c)
                    for (int64_t ri = 0; ri < n_runs; ++ri) {
                        const Run& run = runs[ri];
                        const T* xc = x + (run.n * p.c + g * cg + c) * hw;
                        const int64_t h0 = 2 * run.aa - p.pad_h, w0 = 2 * run.b - p.pad_w;
                        T d[kA][kA][kRun];
                        for (int i = 0; i < kA; ++i) {
                            const int64_t ih = h0 + i;
                            for (int jj = 0; jj < kA; ++jj) {
                                T* de = d[i][jj];
                                if (ih < 0 || ih >= p.h) {
                                    for (int64_t e = 0; e < run.len; ++e) de[e] = T(0);
                                    continue;
                                }
                                const T* row = xc + ih * p.w;
                                for (int64_t e = 0; e < run.len; ++e) {
                                    const int64_t iw = w0 + 2 * e + jj;
                                    de[e] = iw >= 0 && iw < p.w ? row[iw] : T(0);
                                }
                            }
                        }
                        T bd[kA][kA][kRun];  // BT d
#pragma GCC unroll 4
                        for (int u = 0; u < kA; ++u)
#pragma GCC unroll 4
                            for (int jj = 0; jj < kA; ++jj)
                                for (int64_t e = 0; e < run.len; ++e)
                                    bd[u][jj][e] = Tab::bt<T>(u, 0) * d[0][jj][e] + Tab::bt<T>(u, 1) * d[1][jj][e] +
                                                   Tab::bt<T>(u, 2) * d[2][jj][e] + Tab::bt<T>(u, 3) * d[3][jj][e];
#pragma GCC unroll 4
                        for (int u = 0; u < kA; ++u)
#pragma GCC unroll 4
                            for (int v = 0; v < kA; ++v) {
                                T* dst = V + ((u * kA + v) * cg + c) * pl.block + run.j;
                                for (int64_t e = 0; e < run.len; ++e)
                                    dst[e] = bd[u][0][e] * Tab::bt<T>(v, 0) + bd[u][1][e] * Tab::bt<T>(v, 1) +
                                             bd[u][2][e] * Tab::bt<T>(v, 2) + bd[u][3][e] * Tab::bt<T>(v, 3);
                            }
                    }
                // M_xi += U_xi (Kg x bt) V_xi^T (bt x Cg), the block's sum in T, the total in double.
    #pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t xi = 0; xi < kXi; ++xi)
                    gemm(false, true, int(kg), int(cg), int(bt), T(1), U + xi * kg * pl.block, int(pl.block),
                         V + xi * cg * pl.block, int(pl.block), T(0), Mb + xi * kg * cg, int(cg));
            }
#pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t i = 0; i < pl.m_elems; ++i) M[i] += double(Mb[i]);
        }
        // dw = alpha * AT M A + beta * dw, taps mirrored in the true-convolution mode.
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static)
        for (int64_t k = 0; k < kg; ++k)
            for (int64_t c = 0; c < cg; ++c) {
                double m[kA][kA], am[3][kA];
                for (int u = 0; u < kA; ++u)
                    for (int v = 0; v < kA; ++v) m[u][v] = M[((u * kA + v) * kg + k) * cg + c];
                for (int r = 0; r < 3; ++r)
                    for (int v = 0; v < kA; ++v) {
                        double s = 0;
                        for (int u = 0; u < kA; ++u) s += double(AT[r][u]) * m[u][v];
                        am[r][v] = s;
                    }
                T* out = dw + ((g * kg + k) * cg + c) * 9;
                for (int r = 0; r < 3; ++r)
                    for (int s2 = 0; s2 < 3; ++s2) {
                        double y = 0;
                        for (int v = 0; v < kA; ++v) y += am[r][v] * double(AT[s2][v]);
                        blend_store(out + conv_filter_tap(r, 3, p.flip) * 3 + conv_filter_tap(s2, 3, p.flip),
                                    T(y), alpha, beta);
                    }
            }
    }
}

void run(const BwdFilterArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

}  // namespace

extern const Solver winograd_3x3_2x2_bwd_filter_solver;
const Solver winograd_3x3_2x2_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run, .runs_nhwc = runs_nhwc, .made_for = made_for::yes};

}  // namespace cpu
}  // namespace convcore
