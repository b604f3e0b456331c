// IM2WIN on the CPU (paper 002, Lu et al.; Sec. 3.1 Eq. 2 and the micro-kernel of Sec. 3.3).
//
// The im2win transform copies, for every output row p, the R input rows its windows read
// (rows p*stride_h - pad_h + r*dil_h) into one strip, column by column, so that the windows of
// the row's outputs lie one after the other: output q's window starts at column q*stride_w.
// The paper's tensor is N x C x P x (W*R) (Eq. 2: column w of the strip holds the R vertical
// taps of input column w); convcore moves the channels of a group inside each column,
//   win[n][g][p][wc][c][r] = x[n][g*C/g + c][p*stride_h - pad_h + r*dil_h][wc - pad_w]
// (zero outside the input), wc in [0, Wp), Wp = (Q-1)*stride_w + (S-1)*dil_w + 1, so that one
// output's window over all its input channels, S*(C/g)*R values, is contiguous (dil_w == 1;
// otherwise S contiguous runs of (C/g)*R, dil_w columns apart). Same element count as the
// paper's tensor (R/S-fold less than im2col's (C/g)*R*S*P*Q for stride 1).
//
// The kernel is the paper's micro-kernel, an outer product per window element: a register
// tile of KB output channels x NR output columns of one output row accumulates
//   acc[i][k] += win[window of q_i][j] * wpack[k][j]
// over j walking the window contiguously in memory (a broadcast of the window element times
// a vector of KB packed filter values: the vector lanes run over output channels, because a
// window alone, e.g. 9 values for a 3x3 filter, does not fill a vector). The filter is packed
// once per call into the workspace as [g][K/g block of KB][j = (s, c, r)][KB] (zero rows pad
// the last block), flipped for true convolution. Kernels for AVX-512, AVX2+FMA and baseline
// SSE2 (the best the CPU runs; CONVCORE_CPU_ISA=avx2|baseline caps it).
//
// Two schedules (run_typed): units of a few output rows, each made into strips and computed by
// one thread in its own slot of the band buffer (the default), or, for small outputs, bands of
// output rows (of all images, row gr = n*P + p), as many as fit in 4 MiB, transformed by all
// threads and then computed by all. Workspace (elements): B*C*Wp*R (the im2win strips of one
// band of B = clamp(4 MiB / (C*Wp*R*elem), 1, N*P) rows) + groups*ceil((K/g)/KB)*KB*S*(C/g)*R (the
// packed filter), KB = 32 for float32 (16 where K/g <= 16) and 16 for float64. Independent of
// the thread count.
// Everything is supported: any stride, padding, dilation, groups, both modes.
#include <omp.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/conv_index.hpp"
#include "common/im2win_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/scratch.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace convcore {
namespace cpu {

namespace {

#define IW_INLINE inline __attribute__((always_inline))

constexpr int64_t BAND_BYTES = 4 << 20;  // im2win strips transformed at a time (about L2 + a bit of L3)
constexpr int64_t POS_CHUNK = 96;  // output positions per task (a multiple of every NR)

// Output channels per register tile and packed filter block: 32 floats / 16 doubles (128 bytes),
// or 16 floats where a group has at most 16 output channels (the narrow float kernels; a
// 32-wide tile would waste half of its multiply-adds).
int64_t kb_of(const ConvProblem& p) {
    return p.dtype == CONVCORE_DATA_DOUBLE || p.k_per_group() <= 16 ? 16 : 32;
}

struct Geometry {
    int64_t wp;         // strip columns
    int64_t crs;        // (C/g)*R: one strip column
    int64_t win_len;    // S*(C/g)*R
    int64_t row_elems;  // im2win elements of one output row (all groups): C*Wp*R
    int64_t band;       // output rows (of all images, n-major) transformed at a time
    int64_t kblocks;    // ceil((K/g)/KB)
    int64_t filt;       // packed filter elements
};

Geometry geometry(const ConvProblem& p) {
    Geometry g{};
    const int64_t kb = kb_of(p);
    g.wp = im2win::strip_cols(p.q, p.s, p.stride_w, p.dil_w);
    g.crs = p.c_per_group() * p.r;
    g.win_len = p.s * g.crs;
    g.row_elems = p.c * g.wp * p.r;
    g.band = std::clamp<int64_t>(BAND_BYTES / std::max<int64_t>(1, g.row_elems * int64_t(p.elem_size())), 1,
                                 p.n * p.p);
    g.kblocks = (p.k_per_group() + kb - 1) / kb;
    g.filt = p.groups * g.kblocks * kb * g.win_len;
    return g;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IM2WIN runs float32 and float64 only";
    // The workspace is at most a band of BAND_BYTES (or one output row of windows) plus the
    // packed filter; in double, since for huge shapes the int64 products of geometry() overflow.
    const double es = double(p.elem_size());
    const double wp = double(p.q - 1) * double(p.stride_w) + double(p.s - 1) * double(p.dil_w) + 1;
    const double row = double(p.c) * wp * double(p.r) * es;
    const double filt = (double(p.k) + double(p.groups) * double(kb_of(p))) * double(p.s) *
                        double(p.c_per_group()) * double(p.r) * es;
    if (double(BAND_BYTES) + row + filt > 0x1p62)
        return "IM2WIN: its workspace (a band of window rows and the packed filter) would exceed "
               "2^62 bytes for this problem";
    return "";
}

size_t workspace_bytes(const ConvProblem& p) {
    const Geometry g = geometry(p);
    return size_t(g.band * g.row_elems + g.filt) * p.elem_size();
}

template <typename T>
struct Job {
    const T* x;
    T* y;
    const T* win;   // strips of the band (shared schedule) or of the thread's unit (private)
    const T* wpk;   // packed filter
    int64_t c, h, w, k, p, q, cg, kg, r, s, groups;
    int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    int64_t wp, crs, win_len, kblocks;
    int64_t gr0;  // first global output row (n*P + p) in the im2win band
    T alpha, beta;
};

// ---- micro-kernel: KB output channels (NV vectors) x NR output columns --------------------

template <typename T, int VB, int NV, int NR>
struct Micro {
    typedef T V __attribute__((vector_size(VB)));
    static constexpr int VL = VB / sizeof(T);
    static constexpr int KB = NV * VL;
    static_assert(KB == 16 || KB == 32, "a register tile covers one packed filter block");

