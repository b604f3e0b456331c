// CYCLIC_MINIMAL on the CPU: Pitas' minimal-multiplication 2-D cyclic convolution (paper 004)
// with overlap-save tiles. A 4x4 cyclic convolution takes 22 multiplications (CRT over
// z^4 - 1 = (z - 1)(z + 1)(z^2 + 1) in each variable, z1^2 + 1 split over Q[z2]/(z2^2 + 1));
// a 3x3 filter on a 4x4 input tile gives 2x2 outputs that do not wrap around (a 2x2 filter:
// 3x3 outputs). The tables come from tools/gen_cyclic.py (cpp/common/generated/cyclic_tables.hpp),
// in the staged form (every stage a sparse 0/+-1 matrix, the scaling all in B)
//   T = R2 R1 d R1^T R2^T  (d: 4x4 input tile)   V = A2b A2a vec(T)  (22 operands; 58 additions)
//   U = B vec(g)  (g: 3x3 filter)                Z = C2b C2a (U .* V), out = L Z L^T  (46 additions).
// Like Winograd, the 22 products summed over the input channels are 22 independent matrix
// products per group: M[m] (K/g x tiles) = U[m] (K/g x C/g) * V[m] (C/g x tiles).
//
// Two paths, chosen from the problem alone (so the workspace is exact):
//  - fused (C/g <= FUSED_MAX_CG): no GEMM. Per tile row, the input transform of every channel
//    stays in registers / L1 and each output channel accumulates its 22 products with
//    broadcast filter values, then the output transform writes y directly. Workspace: the
//    transformed filter, 22*K*(C/g) elements. This is the path of Pitas' single 512x512 image
//    with one filter, and of depthwise layers.
//  - GEMM: per block of tile rows and per group, the input transform into V (workspace), 22
//    OpenBLAS GEMMs (one per multiplication slot, the slots spread over the threads) into M
//    (workspace), the output transform into y. Workspace:
//    22*K*(C/g) + 22*(C/g + K/g)*tiles_per_block + 16 elements.
// Both vectorise across VL consecutive tiles of a tile row (one tile per lane): inside the
// image, a tile column j of the VL tiles is every other input of 2*VL consecutive ones, which
// two vector loads and one shuffle produce; at the edges (padding) the lanes are gathered one
// by one. The outputs are interleaved back with shuffles the same way. The transforms are
// unrolled at compile time from the constexpr tables (zero entries vanish, +-1 entries are
// additions). Kernels are compiled for AVX-512, AVX2+FMA and baseline SSE2 and the best one
// the CPU runs is picked (CONVCORE_CPU_ISA=avx2|baseline caps it, as for IMPLICIT_GEMM).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/conv_index.hpp"
#include "common/generated/cyclic_tables.hpp"
#include "common/shuffle.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/bilinear_1d.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/blas_threads.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace convcore {
namespace cpu {

namespace {

#define CC_INLINE inline __attribute__((always_inline))

constexpr int64_t FUSED_MAX_CG = 4;           // fused (GEMM-free) path for C/g up to this
constexpr int64_t BLOCK_BYTES = 8 << 20;      // V + M of one block of tile rows (GEMM path)
constexpr int64_t OVERREAD = 16;              // elements after M that vector loads may touch
constexpr int64_t MAX_VB = 64;                // widest vector, bytes

// ---- compile-time application of the small integer tables -----------------------------------
// out[I * OS] = sum_J Mat[I][J] * in[J * IS], with the zero entries dropped and +-1 entries
// turned into additions (the compiler cannot drop "0 * x" or "1 * x" on floats by itself).

template <const auto& Mat, int I, int J, int Cols, int IS, typename V>
CC_INLINE void add_rest(V& acc, const V* in) {
    if constexpr (J < Cols) {
        constexpr int a = Mat[I][J];
        if constexpr (a == 1)
            acc += in[J * IS];
        else if constexpr (a == -1)
            acc -= in[J * IS];
        else if constexpr (a != 0)
            acc += in[J * IS] * a;
        add_rest<Mat, I, J + 1, Cols, IS>(acc, in);
    }
}

template <const auto& Mat, int I, int J, int Cols, int IS, typename V>
CC_INLINE V row_value(const V* in) {
    if constexpr (J == Cols) {
        return V{};
    } else {
        constexpr int a = Mat[I][J];
        if constexpr (a == 0) {
            return row_value<Mat, I, J + 1, Cols, IS>(in);
        } else {
            V acc = a == 1 ? in[J * IS] : a == -1 ? -in[J * IS] : in[J * IS] * a;
            add_rest<Mat, I, J + 1, Cols, IS>(acc, in);
            return acc;
        }
    }
}

template <const auto& Mat, int Cols, int IS, int OS, typename V, int... I>
CC_INLINE void apply_rows(const V* in, V* out, std::integer_sequence<int, I...>) {
    ((out[I * OS] = row_value<Mat, I, 0, Cols, IS>(in)), ...);
}

template <const auto& Mat, int Rows, int Cols, int IS = 1, int OS = 1, typename V>
CC_INLINE void apply(const V* in, V* out) {
    apply_rows<Mat, Cols, IS, OS>(in, out, std::make_integer_sequence<int, Rows>{});
}

// ---- per-problem constants shared by the kernels ---------------------------------------------

template <typename T>
struct Job {
    const T* x;   // N x C x H x W
    T* y;         // N x K x P x Q
    const T* u;   // transformed filters (layout per path, see below)
    T* v;         // GEMM path: V[m][c][ldt]
    T* mo;        // GEMM path: M[m][k][ldt]
    int64_t c, h, w, k, p, q, cg, kg, pad_h, pad_w, tiles_h, tiles_w, ldt;
    bool flip;
    T alpha, beta;
};

// The filter transform's arguments.
template <typename T>
struct FiltJob {
    const T* w;
    T* u;
    int64_t k, cg, kg;
    bool flip, fused;
};

// U = B g for the filters of output channel k (all its input channels), exact B entries,
// accumulated in double. Fused layout [g][k][c][m] (one (k, c) pair's M values together),
// GEMM layout [g][m][k][c] (per multiplication slot m, the K/g x C/g matrix of the group),
// written in runs of CB channels. Compiled inside the ISA entry points (it vectorises over c).
template <class Tab, typename T>
CC_INLINE void filter_transform(const FiltJob<T>& fj, int64_t k) {
    constexpr int M = Tab::M, F = Tab::F, CB = 64;
    const int64_t cg = fj.cg, kg = fj.kg, g = k / kg, kl = k % kg;
    for (int64_t c0 = 0; c0 < cg; c0 += CB) {
        const int64_t cn = std::min<int64_t>(CB, cg - c0);
        double gs[F * F][CB], us[M][CB];
        for (int64_t c = 0; c < cn; ++c) {
            const T* wk = fj.w + (k * cg + c0 + c) * F * F;
            for (int a = 0; a < F; ++a)
                for (int b = 0; b < F; ++b)
                    gs[a * F + b][c] = double(fj.flip ? wk[(F - 1 - a) * F + (F - 1 - b)] : wk[a * F + b]);
        }
        for (int m = 0; m < M; ++m) {
            for (int64_t c = 0; c < cn; ++c) us[m][c] = 0;
            for (int j = 0; j < F * F; ++j) {
                const double bmj = Tab::template b<double>(m, j);  // constant-folded (unrolled)
                if (bmj == 0) continue;
                for (int64_t c = 0; c < cn; ++c) us[m][c] += bmj * gs[j][c];
            }
        }
        if (fj.fused) {
            T* dst = fj.u + (k * cg + c0) * M;
            for (int64_t c = 0; c < cn; ++c)
                for (int m = 0; m < M; ++m) dst[c * M + m] = T(us[m][c]);
        } else {
            for (int m = 0; m < M; ++m) {
                T* dst = fj.u + ((g * M + m) * kg + kl) * cg + c0;
                for (int64_t c = 0; c < cn; ++c) dst[c] = T(us[m][c]);
            }
        }
    }
}

// ---- the vector kernels, for one table and one vector width ----------------------------------

template <class Tab, typename T, int VB>
struct Impl {
    typedef T V __attribute__((vector_size(VB)));
    static constexpr int VL = VB / sizeof(T);
    static constexpr int N = Tab::N, O = Tab::O, M = Tab::M;

