// Winograd F(3x3,2x2) filter gradient per tile, host + device (Lavin & Gray, paper 001,
// Sec. 4.2): what cuda/winograd_backward.cu runs on the GPU, written once here so that
// tests/cpp/test_winograd_filter_grad_tile.cpp runs the same code on the host against a
// float64 reference (the CPU solver, cpu/winograd_backward.cpp, explains the math).
//
// For stride 1 and dilation 1, dy is cut into 2x2 tiles at (2*ty, 2*tx) (winograd::tile_grid
// with m = 2 over N x P x Q). A tile's contribution to dw[k][c] is the correlation of the 4x4
// input tile d = x[2ty - pad_h .. +3][2tx - pad_w .. +3] (zero outside the image) with the
// 2x2 "filter" g = the dy tile (zero beyond P, Q): a 3x3 output, F(3x3,2x2):
//   U = G g G^T (the generic filter_transform with r = 2),
//   V = BT d BT^T (the generic input_transform),
//   M_xi (K/g x C/g) = sum over tiles of U_xi V_xi^T   (16 batched GEMMs per block of tiles),
//   dw = AT M AT^T (the generic output_transform), mirrored taps in the true-convolution mode.
#pragma once
#include <cstdint>

#include "common/blend.hpp"
#include "common/winograd_tile.hpp"

namespace convcore {
namespace winograd {

namespace fgrad {

using Tab = F3x2;                     // m = 3 outputs (the filter taps), r = 2, alpha = 4
constexpr int kA = Tab::alpha;        // 4
constexpr int kXi = kA * kA;          // 16 transform points
constexpr int64_t kTile = Tab::r;     // dy tile side (2)

// The tile grid over dy: 2x2 tiles, t = (n * th + ty) * tw + tx.
CONVCORE_HD TileGrid grid(int64_t n, int64_t p, int64_t q) { return tile_grid(kTile, n, p, q); }

// g (row-major 2x2) = the dy tile (ty, tx) of one dy plane dyk (p x q), zero beyond p, q.
template <typename T>
CONVCORE_HD void load_dy_tile(const T* dyk, int64_t p, int64_t q, int64_t ty, int64_t tx, T (&g)[4]) {
    CONVCORE_UNROLL
    for (int i = 0; i < 2; ++i)
        CONVCORE_UNROLL
        for (int j = 0; j < 2; ++j) {
            const int64_t pp = ty * kTile + i, qq = tx * kTile + j;
            g[i * 2 + j] = pp < p && qq < q ? dyk[pp * q + qq] : T(0);
        }
}

// u = G g G^T of a dy tile: the generic filter transform over F3x2 (r = 2), never flipped
// (the mode flag mirrors the output taps instead, store_dw).
template <typename T>
CONVCORE_HD void dy_transform(const T (&g)[4], T (&u)[kA][kA]) {
    filter_transform<Tab>(g, false, u);
}

// d = the 4x4 input tile under dy tile (ty, tx) from one input plane xc (h x w):
// d[i][j] = x[2ty - pad_h + i][2tx - pad_w + j], zero outside the image.
template <typename T>
CONVCORE_HD void load_x_tile(const T* xc, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w, int64_t ty,
                             int64_t tx, T (&d)[kA][kA]) {
    load_tile_at<kA>(xc, h, w, ty * kTile - pad_h, tx * kTile - pad_w, d);
}

// v = BT d BT^T: the generic input transform over F3x2.
template <typename T>
CONVCORE_HD void x_transform(const T (&d)[kA][kA], T (&v)[kA][kA]) {
    input_transform<Tab>(d, v);
}

// dw[k][c] (9 taps at dwkc) = alpha * AT mm AT^T + beta * dw, the AT . AT^T in Acc (double in
// the CUDA solver), rounded to T once; tap (r, s) stored at (R-1-r, S-1-s) when flip (true
// convolution). beta == 0 never reads dw.
template <typename T, typename Acc>
CONVCORE_HD void store_dw(const Acc (&mm)[kA][kA], T* dwkc, bool flip, T alpha, T beta) {
    Acc y[3][3];
    output_transform<Tab>(mm, y);
    CONVCORE_UNROLL
    for (int r = 0; r < 3; ++r)
        CONVCORE_UNROLL
        for (int s = 0; s < 3; ++s)
            blend_store(dwkc + conv_filter_tap(r, 3, flip) * 3 + conv_filter_tap(s, 3, flip), T(y[r][s]),
                        alpha, beta);
}

// The workspace layout, every group side by side so that one strided-batched GEMM covers all
// groups and all 16 transform points (batch b = g * 16 + xi):
//   U[g][xi][kl][t]  (the dy transforms, t: the tile within the current block, row length ldt)
//   V[g][xi][cl][t]  (the input transforms)
//   M[g][xi][kl][cl] (the sums over tiles: the block's in T, or all blocks' in double)
// (The same shapes as the forward WsLayout's M, V and U.)
struct Layout {
    int64_t cg, kg, ldt;
    CONVCORE_HD int64_t u(int64_t g, int64_t xi, int64_t kl, int64_t t) const {
        return ((g * kXi + xi) * kg + kl) * ldt + t;
    }
    CONVCORE_HD int64_t v(int64_t g, int64_t xi, int64_t cl, int64_t t) const {
        return ((g * kXi + xi) * cg + cl) * ldt + t;
    }
    CONVCORE_HD int64_t m(int64_t g, int64_t xi, int64_t kl, int64_t cl) const {
        return ((g * kXi + xi) * kg + kl) * cg + cl;
    }
};

// The column-major (BLAS) strided-batched GEMM C_b = op(A_b) B_b (m x n, inner size k) with
// op(A) = A^T (cuBLAS: CUBLAS_OP_T, CUBLAS_OP_N) that computes, for nt tiles and `groups`
// groups, row-major M (K/g x C/g) = U (K/g x nt) . V^T (nt x C/g) in the layout above: row-major
// M read column-major is M^T (C/g x K/g, ld C/g) = V U^T, and the row-major U and V (rows of
// length ldt) read column-major are U^T (nt x K/g) and V^T (nt x C/g), so
//   A = V (nt x C/g, lda = ldt, transposed), B = U (nt x K/g, ldb = ldt), C = M (ldc = C/g).
struct GradGemm {
    int64_t m, n, k;
    int64_t lda, stride_a, ldb, stride_b, ldc, stride_c;
    int64_t batch;
};

CONVCORE_HD GradGemm gemm_args(const Layout& l, int64_t nt, int64_t groups) {
    GradGemm b;
    b.m = l.cg;
    b.n = l.kg;
    b.k = nt;
    b.lda = l.ldt;
    b.stride_a = l.cg * l.ldt;
    b.ldb = l.ldt;
    b.stride_b = l.kg * l.ldt;
    b.ldc = l.cg;
    b.stride_c = l.kg * l.cg;
    b.batch = groups * kXi;
    return b;
}

// Cross-block accumulation of a float32 block sum into the float64 M: the first block
// overwrites (M is never read before it is written), later blocks add.
template <typename T>
CONVCORE_HD void accumulate(double& m, T block_sum, bool first) {
    m = first ? double(block_sum) : m + double(block_sum);
}

}  // namespace fgrad

}  // namespace winograd
}  // namespace convcore
