// IM2COL_GEMM backward passes on the CPU, the transposes of cpu/im2col_gemm.cpp's forward
// GEMM Y[n, g] (Kg x PQ) = W[g] (Kg x L) * col (L x PQ), L = Cg*R*S:
//   backward data:   col = alpha * W[g]^T (L x Kg) * dY[n, g] (Kg x PQ) in the workspace, then
//                    col2im scatters it into dx[n, g] (already scaled by beta, or zeroed);
//   backward filter: im2col of x[n, g] into the workspace, then
//                    dW[g] (Kg x L) = alpha * dY[n, g] (Kg x PQ) * col^T (PQ x L) + beta' * dW[g],
//                    beta' = beta for the first image (BLAS with beta == 0 does not read dW)
//                    and 1 for the others.
// Row l = (c, fr, fs) of col pairs with filter element w[.][c][fr][fs], whose tap is
// conv_filter_tap(fr) (mirrored in the true-convolution mode), so the flip is in the
// unfolding, as in the forward pass. 1x1 filters with stride 1 and no padding need no
// unfolding: x and dx themselves are the col matrix (workspace 0).
// NHWC (channels-last x, dx and dy) transposes the same GEMMs: col has one row per output pixel
// (n, oh, ow) and one column per (fr, fs, c), so its rows are runs of C/g contiguous channels:
//   backward data:   col (M x L) = alpha * dY_g (M x Kg) * Wt[g] (Kg x L), then each dx pixel
//                    gathers its (fr, fs) windows' entries (one task per dx row, no atomics);
//   backward filter: dWt[g] (Kg x L) = dY_g^T (Kg x M) * col (M x L), summed over L2-sized blocks of
//                    rows (per thread, then over the threads), then
//                    transposed into dw's K x C/g x R x S order with alpha and beta.
// Wt / dWt are the filters in K x (R*S*C/g) order, in the workspace; M counts the output pixels
// of a chunk of images. 1x1 filters with stride 1 and no padding need no unfolding in NHWC
// either: dx = alpha * dY * W[g] and dw = alpha * dY^T * x, on the tensors in place.
// NHWC backward data where the outputs' windows are disjoint (a stride of at least the filter
// size: ConvTranspose2d(k=2, s=2), 1x1 stride-2 downsamples) is cpu/im2col_gemm_nd.hpp's:
// col2im is then a scatter, done per L2-sized block of col as each thread's GEMM makes it.
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "common/conv_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/blas_gemm.hpp"
#include "cpu/blas_threads.hpp"
#include "cpu/im2col_gemm_nd.hpp"
#include "cpu/nhwc_gemm.hpp"
#include "cpu/partial_sums.hpp"

