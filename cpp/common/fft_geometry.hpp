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

// ---- the CUDA kernels' element functions ------------------------------------------------------
// Each CUDA fill / product / output kernel is a grid-stride loop calling one of these per element
// e (cuda/fft_family.hpp: for_each); tests/cpp/test_fft_geometry.cpp calls the same functions on
// the host, with naive float64 DFTs in place of cuFFT.

struct ImageShape {  // one input plane and its padding
    int64_t h, w, pad_h, pad_w;
};
struct FilterShape {  // one R x S filter, its dilation and mode
    int64_t r, s, dil_h, dil_w;
    bool flip;
};

// FFT: element e of the (image, channel) planes, Lh x Lw each: the padded input, zero past Hu x Wu.
template <typename T>
CONVCORE_HD T fft_input_elem(const T* x, const ImageShape& im, int64_t hu, int64_t wu, int64_t lh, int64_t lw,
                             int64_t e) {
    const int64_t b = e / (lh * lw), ij = e % (lh * lw), i = ij / lw, j = ij % lw;
    return i < hu && j < wu ? padded_input(x + b * im.h * im.w, im.h, im.w, im.pad_h, im.pad_w, i, j) : T(0);
}
// FFT, FFT_TILING: element e of the (filter, channel) planes, lh x lw each (filter_plane).
template <typename T>
CONVCORE_HD T filter_plane_elem(const T* w, const FilterShape& fs, int64_t lh, int64_t lw, int64_t e) {
    const int64_t b = e / (lh * lw), ij = e % (lh * lw);
    return filter_plane(w + b * fs.r * fs.s, fs.r, fs.s, fs.dil_h, fs.dil_w, fs.flip, ij / lw, ij % lw);
}
// FFT: the element of the (image, filter) inverse planes that output e (packed N x K x P x Q)
// reads: (i * stride_h, j * stride_w) of its plane.
CONVCORE_HD int64_t fft_output_source(int64_t e, int64_t p, int64_t q, int64_t stride_h, int64_t stride_w,
                                      int64_t lh, int64_t lw) {
    const int64_t nk = e / (p * q), ij = e % (p * q);
    return nk * lh * lw + ij / q * stride_h * lw + ij % q * stride_w;
}

// POLY_HANKEL: coefficient e of the (image, channel) polynomials A(t), L each (Eq. 10).
template <typename T>
CONVCORE_HD T poly_input_elem(const T* x, const ImageShape& im, int64_t hu, int64_t iw, int64_t len, int64_t e) {
    return poly_input_coeff(x + e / len * im.h * im.w, im.h, im.w, im.pad_h, im.pad_w, hu, iw, e % len);
}
// POLY_HANKEL: coefficient e of the (filter, channel) polynomials U(t), L each (Eq. 11 corrected).
template <typename T>
CONVCORE_HD T poly_filter_elem(const T* w, const FilterShape& fs, int64_t iw, int64_t len, int64_t e) {
    return poly_filter_coeff(w + e / len * fs.r * fs.s, fs.r, fs.s, fs.dil_h, fs.dil_w, fs.flip, iw, e % len);
}
// POLY_HANKEL: the coefficient of the (image, filter) products that output e reads (Eq. 12 at
// the stride-1 position (i * stride_h, j * stride_w)).
CONVCORE_HD int64_t poly_output_source(int64_t e, int64_t p, int64_t q, int64_t stride_h, int64_t stride_w,
                                       int64_t iw, int64_t kh, int64_t kw, int64_t len) {
    const int64_t nk = e / (p * q), ij = e % (p * q);
    return nk * len + poly_output_index(iw, kh, kw, ij / q * stride_h, ij % q * stride_w);
}

