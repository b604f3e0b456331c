// IM2COL_GEMM over 1 to 3 spatial axes in blocks of output pixels (cpu/im2col_gemm_nd.hpp has the
// math).
#include "cpu/im2col_gemm_nd.hpp"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "common/conv_index.hpp"
#include "cpu/blas_gemm.hpp"
#include "cpu/blas_threads.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/partial_sums.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace im2col_nd {

namespace {

// thread_vector sites
struct Columns;
struct CoveredD;
struct CoveredH;
struct CoveredW;

// One spatial axis: input and output sizes, window size, padding, stride, dilation.
struct Axis {
    int64_t in, out, k, pad, stride, dil;
    // Backward data: whether a window covers input index i (at most one does: stride >= k, and
    // dilation 1 unless k is 1).
    bool covered(int64_t i) const {
        const int64_t u = i + pad;
        return u >= 0 && u / stride < out && u % stride < k;
    }
};

struct Axes {
    Axis d, h, w;
};

Axes axes_of(const ConvProblem& p, const Depth& depth) {
    return Axes{{depth.d_in, depth.d_out, depth.taps, depth.pad, depth.stride, depth.dil},
                {p.h, p.p, p.r, p.pad_h, p.stride_h, p.dil_h},
                {p.w, p.q, p.s, p.pad_w, p.stride_w, p.dil_w}};
}

bool disjoint_axis(int64_t k, int64_t stride, int64_t dil) { return stride >= k && (k == 1 || dil == 1); }

int64_t window_elems(const ConvProblem& p, const Depth& depth) { return depth.taps * p.r * p.s * p.c_per_group(); }

// How y's or dY's rows (output pixels of one image) are a GEMM operand: rows `pixel` elements
// apart with channels contiguous (A, lda = pixel), or channels `channel` apart with pixels
// contiguous (A^T, lda = channel). lda 0: neither.
struct Operand {
    bool transposed = false;
    int64_t lda = 0;
};

Operand operand_of(const ConvProblem& p, const Depth& depth, const int64_t s[5]) {
    // the stride between consecutive pixels (od, oh, ow) in row-major order, -1 if not uniform
    int64_t pixel = -1;
    if (p.q > 1) pixel = s[4];
    else if (p.p > 1) pixel = s[3];
    else if (depth.d_out > 1) pixel = s[2];
    if (pixel >= 0 && ((p.p > 1 && s[3] != p.q * pixel) || (depth.d_out > 1 && s[2] != p.p * p.q * pixel))) return {};
    const int64_t kg = p.k_per_group(), rows = depth.d_out * p.p * p.q;
    if (pixel < 0) pixel = s[1] == 1 ? std::max<int64_t>(kg, 1) : 1;  // one pixel: either reading works
    if ((s[1] == 1 || kg == 1) && pixel >= kg) return Operand{false, std::max<int64_t>(pixel, 1)};
    if (pixel == 1 && s[1] >= rows) return Operand{true, std::max<int64_t>(s[1], 1)};
    return {};
}

// The rows of a col block: at most half of L2 (and at least 16), in as many equal blocks per image
// as give every thread the same number of them (two blocks of 4096 and 2176 rows would leave one
// of two threads idle a third of the time).
int64_t block_rows(const ConvProblem& p, const Depth& depth, int threads) {
    const int64_t row_bytes = window_elems(p, depth) * int64_t(p.elem_size()), per_image = depth.d_out * p.p * p.q;
    const int64_t most = std::max<int64_t>(16, cache_bytes(2, 512 << 10) / 2 / std::max<int64_t>(row_bytes, 1));
    int64_t blocks = (per_image + most - 1) / most;
    while ((p.n * blocks) % threads != 0 && (per_image + blocks) / (blocks + 1) >= 16) ++blocks;
    return std::max<int64_t>((per_image + blocks - 1) / blocks, 1);
}

template <typename T>
std::vector<T>& col_scratch() {
    return thread_vector<T, Columns>();
}

// f(i, j) for every filter element: i its index in K x L order, wt[k][((t * R + r) * S + s) * Cg + c]
// by window position (t, r, s), j its index in w (K x C/g x T x R x S), where the position's
// element is mirrored in the true-convolution mode.
template <typename F>
void for_each_filter_element(const ConvProblem& p, const Depth& depth, int threads, F f) {
    const int64_t cg = p.c_per_group(), taps = depth.taps, l = window_elems(p, depth);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < p.k; ++k)
        for (int64_t t = 0; t < taps; ++t)
            for (int64_t r = 0; r < p.r; ++r)
                for (int64_t s = 0; s < p.s; ++s) {
                    const int64_t ft = conv_filter_tap(t, taps, p.flip), fr = conv_filter_tap(r, p.r, p.flip),
                                  fs = conv_filter_tap(s, p.s, p.flip);
                    const int64_t i = k * l + ((t * p.r + r) * p.s + s) * cg;
                    for (int64_t c = 0; c < cg; ++c) f(i + c, (((k * cg + c) * taps + ft) * p.r + fr) * p.s + fs);
                }
}