    // tile[i][k] = sum over the window of output position i (it starts at wi[i]) of window
    // element times packed filter row: `chunks` runs of `len` contiguous elements, run s at
    // s*chunk_step, filter row j at f + j*KB.
    static IW_INLINE void run(const T* const* wi_in, int64_t chunks, int64_t chunk_step, int64_t len,
                              const T* __restrict f, T* tile) {
        V acc[NR][NV];
        for (int i = 0; i < NR; ++i)
            for (int v = 0; v < NV; ++v) acc[i][v] = V{};
        const T* wi[NR];
        for (int i = 0; i < NR; ++i) wi[i] = wi_in[i];
        for (int64_t s = 0; s < chunks; ++s) {
            const int64_t off = s * chunk_step;
            for (int64_t j = 0; j < len; ++j, f += KB) {
                V fv[NV];
                for (int v = 0; v < NV; ++v) __builtin_memcpy(&fv[v], f + v * VL, VB);
#pragma GCC unroll 16
                for (int i = 0; i < NR; ++i) {
                    // scalar * vector: one broadcast (building the vector by hand, or "V{} + x",
                    // gets lowered lane by lane or adds a zero first)
                    const T b = wi[i][off + j];
                    for (int v = 0; v < NV; ++v) acc[i][v] += b * fv[v];
                }
            }
        }
        for (int i = 0; i < NR; ++i)
            for (int v = 0; v < NV; ++v) __builtin_memcpy(tile + i * KB + v * VL, &acc[i][v], VB);
    }
};

#ifdef CONVCORE_X86_DISPATCH
// y[k * ldy + i] = src[i][k] for i < rows, k < cols (both <= 16): a transpose in
// registers (16x16 by unpacks, in-lane shuffles and two rounds of 128-bit block shuffles),
// stored with a lane mask.
__attribute__((target("avx512f"))) inline void transpose_16(const float* const* src, int rows, int cols,
                                                            float* y, int64_t ldy) {
    __m512 r[16], t[16], u[16], col[16];
    for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_loadu_ps(src[i]) : _mm512_setzero_ps();
    for (int i = 0; i < 8; ++i) {  // t[4q..4q+3]: pairs of rows 4q..4q+3 interleaved
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int q = 0; q < 4; ++q) {  // u[4q + c], 128-bit block L: element 4L + c of rows 4q..4q+3
        u[4 * q + 0] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
        u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {  // column 4L + c = block L of u[c], u[4 + c], u[8 + c], u[12 + c]
        const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        const __m512 w0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD), w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        col[c] = _mm512_shuffle_f32x4(v0, v1, 0x88);
        col[8 + c] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
        col[4 + c] = _mm512_shuffle_f32x4(w0, w1, 0x88);
        col[12 + c] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
    }
    const __mmask16 mask = __mmask16((1u << rows) - 1);
    for (int k = 0; k < cols; ++k) _mm512_mask_storeu_ps(y + k * ldy, mask, col[k]);
}

// Strip columns [wc, wc + 16) from input rows rp[0 .. crs) (the transform's inner loops,
// d[t * crs + j] = rp[j][wc + off + t]), 16 rows at a time through transpose_16: the scalar
// gather was ~10% of IM2WIN's time on 3-channel 7x7 layers (perf).
__attribute__((target("avx512f"))) void strip_columns_16(const float* const* rp, int64_t crs, int64_t col,
                                                        float* d) {
    const float* src[16];
    for (int64_t j0 = 0; j0 < crs; j0 += 16) {
        const int rows = int(std::min<int64_t>(16, crs - j0));
        for (int i = 0; i < 16; ++i) src[i] = rp[j0 + std::min(i, rows - 1)] + col;
        transpose_16(src, rows, 16, d + j0, crs);
    }
}
#endif

// Output positions [pos0, pos1) (flattened p*Q + q) of image n, group g, filter block kb, NR
// positions at a time: NR windows, possibly from several output rows. [lo, hi) are the
// positions of image n whose rows are in the current band (the im2win tensor holds the
// global output rows gr0 .. gr0 + band - 1, gr = n*P + p). When fewer than NR positions are
// left, the last NR positions of [lo, hi) are recomputed and only the missing ones stored
// (with fewer than NR positions in [lo, hi): one position at a time).
template <typename T, int VB, int NV, int NR>
IW_INLINE void pos_kernel(const Job<T>& jb, int64_t n, int64_t g, int64_t kb, int64_t pos0, int64_t pos1,
                          int64_t lo, int64_t hi) {
    using K = Micro<T, VB, NV, NR>;
    constexpr int KB = K::KB;
    const int64_t k0 = kb * KB, kn = std::min<int64_t>(KB, jb.kg - k0);
    const T* f = jb.wpk + (g * jb.kblocks + kb) * KB * jb.win_len;
    const bool contiguous = jb.dil_w == 1;
    const int64_t chunks = contiguous ? 1 : jb.s, len = contiguous ? jb.win_len : jb.crs;
    const int64_t chunk_step = jb.dil_w * jb.crs;
    const int64_t pq = jb.p * jb.q, row0 = n * jb.p - jb.gr0;  // band row of output row 0
    T* yk0 = jb.y + (n * jb.k + g * jb.kg + k0) * pq;
    alignas(64) T tile[NR * KB];
    // The run's outputs, channel-major (ybuf[k][pos - pos0]), written to y by whole rows at
    // the end. Each tile's masked stores straight into y's channel planes (12 positions, often
    // across two cache lines, in 32 planes) had been ~11% of the time on 3-channel 7x7 layers
    // (perf, waiting on the lines); the copy-out is ~4% with the prefetch below.
    alignas(64) T ybuf[KB * POS_CHUNK];
    const T* wi[NR];
    // The y rows this run writes, prefetched into L2 while its tiles are computed, so that
    // the copy-out at the end does not wait for each line's fetch for ownership (perf, one
    // thread, IM2WIN conv3: the copy-out 8% -> 4% of the time; measured 1-4% faster, variants
    // interleaved in rotation with PyTorch; into L1 (prefetchw) it did no better).
    for (int64_t k = 0; k < kn; ++k) {
        const char* row = reinterpret_cast<const char*>(yk0 + k * pq + pos0);
        const int64_t bytes = (pos1 - pos0) * int64_t(sizeof(T));
        for (int64_t o = 0; o < bytes + 63; o += 64) __builtin_prefetch(row + o, 0, 2);
    }
    auto window = [&](int64_t pos) {
        return jb.win + im2win::window_start(row0 + pos / jb.q, g, pos % jb.q, jb.groups, jb.wp, jb.crs, jb.stride_w);
    };
    for (int64_t a = pos0; a < pos1; a += NR) {
        const int64_t qn = std::min<int64_t>(NR, pos1 - a);
        int64_t first = a;  // positions computed: first .. first + NR - 1
        if (qn == NR || hi - lo >= NR) {
            first = std::min(a, hi - NR);
            // The NR windows of positions first.. (one division, then stepping along the row:
            // a division per window cost ~2% of the time on 3-channel 7x7 layers).
            int64_t op = first / jb.q, oq = first % jb.q;
            for (int i = 0; i < NR; ++i) {
                wi[i] = jb.win + im2win::window_start(row0 + op, g, oq, jb.groups, jb.wp, jb.crs, jb.stride_w);
                if (++oq == jb.q) oq = 0, ++op;
            }
            K::run(wi, chunks, chunk_step, len, f, tile);
        } else {
            for (int64_t i = 0; i < qn; ++i) {
                wi[0] = window(a + i);
                Micro<T, VB, NV, 1>::run(wi, chunks, chunk_step, len, f, tile + i * KB);
            }
        }
        const T* t0 = tile + (a - first) * KB;  // t0[i*KB + k]: position a + i
        T* yb = ybuf + (a - pos0);
#ifdef CONVCORE_X86_DISPATCH
        if constexpr (std::is_same_v<T, float> && VB == 64) {  // in registers, 16x16 at a time
            for (int64_t i0 = 0; i0 < qn; i0 += 16) {
                const int64_t rows = std::min<int64_t>(16, qn - i0);
                const float* src[16];
                for (int i = 0; i < 16; ++i) src[i] = t0 + (i0 + std::min<int64_t>(i, rows - 1)) * KB;
                for (int64_t k = 0; k < kn; k += 16) {
                    transpose_16(src, int(rows), int(std::min<int64_t>(16, kn - k)),
                                 yb + k * POS_CHUNK + i0, POS_CHUNK);
                    for (int i = 0; i < 16; ++i) src[i] += 16;
                }
            }
            continue;
        }
#endif
        for (int64_t k = 0; k < kn; ++k)
            for (int64_t i = 0; i < qn; ++i) yb[k * POS_CHUNK + i] = t0[i * KB + k];
    }
    // ybuf -> y[k0 + k][pos0 ..pos1), with the alpha/beta blend (beta == 0: y is not read).
    const int64_t npos = pos1 - pos0;
    for (int64_t k = 0; k < kn; ++k) {
        T* __restrict yk = yk0 + k * pq + pos0;
        const T* __restrict src = ybuf + k * POS_CHUNK;
        if (jb.beta == T(0)) {
            for (int64_t i = 0; i < npos; ++i) yk[i] = jb.alpha * src[i];
        } else {
            for (int64_t i = 0; i < npos; ++i) yk[i] = jb.alpha * src[i] + jb.beta * yk[i];
        }
    }
}

template <typename T>
using RowFn = void (*)(const Job<T>&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);

#define IW_ENTRY(NAME, ATTR, VB, NV32, NV64, NR)                                                   \
    ATTR void NAME##_f32(const Job<float>& jb, int64_t n, int64_t g, int64_t kb, int64_t pos0,    \
                         int64_t pos1, int64_t lo, int64_t hi) {                                  \
        pos_kernel<float, VB, NV32, NR>(jb, n, g, kb, pos0, pos1, lo, hi);                        \
    }                                                                                             \
    ATTR void NAME##_f64(const Job<double>& jb, int64_t n, int64_t g, int64_t kb, int64_t pos0,   \
                         int64_t pos1, int64_t lo, int64_t hi) {                                  \
        pos_kernel<double, VB, NV64, NR>(jb, n, g, kb, pos0, pos1, lo, hi);                       \
    }

