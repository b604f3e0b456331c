// IMPLICIT_GEMM on the CPU: the GEMM of IM2COL_GEMM,
//   Y[n, group] (Kg x PQ) = alpha * W[group] (Kg x L) * col (L x PQ) + beta * Y,  L = Cg*R*S,
// without materialising col. Each task owns a tile of KT output channels x NB output
// positions (flattened p*Q+q) and walks the reduction in chunks of LB rows l = (c, fr, fs):
// it unfolds just that LB x NB piece of col into a small per-thread panel (L1/L2 sized), then
// register-tiled micro-kernels (MR channels x NR positions) accumulate into a KT x NB tile,
// which the alpha/beta epilogue writes out. W is read in place: for a fixed channel its
// row w[k][0..L) is contiguous, and true convolution flips the taps inside the panel
// instead of the filter. No workspace (the panels are a few dozen KB of scratch per thread).
//
// The row path (K/g <= 4, unit stride along the rows, a small filter bank): a GEMM with at
// most 4 rows wastes most of the micro-kernel's MR rows, and unfolding col costs more than the
// few multiplies per unfolded value. There the output row is the vector dimension instead. Per
// task (an image, a group, a block of ROWS_PB output rows) the input rows the block reads are
// copied once per channel into a zero-padded per-thread buffer, xb[c][i][j] = x[c][ih0 + i]
// [j - pad_w] (0 outside the image), and NR consecutive outputs (p, q..q+NR) accumulate
// w[k][c][fr][fs] * xb[c][row(p, fr)][q + s*dil_w ..] over (c, fr, fs): unaligned vector loads
// straight from the buffer, up to 4 output channels per load. With unit stride and dilation
// along the rows two output rows are computed together (each loaded vector feeds both), and
// with one output channel per group a chunk is twice as wide. The sum is one float chain of
// C*R*S terms per output, as in the GEMM path (filter rows in tap order, i.e. descending fr
// for true convolution), so the error bound is the same. Single-channel images (Pitas'
// 512x512) and depthwise layers take this path.
//
// NHWC runs natively: the GEMM of cpu/nhwc_gemm.hpp (output pixels x output channels, A read
// in place tap by tap, the filter transposed once to Wt in the workspace or a plan's prepared
// filters), with vectors along the output channels, narrowed for groups of few channels.
//
// The micro-kernels are written with GCC/Clang vector types; on x86-64 they are compiled three
// times (AVX-512, AVX2+FMA, baseline SSE2) and the widest one the CPU runs is picked.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/nhwc_gemm.hpp"
#include "cpu/scratch.hpp"


namespace convcore {
namespace cpu {

namespace {

// thread_vector sites
struct RowsScratch;
struct TapColumns;
struct TapOutputs;
struct PanelScratch;
struct PanelSegments;

constexpr int64_t KT = 64;   // output channels per task
constexpr int64_t LB = 128;  // reduction rows per panel
constexpr int64_t NB_TARGET = 128;  // output positions per task (rounded to a multiple of NR)
constexpr int64_t GUIDED_MAX_LEN = 160;  // reduction rows up to which tasks are scheduled guided

#define CONVCORE_ALWAYS_INLINE inline __attribute__((always_inline))

// c[i][0..NR) += sum_l w[i*ldw + l] * b[l*ldb + 0..NR) for i < MR, NR = NV vectors of VB
// bytes. The MR x NV accumulators stay in registers; GCC/Clang vector types spell out the
// vectorisation so that it does not depend on the auto-vectoriser (acc += w * b contracts
// to an FMA where the target has one).
template <typename T, int MR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void micro(int64_t len, const T* __restrict w, int64_t ldw,
                                  const T* __restrict b, int64_t ldb, T* __restrict c,
                                  int64_t ldc) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);  // lanes
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&acc[i][j], c + i * ldc + j * L, VB);
    for (int64_t l = 0; l < len; ++l) {
        V bv[NV];
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&bv[j], b + l * ldb + j * L, VB);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const V wi = V{} + w[i * ldw + l];  // broadcast
#pragma GCC unroll 16
            for (int j = 0; j < NV; ++j) acc[i][j] += wi * bv[j];
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) __builtin_memcpy(c + i * ldc + j * L, &acc[i][j], VB);
}