namespace convcore {
namespace cpu {

namespace {

bool direct_1x1(const ConvProblem& p) {
    return p.is_1x1() && p.unit_stride() && p.pad_h == 0 && p.pad_w == 0;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IM2COL_GEMM runs float32 and float64 only";
    const int64_t crs = p.c_per_group() * p.r * p.s;
    if (p.k > INT_MAX || p.c > INT_MAX || p.p * p.q > INT_MAX || crs > INT_MAX)
        return "IM2COL_GEMM: a GEMM dimension (K=" + std::to_string(p.k) + ", C=" + std::to_string(p.c) +
               ", P*Q=" + std::to_string(p.p * p.q) + ", C/groups*R*S=" + std::to_string(crs) +
               ") exceeds the 32-bit BLAS interface";
    return "";
}

// NHWC: images unfolded at a time, as many as fit kNhwcColBytes (at least one), so that the
// col chunk stays near the caches while its GEMMs have enough rows (7x7 layers: 49 per image).
constexpr size_t kNhwcColBytes = size_t(16) << 20;

int64_t nhwc_chunk_images(const ConvProblem& p) {
    const size_t image = size_t(p.p * p.q) * size_t(p.c_per_group() * p.r * p.s) * p.elem_size();
    return std::clamp<int64_t>(int64_t(kNhwcColBytes / std::max<size_t>(image, 1)), 1, p.n);
}

size_t round64(size_t b) { return (b + 63) / 64 * 64; }

// NHWC backward data through cpu/im2col_gemm_nd.hpp: windows disjoint, not 1x1 in place.
bool data_scatters(const ConvProblem& p) {
    return p.nhwc && im2col_nd::disjoint(p, im2col_nd::Depth{});
}

// A packed NHWC tensor's element strides in N, C, D, H, W order (one depth plane).
void nhwc_strides(int64_t c, int64_t h, int64_t w, int64_t out[5]) {
    const int64_t s[5] = {h * w * c, 1, h * w * c, w * c, c};
    std::copy(s, s + 5, out);
}

size_t workspace_bytes(const ConvProblem& p) {
    const size_t l = size_t(p.c_per_group() * p.r * p.s);
    if (p.nhwc && direct_1x1(p)) return 0;
    if (p.nhwc)  // the filters in K x (R*S*C/g) order, and one chunk of col (backward data)
        return round64(size_t(p.k) * l * p.elem_size()) + size_t(nhwc_chunk_images(p) * p.p * p.q) * l * p.elem_size();
    return direct_1x1(p) ? 0 : l * size_t(p.p * p.q) * p.elem_size();
}

// NHWC runs every problem: x, dx and dy as N*H*W (N*P*Q) rows of channels.
bool runs_nhwc(const ConvProblem&) { return true; }

size_t data_workspace_bytes(const ConvProblem& p) {
    return data_scatters(p) ? im2col_nd::workspace_bytes(p, im2col_nd::Depth{}) : workspace_bytes(p);
}

// For row (c, fr, fs) of col: calls f(col_row_pointer_for_outputs_of_row_oh, x_row, q range,
// input column offset) for each output row oh whose input row is inside the image.
// im2col (x -> col) and col2im (col -> dx) are the two directions of this one walk.
template <typename T, bool ToCol>
void walk(const ConvProblem& p, T* col, T* x, int threads) {
    const int64_t rs = p.r * p.s, pq = p.p * p.q, hw = p.h * p.w;
    if (ToCol) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t row = 0; row < p.c_per_group() * rs; ++row) {
            const int64_t c = row / rs, fr = row / p.s % p.r, fs = row % p.s;
            const int64_t r = conv_filter_tap(fr, p.r, p.flip), s = conv_filter_tap(fs, p.s, p.flip);
            const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
            const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
            const T* xc = x + c * hw;
            T* d = col + row * pq;
            for (int64_t oh = 0; oh < p.p; ++oh, d += p.q) {
                const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                if (ih < 0 || ih >= p.h) {
                    for (int64_t q = 0; q < p.q; ++q) d[q] = T(0);
                    continue;
                }
                const T* xr = xc + ih * p.w;
                for (int64_t q = 0; q < qv.begin; ++q) d[q] = T(0);
                for (int64_t q = qv.begin; q < qv.end; ++q) d[q] = xr[q * p.stride_w + w0];
                for (int64_t q = qv.end; q < p.q; ++q) d[q] = T(0);
            }
        }
    } else {
        // col2im: one task per channel, so that no two threads add into the same dx element.
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t c = 0; c < p.c_per_group(); ++c) {
            T* xc = x + c * hw;
            for (int64_t f = 0; f < rs; ++f) {
                const int64_t fr = f / p.s, fs = f % p.s;
                const int64_t r = conv_filter_tap(fr, p.r, p.flip), s = conv_filter_tap(fs, p.s, p.flip);
                const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
                const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
                const T* d = col + (c * rs + f) * pq;
                for (int64_t oh = 0; oh < p.p; ++oh, d += p.q) {
                    const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                    if (ih < 0 || ih >= p.h) continue;
                    T* xr = xc + ih * p.w;
                    if (p.stride_w == 1)
                        for (int64_t q = qv.begin; q < qv.end; ++q) xr[q + w0] += d[q];
                    else
                        for (int64_t q = qv.begin; q < qv.end; ++q) xr[q * p.stride_w + w0] += d[q];
                }
            }
        }
    }
}