// The narrow float kernels: KB = 16 (kb_of). AVX-512: 16 x 12, one filter vector and 12
// broadcasts per 12 multiply-adds; 1.65-1.75x the 32-wide tile's speed on 16 -> 16 channel
// layers (PolyHankel's sweeps, 2 threads; bench/results/cpu-2026-11-23-s7.md). 16 x 16 and
// 16 x 24 are no faster: the 16-24 window pointers no longer fit the registers and are
// reloaded for every broadcast.
#define IW_ENTRY_NARROW(NAME, ATTR, VB, NV, NR)                                                    \
    ATTR void NAME##_f32_narrow(const Job<float>& jb, int64_t n, int64_t g, int64_t kb,          \
                                int64_t pos0, int64_t pos1, int64_t lo, int64_t hi) {             \
        pos_kernel<float, VB, NV, NR>(jb, n, g, kb, pos0, pos1, lo, hi);                          \
    }

// KB = 32 floats / 16 doubles per tile row: NV vectors of VB bytes; NR columns; NR*NV
// accumulators in about half the vector registers (plus the NV filter vectors).
IW_ENTRY(baseline, , 16, 8, 8, 1)
IW_ENTRY_NARROW(baseline, , 16, 4, 2)
#ifdef CONVCORE_X86_DISPATCH
IW_ENTRY(avx2, __attribute__((target("avx2,fma"))), 32, 4, 4, 3)
IW_ENTRY_NARROW(avx2, __attribute__((target("avx2,fma"))), 32, 2, 6)
IW_ENTRY(avx512, __attribute__((target("avx512f,fma"))), 64, 2, 2, 12)
IW_ENTRY_NARROW(avx512, __attribute__((target("avx512f,fma"))), 64, 1, 12)
#endif

