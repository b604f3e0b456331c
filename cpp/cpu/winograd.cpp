// WINOGRAD_2X2_3X3 and WINOGRAD_4X4_3X3 on the CPU: Lavin & Gray's Algorithm 1 with the
// minimal filtering algorithms F(2x2,3x3) (4x4 input tiles) and F(4x4,3x3) (6x6 input tiles).
//
// With m the output tile (2 or 4), a = m + 2 the input tile, the output cut into
// th x tw = ceil(P/m) x ceil(Q/m) tiles per image, and the N*th "tile rows" taken a block of
// whole rows at a time (so the workspace stays bounded), for each group g:
//   1. filter transform (once per call): u = G g_kc G^T for every (k, c), scattered to a*a
//      matrices U_xi (K/g x C/g): U[g][xi][k][c]                      (workspace)
//   2. per block of tile rows (B tiles, V and M have ldv >= B columns):
//      a. input transform: v = BT d BT^T per (tile, c), scattered to V_xi (C/g x B)
//      b. a*a independent GEMMs  M_xi (K/g x B) = U_xi . V_xi        (OpenBLAS)
//      c. output transform: Y = AT m AT^T per (k, tile), clipped at the right/bottom edges,
//         stored with the alpha/beta blend (beta == 0 never reads y).
// True convolution mirrors the filter while transforming it. The transform tables come from
// cpp/common/generated/winograd_tables.hpp (tools/gen_winograd.py, verified exactly).
//
// The transforms work on kLanes consecutive tiles of one tile row (or kLanes filter
// channels) at once, lane index innermost, so their fixed small matrix products compile to
// plain vector code with the tables' zero entries dropped at compile time. The input rows a
// lane group reads are first staged with their zero padding in a small local buffer, so
// there is no per-element bounds test and edge tiles take the same path as interior ones.
// These loops are compiled for AVX-512 and AVX2 besides the baseline (function
// multi-versioning) because the library is built without -march=native.
#include <cblas.h>
#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/generated/winograd_tables.hpp"
#include "common/shuffle.hpp"
#include "core/device.hpp"
#include "core/solver.hpp"
#include "cpu/blas_threads.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/winograd_1d.hpp"
#include "cpu/winograd_3d.hpp"
#include "cpu/winograd_nhwc.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVCORE_WINO_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CONVCORE_WINO_CLONES
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace convcore {
namespace cpu {
namespace {

constexpr int64_t kLanes = 16;  // tiles (or filter channels) transformed together
// Tiles per block: as many whole tile rows as fit V and M (a*a*(C/g + K/g) elements per tile)
// in kBlockBudgetBytes, counted within [kMinBlock, kMaxBlock] tiles, and at least one tile
// row. Depends on the problem only, never on the thread count.
constexpr int64_t kBlockBudgetBytes = int64_t(4) << 20;
constexpr int64_t kMinBlock = 256, kMaxBlock = 4096;
// The filter-blocked schedule (make_plan): taken when U is over kFilterBlockedMinBytes and the
// call has at most kFilterBlockedMaxTiles tiles (GEMMs that few columns wide are bound by
// reading U), with U slices of about kFilterBlockBytes (a multiple of 8 filters). Single-
// threaded CPU time against the block schedule: VGG conv5 7.5 against 10.8 ms, conv4.1 9
// against 11.4 ms, conv4.2 equal; with 128-196 tiles (conv5 at batch 8, conv3.2) slower, hence
// the limit (docs/algorithms.md, WINOGRAD_2X2_3X3).
constexpr int64_t kFilterBlockedMinBytes = int64_t(8) << 20;
constexpr int64_t kFilterBlockedMaxTiles = 64;
constexpr int64_t kFilterBlockBytes = int64_t(2) << 20;
constexpr int64_t kMinOwnFilters = 8;  // per-thread sub-slices (run_filter_blocked) from here

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The private block schedule (run_private_pieces) when U is at most this: the ordinary block
// schedule's hand-offs (V made by all threads, read by every GEMM; M likewise to the output
// transform) cost most when the threads do not share a cache, but each private piece re-reads
// all of U, which with U over ~2 MiB (VGG conv2.2 at 2.4 MB) makes it 11% slower.
constexpr int64_t kPrivateMaxUBytes = int64_t(3) << 19;  // 1.5 MiB

// Tile rows per thread piece in the private block schedule: the largest count whose pieces,
// each rounded up to whole lane groups, fit side by side in a block's ldv columns; 0 if none.
int64_t private_piece_rows(int64_t block_rows, int64_t tw, int64_t ldv, int threads) {
    int64_t sb = block_rows / threads;
    while (sb > 0 && threads * ceil_div(sb * tw, kLanes) * kLanes > ldv) --sb;
    return sb;
}

// U larger than this is written with non-temporal stores: it does not fit the caches anyway,
// and streaming it saves reading every line before writing it (measured: ~20% of the filter
// transform of VGG conv4.2).
constexpr int64_t kStreamUBytes = int64_t(4) << 20;

// dst[0, n) = src[0, n), non-temporal when dst is 16-byte aligned (src must be).
template <typename T>
inline void stream_row(T* __restrict dst, const T* __restrict src, int64_t n) {
#if defined(__SSE2__)
    constexpr int64_t v = 16 / int64_t(sizeof(T));
    if (n % v == 0 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
        for (int64_t i = 0; i < n; i += v) {
            if constexpr (sizeof(T) == 4)
                _mm_stream_ps(reinterpret_cast<float*>(dst + i), _mm_load_ps(reinterpret_cast<const float*>(src + i)));
            else
                _mm_stream_pd(reinterpret_cast<double*>(dst + i), _mm_load_pd(reinterpret_cast<const double*>(src + i)));
        }
        return;
    }
#endif
    std::memcpy(dst, src, size_t(n) * sizeof(T));
}

// Orders non-temporal stores before what follows (the barrier that publishes U).
inline void stream_fence() {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

// Everything the run and the workspace size derive from the problem.
struct Plan {
    int64_t m, a;           // output tile (2 or 4), input tile a = m + 2
    int64_t th, tw;         // tiles per image: th x tw
    int64_t rows;           // N * th tile rows in all
    int64_t block_rows;     // tile rows per block
    int64_t ldv;            // row length of V and M: block_rows * tw rounded up to kLanes
    int64_t kb;             // > 0: the filter-blocked schedule, kb filters at a time (below)
    int64_t u_elems, v_elems, m_elems;
};

Plan make_plan(const ConvProblem& p, int64_t m) {
    Plan pl{};
    pl.m = m;
    pl.a = m + 2;
    pl.th = ceil_div(p.p, m);
    pl.tw = ceil_div(p.q, m);
    pl.rows = p.n * pl.th;
    const int64_t aa = pl.a * pl.a, cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t per_tile_bytes = aa * (cg + kg) * int64_t(p.elem_size());
    int64_t tiles = kBlockBudgetBytes / std::max<int64_t>(per_tile_bytes, 1);
    tiles = std::min(std::max(tiles, kMinBlock), kMaxBlock);
    pl.block_rows = std::min(std::max<int64_t>(tiles / pl.tw, 1), pl.rows);
    pl.ldv = ceil_div(pl.block_rows * pl.tw, kLanes) * kLanes;
    // Filter-blocked schedule: when every tile of the call fits one block (small images, batch
    // 1: VGG conv4/conv5) and the whole U would not fit the caches, U is made kb filters at a
    // time, each slice used by its GEMMs while it is still in the cache; otherwise the
    // filter transform and its GEMMs stream U through memory (38 MB for 512 -> 512 channels).
    const int64_t u_row_bytes = aa * cg * int64_t(p.elem_size());  // U for one filter
    pl.kb = 0;
    if (pl.block_rows == pl.rows && pl.rows * pl.tw <= kFilterBlockedMaxTiles &&
        u_row_bytes * p.k > kFilterBlockedMinBytes)
        pl.kb = std::min(kg, std::max<int64_t>(8, kFilterBlockBytes / u_row_bytes / 8 * 8));
    const int64_t u_rows = pl.kb > 0 ? pl.kb : p.k;  // U: a slice, or every group's U
    pl.u_elems = aa * u_rows * cg;
    pl.v_elems = aa * cg * pl.ldv;
    pl.m_elems = aa * (pl.kb > 0 ? pl.kb : kg) * pl.ldv;
    return pl;
}

const char* algo_name(int64_t m) { return m == 2 ? "WINOGRAD_2X2_3X3" : "WINOGRAD_4X4_3X3"; }

// Why a 3x3 problem at stride 2x2 cannot run (stride 2 per axis, F2x3s2 / F4x3s2): only the fused
// NHWC schedule (cpu/winograd_nhwc.hpp) has the stride-2 tiles; "" when it runs.
std::string why_not_stride2(const std::string& name, const ConvProblem& p) {
    if (p.nhwc && winograd_nhwc::applies(p)) return "";
    return name + " needs stride 1, got stride 2x2 (stride 2x2 runs on NHWC tensors with one group and at least " +
           std::to_string(nhwc_gemm::isa_lanes(p.elem_size())) + " input channels; has " + (p.nhwc ? "NHWC" : "NCHW") +
           ", groups=" + std::to_string(p.groups) + ", C=" + std::to_string(p.c) + ")";
}

// winograd_shape_why_not, with stride 2x2 where the fused NHWC schedule runs it.
std::string shape_why_not(const std::string& name, const ConvProblem& p) {
    if (p.stride_h != 2 || p.stride_w != 2) return winograd_shape_why_not(name, p);
    ConvProblem unit = p;
    unit.stride_h = unit.stride_w = 1;
    if (std::string why = winograd_shape_why_not(name, unit); !why.empty()) return why;
    return why_not_stride2(name, p);
}

std::string why_not_m(const ConvProblem& p, int64_t m) {
    const std::string name = algo_name(m);
    if (const std::string shape = shape_why_not(name, p); !shape.empty()) return shape;
    const Plan pl = make_plan(p, m);
    if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX || pl.ldv > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", C/groups=" + std::to_string(p.c_per_group()) + ", tiles per block=" +
               std::to_string(pl.ldv) + ") exceeds the 32-bit BLAS interface";
    return "";
}

size_t workspace_bytes_m(const ConvProblem& p, int64_t m) {
    if (p.nhwc) return size_t(winograd_nhwc::u_elems(p, m)) * p.elem_size();  // U, unless prepared
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

// The 3x3 taps of kLanes consecutive float filters (144 contiguous floats) as 9 lane vectors:
// out[i][j][l] = tap (i, j) of filter l = w[9l + 3i + j] (mirrored with `flip`). Two stride-3
// deinterleaves: 144 = 3 x 48 floats split by filter column j (w[3s + j], s = 3l + i), then each
// column's 48 by row i, each output two two-source shuffles (36 in all; vpermt2ps with AVX-512;
// the helpers are always inlined, so GCC's note that vector arguments change the ABI does not
// apply and is silenced for this file).
// It replaces 144 scalar loads whose narrow stores into `out` then stalled the vector loads of
// the transform (failed store forwarding): with them, the filter transform took about 28% of
// WINOGRAD_4X4 on VGG conv5 at batch 1 (perf).
typedef float V16f __attribute__((vector_size(64)));
typedef int V16i __attribute__((vector_size(64)));

template <int J, size_t... L>
inline __attribute__((always_inline)) V16i deinterleave_mask_ab(std::index_sequence<L...>) {
    return V16i{(3 * int(L) + J < 32 ? 3 * int(L) + J : 0)...};  // element 3l+J of a|b when there
}
template <int J, size_t... L>
inline __attribute__((always_inline)) V16i deinterleave_mask_c(std::index_sequence<L...>) {
    return V16i{(3 * int(L) + J < 32 ? int(L) : 3 * int(L) + J - 16)...};  // else element 3l+J-32 of c
}
// out[J][l] = (a|b|c)[3l + J] for J = 0, 1, 2.
template <int J>
inline __attribute__((always_inline)) V16f deinterleave3(const V16f& a, const V16f& b, const V16f& c) {
    constexpr auto lanes = std::make_index_sequence<16>();
    return shuffle2(shuffle2(a, b, deinterleave_mask_ab<J>(lanes)), c, deinterleave_mask_c<J>(lanes));
}

inline __attribute__((always_inline)) void load_taps_3x3(const float* __restrict w, bool flip,
                                                         float (&out)[3][3][kLanes]) {
    V16f v[9], col[3][3];  // col[j][q]: floats 16q .. 16q+15 of column j's 48 (s = 3l + i)
    for (int q = 0; q < 9; ++q) std::memcpy(&v[q], w + 16 * q, sizeof(V16f));
    for (int q = 0; q < 3; ++q) {
        col[0][q] = deinterleave3<0>(v[3 * q], v[3 * q + 1], v[3 * q + 2]);
        col[1][q] = deinterleave3<1>(v[3 * q], v[3 * q + 1], v[3 * q + 2]);
        col[2][q] = deinterleave3<2>(v[3 * q], v[3 * q + 1], v[3 * q + 2]);
    }
    for (int j = 0; j < 3; ++j) {
        const V16f taps[3] = {deinterleave3<0>(col[j][0], col[j][1], col[j][2]),
                              deinterleave3<1>(col[j][0], col[j][1], col[j][2]),
                              deinterleave3<2>(col[j][0], col[j][1], col[j][2])};
        for (int i = 0; i < 3; ++i) {
            // True convolution: tap (i, j) of the mirrored filter is (2-i, 2-j) of w.
            float* dst = flip ? out[2 - i][2 - j] : out[i][j];
            std::memcpy(dst, &taps[i], sizeof(V16f));
        }
    }
}

// Problem sizes the transform workers need (plain data, passed by value).
struct Dims {
    int64_t n, c, h, w, k, p, q, cg, kg, pad_h, pad_w;
    int64_t th, tw, gpr, ldv;  // gpr: lane groups per tile row, ceil(tw / kLanes)
    bool flip;
};

Dims make_dims(const ConvProblem& p, const Plan& pl) {
    return {p.n,     p.c,     p.h,   p.w,   p.k,                       p.p,    p.q,
            p.c_per_group(), p.k_per_group(), p.pad_h, p.pad_w, pl.th, pl.tw,
            ceil_div(pl.tw, kLanes), pl.ldv, p.flip};
}

template <typename T, class F>
struct Wino {
    static constexpr int m = F::m, r = F::r, a = F::alpha;
    using Tab = typename F::template table<T>;

    // U[g][xi][k][c] for the filter items [i0, i1): item = (global k) * ceil(Cg/kFilterChunk)
    // + channel chunk, transformed kLanes channels at a time. With `stream` (U larger than the
    // caches) a chunk goes to a local buffer first, then out as a*a contiguous rows with
    // non-temporal stores (long sequential stores, not a*a interleaved streams of one cache
    // line each: twice as fast). Otherwise the vectors go straight to U (3-4% faster than
    // through the buffer on VGG conv5 and conv4.1 at batch 1, the filter-blocked schedule).
    static constexpr int64_t kFilterChunk = 256;
    CONVCORE_WINO_CLONES
    static void filter_items(const Dims d, const T* __restrict w, T* __restrict U, int64_t i0,
                             int64_t i1, bool stream) {
        const int64_t chunks = ceil_div(d.cg, kFilterChunk);
        alignas(64) T buf[a * a][kFilterChunk];
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t kk = item / chunks, cs = item % chunks * kFilterChunk;
            const int64_t ce = std::min(d.cg, cs + kFilterChunk);
            const int64_t g = kk / d.kg, k = kk % d.kg;
            T* Ug = U + g * a * a * d.kg * d.cg + k * d.cg + cs;
            for (int64_t c0 = cs; c0 < ce; c0 += kLanes) {
                const int64_t nl = std::min(kLanes, ce - c0);
                T gf[r][r][kLanes], t1[a][r][kLanes], u[a][a][kLanes];
                const T* wk = w + (kk * d.cg + c0) * r * r;
                // Lane l takes filter channel c0 + l; true convolution reads tap (i, j) from
                // (r-1-i, r-1-j), i.e. element r*r-1-ij of the 3x3 filter.
                bool loaded = false;
                if constexpr (std::is_same_v<T, float> && r == 3) {
                    if (nl == kLanes) {
                        load_taps_3x3(wk, d.flip, gf);
                        loaded = true;
                    }
                }
                for (int ij = 0; ij < r * r && !loaded; ++ij) {
                    const int64_t src = d.flip ? r * r - 1 - ij : ij;
                    T* dst = gf[ij / r][ij % r];
                    for (int64_t l = 0; l < kLanes; ++l) dst[l] = l < nl ? wk[l * r * r + src] : T(0);
                }
                mul_left<a, r, r>(Tab::G, gf, t1);
                mul_right_t<a, a, r>(Tab::G, t1, u);
                if (!stream) {  // straight to U's a*a rows
                    T* Uc = Ug + c0 - cs;
                    const int64_t ldu = d.kg * d.cg;
                    if (nl == kLanes) {
                        for (int xi = 0; xi < a; ++xi)
                            for (int nu = 0; nu < a; ++nu)
                                for (int64_t l = 0; l < kLanes; ++l) Uc[(xi * a + nu) * ldu + l] = u[xi][nu][l];
                    } else {
                        for (int xi = 0; xi < a; ++xi)
                            for (int nu = 0; nu < a; ++nu)
                                for (int64_t l = 0; l < nl; ++l) Uc[(xi * a + nu) * ldu + l] = u[xi][nu][l];
                    }
                    continue;
                }
                for (int xi = 0; xi < a; ++xi)
                    for (int nu = 0; nu < a; ++nu)
                        for (int64_t l = 0; l < kLanes; ++l) buf[xi * a + nu][c0 - cs + l] = u[xi][nu][l];
            }
            if (stream)
                for (int xi = 0; xi < a * a; ++xi) stream_row(Ug + xi * d.kg * d.cg, buf[xi], ce - cs);
        }
        if (stream) stream_fence();
    }

    // V[xi][c][ldv] for the input items [i0, i1) of the block of tile rows starting at
    // global tile row row0 (over (image, tile row)), group g. Column of tile (rr, tx) of the
    // block: rr * tw + tx. item = (rr * gpr + lane group) * Cg + c: channels fastest, so the
    // lane group's geometry is worked out once per run of channels.
    static constexpr int64_t kSpan = kLanes * m + a - m;  // input columns of a lane group
    CONVCORE_WINO_CLONES
    static void input_items(const Dims d, const T* __restrict x, T* __restrict V, int64_t g,
                            int64_t row0, int64_t i0, int64_t i1) {
        int64_t cur = -1, nl = 0, col0 = 0, ih0 = 0, iw0 = 0, lo = 0, hi = 0;
        const T* xg = nullptr;
        const int64_t hw = d.h * d.w;
        alignas(64) T buf[a][kSpan];
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t grp = item / d.cg, c = item % d.cg;
            if (grp != cur) {
                cur = grp;
                const int64_t rr = grp / d.gpr, tx0 = grp % d.gpr * kLanes;
                const int64_t trow = row0 + rr, n = trow / d.th, ty = trow % d.th;
                nl = std::min(kLanes, d.tw - tx0);
                col0 = rr * d.tw + tx0;
                ih0 = ty * m - d.pad_h;
                iw0 = tx0 * m - d.pad_w;
                lo = std::min<int64_t>(kSpan, std::max<int64_t>(0, -iw0));  // buf columns [lo, hi)
                hi = std::max<int64_t>(lo, std::min<int64_t>(kSpan, d.w - iw0));  // are inside
                xg = x + (n * d.c + g * d.cg) * hw;
            }
            // Stage the a input rows with their zero padding.
            const T* xc = xg + c * hw;
            for (int i = 0; i < a; ++i) {
                const int64_t ih = ih0 + i;
                T* b = buf[i];
                if (ih < 0 || ih >= d.h) {
                    for (int64_t j = 0; j < kSpan; ++j) b[j] = T(0);
                    continue;
                }
                const T* src = xc + ih * d.w + iw0;
                if (lo == 0 && hi == kSpan) {  // the common case: a fixed-length inline copy
                    for (int64_t j = 0; j < kSpan; ++j) b[j] = src[j];
                    continue;
                }
                for (int64_t j = 0; j < lo; ++j) b[j] = T(0);
                for (int64_t j = lo; j < hi; ++j) b[j] = src[j];
                for (int64_t j = hi; j < kSpan; ++j) b[j] = T(0);
            }
            T dt[a][a][kLanes], t1[a][a][kLanes], v[a][a][kLanes];
            for (int i = 0; i < a; ++i)
                for (int jj = 0; jj < a; ++jj)
                    for (int64_t l = 0; l < kLanes; ++l) dt[i][jj][l] = buf[i][l * m + jj];
            mul_left<a, a, a>(Tab::BT, dt, t1);
            mul_right_t<a, a, a>(Tab::BT, t1, v);
            T* dst = V + c * d.ldv + col0;
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) {
                    T* row = dst + (xi * a + nu) * d.cg * d.ldv;
                    if (nl == kLanes)
                        for (int64_t l = 0; l < kLanes; ++l) row[l] = v[xi][nu][l];
                    else
                        for (int64_t l = 0; l < nl; ++l) row[l] = v[xi][nu][l];
                }
        }
    }

    // y for the output items [i0, i1) of the block of tile rows starting at row0, group g,
    // from M[xi][k][ldv]: item = (rr * gpr + lane group) * Kg + k.
    CONVCORE_WINO_CLONES
    static void output_items(const Dims d, const T* __restrict M, T* __restrict y, int64_t g,
                             int64_t row0, int64_t i0, int64_t i1, T alpha, T beta) {
        int64_t cur = -1, nl = 0, col0 = 0, rows = 0, cols = 0;
        T* yg = nullptr;
        const int64_t pq = d.p * d.q;
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t grp = item / d.kg, k = item % d.kg;
            if (grp != cur) {
                cur = grp;
                const int64_t rr = grp / d.gpr, tx0 = grp % d.gpr * kLanes;
                const int64_t trow = row0 + rr, n = trow / d.th, ty = trow % d.th;
                nl = std::min(kLanes, d.tw - tx0);
                col0 = rr * d.tw + tx0;
                rows = std::min<int64_t>(m, d.p - ty * m);        // clipped at the bottom
                cols = std::min<int64_t>(nl * m, d.q - tx0 * m);  // and at the right
                yg = y + (n * d.k + g * d.kg) * pq + ty * m * d.q + tx0 * m;
            }
            T mm[a][a][kLanes], t1[m][a][kLanes], yt[m][m][kLanes];
            const T* src = M + k * d.ldv + col0;
            for (int xi = 0; xi < a; ++xi)
                for (int nu = 0; nu < a; ++nu) {
                    const T* row = src + (xi * a + nu) * d.kg * d.ldv;
                    if (nl == kLanes)
                        for (int64_t l = 0; l < kLanes; ++l) mm[xi][nu][l] = row[l];
                    else
                        for (int64_t l = 0; l < kLanes; ++l) mm[xi][nu][l] = l < nl ? row[l] : T(0);
                }
            mul_left<m, a, a>(Tab::AT, mm, t1);
            mul_right_t<m, m, a>(Tab::AT, t1, yt);
            T* yk = yg + k * pq;
            for (int64_t i = 0; i < rows; ++i) {
                T line[kLanes * m];  // output row i of the lane group's tiles, left to right
                for (int jj = 0; jj < m; ++jj)
                    for (int64_t l = 0; l < kLanes; ++l) line[l * m + jj] = yt[i][jj][l];
                T* out = yk + i * d.q;
                if (beta == T(0))
                    for (int64_t j = 0; j < cols; ++j) out[j] = alpha * line[j];
                else
                    for (int64_t j = 0; j < cols; ++j) blend_store(out + j, line[j], alpha, beta);
            }
        }
    }
};

void gemm(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemm(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// Work-sharing inside the enclosing parallel region: fn(i0, i1) on chunks of [0, count),
// handed out dynamically (a thread slowed by other load does not hold the others up).
// With `wait` false there is no barrier at the end (the caller knows the next loop's barrier
// is enough).
template <typename Fn>
void for_chunks(int64_t count, int threads, bool wait, Fn fn) {
    const int64_t chunk = std::max<int64_t>(1, count / (int64_t(threads) * 8));
    const int64_t chunks = ceil_div(count, chunk);
    if (wait) {
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < chunks; ++i) fn(i * chunk, std::min(count, (i + 1) * chunk));
    } else {
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t i = 0; i < chunks; ++i) fn(i * chunk, std::min(count, (i + 1) * chunk));
    }
}

// The filter-blocked schedule (Plan::kb > 0; called inside the parallel region): all tiles
// are one block, so V is made once per group; then for each slice of kb filters: their U
// (kb x C/g per transform position), the a*a GEMMs M_xi (kb x tiles) = U_xi . V_xi, and their
// output transform. The workers see the slice as a group of kb filters: Dims::kg = kb, the
// filter and output pointers moved to the slice's first filter, group index 0.
//
// With at least kMinOwnFilters filters per thread (kr = kb / threads), each thread runs whole
// sub-slices of kr filters through all three stages in its own rows of the U and M buffers,
// the sub-slices handed out dynamically: U and M never pass between threads and there is no
// barrier per slice; only V is shared. Otherwise (many threads) every stage of a slice is
// split among the threads. A barrier per slice runs every slice at the slowest thread's pace;
// with dynamic sub-slices a thread that runs slow for a while takes fewer of them (VGG conv5,
// batch 1, 2 threads, one vCPU at ~60% speed: 4.6 against 11.3 ms;
// bench/results/cpu-2026-11-23-e6256e2.md).
template <typename T, class F>
void run_filter_blocked(const Plan& pl, const Dims& d, const ConvProblem& p, const T* x, const T* w,
                        T* y, T* U, T* V, T* M, T alpha, T beta, int threads) {
    using W = Wino<T, F>;
    constexpr int64_t aa = int64_t(F::alpha) * F::alpha, rr = int64_t(F::r) * F::r;
    const int64_t nb = pl.rows * d.tw, lane_groups = pl.rows * d.gpr;  // lane groups: per tile row
    const int64_t chunks = ceil_div(d.cg, W::kFilterChunk), pq = d.p * d.q;
    const int64_t kr = pl.kb / threads;  // filters of a thread's own sub-slice
    const bool own = kr >= kMinOwnFilters;
    for (int64_t g = 0; g < p.groups; ++g) {
        for_chunks(pl.rows * d.gpr * d.cg, threads, /*wait=*/own,
                   [&](int64_t i0, int64_t i1) { W::input_items(d, x, V, g, 0, i0, i1); });
        if (own) {
            // Each thread works in its own rows of the U and M slice buffers.
            const int64_t t = omp_get_thread_num();
            T* Ut = U + t * aa * kr * d.cg;
            T* Mt = M + t * aa * kr * d.ldv;
#pragma omp for schedule(dynamic, 1)
            for (int64_t s = 0; s < ceil_div(d.kg, kr); ++s) {
                Dims sub = d;
                sub.kg = std::min(kr, d.kg - s * kr);
                const int64_t first = g * d.kg + s * kr;
                W::filter_items(sub, w + first * d.cg * rr, Ut, 0, sub.kg * chunks, /*stream=*/false);
                for (int64_t xi = 0; xi < aa; ++xi)
                    gemm(int(sub.kg), int(nb), int(d.cg), Ut + xi * sub.kg * d.cg, int(d.cg),
                         V + xi * d.cg * d.ldv, int(d.ldv), Mt + xi * sub.kg * d.ldv, int(d.ldv));
                W::output_items(sub, Mt, y + first * pq, 0, 0, 0, lane_groups * sub.kg, alpha, beta);
            }
            continue;  // the loop's barrier: V is free for the next group
        }
        for (int64_t k0 = 0; k0 < d.kg; k0 += pl.kb) {
            Dims slice = d;
            slice.kg = std::min(pl.kb, d.kg - k0);
            const int64_t first = g * d.kg + k0;  // the slice's first filter
            // The barrier ending the filter transform also ends the input transform (first
            // slice) and the previous slice's output transform, which read M and V only.
            for_chunks(slice.kg * chunks, threads, /*wait=*/true, [&](int64_t i0, int64_t i1) {
                W::filter_items(slice, w + first * d.cg * rr, U, i0, i1, /*stream=*/false);
            });
#pragma omp for schedule(dynamic, 1)
            for (int64_t xi = 0; xi < aa; ++xi)
                gemm(int(slice.kg), int(nb), int(d.cg), U + xi * slice.kg * d.cg, int(d.cg),
                     V + xi * d.cg * d.ldv, int(d.ldv), M + xi * slice.kg * d.ldv, int(d.ldv));
            for_chunks(lane_groups * slice.kg, threads, /*wait=*/false, [&](int64_t i0, int64_t i1) {
                W::output_items(slice, M, y + first * pq, 0, 0, i0, i1, alpha, beta);
            });
        }
    }
}

// The private block schedule (U small enough, kPrivateMaxUBytes; called inside the parallel
// region after the filter transform): the tile rows are cut into pieces of sb rows, handed
// out dynamically, and each thread takes a piece through all three stages, the input
// transform, the a*a GEMMs (K/g x piece x C/g, single-threaded) and the output transform, in
// its own columns of the V and M block buffers (thread t: columns [t*w, (t+1)*w), w = the
// piece's tiles rounded up to whole lane groups: 64 bytes of float, so the threads' columns
// share a cache line per row at most, where V's start is not 64-byte aligned). Only U, made
// once, is read by both threads; there is no barrier per block. VGG conv1.2 at batch 1, 2
// threads, private against block: 16.4 against 17.2 ms with the threads sharing an L3, 14.9
// against 24.5 ms with them on different L3 domains (bench/results/cpu-2026-11-23-s7.md).
template <typename T, class F>
void run_private_pieces(const Plan& pl, const Dims& d, const ConvProblem& p, const T* x, T* y, const T* U,
                        T* V, T* M, T alpha, T beta, int64_t sb) {
    using W = Wino<T, F>;
    constexpr int64_t aa = int64_t(F::alpha) * F::alpha;
    const int64_t width = ceil_div(sb * d.tw, kLanes) * kLanes, t = omp_get_thread_num();
    T* Vt = V + t * width;
    T* Mt = M + t * width;
    const int64_t pieces = ceil_div(pl.rows, sb);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < p.groups * pieces; ++item) {
        const int64_t g = item / pieces, row0 = item % pieces * sb;
        const int64_t nrows = std::min(sb, pl.rows - row0);
        const int64_t nb = nrows * d.tw, lane_groups = nrows * d.gpr;
        const T* Ug = U + g * aa * d.kg * d.cg;
        W::input_items(d, x, Vt, g, row0, 0, lane_groups * d.cg);
        for (int64_t xi = 0; xi < aa; ++xi)
            gemm(int(d.kg), int(nb), int(d.cg), Ug + xi * d.kg * d.cg, int(d.cg), Vt + xi * d.cg * d.ldv,
                 int(d.ldv), Mt + xi * d.kg * d.ldv, int(d.ldv));
        W::output_items(d, Mt, y, g, row0, 0, lane_groups * d.kg, alpha, beta);
    }
}

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
    // Filters a plan transformed ahead (prepare_filter: not in the filter-blocked schedule).
    const T* prepared = pl.kb == 0 ? static_cast<const T*>(args.prepared_filter) : nullptr;
    T* V = U + pl.u_elems;
    T* M = V + pl.v_elems;
    const T alpha = T(args.alpha), beta = T(args.beta);
    BlasThreads blas_threads(1);  // with one thread BLAS is not in a parallel region

    // One parallel region for the whole call, in one of three schedules: filter-blocked (a
    // huge U, few tiles: run_filter_blocked), private pieces (a small U: run_private_pieces),
    // or the block schedule below, where every stage is a dynamically scheduled loop and the
    // multiply stage runs the a*a GEMMs (times column slices when there are more threads than
    // GEMMs) concurrently, each single-threaded.