// The filters in K x L order (wt), from w.
template <typename T>
void filters_by_position(const ConvProblem& p, const Depth& depth, const T* w, T* wt, int threads) {
    for_each_filter_element(p, depth, threads, [&](int64_t i, int64_t j) { wt[i] = w[j]; });
}

// dx = beta * dx on the elements no window covers.
template <typename T>
void scale_uncovered(const ConvProblem& p, const Axes& a, const int64_t xs[5], T* dx, T beta, int threads) {
    const auto coverage = [](const Axis& axis, std::vector<char>& out) -> const std::vector<char>& {
        out.resize(size_t(axis.in));
        for (int64_t i = 0; i < axis.in; ++i) out[size_t(i)] = axis.covered(i);
        return out;
    };
    const std::vector<char>& cd = coverage(a.d, thread_vector<char, CoveredD>());
    const std::vector<char>& ch = coverage(a.h, thread_vector<char, CoveredH>());
    const std::vector<char>& cw = coverage(a.w, thread_vector<char, CoveredW>());
    const auto all = [](const std::vector<char>& v) { return std::all_of(v.begin(), v.end(), [](char c) { return c != 0; }); };
    if (all(cd) && all(ch) && all(cw)) return;
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2)
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t id = 0; id < a.d.in; ++id)
            for (int64_t ih = 0; ih < a.h.in; ++ih)
                for (int64_t iw = 0; iw < a.w.in; ++iw) {
                    if (cd[size_t(id)] && ch[size_t(ih)] && cw[size_t(iw)]) continue;
                    T* d = dx + n * xs[0] + id * xs[2] + ih * xs[3] + iw * xs[4];
                    for (int64_t c = 0; c < p.c; ++c) d[c * xs[1]] = beta == T(0) ? T(0) : beta * d[c * xs[1]];
                }
}

// Output pixel j's (od, oh, ow) within its image, stepped through consecutive pixels without
// divisions (three 64-bit divisions per row cost as much as unfolding a row of few channels).
struct OutputAt {
    int64_t od, oh, ow;
    OutputAt(const Axes& a, int64_t j) : od(j / (a.h.out * a.w.out)), oh(j / a.w.out % a.h.out), ow(j % a.w.out) {}
    void next(const Axes& a) {
        if (++ow == a.w.out) {
            ow = 0;
            if (++oh == a.h.out) oh = 0, ++od;
        }
    }
};