struct Kernels {
    RowFn<float> f32, f32_narrow;
    RowFn<double> f64;
    bool avx512;  // the AVX-512 kernels: the strips may use transpose_16 too
};

Kernels pick_kernels() {
#ifdef CONVCORE_X86_DISPATCH
    if (cpu_isa() == CpuIsa::avx512) return {avx512_f32, avx512_f32_narrow, avx512_f64, true};
    if (cpu_isa() == CpuIsa::avx2) return {avx2_f32, avx2_f32_narrow, avx2_f64, false};
#endif
    return {baseline_f32, baseline_f32_narrow, baseline_f64, false};
}

const Kernels& kernels() {
    static const Kernels k = pick_kernels();
    return k;
}

RowFn<float> row_fn(float*, int64_t kb) { return kb == 16 ? kernels().f32_narrow : kernels().f32; }
RowFn<double> row_fn(double*, int64_t) { return kernels().f64; }

// ---- transforms -------------------------------------------------------------------------------

// wpk[g][kb][j = (s, c, r)][KB] = w[g*K/g + kb*KB + k][c][r][s] (flipped taps for true
// convolution); rows k >= K/g are zero.
template <typename T>
void pack_filter(const ConvProblem& pr, const T* w, T* wpk, int64_t kblocks, int threads) {
    const int64_t KB = kb_of(pr);
    const int64_t cg = pr.c_per_group(), kg = pr.k_per_group(), len = pr.s * cg * pr.r;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t gb = 0; gb < pr.groups * kblocks; ++gb) {
        const int64_t g = gb / kblocks, kb = gb % kblocks;
        T* dst = wpk + gb * KB * len;
        for (int64_t k = 0; k < KB; ++k) {
            const int64_t kl = kb * KB + k;
            if (kl >= kg) {
                for (int64_t j = 0; j < len; ++j) dst[j * KB + k] = T(0);
                continue;
            }
            const T* wk = w + (g * kg + kl) * cg * pr.r * pr.s;
            int64_t j = 0;  // j = (ts * cg + c) * R + tr, as im2win::filter_elem decomposes it
            for (int64_t ts = 0; ts < pr.s; ++ts)
                for (int64_t c = 0; c < cg; ++c)
                    for (int64_t tr = 0; tr < pr.r; ++tr, ++j)
                        dst[j * KB + k] = wk[im2win::filter_tap_offset(c, tr, ts, pr.r, pr.s, pr.flip)];
        }
    }
}