#pragma omp parallel num_threads(threads)
    {
        if (pl.kb > 0) {
            run_filter_blocked<T, F>(pl, d, p, x, w, y, U, V, M, alpha, beta, threads);
        } else {
        const bool stream = pl.u_elems * int64_t(sizeof(T)) > kStreamUBytes;
        const int64_t sb = pl.u_elems * int64_t(sizeof(T)) <= kPrivateMaxUBytes
                               ? private_piece_rows(pl.block_rows, d.tw, pl.ldv, threads) : 0;
        // Barriers: two per block. The filter transform needs none of its own (the first GEMM
        // comes after the input transform's barrier), nor does the output transform (the next
        // block's GEMMs, which overwrite M, come after the next input transform's barrier).
        // The private schedule has one, after the filter transform.
        if (!prepared)
            for_chunks(p.k * ceil_div(d.cg, W::kFilterChunk), threads, /*wait=*/sb > 0,
                       [&](int64_t i0, int64_t i1) { W::filter_items(d, w, U, i0, i1, stream); });
        const T* Uall = prepared ? prepared : U;
        if (sb > 0) {
            run_private_pieces<T, F>(pl, d, p, x, y, Uall, V, M, alpha, beta, sb);
        } else {
            for (int64_t g = 0; g < p.groups; ++g) {
                const T* Ug = Uall + g * aa * d.kg * d.cg;
                for (int64_t row0 = 0; row0 < pl.rows; row0 += pl.block_rows) {
                    const int64_t nrows = std::min(pl.block_rows, pl.rows - row0);
                    const int64_t nb = nrows * d.tw, groups = nrows * d.gpr;
                    for_chunks(groups * d.cg, threads, /*wait=*/true,
                               [&](int64_t i0, int64_t i1) { W::input_items(d, x, V, g, row0, i0, i1); });
                    // Column slices of whole lane groups, enough for every thread to have work.
                    const int64_t lane_groups = ceil_div(nb, kLanes);
                    const int64_t slices = std::min(lane_groups, ceil_div(2 * int64_t(threads), aa));
                    const int64_t per_slice = ceil_div(lane_groups, slices) * kLanes;
#pragma omp for schedule(dynamic, 1)
                    for (int64_t item = 0; item < aa * slices; ++item) {
                        const int64_t xi = item / slices, c0 = item % slices * per_slice;
                        const int64_t cols = std::min(per_slice, nb - c0);
                        if (cols > 0)
                            gemm(int(d.kg), int(cols), int(d.cg), Ug + xi * d.kg * d.cg, int(d.cg),
                                 V + xi * d.cg * d.ldv + c0, int(d.ldv), M + xi * d.kg * d.ldv + c0,
                                 int(d.ldv));
                    }
                    for_chunks(groups * d.kg, threads, /*wait=*/false, [&](int64_t i0, int64_t i1) {
                        W::output_items(d, M, y, g, row0, i0, i1, alpha, beta);
                    });
                }
            }
        }
        }
    }
}