// dx's elements of rows [j0, j1) of image n, group g, from their col block (rows x L).
template <typename T>
void scatter(const ConvProblem& p, const Axes& a, const T* col, int64_t n, int64_t g, int64_t j0, int64_t j1, T* dx,
             const int64_t xs[5], T beta) {
    const int64_t cg = p.c_per_group(), l = a.d.k * a.h.k * a.w.k * cg;
    OutputAt at(a, j0);
    for (int64_t j = j0; j < j1; ++j, at.next(a)) {
        const int64_t od = at.od, oh = at.oh, ow = at.ow;
        const T* row = col + (j - j0) * l;
        for (int64_t t = 0; t < a.d.k; ++t) {
            const int64_t id = od * a.d.stride - a.d.pad + t;
            if (id < 0 || id >= a.d.in) continue;
            for (int64_t r = 0; r < a.h.k; ++r) {
                const int64_t ih = oh * a.h.stride - a.h.pad + r;
                if (ih < 0 || ih >= a.h.in) continue;
                for (int64_t s = 0; s < a.w.k; ++s) {
                    const int64_t iw = ow * a.w.stride - a.w.pad + s;
                    if (iw < 0 || iw >= a.w.in) continue;
                    const T* src = row + ((t * a.h.k + r) * a.w.k + s) * cg;
                    T* d = dx + n * xs[0] + g * cg * xs[1] + id * xs[2] + ih * xs[3] + iw * xs[4];
                    if (xs[1] == 1) {
                        if (beta == T(0))
                            std::copy_n(src, cg, d);
                        else
#pragma omp simd
                            for (int64_t c = 0; c < cg; ++c) d[c] = src[c] + beta * d[c];
                    } else {
                        for (int64_t c = 0; c < cg; ++c) {
                            T& v = d[c * xs[1]];
                            v = beta == T(0) ? src[c] : src[c] + beta * v;
                        }
                    }
                }
            }
        }
    }
}

// dst[0, count) = src[0, count): the runs are short (a window row's few channels), an inline loop
// costs less than a call to memmove.
template <typename T>
inline void copy_run(const T* src, int64_t count, T* dst) {
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) dst[i] = src[i];
}

// col block (rows [j0, j1) of image n, group g) = x's elements in the windows, zero outside x.
template <typename T>
void gather(const ConvProblem& p, const Axes& a, const T* x, const int64_t xs[5], int64_t n, int64_t g, int64_t j0,
            int64_t j1, T* col) {
    const int64_t cg = p.c_per_group(), l = a.d.k * a.h.k * a.w.k * cg, run = a.w.k * cg;
    const T* xg = x + n * xs[0] + g * cg * xs[1];
    // A window row's S pixels of Cg channels are one run of x where the channels are its pixels'
    // only ones and W has no dilation (NDHWC with one group, or one channel: the stems).
    const bool runs = (xs[1] == 1 || cg == 1) && xs[4] == cg && a.w.dil == 1;
    OutputAt at(a, j0);
    for (int64_t j = j0; j < j1; ++j, at.next(a)) {
        const int64_t od = at.od, oh = at.oh, ow = at.ow;
        T* row = col + (j - j0) * l;
        for (int64_t t = 0; t < a.d.k; ++t) {
            const int64_t id = od * a.d.stride - a.d.pad + t * a.d.dil;
            for (int64_t r = 0; r < a.h.k; ++r) {
                const int64_t ih = oh * a.h.stride - a.h.pad + r * a.h.dil;
                if (runs) {
                    T* dst = row + (t * a.h.k + r) * run;
                    if (id < 0 || id >= a.d.in || ih < 0 || ih >= a.h.in) {
                        std::fill_n(dst, run, T(0));
                        continue;
                    }
                    const int64_t iw0 = ow * a.w.stride - a.w.pad;
                    const int64_t lo = std::clamp<int64_t>(-iw0, 0, a.w.k), hi = std::clamp<int64_t>(a.w.in - iw0, lo, a.w.k);
                    std::fill_n(dst, lo * cg, T(0));
                    copy_run(xg + id * xs[2] + ih * xs[3] + (iw0 + lo) * cg, (hi - lo) * cg, dst + lo * cg);
                    std::fill_n(dst + hi * cg, (a.w.k - hi) * cg, T(0));
                    continue;
                }
                for (int64_t s = 0; s < a.w.k; ++s) {
                    const int64_t iw = ow * a.w.stride - a.w.pad + s * a.w.dil;
                    T* dst = row + ((t * a.h.k + r) * a.w.k + s) * cg;
                    if (id < 0 || id >= a.d.in || ih < 0 || ih >= a.h.in || iw < 0 || iw >= a.w.in) {
                        std::fill_n(dst, cg, T(0));
                        continue;
                    }
                    const T* src = xg + id * xs[2] + ih * xs[3] + iw * xs[4];
                    if (xs[1] == 1)
                        copy_run(src, cg, dst);
                    else
                        for (int64_t c = 0; c < cg; ++c) dst[c] = src[c * xs[1]];
                }
            }
        }
    }
}