// Rows [i, kt) of one strip of NV vectors: MR rows at a time, then MR/2, ... down to 1.
template <typename T, int MR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void strip(int64_t i, int64_t kt, int64_t len, const T* w, int64_t ldw,
                                  const T* b, int64_t ldb, T* c, int64_t ldc) {
    for (; i + MR <= kt; i += MR)
        micro<T, MR, NV, VB>(len, w + i * ldw, ldw, b, ldb, c + i * ldc, ldc);
    if constexpr (MR > 1) strip<T, MR / 2, NV, VB>(i, kt, len, w, ldw, b, ldb, c, ldc);
}

// c (kt x nbp, row stride ldc) += w (kt x len, row stride ldw) * b (len x nbp, row stride ldb);
// nbp is a multiple of the strip width NR = NV * VB / sizeof(T).
template <typename T, int MR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void panel_gemm(int64_t kt, int64_t nbp, int64_t len, const T* w,
                                       int64_t ldw, const T* b, int64_t ldb, T* c, int64_t ldc) {
    constexpr int64_t NR = NV * VB / sizeof(T);
    for (int64_t j = 0; j < nbp; j += NR)
        strip<T, MR, NV, VB>(0, kt, len, w, ldw, b + j, ldb, c + j, ldc);
}

template <typename T>
using PanelGemm = void (*)(int64_t, int64_t, int64_t, const T*, int64_t, const T*, int64_t, T*,
                           int64_t);

// ---- the row path -------------------------------------------------------------------------------

constexpr int64_t ROWS_MAX_KG = 4;                 // output channels per group
constexpr int64_t ROWS_PB = 8;                     // output rows per task
constexpr int64_t ROWS_MAX_BUFFER_BYTES = 512 << 10;  // a task's input rows, per thread
constexpr int64_t ROWS_MAX_FILTER = 1024;          // (C/g)*R*S

// The buffer of one task: `rows` input rows per channel, each `wp` long (the outputs rounded up
// to whole vectors, plus the dilated filter width minus one).
struct RowsGeometry {
    int64_t rows, wp;
};