// FFT_TILING: the chunk of (image, tile) jobs [job0, job0 + chunk) of a call (jobs in all; the
// last chunk is padded with empty jobs).
struct TileChunk {
    TileGrid tg;
    int64_t job0, jobs;
};
// Element e of the chunk's (job, channel) tiles, Th x Tw each: the tile of the padded input
// (zero for the padding jobs).
template <typename T>
CONVCORE_HD T tile_input_elem(const T* x, const ImageShape& im, int64_t c, const TileChunk& ch, int64_t e) {
    const int64_t area = ch.tg.th * ch.tg.tw;
    const int64_t b = e / area, ij = e % area, job = ch.job0 + b / c;
    if (job >= ch.jobs) return T(0);
    const int64_t tiles = ch.tg.nth * ch.tg.ntw, n = job / tiles, t = job % tiles;
    return padded_input(x + (n * c + b % c) * im.h * im.w, im.h, im.w, im.pad_h, im.pad_w,
                        tile_row0(ch.tg, t) + ij / ch.tg.tw, tile_col0(ch.tg, t) + ij % ch.tg.tw);
}
// Stride-1 output e of the chunk's (job, filter) inverse tiles (oh x ow valid outputs each):
// the output it is (packed N x K x P x Q index), or -1 when it is off the stride grid, past the
// outputs or in a padding job; *src: the inverse-tile element holding it.
CONVCORE_HD int64_t tile_output_target(int64_t e, const TileChunk& ch, int64_t k, int64_t p, int64_t q,
                                       int64_t stride_h, int64_t stride_w, int64_t* src) {
    const TileGrid& tg = ch.tg;
    const int64_t per = tg.oh * tg.ow;
    const int64_t b = e / per, u = e % per / tg.ow, v = e % per % tg.ow;
    const int64_t job = ch.job0 + b / k, kk = b % k;
    if (job >= ch.jobs) return -1;
    const int64_t tiles = tg.nth * tg.ntw, n = job / tiles, t = job % tiles;
    const int64_t a = tile_row0(tg, t) + u, bc = tile_col0(tg, t) + v;
    if (a % stride_h != 0 || bc % stride_w != 0 || a / stride_h >= p || bc / stride_w >= q) return -1;
    *src = b * tg.th * tg.tw + u * tg.tw + v;
    return ((n * k + kk) * p + a / stride_h) * q + bc / stride_w;
}