// The col row of output pixel j (of image n, group g) in w's order, (c, t, r, s), each window
// position mirrored in true convolution, zero outside x: a GEMM on such rows writes dw (K x C/g
// x T x R x S) itself.
template <typename T>
void gather_in_filter_order(const ConvProblem& p, const Axes& a, const T* x, const int64_t xs[5], int64_t n,
                            int64_t g, int64_t j, T* row) {
    const int64_t cg = p.c_per_group(), positions = a.d.k * a.h.k * a.w.k;
    const T* xg = x + n * xs[0] + g * cg * xs[1];
    const int64_t od = j / (a.h.out * a.w.out), oh = j / a.w.out % a.h.out, ow = j % a.w.out;
    for (int64_t t = 0; t < a.d.k; ++t)
        for (int64_t r = 0; r < a.h.k; ++r)
            for (int64_t s = 0; s < a.w.k; ++s) {
                const int64_t id = od * a.d.stride - a.d.pad + t * a.d.dil, ih = oh * a.h.stride - a.h.pad + r * a.h.dil,
                              iw = ow * a.w.stride - a.w.pad + s * a.w.dil;
                T* dst = row + (conv_filter_tap(t, a.d.k, p.flip) * a.h.k + conv_filter_tap(r, a.h.k, p.flip)) * a.w.k +
                         conv_filter_tap(s, a.w.k, p.flip);
                if (id < 0 || id >= a.d.in || ih < 0 || ih >= a.h.in || iw < 0 || iw >= a.w.in) {
                    for (int64_t c = 0; c < cg; ++c) dst[c * positions] = T(0);
                    continue;
                }
                const T* src = xg + id * xs[2] + ih * xs[3] + iw * xs[4];
                for (int64_t c = 0; c < cg; ++c) dst[c * positions] = src[c * xs[1]];
            }
}

// f(n, j0, j1, col) for every block of output pixels, each block one thread's, with BLAS
// single-threaded inside; col is the thread's scratch of block * L elements.
template <typename T, typename F>
void for_each_block(const ConvProblem& p, const Depth& depth, int threads, F f) {
    const int64_t l = window_elems(p, depth), per_image = depth.d_out * p.p * p.q;
    const int64_t block = block_rows(p, depth, threads), blocks = (per_image + block - 1) / block, tasks = p.n * blocks;
    const int teams = int(std::clamp<int64_t>(tasks, 1, threads));
    BlasThreads blas_threads(1);
#pragma omp parallel num_threads(teams)
    {
        std::vector<T>& col = col_scratch<T>();
        if (col.size() < size_t(block * l)) col.resize(size_t(block * l));
        for (int64_t task = omp_get_thread_num(); task < tasks; task += teams) {
            const int64_t n = task / blocks, j0 = task % blocks * block;
            f(n, j0, std::min(per_image, j0 + block), col.data());
        }
    }
}

