// CYCLIC_MINIMAL per tile, host + device: Pitas' minimal 4x4 cyclic convolution (paper 004,
// CRT construction, 22 multiplications per 4x4 tile) with overlap-save tiles for a 3x3 filter
// (2x2 outputs per tile). The whole per-thread body of the CUDA kernel (cuda/cyclic_minimal.cu)
// is here, so tests/cpp/test_cyclic_tile.cpp runs exactly that code on the host against a
// float64 reference. The tables are the generated constexpr integer matrices of
// common/generated/cyclic_tables.hpp in their staged form (the same stages as
// cpu/cyclic_minimal.cpp):
//   T = R2 R1 d R1^T R2^T;  V = A2b A2a vec(T);  U = B vec(g);  Z = C2b C2a (U .* V);  out = L Z L^T.
// Each table entry is a template argument (a compile-time constant: zero terms vanish, +-1
// become additions, and no host array is read from device code).
#pragma once
#include <cstdint>
#include <utility>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/generated/cyclic_tables.hpp"

#ifndef CONVCORE_CYC_UNROLL
#if defined(__CUDACC__)
#define CONVCORE_CYC_UNROLL _Pragma("unroll")
#else
#define CONVCORE_CYC_UNROLL
#endif
#endif

namespace convcore {
namespace cyclic {

// acc += C * v for a compile-time integer C.
template <int C, typename T>
CONVCORE_HD void add_term(T& acc, T v) {
    if constexpr (C == 1)
        acc += v;
    else if constexpr (C == -1)
        acc -= v;
    else if constexpr (C != 0)
        acc += T(C) * v;
}

// sum_J Mat[I][J] * in[J * IS]
template <const auto& Mat, int I, int IS, typename T, int... J>
CONVCORE_HD T row_dot(const T* in, std::integer_sequence<int, J...>) {
    T acc = T(0);
    (add_term<Mat[I][J]>(acc, in[J * IS]), ...);
    return acc;
}

template <const auto& Mat, int Cols, int IS, int OS, typename T, int... I>
CONVCORE_HD void apply_rows(const T* in, T* out, std::integer_sequence<int, I...>) {
    ((out[I * OS] = row_dot<Mat, I, IS>(in, std::make_integer_sequence<int, Cols>{})), ...);
}

// out[i * OS] = sum_j Mat[i][j] * in[j * IS], i < Rows, j < Cols.
template <const auto& Mat, int Rows, int Cols, int IS = 1, int OS = 1, typename T>
CONVCORE_HD void apply(const T* in, T* out) {
    apply_rows<Mat, Cols, IS, OS>(in, out, std::make_integer_sequence<int, Rows>{});
}

// The 22 operands of one 4x4 input tile d (row-major).
template <class Tab, typename T>
CONVCORE_HD void input_transform(const T (&d)[Tab::N * Tab::N], T (&v)[Tab::M]) {
    constexpr int N = Tab::N;
    T e[N * N], t[N * N];
    CONVCORE_CYC_UNROLL
    for (int i = 0; i < N; ++i) {  // rows: d R1^T R2^T
        apply<Tab::R1, N, N, 1, 1>(d + i * N, t + i * N);
        apply<Tab::R2, N, N, 1, 1>(t + i * N, e + i * N);
    }
    CONVCORE_CYC_UNROLL
    for (int j = 0; j < N; ++j) {  // columns: R2 R1 (d R^T)
        apply<Tab::R1, N, N, N, N>(e + j, t + j);
        apply<Tab::R2, N, N, N, N>(t + j, e + j);
    }
    apply<Tab::A2a, N * N, N * N>(e, t);
    apply<Tab::A2b, Tab::M, N * N>(t, v);
}

// The O x O outputs (row-major) from the 22 products summed over the channels.
template <class Tab, typename T>
CONVCORE_HD void output_transform(const T (&prod)[Tab::M], T (&out)[Tab::O * Tab::O]) {
    constexpr int N = Tab::N, O = Tab::O;
    T c[N * N], z[N * N], f[N * O];
    apply<Tab::C2a, N * N, Tab::M>(prod, c);
    apply<Tab::C2b, N * N, N * N>(c, z);
    CONVCORE_CYC_UNROLL
    for (int i = 0; i < N; ++i) apply<Tab::L, O, N, 1, 1>(z + i * N, f + i * O);  // Z L^T
    CONVCORE_CYC_UNROLL
    for (int b = 0; b < O; ++b) apply<Tab::L, O, N, O, O>(f + b, out + b);  // L (Z L^T)
}

// U = B vec(g) for one F x F filter slice w (row-major; flip: true convolution reads it
// rotated by 180 degrees), in float64 like the CPU solver: B = B_num / B_den, and B_den is a
// power of two, so dividing once at the end gives the same bits as scaling each entry.
template <class Tab, typename T>
CONVCORE_HD void filter_transform(const T* w, bool flip, T (&u)[Tab::M]) {
    constexpr int F = Tab::F, M = Tab::M;
    double g[F * F], acc[M];
    CONVCORE_CYC_UNROLL
    for (int j = 0; j < F * F; ++j) g[j] = double(w[flip ? F * F - 1 - j : j]);
    apply<Tab::B_num, M, F * F>(g, acc);
    CONVCORE_CYC_UNROLL
    for (int m = 0; m < M; ++m) u[m] = T(acc[m] / double(Tab::B_den));
}

// Problem sizes of the CUDA kernel (packed NCHW x and y, U[k][c][M]).
struct Dims {
    int64_t n, c, h, w, k, p, q, cg, kg, groups, pad_h, pad_w;
    int64_t th, tw;     // tiles per image: ceil(P/O) x ceil(Q/O)
    int64_t kblocks;    // ceil(K/g / KT)
    int64_t items;      // n * groups * kblocks * th * tw: one thread each
};

template <class Tab>
CONVCORE_HD Dims make_dims(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t p,
                           int64_t q, int64_t groups, int64_t pad_h, int64_t pad_w, int64_t kt) {
    Dims d;
    d.n = n, d.c = c, d.h = h, d.w = w, d.k = k, d.p = p, d.q = q, d.groups = groups;
    d.cg = c / groups, d.kg = k / groups, d.pad_h = pad_h, d.pad_w = pad_w;
    d.th = (p + Tab::O - 1) / Tab::O;
    d.tw = (q + Tab::O - 1) / Tab::O;
    d.kblocks = (d.kg + kt - 1) / kt;
    d.items = n * groups * d.kblocks * d.th * d.tw;
    return d;
}

// One thread's work, item = (((n * groups + g) * kblocks + kb) * th + ty) * tw + tx (tiles
// fastest: neighbouring threads read neighbouring input and the same filter values): output
// channels g*K/g + kb*KT .. + KT - 1 (those that exist) of tile (ty, tx) of image n, summed
// over the group's input channels in the transformed domain, then transformed back and
// blended into y (beta == 0 never reads y).
template <class Tab, int KT, typename T>
CONVCORE_HD void tile_item(const Dims& d, const T* x, const T* U, T* y, int64_t item, T alpha, T beta) {
    constexpr int N = Tab::N, O = Tab::O, M = Tab::M;
    int64_t t = item;
    const int64_t tx = t % d.tw;
    t /= d.tw;
    const int64_t ty = t % d.th;
    t /= d.th;
    const int64_t kb = t % d.kblocks;
    t /= d.kblocks;
    const int64_t g = t % d.groups, n = t / d.groups;
    const int64_t k0 = kb * KT;  // first output channel within the group
    const int64_t ih0 = ty * O - d.pad_h, iw0 = tx * O - d.pad_w;

    T acc[KT][M];
    CONVCORE_CYC_UNROLL
    for (int kk = 0; kk < KT; ++kk)
        CONVCORE_CYC_UNROLL
        for (int m = 0; m < M; ++m) acc[kk][m] = T(0);
    const T* xg = x + (n * d.c + g * d.cg) * d.h * d.w;
    for (int64_t c = 0; c < d.cg; ++c) {
        const T* xc = xg + c * d.h * d.w;
        T tile[N * N], v[M];
        CONVCORE_CYC_UNROLL
        for (int i = 0; i < N; ++i) {
            const int64_t ih = ih0 + i;
            const bool row_in = ih >= 0 && ih < d.h;
            CONVCORE_CYC_UNROLL
            for (int j = 0; j < N; ++j) {
                const int64_t iw = iw0 + j;
                tile[i * N + j] = row_in && iw >= 0 && iw < d.w ? xc[ih * d.w + iw] : T(0);
            }
        }
        input_transform<Tab>(tile, v);
        CONVCORE_CYC_UNROLL
        for (int kk = 0; kk < KT; ++kk) {
            // Past the group's last channel: reread the last one (its sums are not stored).
            const int64_t kl = k0 + kk < d.kg ? k0 + kk : d.kg - 1;
            const T* u = U + ((g * d.kg + kl) * d.cg + c) * M;
            CONVCORE_CYC_UNROLL
            for (int m = 0; m < M; ++m) acc[kk][m] += u[m] * v[m];
        }
    }
    const int64_t p0 = ty * O, q0 = tx * O;
    CONVCORE_CYC_UNROLL
    for (int kk = 0; kk < KT; ++kk) {
        if (k0 + kk >= d.kg) break;
        T out[O * O];
        output_transform<Tab>(acc[kk], out);
        T* yk = y + ((n * d.k + g * d.kg + k0 + kk) * d.p + p0) * d.q + q0;
        CONVCORE_CYC_UNROLL
        for (int a = 0; a < O; ++a)
            CONVCORE_CYC_UNROLL
            for (int b = 0; b < O; ++b)
                if (p0 + a < d.p && q0 + b < d.q) blend_store(yk + a * d.q + b, out[a * O + b], alpha, beta);
    }
}

}  // namespace cyclic
}  // namespace convcore
