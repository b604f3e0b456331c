// DEPTHWISE's backward passes on the CPU, in NCHW and NHWC natively (cpu/depthwise.hpp).
//   data:   dx[n][c] at (ih, iw) = sum over the m output channels k = c*m + j and the taps whose
//           window covers (ih, iw) of w[k][r][s] * dy[n][k] at the output that reads it;
//   filter: dw[k][r][s] = sum over n and the outputs of dy[n][k] times the input tap (r, s) reads.
// Both gather (every task owns its outputs, no atomics), so the results do not depend on the
// thread count. Backward data with stride 1 runs the forward kernels instead (data_via_forward).
// The loops are compiled per instruction set (the vectoriser's widths) and chosen at run time, as
// the forward kernels.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/backward_via_forward.hpp"
#include "core/solver.hpp"
#include "cpu/depthwise.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace {

// thread_vector sites
struct DataRows;
struct FilterSums;
struct PaddedPlanes;

template <typename T>
CONVCORE_DW_INLINE void store_row(T* out, const T* acc, int64_t len, T alpha, T beta) {
    if (beta == T(0))
        for (int64_t i = 0; i < len; ++i) out[i] = alpha * acc[i];
    else
        for (int64_t i = 0; i < len; ++i) out[i] = alpha * acc[i] + beta * out[i];
}

// ---- backward data ------------------------------------------------------------------------

// NCHW: dx row ih of plane nc = (n, c). Each (output channel, tap row) adds a dy row, scattered
// with the tap's column offset into the row buffer `a` (W elements).
template <typename T>
CONVCORE_DW_INLINE void data_nchw_row(const ConvProblem& p, const T* taps, const T* dy, T* dx, int64_t nc, int64_t ih,
                                      T* a, T alpha, T beta) {
    const int64_t m = p.k / p.c, n = nc / p.c, c = nc % p.c;
    for (int64_t j = 0; j < p.w; ++j) a[j] = T(0);
    for (int64_t k = c * m; k < (c + 1) * m; ++k) {
        for (int64_t r = 0; r < p.r; ++r) {
            const int64_t oh = conv_output_reading(ih, r, p.pad_h, p.stride_h, p.dil_h, p.p);
            if (oh < 0) continue;
            const T* dyr = dy + ((n * p.k + k) * p.p + oh) * p.q;
            for (int64_t s = 0; s < p.s; ++s) {
                const T wt = taps[(k * p.r + r) * p.s + s];
                // Output ow reads input iw = ow * stride + w0.
                const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
                const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
                if (p.stride_w == 1) {
                    T* as = a + w0;
                    for (int64_t q = qv.begin; q < qv.end; ++q) as[q] += wt * dyr[q];
                } else {
                    const int64_t sw = p.stride_w;
                    for (int64_t q = qv.begin; q < qv.end; ++q) a[q * sw + w0] += wt * dyr[q];
                }
            }
        }
    }
    store_row(dx + (nc * p.h + ih) * p.w, a, p.w, alpha, beta);
}

// NHWC: dx row ih of image n; each pixel gathers, over its channels in blocks, the dy pixels whose
// windows cover it. The outputs each tap row / column reads are found once per row / pixel
// (filters up to kMaxTaps wide; wider ones find them per channel block).
constexpr int64_t kMaxTaps = 16;

