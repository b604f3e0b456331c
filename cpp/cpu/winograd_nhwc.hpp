// Winograd F(mxm,3x3) on NHWC tensors with the three stages fused per block of tiles (the
// "fused" schedule of Zlateski et al., "The anatomy of efficient FFT and Winograd convolutions
// on modern CPUs", ICS 2019; Jia et al., PPoPP 2018): for one group, each thread takes a block
// of tb tiles at a time and
//   1. transforms their inputs, every channel, into V[xi][tile][c]          (L2-sized buffer)
//      v = BT d BT^T with the vector lanes along the channels, which NHWC keeps contiguous;
//   2. multiplies, for each of the a*a points xi, M_xi (tiles x K) = V_xi (tiles x C) . U_xi
//      (C x K) with the register-blocked kernel of the NHWC GEMM (cpu/nhwc_gemm.hpp), U_xi
//      read as column panels of two vectors: U[xi][panel][c][2 vectors], prepared once;
//   3. transforms M back, Y = AT m AT^T, a group of pg panels of output channels at a time
//      while M's group is still in L2, and stores y with the epilogue (alpha, beta, residual z,
//      bias, activation) applied while the outputs are in registers.
// V and M never leave the thread's L2 (V: a*a*tb*C elements, M: a*a*tb*pg*nr), unlike the
// NCHW schedule (winograd.cpp), which goes through memory between the stages.
//
// 1-D (a 3 x 1 or 1 x 3 filter, dilation 1): the same schedule with tiles of m x 1
// (or 1 x m) outputs, F(m,3) along the filter's axis and the identity across it (class Point):
// a + 0 input points per tile, (m+2)/m multiplications per output and (c, k) against 3.
//
// Stride 2 along a 3-tap axis: the tile's transform along it is F(m,3) at stride 2 (the tables
// F2x3s2 / F4x3s2: F(m,2) on the even inputs, the odd inputs times the middle tap; generated and
// verified by tools/gen_winograd.py), m outputs from 2m + 1 inputs in 2m + 1 products (3m by the
// definition). A tile's inputs start at its first output times the stride; nested in both axes it
// is the four-phase split of a stride-2 3x3 filter (Huang et al., "DWM", AAAI 2020): (2m+1)^2
// products per m x m outputs, 81/16 = 5.06 per output for F(4x4) against 9.
//
// 3-D (N x D x H x W x C, filters K x C x T x 3 x 3): the same schedule with the depth taps
// summed in the transformed domain. A tile is one output depth's m x m outputs; its row of V
// holds the transforms of the T input planes it reads (id = od * stride + t * dil - pad, zero
// outside the volume) side by side, so one GEMM per point reduces over T*C, U holding the T
// taps' G g G^T in the matching rows, and each output is transformed back once:
//   Y = AT [ sum over t, c of (G g[k,c,t] G^T) .* (BT d[c, id(t)] BT^T) ] AT^T.
// Per output and (c, k): T*(m+2)^2/m^2 multiplications, 6.75 for F(4x4,3x3) with T = 3 (27 by
// the definition). 2-D is the case T = 1.
//
// The cube, F(m x m x m, 3x3x3) (3x3x3 filters at depth stride 1: Tile's third axis D): the
// minimal filtering algorithms nested one per axis (Lavin & Gray, Sec. 4; Jia et al., PPoPP 2018).
// A tile is m x m x m outputs from (m+2)^3 input points: each of the m + 2 input planes it reads
// is transformed in 2-D, then B_D^T runs across them, so V's rows are the tile's (m+2)^3 points
// over C channels; the GEMMs reduce over C alone, and A_D^T then the 2-D A^T bring the points
// back. (m+2)^3/m^3 multiplications per output and (c, k): 3.375 for F(4x4x4), 8 for F(2x2x2).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/epilogue.hpp"
#include "common/generated/winograd_tables.hpp"
#include "core/solver.hpp"
#include "cpu/epilogue_store.hpp"
#include "cpu/nhwc_gemm.hpp"
#include "cpu/winograd_3d.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace winograd_nhwc {

// thread_vector sites
struct TileBuffers;
struct FilterPanels;
struct ReducedDepths;

using nhwc_gemm::cache_bytes;
using nhwc_gemm::kPanelVectors;

