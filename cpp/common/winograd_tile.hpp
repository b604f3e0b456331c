// Winograd F(m x m, 3 x 3) per tile, host + device (Lavin & Gray, Sec. 4, Eqs. 8-13): the
// three small transforms of one tile and the tile geometry, written once for the CUDA kernels
// (cuda/winograd.cu) and exercised on the host by tests/cpp/test_winograd_tile.cpp against a
// float64 reference, so the arithmetic the GPU runs is tested on machines without a GPU.
// The coefficients are the generated tables (common/generated/winograd_tables.hpp) through
// their CONVCORE_HD accessors; with the loops unrolled they are compile-time constants, and
// wino_mac drops the zero terms and turns +-1 into additions (a compiler may not: 0 * x is
// not 0 for x = NaN/Inf).
#pragma once
#include <cstdint>

#include "common/conv_index.hpp"
#include "common/generated/winograd_tables.hpp"

#ifndef CONVCORE_UNROLL
#if defined(__CUDACC__)
#define CONVCORE_UNROLL _Pragma("unroll")
#else
#define CONVCORE_UNROLL
#endif
#endif

namespace convcore {
namespace winograd {

// acc += c * v for a table coefficient c.
template <typename T>
CONVCORE_HD void wino_mac(T& acc, T c, T v) {
    if (c == T(0)) return;
    if (c == T(1))
        acc += v;
    else if (c == T(-1))
        acc -= v;
    else
        acc += c * v;
}

// Where a tile sits. Tiles are numbered t = (n * th + ty) * tw + tx over every image: the
// output is cut into th x tw = ceil(P/m) x ceil(Q/m) tiles of m x m per image.
struct TileGrid {
    int64_t m;       // output tile side
    int64_t th, tw;  // tiles per image
    int64_t count;   // n * th * tw
};

CONVCORE_HD TileGrid tile_grid(int64_t m, int64_t n, int64_t p, int64_t q) {
    TileGrid g;
    g.m = m;
    g.th = (p + m - 1) / m;
    g.tw = (q + m - 1) / m;
    g.count = n * g.th * g.tw;
    return g;
}

struct TilePos {
    int64_t n, ty, tx;
};

CONVCORE_HD TilePos tile_pos(const TileGrid& g, int64_t t) {
    TilePos p;
    p.tx = t % g.tw;
    t /= g.tw;
    p.ty = t % g.th;
    p.n = t / g.th;
    return p;
}

// The CUDA solver's workspace layout, every group side by side so that one strided-batched
// GEMM covers all groups and all a^2 transform positions xi (batch b = g * a^2 + xi):
//   U[g][xi][kl][c] (K/g x C/g per batch), V[g][xi][cl][t] and M[g][xi][kl][t] (t: the tile
// within the current block of tiles, row length ldt).
struct WsLayout {
    int64_t aa, cg, kg, ldt;
    CONVCORE_HD int64_t u(int64_t g, int64_t xi, int64_t kl, int64_t c) const {
        return ((g * aa + xi) * kg + kl) * cg + c;
    }
    CONVCORE_HD int64_t v(int64_t g, int64_t xi, int64_t cl, int64_t t) const {
        return ((g * aa + xi) * cg + cl) * ldt + t;
    }
    CONVCORE_HD int64_t m(int64_t g, int64_t xi, int64_t kl, int64_t t) const {
        return ((g * aa + xi) * kg + kl) * ldt + t;
    }
};

// The column-major (BLAS) strided-batched GEMM C_b = A_b B_b (m x n, inner size k) that
// computes, for nt tiles and `groups` groups, row-major M (K/g x nt) = U (K/g x C/g) .
// V (C/g x nt) in the layout above: the same memory read column-major is M^T = V^T U^T, so
// A = V, B = U, C = M.
struct BatchedGemm {
    int64_t m, n, k;
    int64_t lda, stride_a, ldb, stride_b, ldc, stride_c;
    int64_t batch;
};

CONVCORE_HD BatchedGemm batched_gemm_args(const WsLayout& l, int64_t nt, int64_t groups) {
    BatchedGemm b;
    b.m = nt;
    b.n = l.kg;
    b.k = l.cg;
    b.lda = l.ldt;
    b.stride_a = l.cg * l.ldt;
    b.ldb = l.cg;
    b.stride_b = l.kg * l.cg;
    b.ldc = l.ldt;
    b.stride_c = l.kg * l.ldt;
    b.batch = groups * l.aa;
    return b;
}

// d = the a x a window of one plane xc (h x w) whose top-left element is (ih0, iw0), zero
// outside the plane: d[i][j] = x[ih0 + i][iw0 + j].
template <int a, typename T>
CONVCORE_HD void load_tile_at(const T* xc, int64_t h, int64_t w, int64_t ih0, int64_t iw0, T (&d)[a][a]) {
    CONVCORE_UNROLL
    for (int i = 0; i < a; ++i) {
        const int64_t ih = ih0 + i;
        const bool row_in = ih >= 0 && ih < h;
        CONVCORE_UNROLL
        for (int j = 0; j < a; ++j) {
            const int64_t iw = iw0 + j;
            d[i][j] = row_in && iw >= 0 && iw < w ? xc[ih * w + iw] : T(0);
        }
    }
}

// d = the a x a input tile of the tile at (ty, tx) read from one input plane xc (h x w),
// with the zero padding: d[i][j] = x[ty*m - pad_h + i][tx*m - pad_w + j], 0 outside.
template <class F, typename T>
CONVCORE_HD void load_input_tile(const T* xc, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w,
                                 int64_t ty, int64_t tx, T (&d)[F::alpha][F::alpha]) {
    load_tile_at<F::alpha>(xc, h, w, ty * F::m - pad_h, tx * F::m - pad_w, d);
}

// The three transforms are one two-sided product out = C in C^T, C (Rows x Cols) one of the
// tables: BT (input), G (filter), AT (output).
enum class Table { BT, G, AT };

template <class F, Table C, typename T>
CONVCORE_HD T coef(int i, int l) {
    if constexpr (C == Table::BT)
        return F::template bt<T>(i, l);
    else if constexpr (C == Table::G)
        return F::template g<T>(i, l);
    else
        return F::template at<T>(i, l);
}

template <class F, Table C, int Rows, int Cols, typename T>
CONVCORE_HD void two_sided(const T (&in)[Cols][Cols], T (&out)[Rows][Rows]) {
    T t[Rows][Cols];  // C in
    CONVCORE_UNROLL
    for (int i = 0; i < Rows; ++i)
        CONVCORE_UNROLL
        for (int j = 0; j < Cols; ++j) {
            T acc = T(0);
            CONVCORE_UNROLL
            for (int l = 0; l < Cols; ++l) wino_mac(acc, coef<F, C, T>(i, l), in[l][j]);
            t[i][j] = acc;
        }
    CONVCORE_UNROLL
    for (int i = 0; i < Rows; ++i)
        CONVCORE_UNROLL
        for (int j = 0; j < Rows; ++j) {
            T acc = T(0);
            CONVCORE_UNROLL
            for (int l = 0; l < Cols; ++l) wino_mac(acc, coef<F, C, T>(j, l), t[i][l]);
            out[i][j] = acc;
        }
}

// v = BT d BT^T  (Eq. 12's input transform of one tile).
template <class F, typename T>
CONVCORE_HD void input_transform(const T (&d)[F::alpha][F::alpha], T (&v)[F::alpha][F::alpha]) {
    two_sided<F, Table::BT, F::alpha, F::alpha>(d, v);
}

// u = G g G^T for one 3x3 filter slice w (row-major r x r); true convolution (flip) reads it
// rotated by 180 degrees.
template <class F, typename T>
CONVCORE_HD void filter_transform(const T* w, bool flip, T (&u)[F::alpha][F::alpha]) {
    constexpr int r = F::r;
    T g[r][r];
    CONVCORE_UNROLL
    for (int i = 0; i < r; ++i)
        CONVCORE_UNROLL
        for (int j = 0; j < r; ++j) g[i][j] = w[flip ? (r - 1 - i) * r + (r - 1 - j) : i * r + j];
    two_sided<F, Table::G, F::alpha, r>(g, u);
}

// y = AT mm AT^T: the m x m outputs of one tile from its a x a transformed-domain sums.
template <class F, typename T>
CONVCORE_HD void output_transform(const T (&mm)[F::alpha][F::alpha], T (&y)[F::m][F::m]) {
    two_sided<F, Table::AT, F::m, F::alpha>(mm, y);
}

}  // namespace winograd
}  // namespace convcore
