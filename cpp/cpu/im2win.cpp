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
// Workspace (elements): NB*C*P*Wp*R (the im2win tensor of NB images at a time, NB = the
// images that fit in 32 MiB, at least 1) + groups*ceil((K/g)/KB)*KB*S*(C/g)*R (the packed
// filter), KB = 32 for float32 and 16 for float64. Independent of the thread count.
// Everything is supported: any stride, padding, dilation, groups, both modes.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/conv_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CONVCORE_X86_DISPATCH 1
#endif
#pragma GCC diagnostic ignored "-Wpsabi"

namespace convcore {
namespace cpu {

namespace {

#define IW_INLINE inline __attribute__((always_inline))

constexpr int64_t TRANSFORM_BYTES = 32 << 20;  // im2win tensor of one block of images
constexpr int MAX_NR = 12;

template <typename T>
constexpr int64_t kb_of() {
    return sizeof(T) == 8 ? 16 : 32;  // output channels per register tile (64 / 128 bytes)
}
int64_t kb_of(const ConvProblem& p) { return p.dtype == CONVCORE_DATA_DOUBLE ? 16 : 32; }

struct Geometry {
    int64_t wp;         // strip columns
    int64_t crs;        // (C/g)*R: one strip column
    int64_t win_len;    // S*(C/g)*R
    int64_t per_image;  // im2win elements of one image: C*P*Wp*R
    int64_t nb;         // images per block
    int64_t kblocks;    // ceil((K/g)/KB)
    int64_t filt;       // packed filter elements
};

Geometry geometry(const ConvProblem& p) {
    Geometry g{};
    const int64_t kb = kb_of(p);
    g.wp = (p.q - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
    g.crs = p.c_per_group() * p.r;
    g.win_len = p.s * g.crs;
    g.per_image = p.c * p.p * g.wp * p.r;
    g.nb = std::clamp<int64_t>(TRANSFORM_BYTES / std::max<int64_t>(1, g.per_image * int64_t(p.elem_size())), 1, p.n);
    g.kblocks = (p.k_per_group() + kb - 1) / kb;
    g.filt = p.groups * g.kblocks * kb * g.win_len;
    return g;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IM2WIN runs float32 and float64 only";
    return "";
}

size_t workspace_bytes(const ConvProblem& p) {
    const Geometry g = geometry(p);
    return size_t(g.nb * g.per_image + g.filt) * p.elem_size();
}

template <typename T>
struct Job {
    const T* x;
    T* y;
    const T* win;   // im2win tensor of the current block of images
    const T* wpk;   // packed filter
    int64_t c, h, w, k, p, q, cg, kg, r, s, groups;
    int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    int64_t wp, crs, win_len, kblocks;
    T alpha, beta;
};

// ---- micro-kernel: KB output channels (NV vectors) x NR output columns --------------------

template <typename T, int VB, int NV, int NR>
struct Micro {
    typedef T V __attribute__((vector_size(VB)));
    static constexpr int VL = VB / sizeof(T);
    static constexpr int KB = NV * VL;
    static_assert(KB == kb_of<T>(), "register tile must cover one packed filter block");

    // tile[i][k] = sum over the window of columns q_i (window i starts at win + i*col_step):
    // `chunks` runs of `len` contiguous elements, run s at s*chunk_step, filter row j*KB.
    static IW_INLINE void run(const T* __restrict win, int64_t col_step, int64_t chunks,
                              int64_t chunk_step, int64_t len, const T* __restrict f, T* tile) {
        V acc[NR][NV];
        for (int i = 0; i < NR; ++i)
            for (int v = 0; v < NV; ++v) acc[i][v] = V{};
        const T* wi[NR];
        for (int i = 0; i < NR; ++i) wi[i] = win + i * col_step;
        for (int64_t s = 0; s < chunks; ++s) {
            const int64_t off = s * chunk_step;
            for (int64_t j = 0; j < len; ++j, f += KB) {
                V fv[NV];
                for (int v = 0; v < NV; ++v) __builtin_memcpy(&fv[v], f + v * VL, VB);
#pragma GCC unroll 16
                for (int i = 0; i < NR; ++i) {
                    const V b = V{} + wi[i][off + j];  // broadcast
                    for (int v = 0; v < NV; ++v) acc[i][v] += b * fv[v];
                }
            }
        }
        for (int i = 0; i < NR; ++i)
            for (int v = 0; v < NV; ++v) __builtin_memcpy(tile + i * KB + v * VL, &acc[i][v], VB);
    }
};

// One output row p of image n (block-local index nl for the im2win tensor), group g, filter
// block kb: every output column, NR at a time (the last group of columns repeats the last
// column's window; its extra results are dropped).
template <typename T, int VB, int NV, int NR>
IW_INLINE void row_kernel(const Job<T>& jb, int64_t n, int64_t nl, int64_t g, int64_t p, int64_t kb) {
    using K = Micro<T, VB, NV, NR>;
    constexpr int KB = K::KB;
    const int64_t k0 = kb * KB, kn = std::min<int64_t>(KB, jb.kg - k0);
    const T* strip = jb.win + ((nl * jb.groups + g) * jb.p + p) * jb.wp * jb.crs;
    const T* f = jb.wpk + (g * jb.kblocks + kb) * KB * jb.win_len;
    const int64_t col_step = jb.stride_w * jb.crs;
    const bool contiguous = jb.dil_w == 1;
    const int64_t chunks = contiguous ? 1 : jb.s, len = contiguous ? jb.win_len : jb.crs;
    const int64_t chunk_step = jb.dil_w * jb.crs;
    const int64_t pq = jb.p * jb.q;
    T* yrow = jb.y + (n * jb.k + g * jb.kg + k0) * pq + p * jb.q;
    alignas(64) T tile[NR * KB];
    for (int64_t q0 = 0; q0 < jb.q; q0 += NR) {
        const int64_t qn = std::min<int64_t>(NR, jb.q - q0);
        if (qn == NR) {
            K::run(strip + q0 * col_step, col_step, chunks, chunk_step, len, f, tile);
        } else {  // last columns: repeat the last window (its results are not stored)
            const T* base = strip + q0 * col_step;
            alignas(64) T part[NR * KB];
            // Run on a window base shifted so that all NR windows exist, then pick ours.
            const int64_t shift = NR - qn <= q0 ? NR - qn : 0;
            if (shift == NR - qn) {
                K::run(base - shift * col_step, col_step, chunks, chunk_step, len, f, part);
                for (int64_t i = 0; i < qn; ++i)
                    std::memcpy(tile + i * KB, part + (i + shift) * KB, KB * sizeof(T));
            } else {  // fewer than NR columns in the whole row: one column at a time
                for (int64_t i = 0; i < qn; ++i) {
                    Micro<T, VB, NV, 1>::run(base + i * col_step, col_step, chunks, chunk_step, len, f,
                                             part);
                    std::memcpy(tile + i * KB, part, KB * sizeof(T));
                }
            }
        }
        // tile[i][k] -> y[k0 + k][p][q0 + i], with the alpha/beta blend (beta == 0: no read).
        for (int64_t k = 0; k < kn; ++k) {
            T* yk = yrow + k * pq + q0;
            if (jb.beta == T(0)) {
                for (int64_t i = 0; i < qn; ++i) yk[i] = jb.alpha * tile[i * KB + k];
            } else {
                for (int64_t i = 0; i < qn; ++i) yk[i] = jb.alpha * tile[i * KB + k] + jb.beta * yk[i];
            }
        }
    }
}

template <typename T>
using RowFn = void (*)(const Job<T>&, int64_t, int64_t, int64_t, int64_t, int64_t);

#define IW_ENTRY(NAME, ATTR, VB, NV32, NV64, NR)                                                   \
    ATTR void NAME##_f32(const Job<float>& jb, int64_t n, int64_t nl, int64_t g, int64_t p,       \
                         int64_t kb) {                                                            \
        row_kernel<float, VB, NV32, NR>(jb, n, nl, g, p, kb);                                     \
    }                                                                                             \
    ATTR void NAME##_f64(const Job<double>& jb, int64_t n, int64_t nl, int64_t g, int64_t p,      \
                         int64_t kb) {                                                            \
        row_kernel<double, VB, NV64, NR>(jb, n, nl, g, p, kb);                                    \
    }

// KB = 32 floats / 16 doubles per tile row: NV vectors of VB bytes; NR columns; NR*NV
// accumulators in about half the vector registers (plus the NV filter vectors).
IW_ENTRY(baseline, , 16, 8, 8, 1)
#ifdef CONVCORE_X86_DISPATCH
IW_ENTRY(avx2, __attribute__((target("avx2,fma"))), 32, 4, 4, 3)
IW_ENTRY(avx512, __attribute__((target("avx512f,fma"))), 64, 2, 2, 12)
#endif

struct Kernels {
    RowFn<float> f32;
    RowFn<double> f64;
};

Kernels pick_kernels() {
#ifdef CONVCORE_X86_DISPATCH
    const char* env = std::getenv("CONVCORE_CPU_ISA");
    const std::string cap = env ? env : "";
    if (cap != "avx2" && cap != "baseline" && __builtin_cpu_supports("avx512f")) return {avx512_f32, avx512_f64};
    if (cap != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return {avx2_f32, avx2_f64};
#endif
    return {baseline_f32, baseline_f64};
}

const Kernels& kernels() {
    static const Kernels k = pick_kernels();
    return k;
}

RowFn<float> row_fn(float*) { return kernels().f32; }
RowFn<double> row_fn(double*) { return kernels().f64; }

// ---- transforms -------------------------------------------------------------------------------

// wpk[g][kb][j = (s, c, r)][KB] = w[g*K/g + kb*KB + k][c][r][s] (flipped taps for true
// convolution); rows k >= K/g are zero.
template <typename T>
void pack_filter(const ConvProblem& pr, const T* w, T* wpk, int64_t kblocks, int threads) {
    constexpr int64_t KB = kb_of<T>();
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
            int64_t j = 0;
            for (int64_t s = 0; s < pr.s; ++s)
                for (int64_t c = 0; c < cg; ++c)
                    for (int64_t r = 0; r < pr.r; ++r, ++j) {
                        const int64_t fr = conv_filter_tap(r, pr.r, pr.flip);
                        const int64_t fs = conv_filter_tap(s, pr.s, pr.flip);
                        dst[j * KB + k] = wk[(c * pr.r + fr) * pr.s + fs];
                    }
        }
    }
}

// The im2win strips of images n0 .. n0 + nb - 1: one task per (image, group, output row).
template <typename T>
void im2win(const ConvProblem& pr, const Geometry& gm, const T* x, T* win, int64_t n0, int64_t nb,
            int threads) {
    const int64_t cg = pr.c_per_group(), hw = pr.h * pr.w, crs = gm.crs;
    const int64_t tasks = nb * pr.groups * pr.p;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
        const int64_t p = t % pr.p, g = t / pr.p % pr.groups, nl = t / (pr.p * pr.groups);
        T* strip = win + t * gm.wp * crs;  // [wc][c][r]
        // Columns wc that read inside the input: iw = wc - pad_w in [0, w).
        const int64_t wc0 = std::min(gm.wp, pr.pad_w), wc1 = std::clamp(pr.w + pr.pad_w, wc0, gm.wp);
        for (int64_t wc = 0; wc < wc0; ++wc) std::fill(strip + wc * crs, strip + (wc + 1) * crs, T(0));
        for (int64_t wc = wc1; wc < gm.wp; ++wc) std::fill(strip + wc * crs, strip + (wc + 1) * crs, T(0));
        const T* xg = x + ((n0 + nl) * pr.c + g * cg) * hw;
        for (int64_t r = 0; r < pr.r; ++r) {
            const int64_t ih = conv_input_coord(p, r, pr.pad_h, pr.stride_h, pr.dil_h);
            for (int64_t c = 0; c < cg; ++c) {
                T* d = strip + c * pr.r + r;
                if (ih < 0 || ih >= pr.h) {
                    for (int64_t wc = wc0; wc < wc1; ++wc) d[wc * crs] = T(0);
                    continue;
                }
                const T* xr = xg + c * hw + ih * pr.w;  // input column wc - pad_w
                for (int64_t wc = wc0; wc < wc1; ++wc) d[wc * crs] = xr[wc - pr.pad_w];
            }
        }
    }
}

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& pr = a.prob;
    const int threads = a.ctx.threads();
    const Geometry gm = geometry(pr);
    T* ws = static_cast<T*>(a.workspace);
    T* win = ws;
    T* wpk = ws + gm.nb * gm.per_image;
    pack_filter<T>(pr, static_cast<const T*>(a.w), wpk, gm.kblocks, threads);

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
    const RowFn<T> fn = row_fn(static_cast<T*>(nullptr));

    for (int64_t n0 = 0; n0 < pr.n; n0 += gm.nb) {
        const int64_t nb = std::min(gm.nb, pr.n - n0);
        im2win<T>(pr, gm, jb.x, win, n0, nb, threads);
        // One task per (image, group, filter block, output row): the strip of a row stays in
        // cache while its filter blocks run over it.
        const int64_t tasks = nb * pr.groups * pr.p * gm.kblocks;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            const int64_t kb = t % gm.kblocks, p = t / gm.kblocks % pr.p;
            const int64_t g = t / (gm.kblocks * pr.p) % pr.groups, nl = t / (gm.kblocks * pr.p * pr.groups);
            fn(jb, n0 + nl, nl, g, p, kb);
        }
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

}  // namespace

extern const Solver im2win_solver;
const Solver im2win_solver = {CONVCORE_FWD_ALGO_IM2WIN, CONVCORE_DEVICE_CPU, /*deterministic=*/true,
                              why_not, workspace_bytes, run};

}  // namespace cpu
}  // namespace convcore