// Tiles come in blocks of this many (a multiple of every instruction set's register block).
constexpr int64_t kTileRows = 12;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One group with at least a vector of input channels (the input transform's lanes run along
// them: with fewer most lanes would idle, and the NCHW schedule, whose lanes run along tiles,
// serves such layers), and sizes whose products (U, the buffers) can be counted.
inline bool applies(const ConvProblem& p) {
    return p.groups == 1 && p.c >= nhwc_gemm::isa_lanes(p.elem_size()) &&
           product_or_minus1({36, nhwc_gemm::panel_count(p), nhwc_gemm::panel_cols(p), p.c,
                              int64_t(p.elem_size())}) >= 0;
}

using winograd_3d::Depth;  // the depth axis of a 3-D problem (the default: 2-D)

// The transform along an axis the filter does not span (one tap): the identity, one point per
// output.
struct Point {
    static constexpr int m = 1, r = 1, alpha = 1;
    template <typename T>
    struct table {
        static constexpr T AT[1][1] = {{T(1)}}, G[1][1] = {{T(1)}}, BT[1][1] = {{T(1)}};
    };
};
// A tile's minimal filtering algorithm per axis: Tile<F, F> is F(m x m, 3x3) (F: F(m,3)),
// Tile<F, Point> F(m,3) along H for a 3 x 1 filter, Tile<Point, F> along W for 1 x 3.
// Tile<F, F, F> is the cube F(m x m x m, 3x3x3), depth stride 1.
template <class FH, class FW, class FD = Point>
struct Tile {
    using H = FH;
    using W = FW;
    using D = FD;
};
template <class F>
constexpr bool kCube = F::D::alpha > 1;
// F(m,3)'s stride-2 form (F2x3s2, F4x3s2).
template <class F>
using AtStride2 = std::conditional_t<F::m == 2, winograd::F2x3s2, winograd::F4x3s2>;
// The output tile and transform points along an axis with `taps` filter taps, for F(m,3) at the
// axis' stride (1: m + 2 points; 2: 2m + 1).
inline int64_t tile_outputs(int64_t taps, int64_t m) { return taps == 1 ? 1 : m; }
inline int64_t tile_points(int64_t taps, int64_t m, int64_t stride) {
    return taps == 1 ? 1 : stride == 2 ? 2 * m + 1 : m + 2;
}
// Whether the schedule runs p's filter shape: 3x3 (stride 1x1 or 2x2), or 3x1 or 1x3 (stride 1
// or 2 along the filter, 1 across it); dilation 1.
inline bool takes_filter(const ConvProblem& p) {
    if (p.dil_h != 1 || p.dil_w != 1) return false;
    if (p.r == 3 && p.s == 3) return p.stride_h == p.stride_w && (p.stride_h == 1 || p.stride_h == 2);
    if (p.r == 3 && p.s == 1) return p.stride_w == 1 && (p.stride_h == 1 || p.stride_h == 2);
    if (p.r == 1 && p.s == 3) return p.stride_h == 1 && (p.stride_w == 1 || p.stride_w == 2);
    return false;
}

// The channels one tap takes in V's and U's rows: C, padded to whole vectors between taps.
inline int64_t tap_stride(const ConvProblem& p, int64_t taps) {
    const int64_t lanes = nhwc_gemm::isa_lanes(p.elem_size());
    return taps == 1 ? p.c : ceil_div(p.c, lanes) * lanes;
}
// The GEMMs' reduction: the taps' channels, the last tap's unpadded.
inline int64_t reduction(const ConvProblem& p, int64_t taps) { return (taps - 1) * tap_stride(p, taps) + p.c; }

struct Geometry {
    Depth depth;
    int64_t rt;             // the depth taps in V's and U's rows (the cube: 1)
    int64_t cp, kc;         // a tap's stride in V's and U's rows; the GEMMs' reduction
    int64_t md, mh, mw;     // output tile (md: the cube's depth, else 1)
    int64_t ad, ah, aw, aa; // input tile (m + 2 or 2m + 1 along a 3-tap axis, 1 along a 1-tap one), ad*ah*aw
    int64_t td, th, tw;     // tiles per volume td x th x tw (td: D' / md)
    int64_t tiles;          // N*td*th*tw
    int64_t nr, panels;     // U's column panels: nr output channels each
    int64_t ldv;            // V's row stride: C padded to whole vectors (and off 2 KiB multiples)
    int64_t tb;             // tiles per block (a multiple of kTileRows)
    int64_t pg, ldm;        // panels per output group; M's row stride pg * nr
    int64_t tile_tasks, tiles_per_task, panel_tasks, panels_per_task;
};

// The blocking. Per block of tb tiles a task reads its whole slice of U (a*a*C x its output
// channels) and writes and reads V (a*a*C per tile): tb = the task's output channels makes the
// two streams about equal (at least what half of L2 holds of V), so U's slice is read once per
// that many tiles however large it is. The threads split either the tiles (each reads all of
// U per block) or the panels (each transforms every tile's input): whichever moves fewer bytes
// per thread. M holds a group of pg panels for the output transform, a quarter of L2.
struct Split {
    int64_t tile_tasks, tiles_per_task, panel_tasks, panels_per_task, tb, cost;
};
inline Split split(const ConvProblem& p, const Geometry& g, int64_t tile_tasks, int64_t panel_tasks) {
    Split s{};
    const int64_t elem = int64_t(p.elem_size()), l2 = cache_bytes(2, 512 << 10);
    s.tiles_per_task = ceil_div(ceil_div(g.tiles, kTileRows), tile_tasks) * kTileRows;
    s.panels_per_task = ceil_div(g.panels, panel_tasks);
    s.tile_tasks = ceil_div(g.tiles, s.tiles_per_task);
    s.panel_tasks = ceil_div(g.panels, s.panels_per_task);
    const int64_t v_tile = g.aa * g.ldv * elem, u_task = g.aa * g.kc * s.panels_per_task * g.nr * elem;
    const int64_t tb_max = std::max({kTileRows, l2 / 2 / v_tile, s.panels_per_task * g.nr});
    const int64_t blocks = ceil_div(s.tiles_per_task, tb_max);
    s.tb = ceil_div(ceil_div(s.tiles_per_task, blocks), kTileRows) * kTileRows;  // even blocks
    s.tb = std::min(s.tb, std::max(kTileRows, s.tiles_per_task));
    s.cost = blocks * u_task + s.tiles_per_task * v_tile;
    return s;
}

inline Geometry geometry(const ConvProblem& p, int64_t m, int threads, const Depth& depth = {}, bool cube = false) {
    Geometry g{};
    g.depth = depth;
    g.rt = cube ? 1 : depth.taps;
    g.cp = tap_stride(p, g.rt);
    g.kc = reduction(p, g.rt);
    const int64_t elem = int64_t(p.elem_size()), lanes = nhwc_gemm::isa_lanes(p.elem_size());
    const int64_t l2 = cache_bytes(2, 512 << 10);
    g.md = cube ? m : 1;
    g.mh = tile_outputs(p.r, m);
    g.mw = tile_outputs(p.s, m);
    g.ad = cube ? m + 2 : 1;
    g.ah = tile_points(p.r, m, p.stride_h);
    g.aw = tile_points(p.s, m, p.stride_w);
    g.aa = g.ad * g.ah * g.aw;
    g.td = ceil_div(depth.d_out, g.md);
    g.th = ceil_div(p.p, g.mh);
    g.tw = ceil_div(p.q, g.mw);
    g.tiles = p.n * g.td * g.th * g.tw;
    g.nr = nhwc_gemm::panel_cols(p);
    g.panels = nhwc_gemm::panel_count(p);
    g.ldv = nhwc_gemm::copied_row_stride((g.rt - 1) * g.cp + ceil_div(p.c, lanes) * lanes, p.elem_size());
    const int64_t t = std::max(1, threads);
    const Split by_tiles = split(p, g, std::min(ceil_div(g.tiles, kTileRows), t), 1);
    const Split by_panels = split(p, g, 1, std::min(g.panels, t));
    const Split& s = by_panels.cost < by_tiles.cost ? by_panels : by_tiles;
    g.tile_tasks = s.tile_tasks;
    g.tiles_per_task = s.tiles_per_task;
    g.panel_tasks = s.panel_tasks;
    g.panels_per_task = s.panels_per_task;
    g.tb = s.tb;
    g.pg = std::min(g.panels_per_task, std::max<int64_t>(1, l2 / 4 / (g.aa * g.tb * g.nr * elem)));
    g.ldm = nhwc_gemm::copied_row_stride(g.pg * g.nr, p.elem_size());
    return g;
}

// The part [lo, hi) of V's rows (and U's) that the tiles [t0, t1) read: the depth taps that reach
// the volume for one of their output depths (the others' columns are zero). 2-D: all of it.
inline std::pair<int64_t, int64_t> reduction_range(const Geometry& g, int64_t t0, int64_t t1) {
    const Depth& d = g.depth;
    if (g.rt == 1) return {0, g.kc};
    const int64_t per_plane = g.th * g.tw;
    int64_t lo = d.taps, hi = 0;
    for (int64_t plane = t0 / per_plane; plane <= (t1 - 1) / per_plane; ++plane) {
        const int64_t first = plane % d.d_out * d.stride - d.pad;  // tap t reads depth first + t * dil
        lo = std::min(lo, first >= 0 ? 0 : ceil_div(-first, d.dil));
        hi = std::max(hi, d.d_in - first <= 0 ? 0 : std::min(d.taps, ceil_div(d.d_in - first, d.dil)));
    }
    if (lo >= hi) return {0, g.kc};  // only padding: the whole (zero) reduction makes the zeros
    return {lo * g.cp, std::min(g.kc, hi * g.cp)};
}

// U's elements: [xi][panel][t * cp + c][nr], columns past K and the rows between taps zero.
// (cube: F(m x m x m), taps 1)
inline int64_t u_elems(const ConvProblem& p, int64_t m, int64_t taps = 1, bool cube = false) {
    return (cube ? m + 2 : 1) * tile_points(p.r, m, p.stride_h) * tile_points(p.s, m, p.stride_w) *
           nhwc_gemm::panel_count(p) * nhwc_gemm::panel_cols(p) * reduction(p, taps);
}
// A thread's buffers: V's block, M's group, and a sink for the rows of a partial block.
inline int64_t scratch_elems(const Geometry& g) { return g.aa * g.tb * (g.ldv + g.ldm) + g.nr; }

// out[i][j] = sum_l M[i][l] in[l][j] (left) and out[i][j] = sum_l in[i][l] M[j][l] (right,
// by M^T) on vectors; M is a constexpr table, so once unrolled its zero entries vanish.
template <int I, int K, int J, typename V, typename Mat>
CONVCORE_GEMM_INLINE void left(const Mat& M, const V (&in)[K][J], V (&out)[I][J]) {
#pragma GCC unroll 8
    for (int i = 0; i < I; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j) {
            V acc = V{};
            bool first = true;  // (no 0 + first term: the compiler may not drop it)
#pragma GCC unroll 8
            for (int l = 0; l < K; ++l)
                if (M[i][l] != 0) acc = first ? M[i][l] * in[l][j] : acc + M[i][l] * in[l][j], first = false;
            out[i][j] = acc;
        }
}
template <int I, int K, int J, typename V, typename Mat>
CONVCORE_GEMM_INLINE void right(const Mat& M, const V (&in)[I][K], V (&out)[I][J]) {
#pragma GCC unroll 8
    for (int i = 0; i < I; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j) {
            V acc = V{};
            bool first = true;
#pragma GCC unroll 8
            for (int l = 0; l < K; ++l)
                if (M[j][l] != 0) acc = first ? M[j][l] * in[i][l] : acc + M[j][l] * in[i][l], first = false;
            out[i][j] = acc;
        }
}

// One vector of VB bytes at p, aligned to T only, as a single load or store. (A __builtin_memcpy
// of 32 bytes into an array that lives in memory compiles to two 16-byte moves, and reading the
// vector back whole then stalls on store forwarding: a tenth of the 1-D input transform's time.)
// (By reference, not by value: a vector argument or result changes the ABI between the ISAs.)
template <typename T, int VB, typename Vec>
CONVCORE_GEMM_INLINE void load_vec(Vec& v, const T* p) {
    typedef T Unaligned __attribute__((vector_size(VB), aligned(sizeof(T)), may_alias));
    v = *reinterpret_cast<const Unaligned*>(p);
}
template <typename T, int VB, typename Vec>
CONVCORE_GEMM_INLINE void store_vec(T* p, const Vec& v) {
    typedef T Unaligned __attribute__((vector_size(VB), aligned(sizeof(T)), may_alias));
    *reinterpret_cast<Unaligned*>(p) = v;
}

// U = G_D (G_H g G_W^T) per filter k, input channel c and depth tap t (true convolution mirrors
// g in every axis; G_D: the cube's, else the identity), in vectors of VB bytes along k: a
// training step makes U again for every pass that runs it (the cube's is 8x the weight). w
// (K x C x T x [3 x] R x S: the cube's depth taps, or the per-tap form's T) is first copied
// tap-major into wt (one row of panels * nr per tap, mirrored, zero past K); each vector of
// consecutive filters then goes through the axes' G into U's panel rows [xi][panel][t*cp + c][nr].
template <typename T, int VB, class F>
CONVCORE_GEMM_INLINE void make_u(const ConvProblem& p, const T* w, T* U, int64_t c, int64_t taps, T* wt) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T), ad = F::D::alpha, ah = F::H::alpha, aw = F::W::alpha;
    constexpr int rd = F::D::r, rh = F::H::r, rw = F::W::r, per_tap = rd * rh * rw, plane_points = ah * aw;
    using TabD = typename F::D::template table<T>;
    using TabH = typename F::H::template table<T>;
    using TabW = typename F::W::template table<T>;
    const int64_t nr = nhwc_gemm::panel_cols(p), panels = nhwc_gemm::panel_count(p), kp = panels * nr;
    const int64_t cp = tap_stride(p, taps), kc = reduction(p, taps), all = taps * per_tap;
    for (int64_t k = 0; k < kp; ++k) {
        const T* g = w + (k * p.c + c) * all;
        for (int64_t l = 0; l < all; ++l) wt[l * kp + k] = k < p.k ? g[p.flip ? all - 1 - l : l] : T(0);
    }
    for (int64_t t = 0; t < taps; ++t)
        for (int64_t k0 = 0; k0 < kp; k0 += L) {
            Vec g[rd][rh][rw], gw[rd][rh][aw], gh[rd][plane_points], u[ad][plane_points];
            for (int l = 0; l < per_tap; ++l)
                load_vec<T, VB>(g[l / (rh * rw)][l / rw % rh][l % rw], wt + (t * per_tap + l) * kp + k0);
            for (int a = 0; a < rd; ++a) {
                right<rh, rw, aw>(TabW::G, g[a], gw[a]);
                left<ah, rh, aw>(TabH::G, gw[a], reinterpret_cast<Vec(&)[ah][aw]>(gh[a]));
            }
            left<ad, rd, plane_points>(TabD::G, gh, u);
            T* dst = U + (k0 / nr * kc + t * cp + c) * nr + k0 % nr;  // point 0's row
            for (int q = 0; q < ad; ++q)
                for (int xi = 0; xi < plane_points; ++xi)
                    store_vec<T, VB>(dst + (q * plane_points + xi) * panels * kc * nr, u[q][xi]);
        }
}