template <typename T>
void data_t(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), crs = cg * p.r * p.s;
    const int64_t pq = p.p * p.q, hw = p.h * p.w;
    const T* w = static_cast<const T*>(a.w);
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    T* col = static_cast<T*>(a.workspace);
    const T alpha = T(a.alpha), beta = T(a.beta);
    BlasThreads blas_threads(threads);
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t g = 0; g < p.groups; ++g) {
            const T* wg = w + g * kg * crs;  // Kg x L
            const T* dyg = dy + (n * p.k + g * kg) * pq;
            T* dxg = dx + (n * p.c + g * cg) * hw;
            if (direct_1x1(p)) {  // dx[n, g] (Cg x HW) = alpha * W^T dy + beta * dx
                gemm(true, false, int(cg), int(pq), int(kg), alpha, wg, int(crs), dyg, int(pq), beta,
                     dxg, int(pq));
                continue;
            }
            gemm(true, false, int(crs), int(pq), int(kg), alpha, wg, int(crs), dyg, int(pq), T(0), col,
                 int(pq));
#pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t i = 0; i < cg * hw; ++i) dxg[i] = beta == T(0) ? T(0) : beta * dxg[i];
            walk<T, false>(p, col, dxg, threads);
        }
    }
}

template <typename T>
void filter_t(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), crs = cg * p.r * p.s;
    const int64_t pq = p.p * p.q, hw = p.h * p.w;
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);
    T* col = static_cast<T*>(a.workspace);
    const T alpha = T(a.alpha), beta = T(a.beta);
    BlasThreads blas_threads(threads);
    for (int64_t g = 0; g < p.groups; ++g) {
        for (int64_t n = 0; n < p.n; ++n) {
            const T* xg = x + (n * p.c + g * cg) * hw;
            const T* src = xg;
            if (!direct_1x1(p)) {
                walk<T, true>(p, col, const_cast<T*>(xg), threads);
                src = col;
            }
            gemm(false, true, int(kg), int(crs), int(pq), alpha, dy + (n * p.k + g * kg) * pq, int(pq),
                 src, int(pq), n == 0 ? beta : T(1), dw + g * kg * crs, int(crs));
        }
    }
}

// ---- NHWC -----------------------------------------------------------------------------------

// im2col: col rows for images [n0, n0 + images) of group g, columns (fr, fs, c).
template <typename T>
void nhwc_unfold(const ConvProblem& p, const T* x, T* col, int64_t m0, int64_t m1, int64_t g) {
    const int64_t cg = p.c_per_group(), l = p.r * p.s * cg;
    // Without groups, dilation or mirroring, the taps of a filter row read consecutive pixels,
    // whose channels are one contiguous run of x (the few-channel stem: one copy, not S).
    const bool row_runs = p.groups == 1 && p.dil_w == 1 && !p.flip;
    nhwc_gemm::PixelAt at(p, m0);  // m's, stepped without divisions
    for (int64_t m = m0; m < m1; ++m, at.next(p)) {
        const int64_t n = at.n, oh = at.oh, ow = at.ow;
        T* d = col + (m - m0) * l;
        for (int64_t fr = 0; fr < p.r; ++fr) {
            const int64_t ih = conv_input_coord(oh, conv_filter_tap(fr, p.r, p.flip), p.pad_h, p.stride_h, p.dil_h);
            if (row_runs) {
                const int64_t iw0 = ow * p.stride_w - p.pad_w;  // tap fs reads iw0 + fs
                const int64_t lo = std::clamp<int64_t>(-iw0, 0, p.s);
                const int64_t hi = ih < 0 || ih >= p.h ? lo : std::clamp<int64_t>(p.w - iw0, lo, p.s);
                std::fill_n(d, lo * cg, T(0));
                if (hi > lo) std::copy_n(x + ((n * p.h + ih) * p.w + iw0 + lo) * p.c, (hi - lo) * cg, d + lo * cg);
                std::fill_n(d + hi * cg, (p.s - hi) * cg, T(0));
                d += p.s * cg;
                continue;
            }
            for (int64_t fs = 0; fs < p.s; ++fs, d += cg) {
                const int64_t iw = conv_input_coord(ow, conv_filter_tap(fs, p.s, p.flip), p.pad_w, p.stride_w, p.dil_w);
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w)
                    std::fill_n(d, cg, T(0));
                else
                    std::copy_n(x + ((n * p.h + ih) * p.w + iw) * p.c + g * cg, cg, d);
            }
        }
    }
}

