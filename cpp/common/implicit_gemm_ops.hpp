// The three GEMMs of IMPLICIT_GEMM on CUDA (cuda/implicit_gemm_kernel.cuh), as operand
// policies over ONE element: the tiled kernel only stages a(.)/b(.) into shared memory and
// writes out(.); everything problem-specific is here, host/device, and tests/cpp/
// test_gemm_gather.cpp runs these exact functions on the host against the float64 reference.
//
// Per group (the GEMM's batch index), with L = Cg*R*S and col as in common/gemm_gather.hpp:
//   forward:          Y[n, g] (Kg x PQ)  = W[g] (Kg x L) * col[n, g] (L x PQ),
//                     rows = Kg, columns = N*P*Q (images side by side), depth = L
//   backward data:    dX[n, g] (Cg x HW) = W[g]^T (per tap) * dY, gathered:
//                     dx[n, c, ih, iw] = sum_{k, fr, fs} w[k][c][fr][fs] * dy[n, k, oh, ow]
//                     with oh*sh = ih + ph - tap(fr)*dh (0 unless divisible and in range),
//                     rows = Cg, columns = N*H*W, depth = Kg*R*S
//   backward filter:  dW[g] (Kg x L) = sum_n dY[n, g] (Kg x PQ) * col[n, g]^T,
//                     rows = Kg, columns = L, depth = N*P*Q
// A Column is what b() needs of its column, computed once per thread and tile.
#pragma once
#include <cstdint>

#include "common/gemm_gather.hpp"

namespace convcore {

template <typename T>
struct ImplicitForward {
    GemmGeom g;
    int64_t images;
    const T* x;
    const T* w;
    T* y;

    struct Column {
        const T* base;  // x[n, grp*Cg, 0, 0]
        ColumnOrigin origin;
    };
    CONVCORE_HD int64_t rows() const { return g.kg; }
    CONVCORE_HD int64_t cols() const { return images * g.p * g.q; }
    CONVCORE_HD int64_t depth() const { return g.rows(); }
    CONVCORE_HD T a(int64_t grp, int64_t m, int64_t d) const {
        return w[(grp * g.kg + m) * g.rows() + d];
    }
    CONVCORE_HD Column column(int64_t grp, int64_t j) const {
        const int64_t pq = g.p * g.q, n = j / pq;
        return {x + (n * g.c + grp * g.cg) * g.h * g.w, column_origin(g, j - n * pq)};
    }
    CONVCORE_HD T b(const Column& col, int64_t d) const {
        const int64_t off = gather_offset(g, col.origin, d);
        return off < 0 ? T(0) : col.base[off];
    }
    CONVCORE_HD T* out(int64_t grp, int64_t m, int64_t j) const {
        const int64_t pq = g.p * g.q, n = j / pq;
        return y + (n * g.k + grp * g.kg + m) * pq + (j - n * pq);
    }
};

template <typename T>
struct ImplicitBackwardData {
    GemmGeom g;
    int64_t images;
    const T* dy;
    const T* w;
    T* dx;

    struct Column {
        const T* base;  // dy[n, grp*Kg, 0, 0]
        int64_t ih, iw;
    };
    CONVCORE_HD int64_t rows() const { return g.cg; }
    CONVCORE_HD int64_t cols() const { return images * g.h * g.w; }
    CONVCORE_HD int64_t depth() const { return g.kg * g.r * g.s; }
    CONVCORE_HD T a(int64_t grp, int64_t m, int64_t d) const {
        const int64_t rs = g.r * g.s, k = d / rs;
        return w[((grp * g.kg + k) * g.cg + m) * rs + (d - k * rs)];
    }
    CONVCORE_HD Column column(int64_t grp, int64_t j) const {
        const int64_t hw = g.h * g.w, n = j / hw, ih = (j - n * hw) / g.w;
        return {dy + (n * g.k + grp * g.kg) * g.p * g.q, ih, j - n * hw - ih * g.w};
    }
    CONVCORE_HD T b(const Column& col, int64_t d) const {
        const int64_t rs = g.r * g.s, k = d / rs, fr = (d - k * rs) / g.s, fs = d - k * rs - fr * g.s;
        const int64_t th = col.ih + g.pad_h - conv_filter_tap(fr, g.r, g.flip) * g.dil_h;
        const int64_t tw = col.iw + g.pad_w - conv_filter_tap(fs, g.s, g.flip) * g.dil_w;
        if (th < 0 || tw < 0 || th % g.stride_h != 0 || tw % g.stride_w != 0) return T(0);
        const int64_t oh = th / g.stride_h, ow = tw / g.stride_w;
        if (oh >= g.p || ow >= g.q) return T(0);
        return col.base[(k * g.p + oh) * g.q + ow];
    }
    CONVCORE_HD T* out(int64_t grp, int64_t m, int64_t j) const {
        const int64_t hw = g.h * g.w, n = j / hw;
        return dx + (n * g.c + grp * g.cg + m) * hw + (j - n * hw);
    }
};

template <typename T>
struct ImplicitBackwardFilter {
    GemmGeom g;
    int64_t images;
    const T* x;
    const T* dy;
    T* dw;

    struct Column {
        const T* base;  // x[0, grp*Cg, 0, 0]
        int64_t l;
    };
    CONVCORE_HD int64_t rows() const { return g.kg; }
    CONVCORE_HD int64_t cols() const { return g.rows(); }
    CONVCORE_HD int64_t depth() const { return images * g.p * g.q; }
    CONVCORE_HD T a(int64_t grp, int64_t m, int64_t d) const {
        const int64_t pq = g.p * g.q, n = d / pq;
        return dy[(n * g.k + grp * g.kg + m) * pq + (d - n * pq)];
    }
    CONVCORE_HD Column column(int64_t grp, int64_t j) const {
        return {x + grp * g.cg * g.h * g.w, j};
    }
    CONVCORE_HD T b(const Column& col, int64_t d) const {
        const int64_t pq = g.p * g.q, n = d / pq;
        const int64_t off = gather_offset(g, column_origin(g, d - n * pq), col.l);
        return off < 0 ? T(0) : col.base[n * g.c * g.h * g.w + off];
    }
    CONVCORE_HD T* out(int64_t grp, int64_t m, int64_t j) const {
        return dw + (grp * g.kg + m) * g.rows() + j;
    }
};

// The GEMM every policy describes, element by element, for the host test:
// *out(grp, m, j) = sum_d a(grp, m, d) * b(column(grp, j), d).
template <typename Acc, typename Ops>
void implicit_gemm_host(const Ops& ops, int64_t groups) {
    for (int64_t grp = 0; grp < groups; ++grp)
        for (int64_t j = 0; j < ops.cols(); ++j) {
            const typename Ops::Column col = ops.column(grp, j);
            for (int64_t m = 0; m < ops.rows(); ++m) {
                Acc acc = Acc(0);
                for (int64_t d = 0; d < ops.depth(); ++d) acc += Acc(ops.a(grp, m, d)) * Acc(ops.b(col, d));
                *ops.out(grp, m, j) = acc;
            }
        }
}

}  // namespace convcore
