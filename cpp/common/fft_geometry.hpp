// Geometry of the FFT family (FFT, FFT_TILING, FINE_GRAINED_FFT, POLY_HANKEL), shared by the
// CPU solvers (cpp/cpu/*.cpp) and the CUDA ones (cpp/cuda/*.cu): the padded-input extents the
// outputs read, where a filter tap lands in a transform plane, the overlap-save tile grid,
// PolyHankel's exponents (Eq. 11 corrected, Eq. 12), and the "gather" form of every plane the
// CUDA kernels fill: the value at one plane position, computed by one thread. The CPU tests
// (tests/cpp/test_fft_geometry.cpp) run exactly these functions through a float64 emulation of
// each CUDA pipeline, so the kernels' index math is tested without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/conv_index.hpp"

namespace convcore {
namespace fftg {

CONVCORE_HD int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Extent of a filter of k taps dilation dil apart.
CONVCORE_HD int64_t dilated_extent(int64_t k, int64_t dil) { return dil * (k - 1) + 1; }

// Stride-1 outputs that cover `out` outputs at `stride`: (out - 1) * stride + 1.
CONVCORE_HD int64_t stride1_outputs(int64_t out, int64_t stride) { return (out - 1) * stride + 1; }

// Padded-input rows (columns) the outputs read: (out - 1) * stride + dil * (k - 1) + 1 (Hu, Wu).
CONVCORE_HD int64_t used_extent(int64_t out, int64_t stride, int64_t k, int64_t dil) {
    return stride1_outputs(out, stride) + dilated_extent(k, dil) - 1;
}

// Element (i, j) of the zero-padded input plane (padded coordinates; i, j may pass the input:
// zero there), `plane` an h x w row-major image.
template <typename T>
CONVCORE_HD T padded_input(const T* plane, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w,
                           int64_t i, int64_t j) {
    const int64_t ih = i - pad_h, iw = j - pad_w;
    return ih >= 0 && ih < h && iw >= 0 && iw < w ? plane[ih * w + iw] : T(0);
}

// The filter tap of a dilated filter found at offset `d` of its extent along one axis (taps sit
// dil apart: offset r * dil holds tap r), as the index of the stored filter element
// (mirrored for true convolution); -1 where the offset holds no tap.
CONVCORE_HD int64_t tap_at(int64_t d, int64_t k, int64_t dil, bool flip) {
    if (d < 0 || d % dil != 0 || d / dil >= k) return -1;
    return conv_filter_tap(d / dil, k, flip);
}

// Element (i, j) of a filter plane for the cross-correlation form of the FFT algorithms (FFT,
// FFT_TILING): the R x S filter `f` (row-major) with tap (r, s) at (r * dil_h, s * dil_w) of an
// otherwise zero plane (mirrored for true convolution). Its spectrum, conjugated, times the
// input's is the cross-correlation whose first entries are the outputs.
template <typename T>
CONVCORE_HD T filter_plane(const T* f, int64_t r, int64_t s, int64_t dil_h, int64_t dil_w,
                           bool flip, int64_t i, int64_t j) {
    const int64_t tr = tap_at(i, r, dil_h, flip), ts = tap_at(j, s, dil_w, flip);
    return tr < 0 || ts < 0 ? T(0) : f[tr * s + ts];
}

// ---- FFT_TILING: overlap-save tiles -----------------------------------------------------------
// Th x Tw tiles of the padded input overlap by the dilated filter extent minus one; each gives
// (Th - Rd + 1) x (Tw - Sd + 1) stride-1 outputs that no cyclic wrap reaches.
struct TileGrid {
    int64_t th, tw;    // tile (FFT) size
    int64_t oh, ow;    // stride-1 outputs per tile
    int64_t nth, ntw;  // tiles per image
};
CONVCORE_HD TileGrid tile_grid(int64_t th, int64_t tw, int64_t rd, int64_t sd, int64_t ah, int64_t aw) {
    TileGrid g;
    g.th = th;
    g.tw = tw;
    g.oh = th - rd + 1;
    g.ow = tw - sd + 1;
    g.nth = ceil_div(ah, g.oh);
    g.ntw = ceil_div(aw, g.ow);
    return g;
}
// Padded-input origin of tile t (row-major over the image's tiles).
CONVCORE_HD int64_t tile_row0(const TileGrid& g, int64_t t) { return t / g.ntw * g.oh; }
CONVCORE_HD int64_t tile_col0(const TileGrid& g, int64_t t) { return t % g.ntw * g.ow; }
// The tile that computes stride-1 output row a (column b), and a's row inside it.
CONVCORE_HD int64_t tile_of(int64_t a, int64_t per_tile) { return a / per_tile; }
// Outputs o (at `stride`) whose stride-1 position o * stride lies in [a0, a0 + per_tile):
// [first, last), clipped to [0, out).
CONVCORE_HD TapRange tile_outputs(int64_t a0, int64_t per_tile, int64_t stride, int64_t out) {
    int64_t lo = ceil_div(a0, stride), hi = ceil_div(a0 + per_tile, stride);
    if (hi > out) hi = out;
    if (lo > hi) lo = hi;
    return {lo, hi};
}

// The GPU's tile size along one axis: the smallest power of two >= 32 that is at least twice the
// dilated filter extent (so that half a tile or more is outputs), or the whole extent
// `whole` (a fast FFT size >= outputs + extent - 1) when that is smaller.
CONVCORE_HD int64_t gpu_tile_size(int64_t extent, int64_t whole) {
    int64_t t = 32;
    while (t < 2 * extent && t < whole) t *= 2;
    return t < whole ? t : whole;
}

// ---- POLY_HANKEL (Xu et al., CGO'25) ----------------------------------------------------------
// With the padded input flattened with row stride Iw (Eq. 10), the reversed filter polynomial
// U(t) = sum u[i][j] t^(Iw*(Kh-1-i) + Kw-1-j) (Eq. 11 corrected: the paper's is off by one) and
// the outputs d[i][j] = p[Iw*(i + Kh-1) + j + Kw-1] of P(t) = A(t) U(t) (Eq. 12). i, j are
// offsets in the dilated Kh x Kw filter, and stride-1 output coordinates.
CONVCORE_HD int64_t poly_filter_exponent(int64_t iw, int64_t kh, int64_t kw, int64_t i, int64_t j) {
    return iw * (kh - 1 - i) + (kw - 1 - j);
}
CONVCORE_HD int64_t poly_output_index(int64_t iw, int64_t kh, int64_t kw, int64_t i, int64_t j) {
    return iw * (i + kh - 1) + j + kw - 1;
}
// Coefficient e (0 <= e < L) of U(t), the inverse of poly_filter_exponent (unique: Kw <= Iw).
template <typename T>
CONVCORE_HD T poly_filter_coeff(const T* f, int64_t r, int64_t s, int64_t dil_h, int64_t dil_w,
                                bool flip, int64_t iw, int64_t e) {
    const int64_t kh = dilated_extent(r, dil_h), kw = dilated_extent(s, dil_w);
    const int64_t ri = e / iw, rj = e % iw;  // (Kh-1-i, Kw-1-j)
    if (ri >= kh || rj >= kw) return T(0);
    return filter_plane(f, r, s, dil_h, dil_w, flip, kh - 1 - ri, kw - 1 - rj);
}
// Coefficient e of A(t): the Hu x Iw padded plane flattened (zero past it, up to L).
template <typename T>
CONVCORE_HD T poly_input_coeff(const T* plane, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w,
                               int64_t hu, int64_t iw, int64_t e) {
    const int64_t i = e / iw;
    return i < hu ? padded_input(plane, h, w, pad_h, pad_w, i, e % iw) : T(0);
}

// ---- FINE_GRAINED_FFT (Zhang et al., Electronics 2024) ------------------------------------------
// Output row p, filter row r reads padded-input row p * stride_h + r * dil_h (Section 4.5: the
// Hankel block of that row).
CONVCORE_HD int64_t fg_input_row(int64_t p, int64_t r, int64_t stride_h, int64_t dil_h) {
    return p * stride_h + r * dil_h;
}
// Element j of the row spectrum source of filter row r (dilated, mirrored for true convolution,
// placed at the start of a zero row of length L): the row whose conjugated spectrum gives the
// cross-correlation of that row.
template <typename T>
CONVCORE_HD T fg_filter_row(const T* f, int64_t r_total, int64_t s, int64_t dil_w, bool flip, int64_t r,
                            int64_t j) {
    const int64_t ts = tap_at(j, s, dil_w, flip);
    return ts < 0 ? T(0) : f[conv_filter_tap(r, r_total, flip) * s + ts];
}

// ---- GPU workspace layout -------------------------------------------------------------------------
// Sections carved from a CUDA workspace, each 256-byte aligned (cuFFT and cuBLAS want 256).
struct Sections {
    size_t end = 0;
    bool overflow = false;
    double wanted = 0;  // bytes asked for (past an overflow)
    // Reserves `count` elements of `elem` bytes; returns the section's offset.
    size_t add(double count, size_t elem) {
        const double bytes = count * double(elem);
        wanted += (bytes + 255.0);
        if (overflow || bytes > 9.0e18 - double(end)) {
            overflow = true;
            return 0;
        }
        const size_t off = end;
        end = (end + size_t(bytes) + 255) / 256 * 256;
        return off;
    }
    double total() const { return overflow ? wanted : double(end); }
    // Bytes to ask the caller for: the sections plus 256 bytes of slack to align its base
    // (aligned_base), which the C API only guarantees to be aligned to the element type.
    double with_slack() const { return total() + 256.0; }
};
inline char* aligned_base(void* ws) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ws);
    return reinterpret_cast<char*>((p + 255) & ~uintptr_t(255));
}

}  // namespace fftg
}  // namespace convcore