RowsGeometry rows_geometry(const ConvProblem& p, int64_t nr) {
    const int64_t qv = (p.q + nr - 1) / nr * nr;
    return {(ROWS_PB - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1, qv + (p.s - 1) * p.dil_w};
}

bool rows_path_applies(const ConvProblem& p, int64_t nr) {
    if (p.k_per_group() > ROWS_MAX_KG || p.stride_w != 1 ||
        double(p.c_per_group()) * double(p.r) * double(p.s) > double(ROWS_MAX_FILTER))
        return false;
    const RowsGeometry rg = rows_geometry(p, nr);
    return double(p.c_per_group()) * double(rg.rows) * double(rg.wp) * double(p.elem_size()) <=
           double(ROWS_MAX_BUFFER_BYTES);
}

// Outputs (p + i, q0 .. q0 + NR) for i < PR of KG output channels from the task's buffer xb
// (see the header). y: output (p, q0) of the first of the KG channels (channel k at
// y + k * ldy, row p + i at y + i * Q); cols: how many of the NR outputs exist; out: one vector
// of scratch. PR > 1 needs unit stride and dilation along the rows: then PR output rows share
// the input rows they read, and each vector loaded from one of the R + PR - 1 input rows feeds
// every output row it belongs to (fewer loads per multiply-add).
template <typename T, int KG, int PR, int NV, int VB>
CONVCORE_ALWAYS_INLINE void rows_chunk(const ConvProblem& pr, const T* __restrict xb, int64_t rows,
                                       int64_t wp, int64_t prow, int64_t q0,
                                       const T* __restrict wk, int64_t len, T* __restrict y,
                                       int64_t ldy, int64_t cols, double a_alpha, double a_beta,
                                       T* __restrict out) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    V acc[KG][PR][NV];
#pragma GCC unroll 16
    for (int k = 0; k < KG; ++k)
#pragma GCC unroll 16
        for (int i = 0; i < PR; ++i)
#pragma GCC unroll 16
            for (int j = 0; j < NV; ++j) acc[k][i][j] = V{};
    const int64_t taps = pr.r * pr.s, channels = len / taps;
    // Input row `row` (of the R + PR - 1 this chunk reads, relative to output row prow's first)
    // meets output row i at filter tap row `row - i`; filter row fr reads tap row
    // conv_filter_tap(fr), so fr = conv_filter_tap(row - i) (the map is its own inverse).
    // Per output the taps are summed channel by channel, tap row by tap row (ascending fr for
    // cross-correlation, descending for convolution), fs ascending: one float chain of C*R*S.
    const int64_t in_rows = PR == 1 ? pr.r : pr.r + PR - 1;
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t row = 0; row < in_rows; ++row) {
            const int64_t xrow = PR == 1 ? prow * pr.stride_h + row * pr.dil_h : prow + row;
            const T* br = xb + (c * rows + xrow) * wp + q0;
            for (int64_t fs = 0; fs < pr.s; ++fs) {
                const T* bp = br + conv_filter_tap(fs, pr.s, pr.flip) * pr.dil_w;
                V xv[NV];
#pragma GCC unroll 16
                for (int j = 0; j < NV; ++j) __builtin_memcpy(&xv[j], bp + j * L, VB);
#pragma GCC unroll 16
                for (int i = 0; i < PR; ++i) {
                    if (row - i < 0 || row - i >= pr.r) continue;
                    const int64_t l = c * taps + conv_filter_tap(row - i, pr.r, pr.flip) * pr.s + fs;
#pragma GCC unroll 16
                    for (int k = 0; k < KG; ++k) {
                        const V wv = V{} + wk[k * len + l];  // broadcast
#pragma GCC unroll 16
                        for (int j = 0; j < NV; ++j) acc[k][i][j] += wv * xv[j];
                    }
                }
            }
        }
    // y = alpha * acc + beta * y (beta == 0 never reads y): whole vectors straight from the
    // registers, the partial last vector of a row through `out` (L elements of scratch).
    const T alpha = T(a_alpha), beta = T(a_beta);
#pragma GCC unroll 16
    for (int k = 0; k < KG; ++k)
#pragma GCC unroll 16
        for (int i = 0; i < PR; ++i)
#pragma GCC unroll 16
            for (int j = 0; j < NV; ++j) {
                T* yv = y + k * ldy + i * pr.q + j * L;
                const int64_t left = cols - int64_t(j) * L;
                if (left >= L) {
                    V r = acc[k][i][j] * alpha;
                    if (beta != T(0)) {
                        V old;
                        __builtin_memcpy(&old, yv, VB);
                        r += old * beta;
                    }
                    __builtin_memcpy(yv, &r, VB);
                } else if (left > 0) {
                    __builtin_memcpy(out, &acc[k][i][j], VB);
                    for (int64_t e = 0; e < left; ++e) blend_store(yv + e, out[e], alpha, beta);
                }
            }
}

// One task of the row path: image n, group g, output rows [p0, p1). xb: the thread's buffer
// (C/g * rows * wp), out: one vector of scratch for a row's partial last vector.
template <typename T>
struct RowsTask {
    const ConvArgs* a;
    int64_t n, g, p0, p1;
    T* xb;
    T* out;
};