    static CC_INLINE V load(const T* p) {
        V v;
        __builtin_memcpy(&v, p, VB);
        return v;
    }
    static CC_INLINE void store(T* p, V v) { __builtin_memcpy(p, &v, VB); }
    static CC_INLINE void store_lanes(T* p, V v, int lanes) {
        if (lanes == VL) {
            store(p, v);
        } else {
            T tmp[VL];
            __builtin_memcpy(tmp, &v, VB);
            for (int l = 0; l < lanes; ++l) p[l] = tmp[l];
        }
    }

    // Integer vectors for __builtin_shuffle masks (same lane count and lane width as V).
    typedef typename std::conditional<sizeof(T) == 8, int64_t, int32_t>::type I;
    typedef I IV __attribute__((vector_size(VB)));
    template <int... L>
    static constexpr CC_INLINE IV even_mask(std::integer_sequence<int, L...>) { return IV{I(2 * L)...}; }
    template <int... L>
    static constexpr CC_INLINE IV odd_mask(std::integer_sequence<int, L...>) { return IV{I(2 * L + 1)...}; }
    // interleave(a, b) = a0 b0 a1 b1 ...: lanes 0..VL-1 (lo) and VL..2VL-1 (hi)
    template <int... L>
    static constexpr CC_INLINE IV lo_mask(std::integer_sequence<int, L...>) {
        return IV{I(L % 2 ? VL + L / 2 : L / 2)...};
    }
    template <int... L>
    static constexpr CC_INLINE IV hi_mask(std::integer_sequence<int, L...>) {
        return IV{I(L % 2 ? VL + VL / 2 + L / 2 : VL / 2 + L / 2)...};
    }
    static constexpr auto lanes_seq = std::make_integer_sequence<int, VL>{};

