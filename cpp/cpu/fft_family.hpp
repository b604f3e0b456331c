// The engine the CPU FFT family shares (FFT, FFT_TILING, FINE_GRAINED_FFT, POLY_HANKEL):
//
//  * FFTW plans cached per shape. FFTW's planner is not thread-safe, so planning (and plan
//    destruction) happens under one mutex; executing a plan on new arrays
//    (fftw_execute_dft_r2c / _c2r) is thread-safe and is what the solvers do, from many
//    OpenMP threads at once. Plans are made with FFTW_ESTIMATE (microseconds; a new shape never
//    stalls a call), or FFTW_MEASURE when CONVCORE_FFTW_PLANNER=measure (0.01-1 s per new
//    shape, 0-50% faster transforms with Debian's FFTW 3.3.10, which has SSE2/AVX codelets only).
//    good_size() picks sizes that FFTW_ESTIMATE plans well. Transforms run in place on a
//    64-byte-aligned per-thread scratch plane (scratch()); FFTW never allocates during a call.
//  * The spectrum layout the products work on ("block-split panels", struct Layout): a spectrum
//    of F complex numbers is cut into blocks of B = 64 bytes / sizeof(T) complex numbers (16
//    floats, 8 doubles), each stored as B real parts then B imaginary parts and zero-padded to
//    Fp = roundup(F, B); a few consecutive blocks of a spectrum form a panel, and a set of S
//    spectra stores panel 0 of every spectrum, then panel 1, ...: the product walks its
//    reduction through one contiguous panel region, and a transform writes whole panels of
//    one spectrum. scatter_blocks / gather_blocks convert from / to FFTW's interleaved complex.
//  * FilterDft: the spectrum of a small filter placed in a large zero plane, computed directly
//    (a separable sparse DFT: R*S taps -> Lh x (Lw/2+1) frequencies, vectorised over the
//    frequencies) instead of by an FFT of the mostly-zero plane, and written straight into the
//    block layout. The column pass splits the Lh frequencies M = 4 (or 2) ways, one radix-4
//    (radix-2) step: R/M complex multiply-adds per frequency plus a butterfly. 3-10x faster than
//    FFTW here for R <= 25.
//  * The frequency-domain product, a complex "GEMM" over a reduction index:
//      Y(i, k) = sum_{c < nc} sum_{r < nr} X(i, c, r) * op(W(k, c, r)),  op = conj or identity,
//    per frequency, with register-tiled micro-kernels compiled for AVX-512, AVX2+FMA and
//    baseline SSE2 (the widest the CPU runs; CONVCORE_CPU_ISA=avx2 or baseline caps it, as for
//    IMPLICIT_GEMM).
//  * Workspace carving with 64-byte alignment of every section (the caller's base may be only
//    16-byte aligned: the solvers ask for 64 bytes of slack and align the base themselves), and
//    the workspace cap.
#pragma once
#include "core/fft_sizes.hpp"
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace convcore {
namespace cpu {
namespace fftc {

// The transform sizes and the workspace cap, shared with the CUDA FFT family (core/fft_sizes.hpp).
using fft::good_size;
using fft::good_size_multiple;
using fft::kWorkspaceCap;
using fft::size_weight;
using fft::too_big;

// Cost model (ns, fitted on one AMD EPYC Zen 5 core): an FFTW r2c or c2r per point and
// log2(points) (times size_weight), the direct filter DFT per frequency and filter row (after
// the split), the product per complex multiply-add; and a fixed cost per transform of a tile
// (the FFTW call and the tile's copies: without it FFT_TILING chooses 16x16 tiles on 100x100
// images, 12% slower than 16x64, and 16x32 on 160x160, 14% slower than 32x160; 2 threads,
// interleaved reps).
constexpr double kFftCost = 0.12, kDftCost = 0.08, kProductCost = 0.07, kFftCallCost = 200.0;

// Complex numbers per block of the block-split layout.
template <typename T>
constexpr int64_t block() {
    return int64_t(64 / sizeof(T));
}
// F rounded up to whole blocks.
template <typename T>
constexpr int64_t padded(int64_t f) {
    return (f + block<T>() - 1) / block<T>() * block<T>();
}
// The block layout of a set of spectra of f complex numbers. With a split m (1, 2 or 4: the
// filter DFT's radix step, see FilterDft), natural block j (frequencies [jB, jB+B)) is stored
// at position (j mod nb/m) * m + j div (nb/m), so that the m blocks one step of the filter
// DFT produces are adjacent; spectra are then cut into panels of pb stored blocks (a multiple
// of m, at most max(kPanel, m), spread evenly), and a set of S spectra stores panel 0 of every
// spectrum, then panel 1, ...: stored block sp of spectrum i sits at
// (sp / pb) * S * pu + i * pu + (sp % pb) * 2B, pu = pb * 2B.
constexpr int64_t kPanel = 4;
template <typename T>
struct Layout {
    int64_t f, nb, m, nbm, pb, np, pu;
    explicit Layout(int64_t f_, int64_t m_ = 1) : f(f_) {
        nb = padded<T>(f) / block<T>();
        m = nb % m_ == 0 ? m_ : 1;
        nbm = nb / m;
        const int64_t cap = std::max<int64_t>(1, kPanel / m);  // units of m blocks per panel
        const int64_t count = (nbm + cap - 1) / cap;
        const int64_t upp = (nbm + count - 1) / count;
        pb = upp * m;
        np = (nbm + upp - 1) / upp;
        pu = pb * 2 * block<T>();
    }
    int64_t stored(int64_t j) const { return (j % nbm) * m + j / nbm; }
    int64_t panel_blocks(int64_t ch) const { return std::min(pb, nb - ch * pb); }
    double set_elems(double spectra) const { return double(np) * double(pu) * spectra; }
};


// Carves 64-byte-aligned sections; total() includes 64 bytes of slack for aligning the base.
class Carver {
   public:
    // Reserves `count` elements of `elem` bytes; returns the section's offset from the base.
    size_t add(double count, size_t elem);
    // Past the overflow, the bytes that were asked for (for the "would need N GB" message).
    double total() const { return (overflow_ ? wanted_ : double(end_)) + 64.0; }
    bool overflow() const { return overflow_; }

   private:
    size_t end_ = 0;
    double wanted_ = 0;
    bool overflow_ = false;
};
// The 64-byte-aligned base of a workspace sized by Carver::total().
inline char* aligned_base(void* ws) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ws);
    return reinterpret_cast<char*>((p + 63) & ~uintptr_t(63));
}

// A 64-byte-aligned scratch buffer of at least `count` elements, owned by the calling thread
// (kept between calls; slots 0-3 are independent buffers: 0 a transform plane, 1 FilterDft's,
// 2 and 3 a solver's per-thread blocks of filter and output spectra).
template <typename T>
T* scratch(size_t count, int slot = 0);

// ---- FFTW plans ---------------------------------------------------------------------------

// `howmany` in-place real transforms of rank 1 (n1 == 0: length n0) or rank 2 (n0 x n1),
// consecutive transforms `dist` complex numbers apart (dist >= the transform's n/2+1 layout).
// Forward: real -> half spectrum (r2c). Backward: half spectrum -> real (c2r, unnormalised,
// destroys its input).
template <typename T>
class Plan {
   public:
    struct Impl;
    explicit Plan(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
    // In place on data (64-byte aligned, dist * howmany complex numbers).
    void forward(T* data) const;
    void backward(T* data) const;

   private:
    std::shared_ptr<Impl> impl_;
};
template <typename T>
Plan<T> get_plan(int64_t n0, int64_t n1, int64_t howmany, int64_t dist);
// One in-place real transform of rank 3 (n0 x n1 x n2, rows padded to 2 * (n2/2 + 1) reals).
template <typename T>
Plan<T> get_plan_3d(int64_t n0, int64_t n1, int64_t n2);

// ---- layout conversion --------------------------------------------------------------------

// f interleaved complex numbers -> the blocks of one spectrum of a set laid out by `lay`
// (dst: the spectrum's first panel; pstride = S * pu), zero-padded.
template <typename T>
void scatter_blocks(const T* src, const Layout<T>& lay, T* dst, int64_t pstride);
// The blocks of one spectrum of a set -> lay.f interleaved complex numbers.
template <typename T>
void gather_blocks(const T* src, const Layout<T>& lay, int64_t pstride, T* dst);

// ---- direct filter spectra ------------------------------------------------------------------

// Spectra of R x S filters whose taps (r, s) sit at (r * dil_h, s * dil_w) of an otherwise
// zero Lh x Lw real plane (lw == 0 for rank 1: R must be 1 and the plane is 1 x lh): the
// Lh x (Lw/2+1) half spectrum FFTW's r2c would give (same sign, unnormalised), block-split.
template <typename T>
class FilterDft {
   public:
    FilterDft(int64_t lh, int64_t lw, int64_t r, int64_t s, int64_t dil_h, int64_t dil_w);
    // Elements of T the twiddle tables and the row order need (carve them from the workspace).
    double table_elems() const;
    // Fills the tables (O(table_elems) plus Lh + Lw sines and cosines).
    void init(T* tables);
    int64_t spectrum() const { return f_; }
    // The split of the column pass (the Layout's m).
    int64_t split() const { return m_; }
    // The spectra of `count` filters (taps + i * R * S, row-major; mirrored in both axes when
    // `flip`) into a set laid out by `lay` (lay.m == split()): filter i's first panel at
    // dst + i * istride (istride may be negative), panels pstride apart.
    void run(const T* taps, int64_t count, bool flip, const Layout<T>& lay, T* dst,
             int64_t istride, int64_t pstride) const;

   private:
    int64_t text_elems() const { return r_ * 2 * wext_; }
    // First pass: the row spectra of `count` filters -> text + i * text_elems().
    void rows(const T* taps, int64_t count, bool flip, T* text) const;

    int64_t lh_, lw_, r_, s_, dh_, dw_;
    int64_t fw_, f_, nb_, wext_;  // Lw/2+1; Lh*fw; blocks; extended row length
    int64_t m_;                   // the column pass splits the Lh frequencies M ways (1, 2, 4)
    int64_t* rlist_ = nullptr;    // R filter rows ordered by (r * dil_h) mod M (in the tables)
    int64_t rcount_[4] = {0, 0, 0, 0};
    T* e_ = nullptr;              // nb/M x R x (B re, B im): column twiddles per block
    T* d_ = nullptr;              // S x (wext re, wext im): row twiddles (extended cyclically)
};

// ---- output ---------------------------------------------------------------------------------

// o[j] = scale * row[j * stride] (+ beta * o[j]; beta == 0 never reads o), j < n.
template <typename T>
inline void store_row(T* __restrict o, const T* __restrict row, int64_t n, int64_t stride, T scale,
                      T beta) {
    if (stride == 1) {
        if (beta == T(0))
            for (int64_t j = 0; j < n; ++j) o[j] = scale * row[j];
        else
            for (int64_t j = 0; j < n; ++j) o[j] = scale * row[j] + beta * o[j];
    } else {
        if (beta == T(0))
            for (int64_t j = 0; j < n; ++j) o[j] = scale * row[j * stride];
        else
            for (int64_t j = 0; j < n; ++j) o[j] = scale * row[j * stride] + beta * o[j];
    }
}

// ---- the frequency-domain product ---------------------------------------------------------

// Offsets (in elements of T) between consecutive spectra along each index, and between
// consecutive blocks of one spectrum (x_b, w_b, y_b: 2B inside a panel).
template <typename T>
struct Product {
    const T* x;
    int64_t x_i, x_c, x_r, x_b;
    const T* w;
    int64_t w_k, w_c, w_r, w_b;
    T* y;
    int64_t y_i, y_k, y_b;
    int64_t ni, nk, nc, nr;
    bool conj_w;  // multiply by conj(W) (cross-correlation) instead of W
};
// Blocks [b0, b1) of every Y(i, k) of the product (overwritten).
template <typename T>
void product(const Product<T>& p, int64_t b0, int64_t b1);

// The instruction set the kernels use ("avx512", "avx2" or "baseline").
const char* product_isa();

}  // namespace fftc
}  // namespace cpu
}  // namespace convcore