// U for every filter (the layout run_typed's filter transform makes), for a plan.
template <typename T, class F>
void prepare_typed(const ConvProblem& p, const Context& ctx, const void* w, void* out) {
    using W = Wino<T, F>;
    const Plan pl = make_plan(p, F::m);
    const Dims d = make_dims(p, pl);
    const int threads = ctx.threads();
#pragma omp parallel num_threads(threads)
    for_chunks(p.k * ceil_div(d.cg, W::kFilterChunk), threads, /*wait=*/false, [&](int64_t i0, int64_t i1) {
        W::filter_items(d, static_cast<const T*>(w), static_cast<T*>(out), i0, i1, /*stream=*/false);
    });
}

using winograd_nhwc::AtStride2;

// Calls fn(tile) with the tile of cpu/winograd_nhwc.hpp that runs p's filter (3x3, 3x1 or 1x3)
// by F(m,3), at stride 1 or 2 along the filter (winograd_nhwc::takes_filter).
template <class F, class Fn>
void with_tile(const ConvProblem& p, Fn&& fn) {
    using winograd_nhwc::Point;
    using winograd_nhwc::Tile;
    using S = AtStride2<F>;
    if (p.r == 3 && p.s == 1)
        p.stride_h == 2 ? fn(Tile<S, Point>{}) : fn(Tile<F, Point>{});
    else if (p.r == 1 && p.s == 3)
        p.stride_w == 2 ? fn(Tile<Point, S>{}) : fn(Tile<Point, F>{});
    else
        p.stride_h == 2 ? fn(Tile<S, S>{}) : fn(Tile<F, F>{});
}