// Output rows [p, p + PR) of KG channels: chunks of NVW vectors while whole ones fit in the
// row, then chunks of NV vectors (the last one partial).
template <typename T, int KG, int PR, int NVW, int NV, int VB>
CONVCORE_ALWAYS_INLINE void rows_pass(const RowsTask<T>& tk, const RowsGeometry& rg, const T* xb,
                                      const T* wk, int64_t len, int64_t p) {
    constexpr int64_t NRW = NVW * VB / sizeof(T), NR = NV * VB / sizeof(T);
    const ConvProblem& pr = tk.a->prob;
    const int64_t pq = pr.p * pr.q;
    T* y = static_cast<T*>(tk.a->y) + (tk.n * pr.k + tk.g * KG) * pq + p * pr.q;
    int64_t q0 = 0;
    if constexpr (NVW != NV)
        for (; q0 + NRW <= pr.q; q0 += NRW)
            rows_chunk<T, KG, PR, NVW, VB>(pr, xb, rg.rows, rg.wp, p - tk.p0, q0, wk, len, y + q0,
                                           pq, NRW, tk.a->alpha, tk.a->beta, tk.out);
    for (; q0 < pr.q; q0 += NR)
        rows_chunk<T, KG, PR, NV, VB>(pr, xb, rg.rows, rg.wp, p - tk.p0, q0, wk, len, y + q0, pq,
                                      std::min(NR, pr.q - q0), tk.a->alpha, tk.a->beta, tk.out);
}

// Output rows [tk.p0, tk.p1) of KG channels, two rows at a time where the rows allow it (unit
// stride and dilation along the rows). With one output channel per group (single-channel
// images, depthwise layers) a chunk has twice the vectors while it fits: KG * PR * NV
// independent FMA chains must cover the FMA latency.
template <typename T, int KG, int NV, int VB>
CONVCORE_ALWAYS_INLINE void rows_rows(const RowsTask<T>& tk, const RowsGeometry& rg, const T* xb,
                                      const T* wk, int64_t len) {
    constexpr int NVW = KG == 1 ? 2 * NV : NV;
    constexpr int REGISTERS = VB >= 64 ? 32 : 16;  // vector registers: AVX-512 has 32
    constexpr int PR = KG <= 2 && KG * 2 * NVW + NVW + 1 <= REGISTERS ? 2 : 1;
    const ConvProblem& pr = tk.a->prob;
    int64_t p = tk.p0;
    if (PR > 1 && pr.stride_h == 1 && pr.dil_h == 1)
        for (; p + PR <= tk.p1; p += PR) rows_pass<T, KG, PR, NVW, NV, VB>(tk, rg, xb, wk, len, p);
    for (; p < tk.p1; ++p) rows_pass<T, KG, 1, NVW, NV, VB>(tk, rg, xb, wk, len, p);
}

template <typename T, int NV, int VB>
CONVCORE_ALWAYS_INLINE void rows_task(const RowsTask<T>& tk) {
    constexpr int64_t NR = 2 * NV * VB / sizeof(T);  // the widest chunk (one channel per group)
    const ConvArgs& a = *tk.a;
    const ConvProblem& pr = a.prob;
    const int64_t cg = pr.c_per_group(), kg = pr.k_per_group(), len = cg * pr.r * pr.s;
    const int64_t hw = pr.h * pr.w;
    const RowsGeometry rg = rows_geometry(pr, NR);
    const int64_t ih0 = conv_input_coord(tk.p0, 0, pr.pad_h, pr.stride_h, pr.dil_h);
    const T* xg = static_cast<const T*>(a.x) + (tk.n * pr.c + tk.g * cg) * hw;
    T* xb = tk.xb;
    // xb[c][i][j] = x[c][ih0 + i][j - pad_w], zero outside the image.
    for (int64_t c = 0; c < cg; ++c)
        for (int64_t i = 0; i < rg.rows; ++i) {
            T* d = xb + (c * rg.rows + i) * rg.wp;
            const int64_t ih = ih0 + i;
            if (ih < 0 || ih >= pr.h) {
                std::fill(d, d + rg.wp, T(0));
                continue;
            }
            const T* xr = xg + c * hw + ih * pr.w;
            const int64_t j0 = std::min(rg.wp, pr.pad_w), j1 = std::clamp(pr.pad_w + pr.w, j0, rg.wp);
            std::fill(d, d + j0, T(0));
            std::copy(xr + (j0 - pr.pad_w), xr + (j1 - pr.pad_w), d + j0);
            std::fill(d + j1, d + rg.wp, T(0));
        }
    const T* wk = static_cast<const T*>(a.w) + tk.g * kg * len;
    switch (kg) {
        case 1: rows_rows<T, 1, NV, VB>(tk, rg, xb, wk, len); break;
        case 2: rows_rows<T, 2, NV, VB>(tk, rg, xb, wk, len); break;
        case 3: rows_rows<T, 3, NV, VB>(tk, rg, xb, wk, len); break;
        default: rows_rows<T, 4, NV, VB>(tk, rg, xb, wk, len); break;
    }
}