template <typename T>
CONVCORE_DW_INLINE void data_nhwc_row(const ConvProblem& p, const T* taps, const T* dy, T* dx, int64_t n, int64_t ih,
                                      T alpha, T beta) {
    constexpr int64_t B = depthwise::kChannelBlock;
    const int64_t m = p.k / p.c;
    const bool small = p.r <= kMaxTaps && p.s <= kMaxTaps;
    int64_t oh_of[kMaxTaps], ow_of[kMaxTaps];
    if (small)
        for (int64_t r = 0; r < p.r; ++r) oh_of[r] = conv_output_reading(ih, r, p.pad_h, p.stride_h, p.dil_h, p.p);
    for (int64_t iw = 0; iw < p.w; ++iw) {
        T* dxo = dx + ((n * p.h + ih) * p.w + iw) * p.c;
        if (small)
            for (int64_t s = 0; s < p.s; ++s) ow_of[s] = conv_output_reading(iw, s, p.pad_w, p.stride_w, p.dil_w, p.q);
        for (int64_t c0 = 0; c0 < p.c; c0 += B) {
            const int64_t cb = std::min(B, p.c - c0);
            T acc[B] = {};
            for (int64_t r = 0; r < p.r; ++r) {
                const int64_t oh = small ? oh_of[r] : conv_output_reading(ih, r, p.pad_h, p.stride_h, p.dil_h, p.p);
                if (oh < 0) continue;
                for (int64_t s = 0; s < p.s; ++s) {
                    const int64_t ow =
                        small ? ow_of[s] : conv_output_reading(iw, s, p.pad_w, p.stride_w, p.dil_w, p.q);
                    if (ow < 0) continue;
                    const T* dyo = dy + ((n * p.p + oh) * p.q + ow) * p.k;
                    const T* wt = taps + (r * p.s + s) * p.k;
                    if (m == 1 && cb == B) {
#pragma omp simd
                        for (int64_t j = 0; j < B; ++j) acc[j] += wt[c0 + j] * dyo[c0 + j];
                    } else if (m == 1) {
#pragma omp simd
                        for (int64_t j = 0; j < cb; ++j) acc[j] += wt[c0 + j] * dyo[c0 + j];
                    } else {
                        for (int64_t j = 0; j < cb; ++j)
                            for (int64_t i = 0; i < m; ++i) acc[j] += wt[(c0 + j) * m + i] * dyo[(c0 + j) * m + i];
                    }
                }
            }
            store_row(dxo + c0, acc, cb, alpha, beta);
        }
    }
}


// ---- backward filter ----------------------------------------------------------------------

// dw[k] at filter element (fr, fs) gets the gradient of correlation tap (r, s); sums in double.
template <typename T>
CONVCORE_DW_INLINE void store_filter(const ConvProblem& p, int64_t k, int64_t r, int64_t s, double g, T* dw, T alpha,
                                     T beta) {
    T* d = dw + (k * p.r + conv_filter_tap(r, p.r, p.flip)) * p.s + conv_filter_tap(s, p.s, p.flip);
    *d = beta == T(0) ? alpha * T(g) : alpha * T(g) + beta * *d;
}

// NCHW: output channel k; each (dy row, tap) is one dot product along the row. `g` holds R*S
// doubles.
template <typename T>
CONVCORE_DW_INLINE void filter_nchw_channel(const ConvProblem& p, const T* x, const T* dy, T* dw, int64_t k, double* g,
                                            T alpha, T beta) {
    const int64_t m = p.k / p.c;
    for (int64_t i = 0; i < p.r * p.s; ++i) g[i] = 0.0;
    for (int64_t n = 0; n < p.n; ++n) {
        const T* xp = x + (n * p.c + k / m) * p.h * p.w;
        for (int64_t oh = 0; oh < p.p; ++oh) {
            const T* dyr = dy + ((n * p.k + k) * p.p + oh) * p.q;
            const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
            for (int64_t r = rr.begin; r < rr.end; ++r) {
                const T* xr = xp + conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h) * p.w;
                for (int64_t s = 0; s < p.s; ++s) {
                    const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
                    const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
                    const int64_t sw = p.stride_w;
                    T dot = 0;
                    if (sw == 1) {  // contiguous loads, not a gather
                        const T* xs = xr + w0;
#pragma omp simd reduction(+ : dot)
                        for (int64_t q = qv.begin; q < qv.end; ++q) dot += dyr[q] * xs[q];
                    } else {
#pragma omp simd reduction(+ : dot)
                        for (int64_t q = qv.begin; q < qv.end; ++q) dot += dyr[q] * xr[q * sw + w0];
                    }
                    g[r * p.s + s] += double(dot);
                }
            }
        }
    }
    for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s) store_filter(p, k, r, s, g[r * p.s + s], dw, alpha, beta);
}

// NCHW, stride 1: the padded image xp (H + 2*pad_h rows of Wp = Q + (S-1)*dil_w, zeros outside
// the input, and a tail of (S-1)*dil_w zeros) and dy's rows widened to Wp with zeros (dyp). Tap
// (r, s) is then one contiguous dot product over the P*Wp elements, without a reduction per row:
//   dw(r, s) = sum_i dyp[i] * xp[i + r*dil_h*Wp + s*dil_w]
// (dyp's zeros cancel the columns past Q). Summed in T over chunks of kFilterChunk, in double
// across them. `pad` holds unit_stride_scratch(p) elements.
constexpr int64_t kFilterChunk = 256;