// make_u compiled for one instruction set (the CONVCORE_WINOGRAD_NHWC_KERNELS below).
template <typename T>
using MakeUFn = void (*)(const ConvProblem&, const T*, T*, int64_t, int64_t, T*);

// The whole U (u_elems) from w, the input channels in parallel.
template <typename T, class F>
void prepare_u(const ConvProblem& p, const T* w, T* U, int threads, int64_t taps, MakeUFn<T> make) {
    if (tap_stride(p, taps) != p.c)  // the rows between taps
        std::memset(U, 0, size_t(u_elems(p, std::max(F::H::m, F::W::m), taps, kCube<F>)) * sizeof(T));
    const size_t wt_elems =
        size_t(taps * F::D::r * F::H::r * F::W::r * nhwc_gemm::panel_count(p) * nhwc_gemm::panel_cols(p));
#pragma omp parallel num_threads(threads)
    {
        std::vector<T>& wt = thread_vector<T, FilterPanels>(wt_elems);  // each thread's
#pragma omp for schedule(static)
        for (int64_t c = 0; c < p.c; ++c) make(p, w, U, c, taps, wt.data());
    }
}

// The input pixels of a tile's plane (ah x aw, from the tile's corner), null in the padding.
template <int ah, int aw, typename T>
CONVCORE_GEMM_INLINE void tile_pixels(const ConvProblem& p, const T* x_plane, int64_t ty, int64_t tx, int64_t mh,
                                      int64_t mw, const T* (&px)[ah][aw]) {
    for (int i = 0; i < ah; ++i)
        for (int j = 0; j < aw; ++j) {
            const int64_t ih = ty * mh * p.stride_h - p.pad_h + i, iw = tx * mw * p.stride_w - p.pad_w + j;
            px[i][j] = ih < 0 || ih >= p.h || iw < 0 || iw >= p.w ? nullptr : x_plane + (ih * p.w + iw) * p.c;
        }
}