// The im2win strip [wc][c][r] of global output row gr (= n*P + p), group g. It is written in
// order (column wc, then channel c, then tap r); the C/g*R input rows it reads advance
// together one element per column, so they stay in L1. rowp and live: scratch of C/g*R entries.
template <typename T>
void im2win_strip(const ConvProblem& pr, const Geometry& gm, const T* x, T* strip, int64_t gr, int64_t g,
                  std::vector<const T*>& rowp, std::vector<int64_t>& live) {
    const int64_t cg = pr.c_per_group(), hw = pr.h * pr.w, crs = gm.crs;
    const int64_t n = gr / pr.p, p = gr % pr.p;
    // Columns wc that read inside the input: iw = wc - pad_w in [0, w).
    const int64_t wc0 = std::min(gm.wp, pr.pad_w), wc1 = std::clamp(pr.w + pr.pad_w, wc0, gm.wp);
    std::fill(strip, strip + wc0 * crs, T(0));
    std::fill(strip + wc1 * crs, strip + gm.wp * crs, T(0));
    const T* xg = x + (n * pr.c + g * cg) * hw;
    bool all_live = true;
    rowp.resize(size_t(crs));
    live.clear();
    for (int64_t c = 0; c < cg; ++c)
        for (int64_t r = 0; r < pr.r; ++r) {
            const int64_t ih = conv_input_coord(p, r, pr.pad_h, pr.stride_h, pr.dil_h);
            const bool in = ih >= 0 && ih < pr.h;
            rowp[size_t(c * pr.r + r)] = in ? xg + c * hw + ih * pr.w : nullptr;
            if (in) live.push_back(c * pr.r + r);
            all_live = all_live && in;
        }
    const T* const* rp = rowp.data();
    const int64_t off = -pr.pad_w;  // input column of strip column wc: wc + off
    if (all_live) {
        int64_t wc = wc0;
#ifdef CONVCORE_X86_DISPATCH
        if constexpr (std::is_same_v<T, float>)
            if (kernels().avx512)  // 16 columns at a time
                for (; wc + 16 <= wc1; wc += 16) strip_columns_16(rp, crs, wc + off, strip + wc * crs);
#endif
        for (; wc < wc1; ++wc) {
            T* d = strip + wc * crs;
            for (int64_t j = 0; j < crs; ++j) d[j] = rp[j][wc + off];
        }
    } else {
        for (int64_t wc = wc0; wc < wc1; ++wc) {
            T* d = strip + wc * crs;
            std::fill(d, d + crs, T(0));
            for (const int64_t j : live) d[j] = rp[j][wc + off];
        }
    }
}