    // The N x N input tiles of tiles tw0 .. tw0 + VL - 1 of tile row th (one tile per lane):
    // d[i * N + j] lane l = x[th*O - pad_h + i][(tw0 + l)*O + j - pad_w], 0 outside the image.
    // Interior chunks with O == 2 load whole vectors and split them into even and odd columns
    // (one shuffle each); edge chunks and O != 2 gather element by element.
    static CC_INLINE void load_tiles(const Job<T>& jb, const T* xc, int64_t th, int64_t tw0, V* d) {
        const int64_t col0 = tw0 * O - jb.pad_w;
        constexpr int SPAN = 2 * VL + N - 2;  // inputs the VL tiles of a row read (O == 2)
        const bool interior = col0 >= 0 && col0 + SPAN <= jb.w;
#pragma GCC unroll 8
        for (int i = 0; i < N; ++i) {
            const int64_t ih = th * O - jb.pad_h + i;
            if (ih < 0 || ih >= jb.h) {
                for (int j = 0; j < N; ++j) d[i * N + j] = V{};
                continue;
            }
            const T* xr = xc + ih * jb.w;
            if constexpr (O == 2) {
                alignas(MAX_VB) T edge[SPAN + VL];
                const T* src = xr + col0;
                if (!interior) {  // zero padding: copy the part inside the row
                    const int64_t lo = std::max<int64_t>(0, -col0);
                    const int64_t hi = std::clamp<int64_t>(jb.w - col0, lo, SPAN);
                    std::fill(edge, edge + SPAN, T(0));
                    if (hi > lo) std::memcpy(edge + lo, xr + col0 + lo, size_t(hi - lo) * sizeof(T));
                    src = edge;
                }
#pragma GCC unroll 8
                for (int j = 0; j < N; j += 2) {
                    const V a = load(src + j), b = load(src + j + VL);
                    d[i * N + j] = shuffle2(a, b, even_mask(lanes_seq));
                    if (j + 1 < N) d[i * N + j + 1] = shuffle2(a, b, odd_mask(lanes_seq));
                }
            } else {
                alignas(MAX_VB) T tmp[N][VL];
                for (int l = 0; l < VL; ++l)
                    for (int j = 0; j < N; ++j) {
                        const int64_t col = col0 + int64_t(l) * O + j;
                        tmp[j][l] = col >= 0 && col < jb.w ? xr[col] : T(0);
                    }
                for (int j = 0; j < N; ++j) d[i * N + j] = load(tmp[j]);
            }
        }
    }