// The vectors of channels [c0, c0 + L) at the pixels px (zero where null; nl < L: a partial one).
template <typename T, int VB, int ah, int aw, typename Vec>
CONVCORE_GEMM_INLINE void load_pixels(const T* const (&px)[ah][aw], int64_t c0, int64_t nl, Vec (&d)[ah][aw]) {
    constexpr int L = VB / sizeof(T);
    for (int i = 0; i < ah; ++i)
        for (int j = 0; j < aw; ++j) {
            d[i][j] = Vec{};
            if (!px[i][j]) continue;
            if (nl == L)
                load_vec<T, VB>(d[i][j], px[i][j] + c0);
            else
                for (int64_t l = 0; l < nl; ++l) d[i][j][l] = px[i][j][c0 + l];
        }
}

// Stage 1 of the cube: V[xi][tt][c], xi = (q * ah + i) * aw + j over the tile's ad x ah x aw
// points: each of the ad input planes the tile reads transformed in 2-D (zero outside the
// volume), then B_D^T across them.
template <typename T, int VB, class F>
CONVCORE_GEMM_INLINE void input_block_cube(const ConvProblem& p, const Geometry& g, const T* x, int64_t t0,
                                           int64_t nt, T* V) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T), ad = F::D::alpha, ah = F::H::alpha, aw = F::W::alpha, md = F::D::m;
    constexpr int plane_points = ah * aw;
    using TabD = typename F::D::template table<T>;
    using TabH = typename F::H::template table<T>;
    using TabW = typename F::W::template table<T>;
    const Depth& dd = g.depth;
    const auto pixels = [&](int64_t tile, const T* (&px)[ad][ah][aw]) {
        const int64_t volume = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
        const int64_t n = volume / g.td, tz = volume % g.td;
        for (int q = 0; q < ad; ++q) {
            const int64_t id = tz * md + q - dd.pad;
            if (id >= 0 && id < dd.d_in)
                tile_pixels<ah, aw>(p, x + (n * dd.d_in + id) * p.h * p.w * p.c, ty, tx, g.mh, g.mw, px[q]);
            else
                for (int i = 0; i < ah; ++i)
                    for (int j = 0; j < aw; ++j) px[q][i][j] = nullptr;
        }
    };
    const T* px[ad][ah][aw];
    pixels(t0, px);
    for (int64_t tt = 0; tt < nt; ++tt) {
        // The next tile's new pixels (the columns it does not share with this one) into the cache:
        // a tile reads ad x ah rows of x at once, more streams than the hardware prefetchers follow.
        const T* next[ad][ah][aw];
        if (tt + 1 < nt) {
            pixels(t0 + tt + 1, next);
            for (int q = 0; q < ad; ++q)
                for (int i = 0; i < ah; ++i)
                    for (int64_t j = std::max<int64_t>(0, aw - g.mw * p.stride_w); j < aw; ++j)
                        if (next[q][i][j])
                            for (int64_t b = 0; b < p.c * int64_t(sizeof(T)); b += 64)
                                __builtin_prefetch(reinterpret_cast<const char*>(next[q][i][j]) + b, 0, 2);
        }
        for (int64_t c0 = 0; c0 < p.c; c0 += L) {
            const int64_t nl = std::min<int64_t>(L, p.c - c0);
            Vec planes[ad][plane_points], v[ad][plane_points];
            for (int q = 0; q < ad; ++q) {
                Vec d[ah][aw], t1[ah][aw];
                load_pixels<T, VB>(px[q], c0, nl, d);
                left<ah, ah, aw>(TabH::BT, d, t1);
                right<ah, aw, aw>(TabW::BT, t1, reinterpret_cast<Vec(&)[ah][aw]>(planes[q]));
            }
            left<ad, ad, plane_points>(TabD::BT, planes, v);
            T* dst = V + tt * g.ldv + c0;
            for (int q = 0; q < ad; ++q)
                for (int xi = 0; xi < plane_points; ++xi)
                    store_vec<T, VB>(dst + (q * plane_points + xi) * g.tb * g.ldv, v[q][xi]);
        }
        if (tt + 1 < nt) std::memcpy(px, next, sizeof(px));
    }
}

