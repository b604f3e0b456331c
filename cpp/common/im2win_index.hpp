// IM2WIN index math, host + device (paper 002, Sec. 3.1 Eq. 2): the window-order tensor's
// geometry and addressing, used by cpu/im2win.cpp and cuda/im2win.cu alike and tested on the
// host by tests/cpp/test_im2win_index.cpp.
//
// For every output row gr = n*P + p (across images) and group g, a strip holds the R input rows
// the row's windows read, column by column, channels of the group inside each column:
//   strip[wc][c][r] = x[n][g*C/g + c][p*stride_h - pad_h + r*dil_h][wc - pad_w]  (0 outside),
//   wc in [0, Wp), Wp = (Q-1)*stride_w + (S-1)*dil_w + 1.
// Strips are stored [band row][g][wc][c][r] for a band of consecutive output rows. Output
// (p, q)'s window starts at strip column q*stride_w; its element j = (s, c, r) (j = (s*C/g +
// c)*R + r) sits at window_elem(j) from there (contiguous when dil_w == 1).
#pragma once
#include <cstdint>

#include "common/conv_index.hpp"

namespace convcore {
namespace im2win {

// Wp: strip columns.
CONVCORE_HD int64_t strip_cols(int64_t q, int64_t s, int64_t stride_w, int64_t dil_w) {
    return (q - 1) * stride_w + (s - 1) * dil_w + 1;
}

// Element offset of output column oq's window in strip (band_row, g); crs = (C/g)*R.
CONVCORE_HD int64_t window_start(int64_t band_row, int64_t g, int64_t oq, int64_t groups, int64_t wp,
                                 int64_t crs, int64_t stride_w) {
    return ((band_row * groups + g) * wp + oq * stride_w) * crs;
}

// Offset of window element j = (s, c, r) from the window's start.
CONVCORE_HD int64_t window_elem(int64_t j, int64_t crs, int64_t dil_w) {
    return dil_w == 1 ? j : (j / crs) * dil_w * crs + j % crs;
}

// The filter element that window element j multiplies: w[k][c][fr][fs] at offset
// (c*R + fr)*S + fs within filter k (true convolution mirrors the taps).
// filter_tap_offset: the same for window element (ts, c, tr) given by its parts (the CPU packs
// the filter in nested loops: three divisions per element cost more than the convolution on
// VGG conv5's 2.4M filter elements).
CONVCORE_HD int64_t filter_tap_offset(int64_t c, int64_t tr, int64_t ts, int64_t r, int64_t s, bool flip) {
    return (c * r + conv_filter_tap(tr, r, flip)) * s + conv_filter_tap(ts, s, flip);
}
CONVCORE_HD int64_t filter_elem(int64_t j, int64_t cg, int64_t r, int64_t s, bool flip) {
    return filter_tap_offset(j / r % cg, j % r, j / (r * cg), r, s, flip);
}

// Sizes a strip element's source needs.
struct StripDims {
    int64_t c, h, w, p, cg, r, groups, pad_h, pad_w, stride_h, dil_h, wp;
};

// Input offset (packed NCHW) of strip element e of the band starting at output row gr0, or
// -1 for the zero padding. e = ((band_row * groups + g) * Wp + wc) * (C/g)*R + c*R + r.
CONVCORE_HD int64_t strip_source(const StripDims& d, int64_t gr0, int64_t e) {
    const int64_t r = e % d.r;
    int64_t t = e / d.r;
    const int64_t c = t % d.cg;
    t /= d.cg;
    const int64_t wc = t % d.wp;
    t /= d.wp;
    const int64_t g = t % d.groups, gr = gr0 + t / d.groups;
    const int64_t n = gr / d.p, p = gr % d.p;
    const int64_t ih = conv_input_coord(p, r, d.pad_h, d.stride_h, d.dil_h), iw = wc - d.pad_w;
    if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) return -1;
    return ((n * d.c + g * d.cg + c) * d.h + ih) * d.w + iw;
}

}  // namespace im2win
}  // namespace convcore