CONVCORE_EACH_ISA(CONVCORE_WINOGRAD_NHWC_KERNELS)
CONVCORE_WINOGRAD_NHWC_DISPATCH

template <class F>
void prepare_f(const ConvProblem& p, const Context& ctx, const void* w, void* out) {
    if (p.nhwc)
        with_tile<F>(p, [&](auto tile) { winograd_nhwc_prepare<decltype(tile)>(p, w, out, ctx.threads()); });
    else if (p.dtype == CONVCORE_DATA_DOUBLE)
        prepare_typed<double, F>(p, ctx, w, out);
    else
        prepare_typed<float, F>(p, ctx, w, out);
}

// The filter-blocked schedule transforms U a slice at a time, in the cache: nothing to prepare.
size_t prepared_bytes_m(const ConvProblem& p, int64_t m) {
    if (p.nhwc) return size_t(winograd_nhwc::u_elems(p, m)) * p.elem_size();
    const Plan pl = make_plan(p, m);
    return pl.kb > 0 ? 0 : size_t(pl.u_elems) * p.elem_size();
}

// NHWC: the fused schedule of cpu/winograd_nhwc.hpp, with the tile Tl (depth: a 3-D problem's).
template <typename T, class Tl>
void run_nhwc(const ConvArgs& a, const winograd_nhwc::Depth& depth = {}) {
    winograd_nhwc::run<T, Tl>(a, static_cast<const T*>(a.prepared_filter), static_cast<T*>(a.workspace),
                              winograd_nhwc_kernels<T, Tl>(), depth);
}