// Stage 1: V[xi][tt][t * cp + c] for the tiles [t0, t0 + nt), every tap and channel.
template <typename T, int VB, class F>
CONVCORE_GEMM_INLINE void input_block(const ConvProblem& p, const Geometry& g, const T* x, int64_t t0, int64_t nt,
                                      T* V) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T), ah = F::H::alpha, aw = F::W::alpha, mh = F::H::m, mw = F::W::m;
    using TabH = typename F::H::template table<T>;
    using TabW = typename F::W::template table<T>;
    const Depth& dd = g.depth;
    for (int64_t tt = 0; tt < nt; ++tt) {
        const int64_t tile = t0 + tt, plane = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
        const int64_t n = plane / dd.d_out, od = plane % dd.d_out;
        for (int64_t t = 0; t < dd.taps; ++t) {
            const int64_t id = od * dd.stride + t * dd.dil - dd.pad;
            if (id < 0 || id >= dd.d_in) {  // a tap in the depth padding: its part of the row is zero
                const Vec zero = Vec{};
                for (int64_t c0 = 0; c0 < p.c; c0 += L)
                    for (int xi = 0; xi < ah * aw; ++xi)
                        store_vec<T, VB>(V + tt * g.ldv + t * g.cp + c0 + xi * g.tb * g.ldv, zero);
                continue;
            }
            const T* px[ah][aw];  // the input pixels of the tile, null in the padding
            tile_pixels<ah, aw>(p, x + (n * dd.d_in + id) * p.h * p.w * p.c, ty, tx, mh, mw, px);
            for (int64_t c0 = 0; c0 < p.c; c0 += L) {
                const int64_t nl = std::min<int64_t>(L, p.c - c0);
                Vec d[ah][aw], t1[ah][aw], v[ah][aw];
                load_pixels<T, VB>(px, c0, nl, d);
                left<ah, ah, aw>(TabH::BT, d, t1);
                right<ah, aw, aw>(TabW::BT, t1, v);
                T* dst = V + tt * g.ldv + t * g.cp + c0;
                for (int xi = 0; xi < ah; ++xi)
                    for (int nu = 0; nu < aw; ++nu)
                        store_vec<T, VB>(dst + (xi * aw + nu) * g.tb * g.ldv, v[xi][nu]);
            }
        }
    }
}