int64_t unit_stride_scratch(const ConvProblem& p) {
    const int64_t wp = p.q + (p.s - 1) * p.dil_w;
    return (p.h + 2 * p.pad_h) * wp + (p.s - 1) * p.dil_w + p.p * wp;
}

template <typename T>
CONVCORE_DW_INLINE void filter_nchw_channel_unit_stride(const ConvProblem& p, const T* x, const T* dy, T* dw,
                                                        int64_t k, double* g, T* pad, T alpha, T beta) {
    const int64_t m = p.k / p.c;
    const int64_t wp = p.q + (p.s - 1) * p.dil_w, hp = p.h + 2 * p.pad_h, len = p.p * wp;
    T* xp = pad;
    T* dyp = pad + hp * wp + (p.s - 1) * p.dil_w;
    std::fill(xp, dyp, T(0));
    for (int64_t i = 0; i < p.r * p.s; ++i) g[i] = 0.0;
    for (int64_t n = 0; n < p.n; ++n) {
        const T* xs = x + (n * p.c + k / m) * p.h * p.w;
        const int64_t cols = std::min(p.w, wp - p.pad_w);  // input columns xp holds
        for (int64_t ih = 0; ih < p.h; ++ih)  // the zero borders stay from the fill above
            std::copy(xs + ih * p.w, xs + ih * p.w + cols, xp + (ih + p.pad_h) * wp + p.pad_w);
        const T* dys = dy + (n * p.k + k) * p.p * p.q;
        for (int64_t oh = 0; oh < p.p; ++oh) {
            std::copy(dys + oh * p.q, dys + (oh + 1) * p.q, dyp + oh * wp);
            std::fill(dyp + oh * wp + p.q, dyp + (oh + 1) * wp, T(0));
        }
        for (int64_t r = 0; r < p.r; ++r)
            for (int64_t s = 0; s < p.s; ++s) {
                const T* xt = xp + r * p.dil_h * wp + s * p.dil_w;
                double sum = 0.0;
                for (int64_t i0 = 0; i0 < len; i0 += kFilterChunk) {
                    const int64_t i1 = std::min(len, i0 + kFilterChunk);
                    T dot = 0;
#pragma omp simd reduction(+ : dot)
                    for (int64_t i = i0; i < i1; ++i) dot += dyp[i] * xt[i];
                    sum += double(dot);
                }
                g[r * p.s + s] += sum;
            }
    }
    for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s) store_filter(p, k, r, s, g[r * p.s + s], dw, alpha, beta);
}

// NHWC: output channels [b*16, b*16 + 16). For each output row and tap, the row's valid outputs
// add dy times the input pixel the tap reads into a 16-wide accumulator in T (vector FMAs in
// registers along the row), which is then added into `g` (R*S*16 doubles): the error grows with
// the row's length only.
constexpr int64_t kFilterBlock = 16;  // one 64-byte line of float32 per pixel and task

template <typename T>
CONVCORE_DW_INLINE void filter_nhwc_block(const ConvProblem& p, const T* x, const T* dy, T* dw, int64_t b, double* g,
                                          T alpha, T beta) {
    constexpr int64_t B = kFilterBlock;
    const int64_t m = p.k / p.c, k0 = b * B, kb = std::min(B, p.k - k0);
    for (int64_t i = 0; i < p.r * p.s * B; ++i) g[i] = 0.0;
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t oh = 0; oh < p.p; ++oh) {
            const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
            const T* dyr = dy + (n * p.p + oh) * p.q * p.k + k0;
            for (int64_t r = rr.begin; r < rr.end; ++r) {
                const T* xr = x + (n * p.h + conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h)) * p.w * p.c;
                for (int64_t s = 0; s < p.s; ++s) {
                    const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
                    const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
                    T acc[B] = {};
                    if (m == 1 && kb == B) {
                        for (int64_t q = qv.begin; q < qv.end; ++q) {
                            const T* dyo = dyr + q * p.k;
                            const T* xi = xr + (q * p.stride_w + w0) * p.c + k0;
#pragma omp simd
                            for (int64_t j = 0; j < B; ++j) acc[j] += dyo[j] * xi[j];
                        }
                    } else {
                        for (int64_t q = qv.begin; q < qv.end; ++q) {
                            const T* dyo = dyr + q * p.k;
                            const T* xi = xr + (q * p.stride_w + w0) * p.c;
                            for (int64_t j = 0; j < kb; ++j) acc[j] += dyo[j] * xi[(k0 + j) / m];
                        }
                    }
                    double* gt = g + (r * p.s + s) * B;
                    for (int64_t j = 0; j < kb; ++j) gt[j] += double(acc[j]);
                }
            }
        }
    }
    for (int64_t j = 0; j < kb; ++j)
        for (int64_t r = 0; r < p.r; ++r)
            for (int64_t s = 0; s < p.s; ++s) store_filter(p, k0 + j, r, s, g[(r * p.s + s) * B + j], dw, alpha, beta);
}