template <class F>
void run_f(const ConvArgs& a) {
    if (a.prob.nhwc) {
        with_tile<F>(a.prob, [&](auto tile) {
            using Tl = decltype(tile);
            a.prob.dtype == CONVCORE_DATA_DOUBLE ? run_nhwc<double, Tl>(a) : run_nhwc<float, Tl>(a);
        });
    } else if (a.prob.dtype == CONVCORE_DATA_DOUBLE) {
        run_typed<double, F>(a);
    } else {
        run_typed<float, F>(a);
    }
}

// A 1x3 or 3x1 filter runs the 1-D algorithm F(m,3) along W or H: on NHWC memory with one group
// and a vector of channels (stride and dilation 1) by the fused schedule with 1-D tiles
// (cpu/winograd_nhwc.hpp), otherwise by cpu/winograd_1d.cpp. Both take the 1-D problems of
// winograd_1d::why_not.
bool fused_1d(const ConvProblem& p) {
    return winograd_1d::takes(p) && p.nhwc && winograd_nhwc::applies(p) && winograd_nhwc::takes_filter(p);
}

// ---- 1x3 / 3x1 filters on NCHW memory through the fused schedule ----
// NCHW x and y whose problem the fused schedule takes once they are NHWC (a 1-D convolution's
// N x C x L, which PyTorch networks keep channels-first): x is transposed into the workspace
// (OpenBLAS's omatcopy, per image C x HW -> HW x C), the fused schedule writes an NHWC y there,
// and y is transposed back with alpha and beta. The transposes move the tensors once each; the
// unfused path (winograd_1d) moves its transformed tiles V and M, a/m times the input and output,
// through memory, and runs its GEMMs through OpenBLAS, which packs U again per block.
// The epilogue's bias and activation commute with the transposes: the schedule applies them in its
// stores, on outputs still in registers. A residual z, laid out as y (NCHW), is added after the
// transpose with the rest of the epilogue, in the core's pass (z == y: blended into y by the
// transpose back).
// (omatcopy's dimensions are BLAS ints)
bool fused_1d_via_nhwc(const ConvProblem& p) {
    return winograd_1d::takes(p) && !p.nhwc && std::max({p.c, p.k, p.h * p.w, p.p * p.q}) <= INT_MAX &&
           fused_1d(p.packed_nhwc());
}
bool bilinear(const ConvProblem& p) { return winograd_1d::takes(p) && !fused_1d(p) && !fused_1d_via_nhwc(p); }