using epilogue_store::Out;
using epilogue_store::store;

// Stage 3: the output channels [k_begin, k_end) of the tiles [t0, t0 + nt) from M, whose
// column 0 is channel k_base.
template <typename T, int VB, class F>
CONVCORE_GEMM_INLINE void output_block(const ConvProblem& p, const Geometry& g, const T* M, int64_t t0, int64_t nt,
                                       int64_t k_base, int64_t k_begin, int64_t k_end, T* y, const Out<T>& e) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T), ah = F::H::alpha, aw = F::W::alpha, mh = F::H::m, mw = F::W::m;
    using TabH = typename F::H::template table<T>;
    using TabW = typename F::W::template table<T>;
    for (int64_t tt = 0; tt < nt; ++tt) {
        const int64_t tile = t0 + tt, plane = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
        const int64_t rows = std::min<int64_t>(mh, p.p - ty * mh), cols = std::min<int64_t>(mw, p.q - tx * mw);
        for (int64_t k0 = k_begin; k0 < k_end; k0 += L) {
            Vec mm[ah][aw], t1[mh][aw], o[mh][mw];
            const T* src = M + tt * g.ldm + (k0 - k_base);
            for (int xi = 0; xi < ah; ++xi)
                for (int nu = 0; nu < aw; ++nu)
                    load_vec<T, VB>(mm[xi][nu], src + (xi * aw + nu) * g.tb * g.ldm);
            left<mh, ah, aw>(TabH::AT, mm, t1);
            right<mh, aw, mw>(TabW::AT, t1, o);
            const int64_t kl = std::min<int64_t>(L, k_end - k0);
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j)
                    store<T, VB>(e, o[i][j], y, ((plane * p.p + ty * mh + i) * p.q + tx * mw + j) * p.k + k0, k0, kl);
        }
    }
}