template <typename T>
struct Kernels {
    void (*data_nchw_row)(const ConvProblem&, const T*, const T*, T*, int64_t, int64_t, T*, T, T);
    void (*data_nhwc_row)(const ConvProblem&, const T*, const T*, T*, int64_t, int64_t, T, T);
    void (*filter_nchw_channel)(const ConvProblem&, const T*, const T*, T*, int64_t, double*, T, T);
    void (*filter_nchw_channel_unit_stride)(const ConvProblem&, const T*, const T*, T*, int64_t, double*, T*, T, T);
    void (*filter_nhwc_block)(const ConvProblem&, const T*, const T*, T*, int64_t, double*, T, T);
};

#define CONVCORE_DW_BACKWARD(ISA, ATTR, VB, ACC)                                                               \
    template <typename T>                                                                                      \
    ATTR void data_nchw_row_##ISA(const ConvProblem& p, const T* t, const T* dy, T* dx, int64_t nc, int64_t ih, \
                                  T* a, T alpha, T beta) {                                                     \
        data_nchw_row(p, t, dy, dx, nc, ih, a, alpha, beta);                                                   \
    }                                                                                                          \
    template <typename T>                                                                                      \
    ATTR void data_nhwc_row_##ISA(const ConvProblem& p, const T* t, const T* dy, T* dx, int64_t n, int64_t ih,  \
                                  T alpha, T beta) {                                                           \
        data_nhwc_row(p, t, dy, dx, n, ih, alpha, beta);                                                       \
    }                                                                                                          \
    template <typename T>                                                                                      \
    ATTR void filter_nchw_channel_##ISA(const ConvProblem& p, const T* x, const T* dy, T* dw, int64_t k,        \
                                        double* g, T alpha, T beta) {                                          \
        filter_nchw_channel(p, x, dy, dw, k, g, alpha, beta);                                                  \
    }                                                                                                          \
    template <typename T>                                                                                      \
    ATTR void filter_nchw_channel_unit_stride_##ISA(const ConvProblem& p, const T* x, const T* dy, T* dw,       \
                                                    int64_t k, double* g, T* pad, T alpha, T beta) {           \
        filter_nchw_channel_unit_stride(p, x, dy, dw, k, g, pad, alpha, beta);                                 \
    }                                                                                                          \
    template <typename T>                                                                                      \
    ATTR void filter_nhwc_block_##ISA(const ConvProblem& p, const T* x, const T* dy, T* dw, int64_t b,          \
                                      double* g, T alpha, T beta) {                                            \
        filter_nhwc_block(p, x, dy, dw, b, g, alpha, beta);                                                    \
    }                                                                                                          \
    template <typename T>                                                                                      \
    constexpr Kernels<T> kernels_##ISA = {data_nchw_row_##ISA<T>, data_nhwc_row_##ISA<T>,                     \
                                          filter_nchw_channel_##ISA<T>,                                        \
                                          filter_nchw_channel_unit_stride_##ISA<T>, filter_nhwc_block_##ISA<T>};
CONVCORE_EACH_ISA(CONVCORE_DW_BACKWARD)

template <typename T>
const Kernels<T>& kernels() {
    return for_cpu_isa(kernels_avx512<T>, kernels_avx2<T>, kernels_baseline<T>);
}

// ---- the passes ---------------------------------------------------------------------------