template <typename T>
using RowsTaskFn = void (*)(const RowsTask<T>&);

// The whole convolution on the row path; the OpenMP loop lives here, outside the ISA-specific
// functions (GCC outlines an OpenMP region without its enclosing function's target ISA).
template <typename T>
void rows_run(const ConvArgs& a, RowsTaskFn<T> task, int64_t nr) {
    const ConvProblem& pr = a.prob;
    const RowsGeometry rg = rows_geometry(pr, nr);
    const int64_t blocks = (pr.p + ROWS_PB - 1) / ROWS_PB;
    const int64_t tasks = pr.n * pr.groups * blocks;
    const int threads = a.ctx.threads();
    const int64_t per_thread = pr.c_per_group() * rg.rows * rg.wp + nr;
    std::vector<T>& scratch = thread_vector<T, RowsScratch>(size_t(threads * per_thread));  // outside OpenMP: may throw

    // Guided: a thread's first tasks are consecutive row blocks, whose input and output rows
    // the hardware prefetchers stream (single dynamic tasks jump between images and groups;
    // a depthwise 32-channel 112x112 layer: 0.13 against 0.22 ms;
    // bench/results/cpu-2026-11-23-s6.md). The shrinking chunks still balance the end.
#pragma omp parallel for num_threads(threads) schedule(guided)
    for (int64_t t = 0; t < tasks; ++t) {
        const int64_t block = t % blocks, g = t / blocks % pr.groups, n = t / (blocks * pr.groups);
        T* xb = scratch.data() + omp_get_thread_num() * per_thread;
        const int64_t p0 = block * ROWS_PB;
        task({&a, n, g, p0, std::min(pr.p, p0 + ROWS_PB), xb, xb + (per_thread - nr)});
    }
}

struct Kernel {
    PanelGemm<float> f32;
    int nr_f32;
    PanelGemm<double> f64;
    int nr_f64;
    RowsTaskFn<float> rows_f32;  // the row path's task and its outputs per chunk
    int rows_nr_f32;
    RowsTaskFn<double> rows_f64;
    int rows_nr_f64;
};

