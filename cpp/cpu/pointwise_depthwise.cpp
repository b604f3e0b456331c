// The fused 1x1 -> depthwise pair on the CPU (cpu/pointwise_depthwise.hpp).
#include "cpu/pointwise_depthwise.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/depthwise.hpp"
#include "cpu/nhwc_gemm.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace pointwise_depthwise {
namespace {

// thread_vector sites
struct RowPointers;

size_t round64(size_t b) { return (b + 63) / 64 * 64; }

// Output rows per band, and the expanded rows a band reads: rows of `channels` channels that
// fill about half of L2 (the other half holds the band's x rows, Wt and the taps), at least the
// rows of one output row.
struct Bands {
    int64_t rows_per_band, buffer_rows;
};
Bands bands_of(const ConvProblem& dw, int64_t channels) {
    const int64_t span = (dw.r - 1) * dw.dil_h + 1;  // expanded rows one output row reads
    const int64_t row_bytes = dw.w * channels * int64_t(dw.elem_size());
    const int64_t fit = std::max<int64_t>(span, nhwc_gemm::cache_bytes(2, 512 << 10) / 2 / row_bytes);
    const int64_t band = std::min(dw.p, std::max<int64_t>(1, (fit - span) / dw.stride_h + 1));
    return {band, std::min(dw.h, (band - 1) * dw.stride_h + span)};
}

// How an image's work is split over the threads it gets: its 1x1's panels (output channels, of
// which the depthwise channels follow: nothing is computed twice) or its output rows (a run's
// first band computes the expanded rows it shares with the run before it again), whichever
// gives the busiest thread fewer expanded rows x panels.
struct Split {
    int64_t channel_parts, panels_per_part, row_parts, rows_per_part;
};
int64_t panels_of(const ConvProblem& pw) { return nhwc_gemm::panel_path(pw) ? nhwc_gemm::panel_count(pw) : 1; }
Split split_of(const ConvProblem& pw, const ConvProblem& dw, int threads) {
    const int64_t t = std::max<int64_t>(1, (threads + dw.n - 1) / dw.n);  // threads per image
    const int64_t panels = panels_of(pw), span = (dw.r - 1) * dw.dil_h + 1;
    const int64_t rows_per_part = (dw.p + t - 1) / t;
    const int64_t by_channels = (panels + t - 1) / t * dw.h;
    const int64_t by_rows = panels * std::min(dw.h, (rows_per_part - 1) * dw.stride_h + span);
    if (t > 1 && panels > 1 && by_channels <= by_rows) {
        const int64_t per = (panels + t - 1) / t;
        return {(panels + per - 1) / per, per, 1, dw.p};
    }
    return {1, panels, (dw.p + rows_per_part - 1) / rows_per_part, rows_per_part};
}

// Rows [r0, r1) of image n's expanded tensor, the 1x1's panels [j0, j1) (every channel off the
// panel path), into `out` (W*K values per row): the 1x1 convolution of those rows of x, with
// its epilogue. a_block, zeros, row_pointers: the GEMM's per-thread buffers.
template <typename T>
void expand_rows(const ConvProblem& pw, const T* x, const T* wt, const epilogue_store::Out<T>& e, int64_t n,
                 int64_t r0, int64_t r1, int64_t j0, int64_t j1, T* out, T* a_block, T* zeros,
                 const T** row_pointers) {
    if (r1 <= r0) return;
    ConvProblem rows = pw;  // the rows as an image of their own: x's pixels are contiguous in NHWC
    rows.n = 1, rows.h = rows.p = r1 - r0;
    const T* xr = x + (n * pw.h + r0) * pw.w * pw.c;
    const int64_t pixels = rows.p * rows.q;
    const nhwc_gemm::Stores<T> stores = nhwc_gemm::stores_of(rows, e, out);
    const nhwc_gemm::Kernels<T>& kernels = nhwc_gemm::kernels<T>();
    if (nhwc_gemm::panel_path(rows)) {
        const nhwc_gemm::PanelBlocking b = nhwc_gemm::panel_blocking(rows, 1);
        const int64_t a_size = nhwc_gemm::panel_a_in_place(rows) ? 0 : b.mc * nhwc_gemm::copied_row_stride(b.kc, sizeof(T));
        kernels.panel_task(rows, xr, wt, zeros, out, 0, pixels, j0, j1, b.kc, b.mc, stores, a_block, a_block + a_size,
                           row_pointers);
        return;
    }
    // Fewer output channels than a panel: the grouped path's tasks (one group), as nhwc_gemm::run.
    using nhwc_gemm::kChannelsPerTask;
    using nhwc_gemm::kPixelsPerTask;
    for (int64_t p0 = 0; p0 < pixels; p0 += kPixelsPerTask)
        for (int64_t k0 = 0; k0 < pw.k; k0 += kChannelsPerTask)
            kernels.task(rows, xr, wt, zeros, out, 0, 1, p0, std::min(pixels, p0 + kPixelsPerTask), k0,
                         std::min(pw.k, k0 + kChannelsPerTask), stores, row_pointers);
}

// The GEMM's A block for rows of at most `rows` image rows (as nhwc_gemm::run).
int64_t a_block_elems(const ConvProblem& pw, int64_t rows) {
    ConvProblem r = pw;
    r.n = 1, r.h = r.p = rows;
    if (!nhwc_gemm::panel_path(r) || nhwc_gemm::panel_a_in_place(r)) return 0;
    const nhwc_gemm::PanelBlocking b = nhwc_gemm::panel_blocking(r, 1);
    return b.mc * nhwc_gemm::copied_row_stride(b.kc, pw.elem_size());
}

}  // namespace