template <typename T>
void data_t(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    const T* taps = depthwise::taps_for<T>(p, a.w, nullptr, a.workspace);
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    const Kernels<T>& kern = kernels<T>();
    const T alpha = T(a.alpha), beta = T(a.beta);
    if (p.nhwc) {
#pragma omp parallel for collapse(2) num_threads(a.ctx.threads()) schedule(static)
        for (int64_t n = 0; n < p.n; ++n)
            for (int64_t ih = 0; ih < p.h; ++ih) kern.data_nhwc_row(p, taps, dy, dx, n, ih, alpha, beta);
        return;
    }
    // Per-thread row buffers, allocated here: an exception cannot leave a parallel region.
    const int threads = a.ctx.threads();
    std::vector<T>& rows = thread_vector<T, DataRows>(size_t(p.w) * size_t(threads));
#pragma omp parallel num_threads(threads)
    {
        T* acc = rows.data() + size_t(p.w) * size_t(omp_get_thread_num());
#pragma omp for collapse(2) schedule(static)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc)
            for (int64_t ih = 0; ih < p.h; ++ih) kern.data_nchw_row(p, taps, dy, dx, nc, ih, acc, alpha, beta);
    }
}

// With stride 1 (and padding <= dilation * (filter size - 1)), dx is the forward depthwise
// convolution of dy with the rotated filter (core/backward_via_forward), which the forward
// pass's register-blocked kernels run 2-6x faster than the gathers above (one multiplier; the
// reduction declines others).
bool data_via_forward(const ConvProblem& p) {
    return via_forward::data_why_not(p, CONVCORE_FWD_ALGO_DEPTHWISE).empty() &&
           (!p.nhwc || via_forward::data_runs_nhwc(p, CONVCORE_FWD_ALGO_DEPTHWISE));
}

void run_data(const BwdDataArgs& a) {
    if (data_via_forward(a.prob))
        via_forward::data_run(a, CONVCORE_FWD_ALGO_DEPTHWISE);
    else if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        data_t<double>(a);
    else
        data_t<float>(a);
}

size_t data_workspace(const ConvProblem& p) {
    return data_via_forward(p) ? via_forward::data_workspace_bytes(p, CONVCORE_FWD_ALGO_DEPTHWISE)
                               : depthwise::taps_bytes(p);
}

template <typename T>
void filter_t(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);
    const Kernels<T>& kern = kernels<T>();
    const T alpha = T(a.alpha), beta = T(a.beta);
    const int64_t tasks = p.nhwc ? (p.k + kFilterBlock - 1) / kFilterBlock : p.k;
    const int threads = a.ctx.threads();
    const size_t per_thread = size_t(p.r * p.s * (p.nhwc ? kFilterBlock : 1));
    // (images past 4M padded elements, 16 MiB per thread in float, keep the row path)
    const bool padded = !p.nhwc && p.unit_stride() && unit_stride_scratch(p) <= (int64_t(1) << 22);
    const size_t pad_per_thread = padded ? size_t(unit_stride_scratch(p)) : 0;
    // allocated outside the parallel region: an exception cannot leave it
    std::vector<double>& sums = thread_vector<double, FilterSums>(per_thread * size_t(threads));
    std::vector<T>& pads = thread_vector<T, PaddedPlanes>(pad_per_thread * size_t(threads));
#pragma omp parallel num_threads(threads)
    {
        double* g = sums.data() + per_thread * size_t(omp_get_thread_num());
        T* pad = pads.data() + pad_per_thread * size_t(omp_get_thread_num());
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
            if (p.nhwc)
                kern.filter_nhwc_block(p, x, dy, dw, t, g, alpha, beta);
            else if (padded)
                kern.filter_nchw_channel_unit_stride(p, x, dy, dw, t, g, pad, alpha, beta);
            else
                kern.filter_nchw_channel(p, x, dy, dw, t, g, alpha, beta);
        }
    }
}

void run_filter(const BwdFilterArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        filter_t<double>(a);
    else
        filter_t<float>(a);
}

size_t filter_workspace(const ConvProblem&) { return 0; }

}  // namespace

extern const Solver depthwise_bwd_data_solver;
const Solver depthwise_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_DEPTHWISE,
    .device = CONVCORE_DEVICE_CPU, .why_not = depthwise::why_not, .workspace_bytes = data_workspace,
    .backward_data = run_data, .runs_nhwc = depthwise::runs_nhwc, .made_for = made_for::only};

extern const Solver depthwise_bwd_filter_solver;
const Solver depthwise_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_DEPTHWISE,
    .device = CONVCORE_DEVICE_CPU, .why_not = depthwise::why_not, .workspace_bytes = filter_workspace,
    .backward_filter = run_filter, .runs_nhwc = depthwise::runs_nhwc, .made_for = made_for::only};

}  // namespace cpu
}  // namespace convcore