// One kernel set per instruction set: MR x NV accumulators of VB-byte vectors (8 to 16
// registers, leaving room for the NV panel vectors and the broadcast), float32 and float64;
// the row path's chunk is NVR vectors (at most 4 x NVR accumulators).
#define CONVCORE_KERNELS(NAME, ATTR, MR, NV, NVR, VB)                                         \
    ATTR void NAME##_f32(int64_t kt, int64_t nbp, int64_t len, const float* w, int64_t ldw,   \
                         const float* b, int64_t ldb, float* c, int64_t ldc) {                \
        panel_gemm<float, MR, NV, VB>(kt, nbp, len, w, ldw, b, ldb, c, ldc);                  \
    }                                                                                         \
    ATTR void NAME##_f64(int64_t kt, int64_t nbp, int64_t len, const double* w, int64_t ldw,  \
                         const double* b, int64_t ldb, double* c, int64_t ldc) {              \
        panel_gemm<double, MR, NV, VB>(kt, nbp, len, w, ldw, b, ldb, c, ldc);                 \
    }                                                                                         \
    ATTR void NAME##_rows_f32(const RowsTask<float>& t) { rows_task<float, NVR, VB>(t); }     \
    ATTR void NAME##_rows_f64(const RowsTask<double>& t) { rows_task<double, NVR, VB>(t); }   \
    const Kernel NAME = {NAME##_f32, NV * VB / 4, NAME##_f64, NV * VB / 8,                    \
                         NAME##_rows_f32, 2 * NVR * VB / 4, NAME##_rows_f64, 2 * NVR * VB / 8};

CONVCORE_KERNELS(baseline, , 4, 2, 2, 16)  // 16-byte vectors: SSE2, NEON
#ifdef CONVCORE_X86_DISPATCH
CONVCORE_KERNELS(avx2, __attribute__((target("avx2,fma"))), 4, 3, 3, 32)
CONVCORE_KERNELS(avx512, __attribute__((target("avx512f,fma"))), 8, 2, 4, 64)
#endif

// The widest kernel this CPU runs. CONVCORE_CPU_ISA=avx2|baseline caps it (to test and time
// the narrower kernels on a wider machine).
const Kernel& pick_kernel() {
#ifdef CONVCORE_X86_DISPATCH
    return for_cpu_isa(avx512, avx2, baseline);
#else
    return baseline;
#endif
}

const Kernel& best_kernel() {
    static const Kernel& k = pick_kernel();
    return k;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IMPLICIT_GEMM runs float32 and float64 only";
    return "";
}

// NHWC (cpu/nhwc_gemm.hpp): the transposed filter Wt and a zero row for the padding.
size_t round64(size_t b) { return (b + 63) / 64 * 64; }
size_t workspace_bytes(const ConvProblem& p) {
    return p.nhwc ? round64(nhwc_gemm::wt_bytes(p)) + size_t(p.c) * p.elem_size() : 0;
}
bool runs_nhwc(const ConvProblem& p) { return nhwc_gemm::sizes_fit(p); }
// The NHWC GEMM applies the epilogue in its stores (nhwc_gemm::Stores).
bool fuses_epilogue(const ConvProblem& p) { return p.nhwc; }
size_t prepared_filter_bytes(const ConvProblem& p) { return p.nhwc ? nhwc_gemm::wt_bytes(p) : 0; }
void prepare_filter(const ConvProblem& p, const Context& ctx, const void* w, void* out) {
    nhwc_gemm::prepare_wt(p, w, out, ctx.threads());
}

template <typename T>
void run_nhwc(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    char* ws = static_cast<char*>(a.workspace);
    const T* wt = static_cast<const T*>(a.prepared_filter);
    if (!wt) {
        nhwc_gemm::make_wt(p, static_cast<const T*>(a.w), reinterpret_cast<T*>(ws), a.ctx.threads());
        wt = reinterpret_cast<const T*>(ws);
    }
    T* zeros = reinterpret_cast<T*>(ws + round64(nhwc_gemm::wt_bytes(p)));
    std::fill(zeros, zeros + p.c, T(0));
    T* y = static_cast<T*>(a.y);
    nhwc_gemm::run(p, static_cast<const T*>(a.x), wt, zeros, y, nhwc_gemm::stores_of(p, epilogue_store::out_of<T>(a), y),
                   a.ctx.threads());
}

// A run of output positions in one output row: columns [col, col + (q1 - q0)) of the tile
// are outputs (p, q0..q1).
struct Segment {
    int64_t p, q0, q1, col;
};

template <typename T>
void run_typed(const ConvArgs& a, PanelGemm<T> gemm, int64_t nr) {
    const ConvProblem& pr = a.prob;
    const int64_t cg = pr.c_per_group(), kg = pr.k_per_group(), rs = pr.r * pr.s;
    const int64_t len = cg * rs, pq = pr.p * pr.q, hw = pr.h * pr.w;
    const int64_t nb = std::max<int64_t>(1, NB_TARGET / nr) * nr;
    const int64_t kt_max = std::min(KT, kg);
    const int64_t k_tiles = (kg + KT - 1) / KT, n_tiles = (pq + nb - 1) / nb;
    const int64_t tasks = pr.n * pr.groups * k_tiles * n_tiles;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    const T alpha = T(a.alpha), beta = T(a.beta);

    // Per filter column fs: its input column tap, and the outputs q for which it is inside.
    std::vector<int64_t>& w0 = thread_vector<int64_t, TapColumns>(size_t(pr.s));
    std::vector<TapRange>& qv = thread_vector<TapRange, TapOutputs>(size_t(pr.s));
    for (int64_t fs = 0; fs < pr.s; ++fs) {
        const int64_t s = conv_filter_tap(fs, pr.s, pr.flip);
        w0[fs] = conv_input_coord(0, s, pr.pad_w, pr.stride_w, pr.dil_w);
        qv[fs] = conv_valid_outputs(s, pr.w, pr.q, pr.pad_w, pr.stride_w, pr.dil_w);
    }

    // Per-thread scratch, allocated here so that a failed allocation throws outside OpenMP.
    const int threads = a.ctx.threads();
    const int64_t scratch_elems = LB * nb + kt_max * nb;
    std::vector<T>& scratch = thread_vector<T, PanelScratch>(size_t(threads * scratch_elems));
    std::vector<Segment>& seg_scratch = thread_vector<Segment, PanelSegments>(size_t(threads * nb));  // a tile has at most nb segments

    // A short reduction (few multiply-adds per output) makes a task memory-bound: there a
    // guided schedule, whose first chunks are runs of consecutive tiles that the prefetchers
    // stream, beats single dynamic tasks (VGG conv1.1, L = 27: 2.03 -> 1.87 ms; the 1-channel
    // fine-grained layers 15-20%); with a long one it lost up to 7% (64 channels 3x3 at 56x56).
    const bool guided = len <= GUIDED_MAX_LEN;
#pragma omp parallel num_threads(threads)
    {
        T* panel = scratch.data() + omp_get_thread_num() * scratch_elems;  // LB x nb
        T* acc = panel + LB * nb;                                          // kt_max x nb
        Segment* segs = seg_scratch.data() + omp_get_thread_num() * nb;
        auto task = [&](int64_t t) {
            const int64_t ntile = t % n_tiles, ktile = t / n_tiles % k_tiles;
            const int64_t g = t / (n_tiles * k_tiles) % pr.groups;
            const int64_t n = t / (n_tiles * k_tiles * pr.groups);
            const int64_t col0 = ntile * nb, cols = std::min(nb, pq - col0);
            const int64_t ncols = (cols + nr - 1) / nr * nr;  // padded to whole strips
            const int64_t k0 = ktile * KT, kt = std::min(KT, kg - k0);
            const T* xg = x + (n * pr.c + g * cg) * hw;
            const T* wk = w + (g * kg + k0) * len;  // row k of this tile: wk + k*len

            int64_t n_segs = 0;
            for (int64_t col = 0; col < cols;) {
                const int64_t p = (col0 + col) / pr.q, q0 = (col0 + col) % pr.q;
                const int64_t q1 = std::min(pr.q, q0 + cols - col);
                segs[n_segs++] = {p, q0, q1, col};
                col += q1 - q0;
            }
            std::fill(acc, acc + kt * nb, T(0));

            for (int64_t l0 = 0; l0 < len; l0 += LB) {
                const int64_t lb = std::min(LB, len - l0);
                // Unfold rows l0..l0+lb of col for this tile: row l = (c, fr, fs) holds the
                // inputs that w[.][c][fr][fs] multiplies (tap fr, or R-1-fr when flipped).
                int64_t c = l0 / rs, fr = l0 / pr.s % pr.r, fs = l0 % pr.s;
                for (int64_t l = 0; l < lb; ++l) {
                    T* d = panel + l * nb;
                    const T* xc = xg + c * hw;
                    const int64_t r = conv_filter_tap(fr, pr.r, pr.flip);
                    const int64_t qa = qv[fs].begin, qb = qv[fs].end, off = w0[fs];
                    for (int64_t i = 0; i < n_segs; ++i) {
                        const Segment& sg = segs[i];
                        T* ds = d + sg.col;  // ds[q - q0]: output (sg.p, q), q in [q0, q1)
                        const int64_t ih =
                            conv_input_coord(sg.p, r, pr.pad_h, pr.stride_h, pr.dil_h);
                        if (ih < 0 || ih >= pr.h) {
                            for (int64_t q = sg.q0; q < sg.q1; ++q) ds[q - sg.q0] = T(0);
                            continue;
                        }
                        // Output q reads xr[q * stride_w + off] for q in [lo, hi), else 0.
                        const T* xr = xc + ih * pr.w;
                        const int64_t lo = std::clamp(qa, sg.q0, sg.q1);
                        const int64_t hi = std::clamp(qb, lo, sg.q1);
                        for (int64_t q = sg.q0; q < lo; ++q) ds[q - sg.q0] = T(0);
                        if (pr.stride_w == 1)
                            for (int64_t q = lo; q < hi; ++q) ds[q - sg.q0] = xr[q + off];
                        else
                            for (int64_t q = lo; q < hi; ++q)
                                ds[q - sg.q0] = xr[q * pr.stride_w + off];
                        for (int64_t q = hi; q < sg.q1; ++q) ds[q - sg.q0] = T(0);
                    }
                    for (int64_t col = cols; col < ncols; ++col) d[col] = T(0);
                    if (++fs == pr.s) {
                        fs = 0;
                        if (++fr == pr.r) fr = 0, ++c;
                    }
                }
                gemm(kt, ncols, lb, wk + l0, len, panel, nb, acc, nb);
            }

            // Epilogue: y = alpha * acc + beta * y (beta == 0 never reads y). The beta test is
            // outside the loops so that they vectorise (per element it kept the loop scalar:
            // 40% of the time on VGG conv1.1, perf).
            T* yt = y + (n * pr.k + g * kg + k0) * pq + col0;
            for (int64_t k = 0; k < kt; ++k) {
                T* __restrict yk = yt + k * pq;
                const T* __restrict ak = acc + k * nb;
                if (beta == T(0))
                    for (int64_t col = 0; col < cols; ++col) yk[col] = alpha * ak[col];
                else
                    for (int64_t col = 0; col < cols; ++col) yk[col] = alpha * ak[col] + beta * yk[col];
            }
        };
        if (guided) {
#pragma omp for schedule(guided)
            for (int64_t t = 0; t < tasks; ++t) task(t);
        } else {
#pragma omp for schedule(dynamic)
            for (int64_t t = 0; t < tasks; ++t) task(t);
        }
    }
}

void run(const ConvArgs& a) {
    const Kernel& k = best_kernel();
    const bool f64 = a.prob.dtype == CONVCORE_DATA_DOUBLE;
    if (a.prob.nhwc) return f64 ? run_nhwc<double>(a) : run_nhwc<float>(a);
    if (rows_path_applies(a.prob, f64 ? k.rows_nr_f64 : k.rows_nr_f32) &&
        !std::getenv("CONVCORE_IMPLICIT_GEMM_NO_ROWS"))
        return f64 ? rows_run<double>(a, k.rows_f64, k.rows_nr_f64) : rows_run<float>(a, k.rows_f32, k.rows_nr_f32);
    if (f64)
        run_typed<double>(a, k.f64, k.nr_f64);
    else
        run_typed<float>(a, k.f32, k.nr_f32);
}

}  // namespace

extern const Solver implicit_gemm_solver;
const Solver implicit_gemm_solver = {.algo = CONVCORE_FWD_ALGO_IMPLICIT_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .runs_nhwc = runs_nhwc, .prepared_filter_bytes = prepared_filter_bytes,
    .prepare_filter = prepare_filter, .fuses_epilogue = fuses_epilogue, .made_for = made_for::general};

}  // namespace cpu
}  // namespace convcore