// col2im: dx pixels of images [n0, n0 + images), group g's channels, = beta * dx + the col
// entries of every (output pixel, filter element) that reads them.
template <typename T>
void nhwc_fold(const ConvProblem& p, const T* col, T* dx, int64_t n0, int64_t images, int64_t g, T beta,
               int threads) {
    const int64_t cg = p.c_per_group(), l = p.r * p.s * cg;
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2)
    for (int64_t n = 0; n < images; ++n)
        for (int64_t ih = 0; ih < p.h; ++ih)
            for (int64_t iw = 0; iw < p.w; ++iw) {
                T* d = dx + (((n0 + n) * p.h + ih) * p.w + iw) * p.c + g * cg;
                if (beta == T(0))
                    std::fill_n(d, cg, T(0));
                else
                    for (int64_t c = 0; c < cg; ++c) d[c] *= beta;
                for (int64_t fr = 0; fr < p.r; ++fr) {
                    const int64_t oh =
                        conv_output_reading(ih, conv_filter_tap(fr, p.r, p.flip), p.pad_h, p.stride_h, p.dil_h, p.p);
                    if (oh < 0) continue;
                    for (int64_t fs = 0; fs < p.s; ++fs) {
                        const int64_t ow = conv_output_reading(iw, conv_filter_tap(fs, p.s, p.flip), p.pad_w,
                                                               p.stride_w, p.dil_w, p.q);
                        if (ow < 0) continue;
                        const T* src = col + ((n * p.p + oh) * p.q + ow) * l + (fr * p.s + fs) * cg;
#pragma omp simd
                        for (int64_t c = 0; c < cg; ++c) d[c] += src[c];
                    }
                }
            }
}

// dst[k][(fr, fs, c)] = src[k][c][fr][fs] (KCRS -> K x L), or the reverse with alpha and beta.
template <typename T>
void filters_to_krsc(const ConvProblem& p, const T* src, T* dst, int threads) {
    const int64_t cg = p.c_per_group(), rs = p.r * p.s;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < p.k; ++k)
        for (int64_t c = 0; c < cg; ++c)
            for (int64_t f = 0; f < rs; ++f) dst[(k * rs + f) * cg + c] = src[(k * cg + c) * rs + f];
}

template <typename T>
void filters_from_krsc(const ConvProblem& p, const T* src, T* dst, T alpha, T beta, int threads) {
    const int64_t cg = p.c_per_group(), rs = p.r * p.s;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < p.k; ++k)
        for (int64_t c = 0; c < cg; ++c)
            for (int64_t f = 0; f < rs; ++f) {
                T* d = dst + (k * cg + c) * rs + f;
                const T v = alpha * src[(k * rs + f) * cg + c];
                *d = beta == T(0) ? v : v + beta * *d;
            }
}