// Stage 3 of the cube: as output_block, A_D^T across the tile's ad planes of points first, then
// the 2-D A^T on each of its md output planes inside the volume.
template <typename T, int VB, class F>
CONVCORE_GEMM_INLINE void output_block_cube(const ConvProblem& p, const Geometry& g, const T* M, int64_t t0,
                                            int64_t nt, int64_t k_base, int64_t k_begin, int64_t k_end, T* y,
                                            const Out<T>& e) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T), ad = F::D::alpha, ah = F::H::alpha, aw = F::W::alpha;
    constexpr int md = F::D::m, mh = F::H::m, mw = F::W::m, plane_points = ah * aw;
    using TabD = typename F::D::template table<T>;
    using TabH = typename F::H::template table<T>;
    using TabW = typename F::W::template table<T>;
    const int64_t d_out = g.depth.d_out;
    for (int64_t tt = 0; tt < nt; ++tt) {
        const int64_t tile = t0 + tt, volume = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
        const int64_t n = volume / g.td, tz = volume % g.td;
        const int64_t depths = std::min<int64_t>(md, d_out - tz * md);
        const int64_t rows = std::min<int64_t>(mh, p.p - ty * mh), cols = std::min<int64_t>(mw, p.q - tx * mw);
        for (int64_t k0 = k_begin; k0 < k_end; k0 += L) {
            Vec mm[ad][plane_points], planes[md][plane_points];
            const T* src = M + tt * g.ldm + (k0 - k_base);
            for (int q = 0; q < ad; ++q)
                for (int xi = 0; xi < plane_points; ++xi)
                    load_vec<T, VB>(mm[q][xi], src + (q * plane_points + xi) * g.tb * g.ldm);
            left<md, ad, plane_points>(TabD::AT, mm, planes);
            const int64_t kl = std::min<int64_t>(L, k_end - k0);
            for (int64_t od = 0; od < depths; ++od) {
                Vec t1[mh][aw], o[mh][mw];
                left<mh, ah, aw>(TabH::AT, reinterpret_cast<const Vec(&)[ah][aw]>(planes[od]), t1);
                right<mh, aw, mw>(TabW::AT, t1, o);
                const int64_t plane = n * d_out + tz * md + od;
                for (int64_t i = 0; i < rows; ++i)
                    for (int64_t j = 0; j < cols; ++j)
                        store<T, VB>(e, o[i][j], y, ((plane * p.p + ty * mh + i) * p.q + tx * mw + j) * p.k + k0, k0,
                                     kl);
            }
        }
    }
}

// One task: tiles [t0, t1) x panels [j0, j1), tb tiles at a time.
template <typename T, int VB, int kAcc, class F>
CONVCORE_GEMM_INLINE void task(const ConvProblem& p, const Geometry& g, const T* x, const T* U, T* y, int64_t t0,
                               int64_t t1, int64_t j0, int64_t j1, const Out<T>& e, T* scratch) {
    constexpr int NV = kPanelVectors, MR = kAcc * 3 / 2 / NV;
    const nhwc_gemm::PlainStores<T> plain{T(1), T(0)};  // M = V . U
    T* V = scratch;
    T* M = V + g.aa * g.tb * g.ldv;
    T* sink = M + g.aa * g.tb * g.ldm;
    // 3-D: per row block of MR tiles, the part of the reduction its output depths read
    std::vector<std::pair<int64_t, int64_t>>& reduced =
        thread_vector<std::pair<int64_t, int64_t>, ReducedDepths>(static_cast<size_t>(ceil_div(g.tb, MR)));
    for (int64_t tb0 = t0; tb0 < t1; tb0 += g.tb) {
        const int64_t nt = std::min(g.tb, t1 - tb0);
        if constexpr (kCube<F>)
            input_block_cube<T, VB, F>(p, g, x, tb0, nt, V);
        else
            input_block<T, VB, F>(p, g, x, tb0, nt, V);
        for (int64_t t = 0; t < nt; t += MR)
            reduced[static_cast<size_t>(t / MR)] = reduction_range(g, tb0 + t, tb0 + std::min<int64_t>(nt, t + MR));
        for (int64_t jg = j0; jg < j1; jg += g.pg) {
            const int64_t je = std::min(j1, jg + g.pg);
            for (int64_t xi = 0; xi < g.aa; ++xi)
                for (int64_t jp = jg; jp < je; ++jp) {
                    const T* b = U + (xi * g.panels + jp) * g.kc * g.nr;
                    for (int64_t t = 0; t < nt; t += MR) {
                        const int64_t rows = std::min<int64_t>(MR, nt - t);
                        const auto [q0, q1] = reduced[static_cast<size_t>(t / MR)];
                        const T* va = V + (xi * g.tb + t) * g.ldv + q0;
                        const T* bq = b + q0 * g.nr;
                        T* mc = M + (xi * g.tb + t) * g.ldm + (jp - jg) * g.nr;
                        if (rows > MR / 2)
                            nhwc_gemm::panel_block<T, VB, MR, NV>(va, g.ldv, rows, q1 - q0, bq, mc, g.ldm, g.nr,
                                                                   plain, sink);
                        else if (rows > MR / 4)  // a last partial block: a kernel of half or a quarter the rows
                            nhwc_gemm::panel_block<T, VB, MR / 2, NV>(va, g.ldv, rows, q1 - q0, bq, mc, g.ldm,
                                                                       g.nr, plain, sink);
                        else
                            nhwc_gemm::panel_block<T, VB, MR / 4, NV>(va, g.ldv, rows, q1 - q0, bq, mc, g.ldm,
                                                                       g.nr, plain, sink);
                    }
                }
            if constexpr (kCube<F>)
                output_block_cube<T, VB, F>(p, g, M, tb0, nt, jg * g.nr, jg * g.nr, std::min(p.k, je * g.nr), y, e);
            else
                output_block<T, VB, F>(p, g, M, tb0, nt, jg * g.nr, jg * g.nr, std::min(p.k, je * g.nr), y, e);
        }
    }
}