std::string why_not(const ConvProblem& pw, const ConvProblem& dw) {
    if (pw.dtype != CONVCORE_DATA_FLOAT && pw.dtype != CONVCORE_DATA_DOUBLE)
        return "the fused 1x1 -> depthwise pair runs float32 and float64 only";
    if (!pw.is_1x1() || !pw.unit_stride() || pw.pad_h || pw.pad_w || pw.groups != 1)
        return "the first convolution must be 1x1 with stride 1, no padding and one group";
    if (dw.groups != dw.c || dw.k != dw.c)
        return "the second convolution must be depthwise with one output channel per group (groups = C = K), got "
               "C=" + std::to_string(dw.c) + " K=" + std::to_string(dw.k) + " groups=" + std::to_string(dw.groups);
    if (dw.dtype != pw.dtype || dw.n != pw.n || dw.c != pw.k || dw.h != pw.p || dw.w != pw.q)
        return "the depthwise convolution's input must be the 1x1's output (N x K x H x W, the same data type)";
    if (!pw.nhwc || !dw.nhwc) return "the fused pair runs packed NHWC tensors only";
    if (!nhwc_gemm::sizes_fit(pw) || product_or_minus1({dw.w, dw.c, dw.r, dw.dil_h, int64_t(dw.elem_size())}) < 0 ||
        product_or_minus1({bands_of(dw, 1).buffer_rows, dw.w, dw.c, int64_t(dw.elem_size())}) < 0)
        return "the fused pair's buffers cannot be counted in 64 bits";
    return "";
}

size_t prepared_bytes(const ConvProblem& pw, const ConvProblem& dw) {
    return round64(nhwc_gemm::wt_bytes(pw)) + depthwise::taps_bytes(dw);
}

void prepare(const ConvProblem& pw, const ConvProblem& dw, const void* w_pw, const void* w_dw, void* prepared) {
    char* out = static_cast<char*>(prepared);
    nhwc_gemm::prepare_wt(pw, w_pw, out);
    void* taps = out + round64(nhwc_gemm::wt_bytes(pw));
    if (dw.dtype == CONVCORE_DATA_DOUBLE)
        depthwise::make_taps(dw, static_cast<const double*>(w_dw), static_cast<double*>(taps));
    else
        depthwise::make_taps(dw, static_cast<const float*>(w_dw), static_cast<float*>(taps));
}