    // The M operand vectors from the input tiles.
    static CC_INLINE void input_transform(const V* d, V* out) {
        V e[N * N], t[N * N];
        for (int i = 0; i < N; ++i) {  // rows: d R1^T R2^T
            apply<Tab::R1, N, N, 1, 1>(d + i * N, t + i * N);
            apply<Tab::R2, N, N, 1, 1>(t + i * N, e + i * N);
        }
        for (int j = 0; j < N; ++j) {  // columns: R2 R1 (d R^T)
            apply<Tab::R1, N, N, N, N>(e + j, t + j);
            apply<Tab::R2, N, N, N, N>(t + j, e + j);
        }
        apply<Tab::A2a, N * N, N * N>(e, t);
        apply<Tab::A2b, M, N * N>(t, out);
    }

    // The O x O output vectors (out[a * O + b]: output (a, b) of each lane's tile) from the
    // M products.
    static CC_INLINE void output_transform(const V* prod, V* out) {
        V c[N * N], z[N * N], f[N * O];
        apply<Tab::C2a, N * N, M>(prod, c);
        apply<Tab::C2b, N * N, N * N>(c, z);
        for (int i = 0; i < N; ++i) apply<Tab::L, O, N, 1, 1>(z + i * N, f + i * O);  // Z L^T
        for (int b = 0; b < O; ++b) apply<Tab::L, O, N, O, O>(f + b, out + b);       // L (Z L^T)
    }

    static CC_INLINE void blend_vec(T* yr, V v, T alpha, T beta) {
        if (beta == T(0)) {
            store(yr, alpha == T(1) ? v : v * alpha);
        } else {
            store(yr, v * alpha + load(yr) * beta);
        }
    }

    // Writes the O x O outputs of tiles tw0.. of tile row th into one output plane, with the
    // alpha/beta blend (beta == 0 never reads y) and clipping at the bottom and right edges.
    static CC_INLINE void store_outputs(const Job<T>& jb, T* yk, int64_t th, int64_t tw0,
                                        const V* out) {
        const int64_t q0 = tw0 * O, qn = std::min<int64_t>(VL * O, jb.q - q0);
        const int rows = int(std::min<int64_t>(O, jb.p - th * O));
        if (O == 2 && qn == 2 * VL) {  // interleave the two columns of each row: 2 full vectors
            for (int a = 0; a < rows; ++a) {
                T* yr = yk + (th * O + a) * jb.q + q0;
                blend_vec(yr, shuffle2(out[a * O], out[a * O + 1], lo_mask(lanes_seq)), jb.alpha, jb.beta);
                blend_vec(yr + VL, shuffle2(out[a * O], out[a * O + 1], hi_mask(lanes_seq)), jb.alpha, jb.beta);
            }
            return;
        }
        alignas(MAX_VB) T tmp[O * O][VL];
        for (int ab = 0; ab < O * O; ++ab) store(tmp[ab], out[ab]);
        for (int a = 0; a < rows; ++a) {
            T* yr = yk + (th * O + a) * jb.q + q0;
            for (int64_t i = 0; i < qn; ++i) {
                const T v = jb.alpha * tmp[a * O + i % O][i / O];
                yr[i] = jb.beta == T(0) ? v : v + jb.beta * yr[i];
            }
        }
    }