template <typename T>
using TaskFn = void (*)(const ConvProblem&, const Geometry&, const T*, const T*, T*, int64_t, int64_t, int64_t,
                        int64_t, const Out<T>&, T*);
// A tile's task and make_u in one instruction set.
template <typename T>
struct Kernels {
    TaskFn<T> task;
    MakeUFn<T> make_u;
};

// The task and make_u compiled for one instruction set: winograd_nhwc_<isa><T, F>, a Kernels.
// CONVCORE_WINOGRAD_NHWC_DISPATCH then defines, in the including file, winograd_nhwc_kernels<T, F>()
// (the CPU's set) and winograd_nhwc_prepare<F>(p, w, U, threads, taps) (prepare_u in p's precision).
#define CONVCORE_WINOGRAD_NHWC_KERNELS(ISA, ATTR, VB, ACC)                                                    \
    template <typename T, class F>                                                                           \
    ATTR void winograd_nhwc_task_##ISA(const ConvProblem& p, const winograd_nhwc::Geometry& g, const T* x,   \
                                       const T* U, T* y, int64_t t0, int64_t t1, int64_t j0, int64_t j1,     \
                                       const winograd_nhwc::Out<T>& e, T* scratch) {                         \
        winograd_nhwc::task<T, VB, ACC, F>(p, g, x, U, y, t0, t1, j0, j1, e, scratch);                       \
    }                                                                                                        \
    template <typename T, class F>                                                                           \
    ATTR void winograd_nhwc_make_u_##ISA(const ConvProblem& p, const T* w, T* U, int64_t c, int64_t taps,    \
                                         T* wt) {                                                            \
        winograd_nhwc::make_u<T, VB, F>(p, w, U, c, taps, wt);                                               \
    }                                                                                                        \
    template <typename T, class F>                                                                           \
    const winograd_nhwc::Kernels<T> winograd_nhwc_##ISA = {winograd_nhwc_task_##ISA<T, F>,                   \
                                                           winograd_nhwc_make_u_##ISA<T, F>};
#define CONVCORE_WINOGRAD_NHWC_DISPATCH                                                                        \
    template <typename T, class F>                                                                            \
    const winograd_nhwc::Kernels<T>& winograd_nhwc_kernels() {                                                \
        return for_cpu_isa(winograd_nhwc_avx512<T, F>, winograd_nhwc_avx2<T, F>, winograd_nhwc_baseline<T, F>); \
    }                                                                                                         \
    template <class F>                                                                                        \
    void winograd_nhwc_prepare(const ConvProblem& p, const void* w, void* U, int threads, int64_t taps = 1) { \
        if (p.dtype == CONVCORE_DATA_DOUBLE)                                                                  \
            winograd_nhwc::prepare_u<double, F>(p, static_cast<const double*>(w), static_cast<double*>(U),    \
                                                threads, taps, winograd_nhwc_kernels<double, F>().make_u);    \
        else                                                                                                  \
            winograd_nhwc::prepare_u<float, F>(p, static_cast<const float*>(w), static_cast<float*>(U),       \
                                               threads, taps, winograd_nhwc_kernels<float, F>().make_u);      \
    }

// y = act(alpha * conv(x, w) + beta * y + alpha2 * z + bias) on NHWC x and y; U prepared by
// prepare_u (or made here into `u_space`).
// 3-D: args.prob is one plane's problem (N images), x, w and y the whole tensors (N x D x H x W x
// C, K x C x T x 3 x 3, N x D' x P x Q x K), `depth` their depth axis (the cube: T = 3, depth
// stride and dilation 1).
template <typename T, class F>
void run(const ConvArgs& args, const T* U, T* u_space, const Kernels<T>& kernels, const Depth& depth = {}) {
    const ConvProblem& p = args.prob;
    const int threads = args.ctx.threads();
    if (!U) {
        prepare_u<T, F>(p, static_cast<const T*>(args.w), u_space, threads, kCube<F> ? 1 : depth.taps, kernels.make_u);
        U = u_space;
    }
    const Geometry g = geometry(p, std::max(F::H::m, F::W::m), threads, depth, kCube<F>);
    const Out<T> e = epilogue_store::out_of<T>(args);
    const size_t per_thread = size_t(scratch_elems(g));
    std::vector<T>& buffers = thread_vector<T, TileBuffers>(per_thread * size_t(threads));
    const T* x = static_cast<const T*>(args.x);
    T* y = static_cast<T*>(args.y);
#pragma omp parallel num_threads(threads)
    {
        T* mine = buffers.data() + per_thread * size_t(omp_get_thread_num());
#pragma omp for collapse(2) schedule(static)
        for (int64_t tt = 0; tt < g.tile_tasks; ++tt)
            for (int64_t tj = 0; tj < g.panel_tasks; ++tj)
                kernels.task(p, g, x, U, y, tt * g.tiles_per_task, std::min(g.tiles, (tt + 1) * g.tiles_per_task),
                        tj * g.panels_per_task, std::min(g.panels, (tj + 1) * g.panels_per_task), e, mine);
    }
}

}  // namespace winograd_nhwc
}  // namespace cpu
}  // namespace convcore
