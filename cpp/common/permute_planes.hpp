// Permuting the three outer axes of an array of planes (the transposes of the CUDA GEMM
// algorithms and of the CUDA backward-via-forward reductions, cuda/gemm_util.cu), as a
// host/device function of one destination element, tested on the host by
// tests/cpp/test_gemm_gather.cpp.
//
// src is dims[0] x dims[1] x dims[2] planes of `plane` elements; dst's axis t is src's axis
// perm[t]: dst[i_perm0][i_perm1][i_perm2][e] = src[i0][i1][i2][e].
#pragma once
#include <cstdint>

#include "common/conv_index.hpp"

namespace convcore {

struct PlanePermutation {
    int64_t dst_dims[3];    // dst's outer extents
    int64_t src_stride[3];  // for dst axis t: the stride (in planes) of src axis perm[t]
    int64_t plane;
};

inline PlanePermutation make_plane_permutation(const int64_t dims[3], const int perm[3],
                                               int64_t plane) {
    const int64_t src_stride[3] = {dims[1] * dims[2], dims[2], 1};
    PlanePermutation pm;
    for (int t = 0; t < 3; ++t) {
        pm.dst_dims[t] = dims[perm[t]];
        pm.src_stride[t] = src_stride[perm[t]];
    }
    pm.plane = plane;
    return pm;
}

// The src index of dst element i.
CONVCORE_HD int64_t permuted_source(const PlanePermutation& pm, int64_t i) {
    const int64_t e = i % pm.plane;
    int64_t t = i / pm.plane;
    const int64_t o2 = t % pm.dst_dims[2];
    t /= pm.dst_dims[2];
    const int64_t o1 = t % pm.dst_dims[1], o0 = t / pm.dst_dims[1];
    return (o0 * pm.src_stride[0] + o1 * pm.src_stride[1] + o2 * pm.src_stride[2]) * pm.plane + e;
}

// The transposes of the backward-via-forward reductions (core/backward_via_forward.hpp):
// w' (C x K/g x R x S), w'[g*Cg + c][k] = w[g*Kg + k][c]: [g][k][c] planes -> [g][c][k].
inline PlanePermutation filter_transpose(int64_t groups, int64_t kg, int64_t cg, int64_t rs) {
    const int64_t dims[3] = {groups, kg, cg};
    const int perm[3] = {0, 2, 1};
    return make_plane_permutation(dims, perm, rs);
}
// x' (Cg x g*N x H x W), x'[c][g*N + n] = x[n][g*Cg + c]: [n][g][c] planes -> [c][g][n].
inline PlanePermutation input_transpose(int64_t n, int64_t groups, int64_t cg, int64_t hw) {
    const int64_t dims[3] = {n, groups, cg};
    const int perm[3] = {2, 1, 0};
    return make_plane_permutation(dims, perm, hw);
}
// dst[b][a] = src[a][b] for A x B planes (dy' = dy with N and K swapped, ...).
inline PlanePermutation swap_outer_axes(int64_t a, int64_t b, int64_t plane) {
    const int64_t dims[3] = {a, b, 1};
    const int perm[3] = {1, 0, 2};
    return make_plane_permutation(dims, perm, plane);
}

// The filter gradient from the backward-filter reduction's output y' (Cg x K x R x S): dw
// element i ([k][c][r][s], K x Cg x R x S) is y'[c][k][tap(r)][tap(s)], the taps mirrored in
// the true-convolution mode (the forward pass multiplies x at tap t by w[R-1-t]).
CONVCORE_HD int64_t reduced_filter_source(int64_t k_all, int64_t cg, int64_t r_size,
                                          int64_t s_size, bool flip, int64_t i) {
    const int64_t s = i % s_size, r = i / s_size % r_size, c = i / (s_size * r_size) % cg;
    const int64_t k = i / (s_size * r_size * cg);
    return ((c * k_all + k) * r_size + conv_filter_tap(r, r_size, flip)) * s_size +
           conv_filter_tap(s, s_size, flip);
}

}  // namespace convcore