size_t lines(int64_t elems, size_t elem) { return (size_t(elems) * elem + 63) / 64 * 64; }
// The workspace of fused_1d_via_nhwc: U (unless prepared), x and y NHWC.
size_t via_nhwc_workspace(const ConvProblem& p, int64_t m) {
    return lines(winograd_nhwc::u_elems(p.packed_nhwc(), m), p.elem_size()) + lines(p.n * p.c * p.h * p.w, p.elem_size()) +
           lines(p.n * p.k * p.p * p.q, p.elem_size());
}

// dst = alpha * src^T per image (src: images of rows x cols), the images' row ranges split
// among the threads; OpenBLAS's omatcopy (single-threaded) on each piece.
template <typename T>
void transpose_images(const Context& ctx, int64_t images, int64_t rows, int64_t cols, T alpha, const T* src,
                      T* dst) {
    constexpr int64_t kRowsPerPiece = 64;
    const int64_t pieces = ceil_div(rows, kRowsPerPiece);
#pragma omp parallel for collapse(2) num_threads(ctx.threads()) schedule(static)
    for (int64_t n = 0; n < images; ++n)
        for (int64_t piece = 0; piece < pieces; ++piece) {
            const int64_t r0 = piece * kRowsPerPiece, nr = std::min(kRowsPerPiece, rows - r0);
            const T* a = src + n * rows * cols + r0 * cols;
            T* b = dst + n * rows * cols + r0;
            if constexpr (std::is_same_v<T, float>)
                cblas_somatcopy(CblasRowMajor, CblasTrans, blasint(nr), blasint(cols), alpha, a, blasint(cols), b,
                                blasint(rows));
            else
                cblas_domatcopy(CblasRowMajor, CblasTrans, blasint(nr), blasint(cols), alpha, a, blasint(cols), b,
                                blasint(rows));
        }
}