    template <int CG>
    static CC_INLINE void fused_row_cg(const Job<T>& jb, int64_t n, int64_t g, int64_t th) {
        const int64_t kg = jb.kg, plane = jb.h * jb.w;
        const T* xg = jb.x + (n * jb.c + g * CG) * plane;
        for (int64_t tw0 = 0; tw0 < jb.tiles_w; tw0 += VL) {
            V vb[CG][M];
#pragma GCC unroll 4
            for (int c = 0; c < CG; ++c) {
                V d[N * N];
                load_tiles(jb, xg + c * plane, th, tw0, d);
                input_transform(d, vb[c]);
            }
            for (int64_t k = 0; k < kg; ++k) {
                const T* uk = jb.u + (g * kg + k) * CG * M;
                V prod[M];
#pragma GCC unroll 32
                for (int m = 0; m < M; ++m) prod[m] = vb[0][m] * uk[m];
#pragma GCC unroll 4
                for (int c = 1; c < CG; ++c)
#pragma GCC unroll 32
                    for (int m = 0; m < M; ++m) prod[m] += vb[c][m] * uk[c * M + m];
                V out[O * O];
                output_transform(prod, out);
                store_outputs(jb, jb.y + ((n * jb.k + g * kg + k) * jb.p) * jb.q, th, tw0, out);
            }
        }
    }

    // Fused path, one tile row th of image n, group g: every output channel of the group.
    // u layout: [g][k][c][m].
    static CC_INLINE void fused_row(const Job<T>& jb, int64_t n, int64_t g, int64_t th) {
        static_assert(FUSED_MAX_CG == 4, "one case per channel count");
        switch (jb.cg) {
            case 1: return fused_row_cg<1>(jb, n, g, th);
            case 2: return fused_row_cg<2>(jb, n, g, th);
            case 3: return fused_row_cg<3>(jb, n, g, th);
            default: return fused_row_cg<4>(jb, n, g, th);
        }
    }

    // GEMM path: input transform of channel c of group g, global tile row gr (image
    // gr / tiles_h), into V[m][c][tt0 + tw] (tt0: the row's first tile in the block).
    static CC_INLINE void transform_row(const Job<T>& jb, int64_t g, int64_t c, int64_t gr,
                                        int64_t tt0) {
        const int64_t n = gr / jb.tiles_h, th = gr % jb.tiles_h;
        const T* xc = jb.x + ((n * jb.c + g * jb.cg + c) * jb.h) * jb.w;
        const int64_t mstride = jb.cg * jb.ldt;
        T* vc = jb.v + c * jb.ldt + tt0;
        for (int64_t tw0 = 0; tw0 < jb.tiles_w; tw0 += VL) {
            V d[N * N], vt[M];
            load_tiles(jb, xc, th, tw0, d);
            input_transform(d, vt);
            const int lanes = int(std::min<int64_t>(VL, jb.tiles_w - tw0));
#pragma GCC unroll 32
            for (int m = 0; m < M; ++m) store_lanes(vc + m * mstride + tw0, vt[m], lanes);
        }
    }

    // GEMM path: output transform of channel k of group g for global tile row gr.
    static CC_INLINE void output_row(const Job<T>& jb, int64_t g, int64_t k, int64_t gr, int64_t tt0) {
        const int64_t n = gr / jb.tiles_h, th = gr % jb.tiles_h;
        const int64_t mstride = jb.kg * jb.ldt;
        const T* mk = jb.mo + k * jb.ldt + tt0;
        T* yk = jb.y + ((n * jb.k + g * jb.kg + k) * jb.p) * jb.q;
        for (int64_t tw0 = 0; tw0 < jb.tiles_w; tw0 += VL) {
            V prod[M], out[O * O];
#pragma GCC unroll 32
            for (int m = 0; m < M; ++m) prod[m] = load(mk + m * mstride + tw0);
            output_transform(prod, out);
            store_outputs(jb, yk, th, tw0, out);
        }
    }
};

template <typename T>
struct KernelSet {
    void (*filters)(const FiltJob<T>&, int64_t);
    void (*fused_row)(const Job<T>&, int64_t, int64_t, int64_t);
    void (*transform_row)(const Job<T>&, int64_t, int64_t, int64_t, int64_t);
    void (*output_row)(const Job<T>&, int64_t, int64_t, int64_t, int64_t);
    int vl;
};

// One set of entry points per (table, type, instruction set): the always-inline kernels are
// compiled inside these target-specific functions.
#define CYC_ENTRIES(ISA, ATTR, VB)                                                                \
    template <class Tab, typename T>                                                              \
    ATTR void filters_##ISA(const FiltJob<T>& fj, int64_t k) {                                    \
        filter_transform<Tab, T>(fj, k);                                                          \
    }                                                                                             \
    template <class Tab, typename T>                                                              \
    ATTR void fused_##ISA(const Job<T>& jb, int64_t n, int64_t g, int64_t th) {                  \
        Impl<Tab, T, VB>::fused_row(jb, n, g, th);                                                \
    }                                                                                             \
    template <class Tab, typename T>                                                              \
    ATTR void transform_##ISA(const Job<T>& jb, int64_t g, int64_t c, int64_t gr, int64_t tt0) { \
        Impl<Tab, T, VB>::transform_row(jb, g, c, gr, tt0);                                       \
    }                                                                                             \
    template <class Tab, typename T>                                                              \
    ATTR void output_##ISA(const Job<T>& jb, int64_t g, int64_t k, int64_t gr, int64_t tt0) {    \
        Impl<Tab, T, VB>::output_row(jb, g, k, gr, tt0);                                          \
    }                                                                                             \
    template <class Tab, typename T>                                                              \
    KernelSet<T> kernels_##ISA() {                                                                \
        return {filters_##ISA<Tab, T>, fused_##ISA<Tab, T>, transform_##ISA<Tab, T>,              \
                output_##ISA<Tab, T>,                                                             \
                int(VB / sizeof(T))};                                                             \
    }