template <typename T>
void data_nhwc(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), l = cg * p.r * p.s, pq = p.p * p.q;
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    if (direct_1x1(p)) {  // in place, as POINTWISE
        BlasThreads blas_threads(threads);
        return nhwc_1x1_data_gemms(p.n * pq, p.c, p.k, p.groups, static_cast<const T*>(a.w), dy, dx, T(a.alpha),
                                   T(a.beta));
    }
    if (data_scatters(p)) {
        int64_t dy_strides[5], dx_strides[5];
        nhwc_strides(p.k, p.p, p.q, dy_strides);
        nhwc_strides(p.c, p.h, p.w, dx_strides);
        return im2col_nd::backward_data(p, a.ctx, im2col_nd::Depth{}, dy, dy_strides, a.w, dx, dx_strides,
                                              a.alpha, a.beta, a.workspace);
    }
    T* wt = static_cast<T*>(a.workspace);
    T* col = wt + round64(size_t(p.k * l) * sizeof(T)) / sizeof(T);
    const int64_t chunk = nhwc_chunk_images(p);
    filters_to_krsc(p, static_cast<const T*>(a.w), wt, threads);
    BlasThreads blas_threads(threads);
    for (int64_t g = 0; g < p.groups; ++g)
        for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
            const int64_t images = std::min(chunk, p.n - n0);
            gemm(false, false, int(images * pq), int(l), int(kg), T(a.alpha), dy + n0 * pq * p.k + g * kg, int(p.k),
                 wt + g * kg * l, int(l), T(0), col, int(l));
            nhwc_fold(p, col, dx, n0, images, g, T(a.beta), threads);
        }
}

// Backward filter, NHWC: the reduction over the N*P*Q output pixels in blocks of rows whose col
// block fills half of L2; each thread unfolds its own blocks and reduces them with a
// single-threaded GEMM into a partial dWt of its own (the unfolded rows are read back from L2,
// not memory), and the partials are summed at the end.
template <typename T>
int64_t filter_block_rows(const ConvProblem& p) {
    const int64_t row = p.c_per_group() * p.r * p.s * int64_t(sizeof(T));
    return std::max<int64_t>(16, nhwc_gemm::cache_bytes(2, 512 << 10) / 2 / std::max<int64_t>(row, 1));
}

template <typename T>
void filter_nhwc(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), l = cg * p.r * p.s, pq = p.p * p.q;
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    if (direct_1x1(p)) {  // in place, as POINTWISE
        BlasThreads blas_threads(threads);
        return nhwc_1x1_filter_gemms(p.n * pq, p.c, p.k, p.groups, x, dy, static_cast<T*>(a.dw), T(a.alpha),
                                     T(a.beta));
    }
    T* dwt = static_cast<T*>(a.workspace);
    const int64_t rows = p.n * pq, block = filter_block_rows<T>(p), blocks = (rows + block - 1) / block;
    const int teams = int(std::min<int64_t>(threads, blocks));
    for (int64_t g = 0; g < p.groups; ++g)  // dWt[g] = the sum over blocks of dY_block^T (Kg x rows) * col (rows x L)
        sum_tasks_in_partials<T>(blocks, teams, size_t(kg * l), size_t(block * l), dwt + g * kg * l,
                                 [&](int64_t b, T* col, T* sum, bool first) {
                                     const int64_t m0 = b * block, m1 = std::min(rows, m0 + block);
                                     nhwc_unfold(p, x, col, m0, m1, g);
                                     gemm(true, false, int(kg), int(l), int(m1 - m0), T(1), dy + m0 * p.k + g * kg,
                                          int(p.k), col, int(l), first ? T(0) : T(1), sum, int(l));
                                 });
    filters_from_krsc(p, dwt, static_cast<T*>(a.dw), T(a.alpha), T(a.beta), threads);
}

template <typename T>
void data_any(const BwdDataArgs& a) {
    if (a.prob.nhwc)
        data_nhwc<T>(a);
    else
        data_t<T>(a);
}

template <typename T>
void filter_any(const BwdFilterArgs& a) {
    if (a.prob.nhwc)
        filter_nhwc<T>(a);
    else
        filter_t<T>(a);
}

void run_data(const BwdDataArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        data_any<double>(a);
    else
        data_any<float>(a);
}

void run_filter(const BwdFilterArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        filter_any<double>(a);
    else
        filter_any<float>(a);
}

}  // namespace

extern const Solver im2col_gemm_bwd_data_solver;
const Solver im2col_gemm_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = data_workspace_bytes,
    .backward_data = run_data, .runs_nhwc = runs_nhwc};
extern const Solver im2col_gemm_bwd_filter_solver;
const Solver im2col_gemm_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run_filter, .runs_nhwc = runs_nhwc};

}  // namespace cpu
}  // namespace convcore