template <typename T, class F>
void run_via_nhwc(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const ConvProblem q = p.packed_nhwc();
    char* ws = static_cast<char*>(a.workspace);
    T* u_space = reinterpret_cast<T*>(ws);
    T* x_nhwc = reinterpret_cast<T*>(ws + lines(winograd_nhwc::u_elems(q, F::m), sizeof(T)));
    T* y_nhwc = reinterpret_cast<T*>(reinterpret_cast<char*>(x_nhwc) + lines(p.n * p.c * p.h * p.w, sizeof(T)));
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    transpose_images<T>(a.ctx, p.n, p.c, hw, T(1), static_cast<const T*>(a.x), x_nhwc);
    const Epilogue& e = a.epilogue;  // none() unless beta == 0
    const bool in_stores = a.beta == 0 && !e.z;  // alpha, bias and activation in the schedule's stores
    ConvArgs b{q, a.ctx, x_nhwc, a.w, y_nhwc, in_stores ? a.alpha : 1.0, 0.0, u_space, a.prepared_filter,
               in_stores ? e : Epilogue{}};
    with_tile<F>(q, [&](auto tile) { run_nhwc<T, decltype(tile)>(b); });
    T* y = static_cast<T*>(a.y);
    const auto y_view = [](const ConvProblem& t) {
        return Strided4d{{t.n, t.k, t.p, t.q}, {t.y_strides[0], t.y_strides[1], t.y_strides[2], t.y_strides[3]}};
    };
    if (a.beta == 0 && e.z == y) {  // y = alpha * y_nhwc^T + alpha2 * y, then bias and activation
        blend_strided(a.ctx, sizeof(T), y_nhwc, y_view(q), y, y_view(p), a.alpha, e.alpha2);
        apply_epilogue(a.ctx, sizeof(T), y, y_view(p), Epilogue{e.bias, nullptr, 0.0, e.activation});
        return;
    }
    if (a.beta == 0) {  // y = alpha * y_nhwc^T, y never read; a separate z after
        transpose_images<T>(a.ctx, p.n, pq, p.k, in_stores ? T(1) : T(a.alpha), y_nhwc, y);
        if (!in_stores) apply_epilogue(a.ctx, sizeof(T), y, y_view(p), e);
        return;
    }
    blend_strided(a.ctx, sizeof(T), y_nhwc, y_view(q), y, y_view(p), a.alpha, a.beta);
}