// FINE_GRAINED_FFT: element e of the chunk's padded input rows ((image n0 + i, channel, row),
// L each; zero past Wu and for the images past n).
template <typename T>
CONVCORE_HD T fg_input_elem(const T* x, const ImageShape& im, int64_t c, int64_t hu, int64_t wu, int64_t len,
                            int64_t n0, int64_t n, int64_t e) {
    const int64_t row = e / len, j = e % len, i = row % hu, nc = row / hu, img = n0 + nc / c;
    return img < n && j < wu ? padded_input(x + (img * c + nc % c) * im.h * im.w, im.h, im.w, im.pad_h, im.pad_w, i, j)
                             : T(0);
}
// FINE_GRAINED_FFT: element e of the filter rows (((filter, channel), r), L each).
template <typename T>
CONVCORE_HD T fg_filter_elem(const T* w, const FilterShape& fs, int64_t len, int64_t e) {
    const int64_t row = e / len;
    return fg_filter_row(w + row / fs.r * fs.r * fs.s, fs.r, fs.s, fs.dil_w, fs.flip, row % fs.r, e % len);
}
// FINE_GRAINED_FFT's frequency-domain row product (Section 5.3): for element e = (image in
// chunk, group, block of KF filters, output row p, frequency f),
//   Y((image, k), p)[f] = sum_{c, r} X((image, g*cg + c), p*stride_h + r*dil_h)[f] * conj(W((k, c), r)[f])
// for the block's filters. C: a complex type with members x (real) and y (imaginary); spectra
// stored row after row, f spectrum entries each.
struct FgProduct {
    int64_t f, c, k, cg, kg, r, p, hu, stride_h, dil_h;
    int64_t kblocks;  // blocks of KF filters per group
};
template <int KF, typename C>
CONVCORE_HD void fg_row_product(const C* x, const C* w, C* y, const FgProduct& sh, int64_t e) {
    const int64_t fr = e % sh.f;
    int64_t t = e / sh.f;
    const int64_t pp = t % sh.p;
    t /= sh.p;
    const int64_t blocks = sh.k / sh.kg * sh.kblocks;
    const int64_t kb = t % blocks, nl = t / blocks;
    const int64_t grp = kb / sh.kblocks, k0 = grp * sh.kg + kb % sh.kblocks * KF;
    const int64_t kt = (grp + 1) * sh.kg - k0 < KF ? (grp + 1) * sh.kg - k0 : KF;
    decltype(C().x) re[KF], im[KF];
    for (int q = 0; q < KF; ++q) re[q] = im[q] = 0;
    for (int64_t cc = 0; cc < sh.cg; ++cc) {
        const int64_t xrow0 = (nl * sh.c + grp * sh.cg + cc) * sh.hu;
        for (int64_t rr = 0; rr < sh.r; ++rr) {
            const C xv = x[(xrow0 + fg_input_row(pp, rr, sh.stride_h, sh.dil_h)) * sh.f + fr];
            for (int q = 0; q < KF; ++q) {
                if (q < kt) {
                    const C wv = w[(((k0 + q) * sh.cg + cc) * sh.r + rr) * sh.f + fr];
                    re[q] += xv.x * wv.x + xv.y * wv.y;  // x * conj(w)
                    im[q] += xv.y * wv.x - xv.x * wv.y;
                }
            }
        }
    }
    for (int q = 0; q < KF; ++q) {
        if (q < kt) {
            C out;
            out.x = re[q];
            out.y = im[q];
            y[((nl * sh.k + k0 + q) * sh.p + pp) * sh.f + fr] = out;
        }
    }
}
// FINE_GRAINED_FFT: output row element e of the chunk ((image in chunk, filter, p), Q each): the
// output it is (packed N x K x P x Q index), or -1 for the images past n; *src: the inverse-row
// element holding it (entry q * stride_w of its row).
CONVCORE_HD int64_t fg_output_target(int64_t e, int64_t k, int64_t p, int64_t q, int64_t stride_w, int64_t len,
                                     int64_t n0, int64_t n, int64_t* src) {
    const int64_t row = e / q;  // (image in chunk * K + filter) * P + p
    if (n0 + row / (k * p) >= n) return -1;
    *src = row * len + e % q * stride_w;
    return n0 * k * p * q + e;
}

// The frequency-domain channel reduction of FFT, FFT_TILING and POLY_HANKEL for one element e of
// Y, in the frequency-major layouts of cuda::spectral_gemm (per frequency: X cols x c, W k x cg,
// Y cols x k, row-major): e = (f * cols + col) * k + kk,
//   Y[e] = sum_{cc < cg} X[f][col][g*cg + cc] * op(W[f][kk][cc]),  g = kk / (k / groups),
// op = conj or identity. C: a complex type with members x and y. The custom kernel
// spectral_gemm uses when the per-group GEMMs are too small for cuBLAS.
template <typename C>
CONVCORE_HD void grouped_product(const C* x, const C* w, C* y, int64_t cols, int64_t c, int64_t k, int64_t groups,
                                 bool conj, int64_t e) {
    const int64_t cg = c / groups, kg = k / groups;
    const int64_t kk = e % k, fc = e / k;  // fc = f * cols + col
    const int64_t f = fc / cols;
    const C* xr = x + fc * c + kk / kg * cg;
    const C* wr = w + (f * k + kk) * cg;
    decltype(C().x) re = 0, im = 0;
    for (int64_t cc = 0; cc < cg; ++cc) {
        const C a = xr[cc], b = wr[cc];
        if (conj) {
            re += a.x * b.x + a.y * b.y;
            im += a.y * b.x - a.x * b.y;
        } else {
            re += a.x * b.x - a.y * b.y;
            im += a.x * b.y + a.y * b.x;
        }
    }
    C out;
    out.x = re;
    out.y = im;
    y[e] = out;
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