CYC_ENTRIES(baseline, , 16)
#ifdef CONVCORE_X86_DISPATCH
CYC_ENTRIES(avx2, __attribute__((target("avx2,fma"))), 32)
CYC_ENTRIES(avx512, __attribute__((target("avx512f,avx512dq,fma"))), 64)
#endif

template <class Tab, typename T>
KernelSet<T> kernels() {
#ifdef CONVCORE_X86_DISPATCH
    if (cpu_isa() == CpuIsa::avx512) return kernels_avx512<Tab, T>();
    if (cpu_isa() == CpuIsa::avx2) return kernels_avx2<Tab, T>();
#endif
    return kernels_baseline<Tab, T>();
}

// ---- applicability, workspace ----------------------------------------------------------------

constexpr int64_t M_SLOTS = 22;  // both supported tables (C4F3, C4F2) use 22 multiplications
static_assert(cyclic::C4F3::M == M_SLOTS && cyclic::C4F2::M == M_SLOTS, "tables changed");

int64_t out_per_tile(const ConvProblem& p) { return p.r == 3 ? cyclic::C4F3::O : cyclic::C4F2::O; }

bool fused_path(const ConvProblem& p) { return p.c_per_group() <= FUSED_MAX_CG; }

struct Geometry {
    int64_t tiles_h, tiles_w, rows_per_block, ldt;
};

Geometry geometry(const ConvProblem& p) {
    const int64_t o = out_per_tile(p);
    Geometry gm{};
    gm.tiles_h = (p.p + o - 1) / o;
    gm.tiles_w = (p.q + o - 1) / o;
    const int64_t per_tile = M_SLOTS * (p.c_per_group() + p.k_per_group()) * int64_t(p.elem_size());
    const int64_t target = std::max<int64_t>(256, BLOCK_BYTES / per_tile);  // tiles per block
    gm.rows_per_block = std::clamp<int64_t>(target / gm.tiles_w, 1, p.n * gm.tiles_h);
    gm.ldt = gm.rows_per_block * gm.tiles_w;
    return gm;
}

// ---- 1 x 3 and 1 x 2 filters: the 4-point cyclic convolution along W -------------------------
// Pitas' CRT in one variable (z^4 - 1 = (z - 1)(z + 1)(z^2 + 1): 1 + 1 + 3 = 5 multiplications
// per 4-point tile; tools/gen_cyclic.py's C4F3Row / C4F2Row), by the 1-D bilinear path
// (cpu/bilinear_1d.hpp), NCHW or NHWC: 1-D convolutions and 2-D layers with 1 x F filters.