std::string why_not_mm(const ConvProblem& p, int64_t m) {
    if (winograd_1d::takes(p)) return winograd_1d::why_not(algo_name(m), p, int(m));
    const std::string why = why_not_m(p, m);
    if (p.r != 3 || p.s != 3)  // the 2-D rule's message, with the 1-D shapes this solver takes too
        return why + " (or 1x3 / 3x1: F(" + std::to_string(m) + ",3) along W / H)";
    return why;
}
std::string why_not_2(const ConvProblem& p) { return why_not_mm(p, 2); }
std::string why_not_4(const ConvProblem& p) { return why_not_mm(p, 4); }

// F(m,3) for m = 2 or 4, and the solvers' entries for each: the unfused 1-D path, NCHW through
// the fused schedule, or the 2-D schedules (NCHW, or fused NHWC with 1-D or 2-D tiles).
template <int M>
using FOf = std::conditional_t<M == 2, winograd::F2x3, winograd::F4x3>;

template <int M>
size_t workspace_of(const ConvProblem& p) {
    if (bilinear(p)) return winograd_1d::workspace_bytes(p, M);
    return fused_1d_via_nhwc(p) ? via_nhwc_workspace(p, M) : workspace_bytes_m(p, M);
}
template <int M>
size_t prepared_of(const ConvProblem& p) {
    if (bilinear(p)) return winograd_1d::prepared_bytes(p, M);
    return prepared_bytes_m(fused_1d_via_nhwc(p) ? p.packed_nhwc() : p, M);
}
template <int M>
void prepare_of(const ConvProblem& p, const Context& c, const void* w, void* out) {
    if (bilinear(p)) return winograd_1d::prepare(p, c, w, out, M);
    prepare_f<FOf<M>>(fused_1d_via_nhwc(p) ? p.packed_nhwc() : p, c, w, out);
}
template <int M>
void run_of(const ConvArgs& a) {
    if (bilinear(a.prob)) return winograd_1d::run(a, M);
    if (!fused_1d_via_nhwc(a.prob)) return run_f<FOf<M>>(a);
    a.prob.dtype == CONVCORE_DATA_DOUBLE ? run_via_nhwc<double, FOf<M>>(a) : run_via_nhwc<float, FOf<M>>(a);
}

bool runs_nhwc(const ConvProblem& p) { return winograd_1d::takes(p) || winograd_nhwc::applies(p); }
bool fuses_epilogue(const ConvProblem& p) { return (p.nhwc && !bilinear(p)) || fused_1d_via_nhwc(p); }

}  // namespace

// ---- 3-D: F(m x m, 3x3) on the planes, the depth taps summed in the transformed domain ----

namespace winograd_3d {

std::string why_not(const ConvProblem& plane, int64_t m) {
    const std::string name = algo_name(m);
    if (const std::string shape = shape_why_not(name, plane); !shape.empty()) return shape;
    if (plane.r != 3 || plane.s != 3) return name + " in 3-D: the filter's planes must be 3x3";
    if (!winograd_nhwc::applies(plane))
        return name + " in 3-D: needs one group and at least " +
               std::to_string(nhwc_gemm::isa_lanes(plane.elem_size())) + " input channels (has groups=" +
               std::to_string(plane.groups) + ", C=" + std::to_string(plane.c) + ")";
    return "";
}

size_t filter_bytes(const ConvProblem& plane, int64_t m, int64_t taps) {
    return size_t(winograd_nhwc::u_elems(plane, m, taps)) * plane.elem_size();
}

namespace {
template <class F>
void prepare_f(const ConvProblem& p, const Context& ctx, int64_t taps, const void* w, void* out) {
    with_tile<F>(p, [&](auto tile) { winograd_nhwc_prepare<decltype(tile)>(p, w, out, ctx.threads(), taps); });
}
template <class F>
void forward_f(const ConvArgs& a, const Depth& depth) {
    with_tile<F>(a.prob, [&](auto tile) {
        using Tl = decltype(tile);
        a.prob.dtype == CONVCORE_DATA_DOUBLE ? run_nhwc<double, Tl>(a, depth) : run_nhwc<float, Tl>(a, depth);
    });
}
}  // namespace

void prepare(const ConvProblem& plane, const Context& ctx, int64_t m, int64_t taps, const void* w, void* out) {
    m == 2 ? prepare_f<winograd::F2x3>(plane, ctx, taps, w, out) : prepare_f<winograd::F4x3>(plane, ctx, taps, w, out);
}

void forward(const ConvProblem& plane, const Context& ctx, int64_t m, const Depth& depth, const void* x,
             const void* w, const void* U, void* y, double alpha, double beta, void* workspace) {
    ConvArgs a{plane, ctx, x, w, y, alpha, beta, workspace, U};
    m == 2 ? forward_f<winograd::F2x3>(a, depth) : forward_f<winograd::F4x3>(a, depth);
}

}  // namespace winograd_3d

extern const Solver winograd_2x2_3x3_solver;
const Solver winograd_2x2_3x3_solver = {.algo = CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not_2, .workspace_bytes = workspace_of<2>,
    .forward = run_of<2>, .runs_nhwc = runs_nhwc, .prepared_filter_bytes = prepared_of<2>,
    .prepare_filter = prepare_of<2>, .fuses_epilogue = fuses_epilogue, .made_for = made_for::yes};
extern const Solver winograd_4x4_3x3_solver;
const Solver winograd_4x4_3x3_solver = {.algo = CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not_4, .workspace_bytes = workspace_of<4>,
    .forward = run_of<4>, .runs_nhwc = runs_nhwc, .prepared_filter_bytes = prepared_of<4>,
    .prepare_filter = prepare_of<4>, .fuses_epilogue = fuses_epilogue, .made_for = made_for::yes};

}  // namespace cpu
}  // namespace convcore