// Every (position run, group, filter block) task of the band rows gr0 .. gr0 + rows - 1
// (their strips at jb.win, jb.gr0 == gr0), in runs of up to POS_CHUNK positions of one image.
// fn(n, g, kb, pos0, pos1, lo, hi) for task index t of count().
struct StripRows;  // thread_vector sites
struct StripLive;
struct BandTasks {
    struct Run {
        int64_t n, pos0, pos1, lo, hi;
    };
    std::vector<Run>& runs = thread_vector<Run, BandTasks>();  // this thread's, kept between calls
    int64_t groups = 1, kblocks = 1;
    void build(const ConvProblem& pr, int64_t kb, int64_t gr0, int64_t rows) {
        groups = pr.groups, kblocks = kb;
        runs.clear();
        for (int64_t n = gr0 / pr.p; n * pr.p < gr0 + rows; ++n) {
            const int64_t lo = (std::max(gr0, n * pr.p) - n * pr.p) * pr.q;
            const int64_t hi = (std::min(gr0 + rows, (n + 1) * pr.p) - n * pr.p) * pr.q;
            for (int64_t p0 = lo; p0 < hi; p0 += POS_CHUNK) runs.push_back({n, p0, std::min(hi, p0 + POS_CHUNK), lo, hi});
        }
    }
    // The filter blocks of a run follow one another, so its windows stay in cache.
    int64_t count() const { return int64_t(runs.size()) * groups * kblocks; }
    template <typename T>
    void run(RowFn<T> fn, const Job<T>& jb, int64_t t) const {
        const int64_t kb = t % kblocks, g = t / kblocks % groups;
        const Run& r = runs[size_t(t / (kblocks * groups))];
        fn(jb, r.n, g, kb, r.pos0, r.pos1, r.lo, r.hi);
    }
};