// The tables as bilinear_1d's algorithm: out = C (U .* (A d)), U = B g.
template <class Tab>
struct Row {
    static constexpr int n = Tab::N, a = Tab::M, m = Tab::O, taps = Tab::F, stride = 1;
    template <typename T>
    static constexpr T bt(int xi, int i) { return T(Tab::A[xi][i]); }
    template <typename T>
    static constexpr T g(int xi, int j) { return Tab::template b<T>(xi, j); }
    template <typename T>
    static constexpr T at(int i, int xi) { return T(Tab::C[i][xi]); }
};

// A 1 x F or F x 1 filter, F = 2 or 3: the 1-D path (along W or H).
bool row_filter(const ConvProblem& p) {
    return (p.r == 1 && (p.s == 3 || p.s == 2)) || (p.s == 1 && (p.r == 3 || p.r == 2));
}
int row_outputs(const ConvProblem& p) {
    return bilinear_1d::taps_of(p) == 3 ? cyclic::C4F3Row::O : cyclic::C4F2Row::O;
}
constexpr int kRowProducts = cyclic::C4F3Row::M;
static_assert(cyclic::C4F2Row::M == kRowProducts, "tables changed");

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "CYCLIC_MINIMAL runs float32 and float64 only";
    if (row_filter(p))
        return bilinear_1d::why_not("CYCLIC_MINIMAL", "the 4-point cyclic convolution", p, row_outputs(p),
                                    kRowProducts);
    if (!((p.r == 3 && p.s == 3) || (p.r == 2 && p.s == 2)))
        return "CYCLIC_MINIMAL needs a 3x3 filter (or 2x2, 1x3, 1x2, 3x1, 2x1), got " + std::to_string(p.r) + "x" +
               std::to_string(p.s) + " (its tables are the 4x4 and 4-point cyclic convolutions with overlap-save)";
    if (!p.unit_stride())
        return "CYCLIC_MINIMAL needs stride 1, got " + std::to_string(p.stride_h) + "x" +
               std::to_string(p.stride_w) + " (overlap-save tiles produce every output)";
    if (!p.unit_dilation())
        return "CYCLIC_MINIMAL needs dilation 1, got " + std::to_string(p.dil_h) + "x" +
               std::to_string(p.dil_w);
    if (!fused_path(p)) {
        const Geometry gm = geometry(p);
        if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX || gm.ldt > INT_MAX)
            return "CYCLIC_MINIMAL: a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
                   ", C/groups=" + std::to_string(p.c_per_group()) +
                   ") exceeds the 32-bit BLAS interface";
    }
    return "";
}

size_t workspace_elems(const ConvProblem& p) {
    const int64_t filt = M_SLOTS * p.k * p.c_per_group();
    if (fused_path(p)) return size_t(filt);
    const Geometry gm = geometry(p);
    return size_t(filt + M_SLOTS * (p.c_per_group() + p.k_per_group()) * gm.ldt + OVERREAD);
}

size_t workspace_bytes(const ConvProblem& p) {
    if (row_filter(p)) return bilinear_1d::workspace_bytes(p, row_outputs(p), kRowProducts);
    return workspace_elems(p) * p.elem_size();
}

bool runs_nhwc(const ConvProblem& p) { return row_filter(p); }
// Made for the 1-D path and for few input channels per group, where the fused path skips the
// GEMMs (the paper's minimal tiles then carry the whole cost).
MadeFor made_for_problem(const ConvProblem& p) {
    return row_filter(p) || fused_path(p) ? MadeFor::Yes : MadeFor::No;
}

// ---- the run -----------------------------------------------------------------------------------