template <typename T>
void run(const ConvProblem& pw, const ConvProblem& dw, const T* x, const void* prepared,
         const epilogue_store::Out<T>& e_pw, const epilogue_store::Out<T>& e_dw, T* y, int threads) {
    const T* wt = static_cast<const T*>(prepared);
    const T* taps = reinterpret_cast<const T*>(static_cast<const char*>(prepared) + round64(nhwc_gemm::wt_bytes(pw)));
    const Split split = split_of(pw, dw, threads);
    const int64_t nr = nhwc_gemm::panel_path(pw) ? nhwc_gemm::panel_cols(pw) : pw.k, panels = panels_of(pw);
    const int64_t widest = std::min(pw.k, split.panels_per_part * nr);  // channels of the widest part
    const Bands bands = bands_of(dw, widest);
    const int64_t row = dw.w * dw.c, span = (dw.r - 1) * dw.dil_h + 1;
    const int64_t a_size = a_block_elems(pw, bands.buffer_rows);
    const size_t per_thread = size_t(bands.buffer_rows * row + a_size + nhwc_gemm::panel_cols(pw) + pw.c);
    // Per-thread buffers reused across calls, allocated outside the parallel region (their
    // contents are written before they are read, but for the zeros).
    thread_local std::vector<T> scratch;  // (the calling thread's: the region's threads see base)
    if (scratch.size() < per_thread * size_t(threads)) scratch.resize(per_thread * size_t(threads));
    T* const base = scratch.data();
    std::vector<const T*>& pointers = thread_vector<const T*, RowPointers>(12 * size_t(threads));
    const int64_t tasks = dw.n * split.channel_parts * split.row_parts;
#pragma omp parallel num_threads(threads)
    {
        const int thread = omp_get_thread_num();
        // The expanded rows (all K channels apart, the task's written), then the GEMM's A block,
        // sink row and C zeros.
        T* expanded = base + per_thread * size_t(thread);
        T* a_block = expanded + bands.buffer_rows * row;
        T* zeros = a_block + a_size + nhwc_gemm::panel_cols(pw);
        std::fill(zeros, zeros + pw.c, T(0));
        const T** row_pointers = pointers.data() + 12 * size_t(thread);
#pragma omp for schedule(static)
        for (int64_t task = 0; task < tasks; ++task) {
            const int64_t n = task / (split.channel_parts * split.row_parts);
            const int64_t part = task / split.row_parts % split.channel_parts, run = task % split.row_parts;
            const int64_t j0 = part * split.panels_per_part, j1 = std::min(panels, j0 + split.panels_per_part);
            const int64_t k0 = std::min(pw.k, j0 * nr), k1 = std::min(pw.k, j1 * nr);
            const int64_t first = run * split.rows_per_part, last = std::min(dw.p, first + split.rows_per_part);
            int64_t held_first = 0, held = 0;  // expanded rows [held_first, held_first + held) are in the buffer
            for (int64_t ob = first; ob < last; ob += bands.rows_per_band) {
                const int64_t oe = std::min(last, ob + bands.rows_per_band);
                const int64_t top = ob * dw.stride_h - dw.pad_h;  // the band's first input row (maybe padding)
                const int64_t lo = std::max<int64_t>(0, top);
                const int64_t hi = std::max(lo, std::min(dw.h, (oe - 1) * dw.stride_h - dw.pad_h + span));
                if (held > 0 && lo >= held_first && lo < held_first + held) {  // keep the rows read again
                    const int64_t drop = lo - held_first;
                    held -= drop;
                    if (drop > 0) std::memmove(expanded, expanded + drop * row, size_t(held * row) * sizeof(T));
                } else {
                    held = 0;
                }
                held_first = lo;
                expand_rows(pw, x, wt, e_pw, n, lo + held, hi, j0, j1, expanded + held * row, a_block, zeros,
                            row_pointers);
                held = hi - lo;
                // The band as a depthwise problem of its own on the held rows: its top padding is
                // what lies above row lo, its rows past `held` are padding or not read.
                ConvProblem band = dw;
                band.n = 1, band.h = held, band.pad_h = lo - top, band.p = oe - ob;
                const int64_t at = (n * dw.p + ob) * dw.q * dw.k;
                epilogue_store::Out<T> e = e_dw;
                if (e.z) e.z += at;
                depthwise::nhwc_rows(band, expanded, taps, y + at, e, 0, 0, band.p, k0, k1);
            }
        }
    }
}

template void run<float>(const ConvProblem&, const ConvProblem&, const float*, const void*,
                         const epilogue_store::Out<float>&, const epilogue_store::Out<float>&, float*, int);
template void run<double>(const ConvProblem&, const ConvProblem&, const double*, const void*,
                          const epilogue_store::Out<double>&, const epilogue_store::Out<double>&, double*, int);

namespace {
template <typename T>
epilogue_store::Out<T> out_of(const Epilogue& e) {
    return {T(1), T(0), T(0), nullptr, static_cast<const T*>(e.bias), e.activation};
}
}  // namespace

void run(const ConvProblem& pw, const ConvProblem& dw, const void* x, const void* prepared, const Epilogue& e_pw,
         const Epilogue& e_dw, void* y, int threads) {
    if (pw.dtype == CONVCORE_DATA_DOUBLE)
        run(pw, dw, static_cast<const double*>(x), prepared, out_of<double>(e_pw), out_of<double>(e_dw),
            static_cast<double*>(y), threads);
    else
        run(pw, dw, static_cast<const float*>(x), prepared, out_of<float>(e_pw), out_of<float>(e_dw),
            static_cast<float*>(y), threads);
}

}  // namespace pointwise_depthwise
}  // namespace cpu
}  // namespace convcore