// Output rows per unit of the private schedule (run_typed): enough positions that the last
// partial tile of a unit is rare (UNIT_POSITIONS), at least 8 units per thread, and at most
// the thread's slot of the band. 0: the shared schedule, where the band is shorter than the
// thread count or a unit would have under MIN_UNIT_POSITIONS (small images: there the
// shared schedule's tasks of whole images balance better and waste fewer partial tiles;
// measured on 20x20 and 10x10 outputs, 3-4% and 11% faster than 1-2 row units).
constexpr int64_t UNIT_POSITIONS = 768, MIN_UNIT_POSITIONS = 192;
int64_t unit_rows(const ConvProblem& pr, const Geometry& gm, int threads) {
    const int64_t slot = gm.band / threads, total = pr.n * pr.p;
    const int64_t u = std::min({(UNIT_POSITIONS + pr.q - 1) / pr.q, (total + 8 * threads - 1) / (8 * int64_t(threads)), slot});
    return u >= 1 && u * pr.q >= MIN_UNIT_POSITIONS ? u : 0;
}

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& pr = a.prob;
    const int threads = a.ctx.threads();
    const Geometry gm = geometry(pr);
    T* ws = static_cast<T*>(a.workspace);
    T* win = ws;
    // The packed filter: prepared by the plan (prepare below), else packed into the workspace.
    const T* wpk = static_cast<const T*>(a.prepared_filter);
    if (!wpk) {
        T* packed = ws + gm.band * gm.row_elems;
        pack_filter<T>(pr, static_cast<const T*>(a.w), packed, gm.kblocks, threads);
        wpk = packed;
    }

    Job<T> jb{};
    jb.x = static_cast<const T*>(a.x);
    jb.y = static_cast<T*>(a.y);
    jb.win = win;
    jb.wpk = wpk;
    jb.c = pr.c, jb.h = pr.h, jb.w = pr.w, jb.k = pr.k, jb.p = pr.p, jb.q = pr.q;
    jb.cg = pr.c_per_group(), jb.kg = pr.k_per_group(), jb.r = pr.r, jb.s = pr.s, jb.groups = pr.groups;
    jb.pad_h = pr.pad_h, jb.pad_w = pr.pad_w, jb.stride_h = pr.stride_h, jb.stride_w = pr.stride_w;
    jb.dil_h = pr.dil_h, jb.dil_w = pr.dil_w;
    jb.wp = gm.wp, jb.crs = gm.crs, jb.win_len = gm.win_len, jb.kblocks = gm.kblocks;
    jb.alpha = T(a.alpha), jb.beta = T(a.beta);
    const RowFn<T> fn = row_fn(static_cast<T*>(nullptr), kb_of(pr));
    const int64_t total_rows = pr.n * pr.p, strip_elems = gm.wp * gm.crs;

    // The private schedule: units of a few output rows handed out dynamically; a thread makes
    // a unit's strips in its own slot of the band buffer and runs all of the unit's tasks
    // itself, so strips never pass between threads and there is no barrier per band (data
    // that one thread writes and another reads costs most when they do not share a cache).
    // Cold caches, private against shared: ResNet-50 conv1 2.98 against 3.20 ms on one
    // thread, 1.73 against 1.85 on two (bench/results/cpu-2026-11-23-s7.md).
    if (const int64_t ur = unit_rows(pr, gm, threads); ur > 0) {
        const int64_t units = (total_rows + ur - 1) / ur;
#pragma omp parallel num_threads(threads)
        {
            // Each thread's buffers, sized before the dynamic schedule decides which threads
            // work: a repeated call allocates nothing however the units fall.
            std::vector<const T*>& rowp = thread_vector<const T*, StripRows>();
            std::vector<int64_t>& live = thread_vector<int64_t, StripLive>();
            rowp.reserve(size_t(gm.crs));
            live.reserve(size_t(gm.crs));
            BandTasks tasks;
            tasks.runs.reserve(size_t(ur + 2 + ur * pr.q / POS_CHUNK));
            T* const slot = win + int64_t(omp_get_thread_num()) * ur * gm.row_elems;
            Job<T> mine = jb;
            mine.win = slot;
#pragma omp for schedule(dynamic, 1)
            for (int64_t u = 0; u < units; ++u) {
                const int64_t gr0 = u * ur, rows = std::min(ur, total_rows - gr0);
                for (int64_t i = 0; i < rows * pr.groups; ++i)
                    im2win_strip<T>(pr, gm, jb.x, slot + i * strip_elems, gr0 + i / pr.groups,
                                    i % pr.groups, rowp, live);
                mine.gr0 = gr0;
                tasks.build(pr, gm.kblocks, gr0, rows);
                for (int64_t t = 0; t < tasks.count(); ++t) tasks.run(fn, mine, t);
            }
        }
        return;
    }

    // The shared schedule, band by band: the strips (win[(row - gr0) * groups + g]), then the
    // band's tasks.
    BandTasks tasks;
    for (int64_t gr0 = 0; gr0 < total_rows; gr0 += gm.band) {
        const int64_t rows = std::min(gm.band, total_rows - gr0);
#pragma omp parallel num_threads(threads)
        {
            std::vector<const T*>& rowp = thread_vector<const T*, StripRows>();
            std::vector<int64_t>& live = thread_vector<int64_t, StripLive>();
            rowp.reserve(size_t(gm.crs));  // before the dynamic schedule (above)
            live.reserve(size_t(gm.crs));
#pragma omp for schedule(dynamic)
            for (int64_t i = 0; i < rows * pr.groups; ++i)
                im2win_strip<T>(pr, gm, jb.x, win + i * strip_elems, gr0 + i / pr.groups, i % pr.groups, rowp, live);
        }
        jb.gr0 = gr0;
        tasks.build(pr, gm.kblocks, gr0, rows);
#pragma omp parallel for num_threads(threads) schedule(dynamic)
        for (int64_t t = 0; t < tasks.count(); ++t) tasks.run(fn, jb, t);
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

size_t prepared_bytes(const ConvProblem& pr) { return size_t(geometry(pr).filt) * pr.elem_size(); }

void prepare(const ConvProblem& pr, const Context& ctx, const void* w, void* out) {
    const Geometry gm = geometry(pr);
    if (pr.dtype == CONVCORE_DATA_DOUBLE)
        pack_filter<double>(pr, static_cast<const double*>(w), static_cast<double*>(out), gm.kblocks, ctx.threads());
    else
        pack_filter<float>(pr, static_cast<const float*>(w), static_cast<float*>(out), gm.kblocks, ctx.threads());
}

}  // namespace

extern const Solver im2win_solver;
const Solver im2win_solver = {.algo = CONVCORE_FWD_ALGO_IM2WIN, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .prepared_filter_bytes = prepared_bytes, .prepare_filter = prepare, .made_for = made_for::general};

}  // namespace cpu
}  // namespace convcore