void gemm(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemm(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
          int ldc) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

template <class Tab, typename T>
void run_typed(const ConvArgs& a) {
    constexpr int M = Tab::M;
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    BlasThreads blas_threads(threads);
    const KernelSet<T> ks = kernels<Tab, T>();
    const bool fused = fused_path(p);
    const Geometry gm = geometry(p);
    T* ws = static_cast<T*>(a.workspace);

    Job<T> jb{};
    jb.x = static_cast<const T*>(a.x);
    jb.y = static_cast<T*>(a.y);
    jb.u = ws;
    jb.c = p.c, jb.h = p.h, jb.w = p.w, jb.k = p.k, jb.p = p.p, jb.q = p.q;
    jb.cg = p.c_per_group(), jb.kg = p.k_per_group();
    jb.pad_h = p.pad_h, jb.pad_w = p.pad_w;
    jb.tiles_h = gm.tiles_h, jb.tiles_w = gm.tiles_w;
    jb.flip = p.flip;
    jb.alpha = T(a.alpha), jb.beta = T(a.beta);

    const FiltJob<T> fj{static_cast<const T*>(a.w), ws, p.k, jb.cg, jb.kg, p.flip, fused};
#pragma omp parallel for num_threads(threads) schedule(static) if (p.k * jb.cg >= 256)
    for (int64_t k = 0; k < p.k; ++k) ks.filters(fj, k);
    const int64_t filt = M * p.k * jb.cg;

    if (fused) {
        const int64_t rows = p.n * p.groups * gm.tiles_h;
#pragma omp parallel for num_threads(threads) schedule(dynamic)
        for (int64_t t = 0; t < rows; ++t) {
            const int64_t th = t % gm.tiles_h, g = t / gm.tiles_h % p.groups, n = t / (gm.tiles_h * p.groups);
            ks.fused_row(jb, n, g, th);
        }
        return;
    }

    jb.ldt = gm.ldt;
    jb.v = ws + filt;
    jb.mo = jb.v + M * jb.cg * gm.ldt;
    const int64_t total_rows = p.n * gm.tiles_h;
#pragma omp parallel num_threads(threads)
    {
        for (int64_t gr0 = 0; gr0 < total_rows; gr0 += gm.rows_per_block) {
            const int64_t nrows = std::min(gm.rows_per_block, total_rows - gr0);
            const int64_t ntiles = nrows * gm.tiles_w;
            for (int64_t g = 0; g < p.groups; ++g) {
#pragma omp for schedule(dynamic)
                for (int64_t t = 0; t < jb.cg * nrows; ++t) {
                    const int64_t c = t / nrows, r = t % nrows;
                    ks.transform_row(jb, g, c, gr0 + r, r * gm.tiles_w);
                }
#pragma omp for schedule(dynamic, 1)
                for (int m = 0; m < M; ++m)
                    gemm(int(jb.kg), int(ntiles), int(jb.cg), jb.u + (g * M + m) * jb.kg * jb.cg,
                         int(jb.cg), jb.v + m * jb.cg * gm.ldt, int(gm.ldt),
                         jb.mo + m * jb.kg * gm.ldt, int(gm.ldt));
#pragma omp for schedule(dynamic)
                for (int64_t t = 0; t < jb.kg * nrows; ++t) {
                    const int64_t k = t / nrows, r = t % nrows;
                    ks.output_row(jb, g, k, gr0 + r, r * gm.tiles_w);
                }
            }
        }
    }
}

void run(const ConvArgs& a) {
    const bool f64 = a.prob.dtype == CONVCORE_DATA_DOUBLE;
    if (row_filter(a.prob) && bilinear_1d::taps_of(a.prob) == 3)
        f64 ? bilinear_1d::run<Row<cyclic::C4F3Row>, double>(a) : bilinear_1d::run<Row<cyclic::C4F3Row>, float>(a);
    else if (row_filter(a.prob))
        f64 ? bilinear_1d::run<Row<cyclic::C4F2Row>, double>(a) : bilinear_1d::run<Row<cyclic::C4F2Row>, float>(a);
    else if (a.prob.r == 3)
        f64 ? run_typed<cyclic::C4F3, double>(a) : run_typed<cyclic::C4F3, float>(a);
    else
        f64 ? run_typed<cyclic::C4F2, double>(a) : run_typed<cyclic::C4F2, float>(a);
}

}  // namespace

extern const Solver cyclic_minimal_solver;
const Solver cyclic_minimal_solver = {.algo = CONVCORE_FWD_ALGO_CYCLIC_MINIMAL,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .runs_nhwc = runs_nhwc, .made_for = made_for_problem};

}  // namespace cpu
}  // namespace convcore