// y = alpha * conv(x, w) + beta * y, in one of two ways:
// - blocks of output pixels whose col fills half of L2 (block_rows), each thread's block
//   gathered and multiplied by Wt[g] (single-threaded GEMMs), so each block reads the filters;
// - where an image's output pixels are no more than a group's filters (Kg) and take more than one
//   block (3x3x3 layers of 512 channels on 2x7x7: 98 pixels, blocks of 18 rows, 28 MB of
//   filters read by each of 6 blocks), every thread gathers a part of the image's col (no larger
//   than the filters) and one multi-threaded GEMM per image and group reads the filters once.
template <typename T>
void forward_t(const ConvProblem& p, const Context& ctx, const Depth& depth, const T* x, const int64_t xs[5],
               const T* w, T* y, const int64_t ys[5], T alpha, T beta, T* wt) {
    const Axes a = axes_of(p, depth);
    const Operand op = operand_of(p, depth, ys);
    const int threads = ctx.threads();
    const int64_t kg = p.k_per_group(), l = window_elems(p, depth), per_image = depth.d_out * p.p * p.q;
    filters_by_position(p, depth, w, wt, threads);
    // y rows [j0, j1) of image n, group g = alpha * col (rows x L) * Wt[g]^T + beta * y
    const auto multiply = [&](int64_t n, int64_t g, int64_t j0, int64_t j1, const T* col) {
        const T* wg = wt + g * kg * l;
        T* out = y + n * ys[0] + g * kg * ys[1];
        if (op.transposed)  // y^T (Kg x rows, channels ys[1] apart) = Wt[g] * col^T
            gemm(false, true, int(kg), int(j1 - j0), int(l), alpha, wg, int(l), col, int(l), beta, out + j0,
                 int(op.lda));
        else  // y (rows x Kg, pixels op.lda apart) = col * Wt[g]^T
            gemm(false, true, int(j1 - j0), int(kg), int(l), alpha, col, int(l), wg, int(l), beta, out + j0 * op.lda,
                 int(op.lda));
    };
    if (per_image <= kg && block_rows(p, depth, 1) < per_image) {
        std::vector<T>& col = col_scratch<T>();
        if (col.size() < size_t(per_image * l)) col.resize(size_t(per_image * l));
        for (int64_t n = 0; n < p.n; ++n)
            for (int64_t g = 0; g < p.groups; ++g) {
#pragma omp parallel for num_threads(threads) schedule(static)
                for (int64_t j = 0; j < per_image; ++j) gather(p, a, x, xs, n, g, j, j + 1, col.data() + j * l);
                BlasThreads blas_threads(threads);
                multiply(n, g, 0, per_image, col.data());
            }
        return;
    }
    for_each_block<T>(p, depth, threads, [&](int64_t n, int64_t j0, int64_t j1, T* col) {
        for (int64_t g = 0; g < p.groups; ++g) {
            gather(p, a, x, xs, n, g, j0, j1, col);
            multiply(n, g, j0, j1, col);
        }
    });
}

template <typename T>
void backward_data_t(const ConvProblem& p, const Context& ctx, const Depth& depth, const T* dy, const int64_t ys[5],
                     const T* w, T* dx, const int64_t xs[5], T alpha, T beta, T* wt) {
    const Axes a = axes_of(p, depth);
    const Operand op = operand_of(p, depth, ys);
    const int64_t kg = p.k_per_group(), l = window_elems(p, depth), pixel = op.transposed ? 1 : op.lda;
    filters_by_position(p, depth, w, wt, ctx.threads());
    scale_uncovered(p, a, xs, dx, beta, ctx.threads());
    for_each_block<T>(p, depth, ctx.threads(), [&](int64_t n, int64_t j0, int64_t j1, T* col) {
        for (int64_t g = 0; g < p.groups; ++g) {
            const T* rows = dy + n * ys[0] + g * kg * ys[1] + j0 * pixel;
            gemm(op.transposed, false, int(j1 - j0), int(l), int(kg), alpha, rows, int(op.lda), wt + g * kg * l, int(l),
                 T(0), col, int(l));
            scatter(p, a, col, n, g, j0, j1, dx, xs, beta);
        }
    });
}

