// The im2col matrix of the GEMM algorithms (IM2COL_GEMM, IMPLICIT_GEMM, their backward
// passes on CUDA), as host/device functions over ONE element, so that the CUDA kernels and
// the CPU test (tests/cpp/test_gemm_gather.cpp) run exactly the same index math.
//
// For one image n and group g, col is the (Cg*R*S) x (P*Q) matrix
//   col[l = (c, fr, fs)][j = (oh, ow)] = x[n, g*Cg + c, oh*sh - ph + r*dh, ow*sw - pw + s*dw]
// (0 in the padding), where r = conv_filter_tap(fr), s = conv_filter_tap(fs): row l pairs with
// filter element w[.][c][fr][fs], so the true-convolution flip lives in the unfolding. Then
//   forward:          Y[n, g] (Kg x PQ) = W[g] (Kg x L) * col
//   backward data:    dX[n, g] = col2im(W[g]^T * dY[n, g])
//   backward filter:  dW[g] = sum_n dY[n, g] * col^T.
#pragma once
#include <cstdint>

#include "common/conv_index.hpp"

namespace convcore {

// The problem's sizes, by value (kernels receive it as one argument).
struct GemmGeom {
    int64_t c, h, w;     // input channels (all groups), height, width
    int64_t k;           // filters (all groups)
    int64_t r, s;        // filter extent
    int64_t cg, kg;      // channels and filters per group
    int64_t p, q;        // output extent
    int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    bool flip;
    CONVCORE_HD int64_t rows() const { return cg * r * s; }  // L
    CONVCORE_HD int64_t cols() const { return p * q; }      // P*Q per image
};

// From anything with ConvProblem's field names (core/problem.hpp), so common/ stays
// independent of core/.
template <typename Problem>
inline GemmGeom gemm_geom(const Problem& pb) {
    GemmGeom g;
    g.c = pb.c;
    g.h = pb.h;
    g.w = pb.w;
    g.k = pb.k;
    g.r = pb.r;
    g.s = pb.s;
    g.cg = pb.c / pb.groups;
    g.kg = pb.k / pb.groups;
    g.p = pb.p;
    g.q = pb.q;
    g.pad_h = pb.pad_h;
    g.pad_w = pb.pad_w;
    g.stride_h = pb.stride_h;
    g.stride_w = pb.stride_w;
    g.dil_h = pb.dil_h;
    g.dil_w = pb.dil_w;
    g.flip = pb.flip;
    return g;
}

// Input coordinates of tap 0 for output column j = (oh, ow).
struct ColumnOrigin {
    int64_t ih0, iw0;
};
CONVCORE_HD ColumnOrigin column_origin(const GemmGeom& g, int64_t j) {
    const int64_t oh = j / g.q, ow = j - oh * g.q;
    return {oh * g.stride_h - g.pad_h, ow * g.stride_w - g.pad_w};
}

// Offset of col[l][j] inside the image's group block x[n, g*Cg .. g*Cg+Cg-1, :, :]
// (c*H*W + ih*W + iw), or -1 where it reads the zero padding.
CONVCORE_HD int64_t gather_offset(const GemmGeom& g, ColumnOrigin o, int64_t l) {
    const int64_t rs = g.r * g.s;
    const int64_t c = l / rs, fr = (l - c * rs) / g.s, fs = l - c * rs - fr * g.s;
    const int64_t ih = o.ih0 + conv_filter_tap(fr, g.r, g.flip) * g.dil_h;
    const int64_t iw = o.iw0 + conv_filter_tap(fs, g.s, g.flip) * g.dil_w;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return -1;
    return (c * g.h + ih) * g.w + iw;
}

// col2im as a gather (deterministic: no atomics): the gradient of input element
// (c, ih, iw) of one image's group is the sum of col[(c, fr, fs)][(oh, ow)] over the filter
// elements whose tap reads (ih, iw): oh*sh = ih + ph - r*dh with 0 <= oh < P, same for w.
// col is L x P*Q, row-major, in float64 or T; the sum is in Acc.
template <typename Acc, typename T>
CONVCORE_HD Acc col2im_gather(const GemmGeom& g, const T* col, int64_t c, int64_t ih,
                              int64_t iw) {
    const int64_t pq = g.p * g.q;
    Acc acc = Acc(0);
    for (int64_t fr = 0; fr < g.r; ++fr) {
        const int64_t th = ih + g.pad_h - conv_filter_tap(fr, g.r, g.flip) * g.dil_h;
        if (th < 0 || th % g.stride_h != 0) continue;
        const int64_t oh = th / g.stride_h;
        if (oh >= g.p) continue;
        for (int64_t fs = 0; fs < g.s; ++fs) {
            const int64_t tw = iw + g.pad_w - conv_filter_tap(fs, g.s, g.flip) * g.dil_w;
            if (tw < 0 || tw % g.stride_w != 0) continue;
            const int64_t ow = tw / g.stride_w;
            if (ow >= g.q) continue;
            acc += Acc(col[((c * g.r + fr) * g.s + fs) * pq + oh * g.q + ow]);
        }
    }
    return acc;
}

}  // namespace convcore