// dw = alpha * dwt (K x L order) + beta * dw (beta == 0: dw never read): filters_by_position's
// inverse.
template <typename T>
void filters_from_position(const ConvProblem& p, const Depth& depth, const T* dwt, T* dw, T alpha, T beta,
                           int threads) {
    for_each_filter_element(p, depth, threads, [&](int64_t i, int64_t j) {
        dw[j] = beta == T(0) ? alpha * dwt[i] : alpha * dwt[i] + beta * dw[j];
    });
}

// dW[g] (Kg x L) = the sum over the output pixels of dY^T (Kg x pixels) * col (pixels x L), in
// one of two ways:
// - blocks of pixels whose col fills half of L2 (block_rows), each thread reducing its own into
//   a partial sum of its own (cpu/partial_sums.hpp; the col block read back from L2), the
//   partials added into the workspace's dWt, then reordered into dw;
// - where the output pixels are few against the filters (N*D'*P*Q at most threads * Kg: 3x3x3
//   layers of 256-512 channels on small volumes), the partials (Kg x L per thread) would cost
//   more memory traffic than the product, and L2-sized blocks would give GEMMs too few rows to
//   reduce over: each image's pixels are unfolded by every thread into one col (no more memory
//   than the partials) in w's column order (gather_in_filter_order), and one multi-threaded GEMM
//   per image adds alpha * dY^T * col into dw itself.
template <typename T>
void backward_filter_t(const ConvProblem& p, const Context& ctx, const Depth& depth, const T* x, const int64_t xs[5],
                       const T* dy, const int64_t ys[5], T* dw, T alpha, T beta, T* dwt) {
    const Axes a = axes_of(p, depth);
    const Operand op = operand_of(p, depth, ys);
    const int threads = ctx.threads();
    const int64_t kg = p.k_per_group(), l = window_elems(p, depth), per_image = depth.d_out * p.p * p.q;
    const int64_t pixel = op.transposed ? 1 : op.lda;
    const int64_t block = block_rows(p, depth, threads), blocks = (per_image + block - 1) / block, tasks = p.n * blocks;
    const int teams = int(std::clamp<int64_t>(tasks, 1, threads));
    // out = scale * dY^T (Kg x rows j0 .. j1 of image n, group g) * col (rows x L) + keep * out
    const auto reduce = [&](int64_t n, int64_t g, int64_t j0, int64_t j1, const T* col, T scale, T keep, T* out) {
        const T* rows = dy + n * ys[0] + g * kg * ys[1] + j0 * pixel;
        // dY^T: rows x Kg with pixels lda apart (transposed), or Kg x rows as stored
        gemm(!op.transposed, false, int(kg), int(l), int(j1 - j0), scale, rows, int(op.lda), col, int(l), keep, out,
             int(l));
    };
    if (p.n * per_image <= threads * kg) {
        std::vector<T>& col = col_scratch<T>();
        if (col.size() < size_t(per_image * l)) col.resize(size_t(per_image * l));
        for (int64_t g = 0; g < p.groups; ++g)
            for (int64_t n = 0; n < p.n; ++n) {
#pragma omp parallel for num_threads(threads) schedule(static)
                for (int64_t j = 0; j < per_image; ++j) gather_in_filter_order(p, a, x, xs, n, g, j, col.data() + j * l);
                BlasThreads blas_threads(threads);
                reduce(n, g, 0, per_image, col.data(), alpha, n == 0 ? beta : T(1), dw + g * kg * l);
            }
        return;
    }
    BlasThreads blas_threads(1);
    for (int64_t g = 0; g < p.groups; ++g)
        sum_tasks_in_partials<T>(tasks, teams, size_t(kg * l), size_t(block * l), dwt + g * kg * l,
                                 [&](int64_t task, T* col, T* sum, bool first) {
                                     const int64_t n = task / blocks, j0 = task % blocks * block,
                                                   j1 = std::min(per_image, j0 + block);
                                     gather(p, a, x, xs, n, g, j0, j1, col);
                                     reduce(n, g, j0, j1, col, T(1), first ? T(0) : T(1), sum);
                                 });
    filters_from_position(p, depth, dwt, dw, alpha, beta, threads);
}

}  // namespace

bool one_to_one(const ConvProblem& p, const Depth& depth) {
    return depth.taps == 1 && depth.stride == 1 && depth.pad == 0 && p.is_1x1() && p.unit_stride() && p.pad_h == 0 &&
           p.pad_w == 0;
}

bool disjoint(const ConvProblem& p, const Depth& depth) {
    return !one_to_one(p, depth) && disjoint_axis(depth.taps, depth.stride, depth.dil) &&
           disjoint_axis(p.r, p.stride_h, p.dil_h) && disjoint_axis(p.s, p.stride_w, p.dil_w);
}

std::string why_not(const ConvProblem& p, const Depth& depth, bool any_windows, const int64_t strides[5]) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE) return "IM2COL_GEMM runs float32 and float64 only";
    if (!any_windows && !disjoint(p, depth))
        return "IM2COL_GEMM's backward data over 1 to 3 axes needs disjoint windows: in every axis a stride of at "
               "least the filter size and dilation 1";
    const int64_t l = window_elems(p, depth), rows = depth.d_out * p.p * p.q;
    if (p.k > INT_MAX || l > INT_MAX || rows > INT_MAX || p.k * l > INT_MAX)
        return "IM2COL_GEMM: a GEMM dimension exceeds the 32-bit BLAS interface";
    const Operand op = operand_of(p, depth, strides);
    if (op.lda == 0 || op.lda > INT_MAX)
        return "IM2COL_GEMM over 1 to 3 axes reads and writes the output's pixels (y or dy) one stride apart "
               "(NDHWC or NCDHW, packed per image)";
    return "";
}

size_t workspace_bytes(const ConvProblem& p, const Depth& depth) {
    return size_t(p.k * window_elems(p, depth)) * p.elem_size();
}

void forward(const ConvProblem& p, const Context& ctx, const Depth& depth, const void* x, const int64_t x_strides[5],
             const void* w, void* y, const int64_t y_strides[5], double alpha, double beta, void* workspace) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        forward_t(p, ctx, depth, static_cast<const double*>(x), x_strides, static_cast<const double*>(w),
                  static_cast<double*>(y), y_strides, alpha, beta, static_cast<double*>(workspace));
    else
        forward_t(p, ctx, depth, static_cast<const float*>(x), x_strides, static_cast<const float*>(w),
                  static_cast<float*>(y), y_strides, float(alpha), float(beta), static_cast<float*>(workspace));
}

void backward_filter(const ConvProblem& p, const Context& ctx, const Depth& depth, const void* x,
                     const int64_t x_strides[5], const void* dy, const int64_t dy_strides[5], void* dw, double alpha,
                     double beta, void* workspace) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        backward_filter_t(p, ctx, depth, static_cast<const double*>(x), x_strides, static_cast<const double*>(dy),
                          dy_strides, static_cast<double*>(dw), alpha, beta, static_cast<double*>(workspace));
    else
        backward_filter_t(p, ctx, depth, static_cast<const float*>(x), x_strides, static_cast<const float*>(dy),
                          dy_strides, static_cast<float*>(dw), float(alpha), float(beta),
                          static_cast<float*>(workspace));
}

void backward_data(const ConvProblem& p, const Context& ctx, const Depth& depth, const void* dy,
                   const int64_t dy_strides[5], const void* w, void* dx, const int64_t dx_strides[5], double alpha,
                   double beta, void* workspace) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        backward_data_t(p, ctx, depth, static_cast<const double*>(dy), dy_strides, static_cast<const double*>(w),
                        static_cast<double*>(dx), dx_strides, alpha, beta, static_cast<double*>(workspace));
    else
        backward_data_t(p, ctx, depth, static_cast<const float*>(dy), dy_strides, static_cast<const float*>(w),
                        static_cast<float*>(dx), dx_strides, float(alpha), float(beta),
                        static_cast<float*>(workspace));
}

}  // namespace im2col_nd
}  // namespace cpu
}  // namespace convcore
