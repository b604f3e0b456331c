// POINTWISE's backward passes on the CPU: 1x1 filters, in NHWC and NCHW natively. The forward
// pass is a GEMM over the input pixels the outputs read (cpu/pointwise.cpp), so its backward
// passes are the two transposed GEMMs, called on the activations in place (BLAS, no im2col):
//   NHWC, M = N*P*Q pixel rows, per group g (columns g*Cg.. of x, g*Kg.. of dy):
//     data:   dX[M x Cg]  = alpha * dY[M x Kg] * W[g] (Kg x Cg)     + beta * dX
//     filter: dW[g] (Kg x Cg) = alpha * dY^T (Kg x M) * X[M x Cg]   + beta * dW[g]
//   NCHW, per image n and group g (planes of P*Q pixels):
//     data:   dX[n, g] (Cg x PQ) = alpha * W[g]^T (Cg x Kg) * dY[n, g] (Kg x PQ) + beta * dX[n, g]
//     filter: dW[g] += alpha * dY[n, g] (Kg x PQ) * X[n, g]^T (PQ x Cg), summed over n.
// With stride 1 and no padding every output pixel reads the input pixel at its own position, and
// X / dX are x / dx themselves. Otherwise (a stride, or padding) output pixel o reads at most one
// input pixel, and distinct outputs read distinct inputs: the filter pass gathers the pixels the
// outputs read into the workspace (zeros where they fall in the padding), the data pass computes
// dX there and adds it into dx, whose other pixels receive no gradient.
// NHWC backward data without stride or padding is instead a forward 1x1 convolution of dy with
// the transposed filter (core/backward_via_forward), run by POINTWISE's forward register-blocked
// kernel: BLAS packs both operands first, which costs more than the product where the channel
// counts are small (MobileNet's and EfficientNet's 16-192). IM2COL_GEMM runs the same pass as
// one BLAS GEMM in place, and "auto" times the two.
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/conv_index.hpp"
#include "core/backward_via_forward.hpp"
#include "core/solver.hpp"
#include "cpu/blas_gemm.hpp"
#include "cpu/blas_threads.hpp"

namespace convcore {
namespace cpu {
namespace {

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "POINTWISE runs float32 and float64 only";
    if (!p.is_1x1())
        return "POINTWISE needs a 1x1 filter, got " + std::to_string(p.r) + "x" + std::to_string(p.s);
    if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX || p.k > INT_MAX || p.c > INT_MAX ||
        p.p * p.q > INT_MAX)
        return "POINTWISE: a GEMM dimension (K=" + std::to_string(p.k) + ", C=" + std::to_string(p.c) +
               ", P*Q=" + std::to_string(p.p * p.q) + ") exceeds the 32-bit BLAS interface";
    return "";
}

bool runs_nhwc(const ConvProblem&) { return true; }

bool in_place(const ConvProblem& p) { return p.unit_stride() && p.pad_h == 0 && p.pad_w == 0; }

// The pixels the outputs read, in x's layout (N x P x Q x C, or N x C x P x Q).
size_t workspace_bytes(const ConvProblem& p) {
    return in_place(p) ? 0 : size_t(p.n * p.c * p.p * p.q) * p.elem_size();
}

// Backward data through the forward kernel (see the top of the file).
bool data_via_forward(const ConvProblem& p) {
    return p.nhwc && in_place(p) && via_forward::data_runs_nhwc(p, CONVCORE_FWD_ALGO_POINTWISE) &&
           via_forward::data_why_not(p, CONVCORE_FWD_ALGO_POINTWISE).empty();
}

size_t data_workspace_bytes(const ConvProblem& p) {
    return data_via_forward(p) ? via_forward::data_workspace_bytes(p, CONVCORE_FWD_ALGO_POINTWISE)
                               : workspace_bytes(p);
}

// The input pixel output pixel (oh, ow) reads (an index into an H*W plane), or -1 in the padding.
int64_t input_pixel(const ConvProblem& p, int64_t oh, int64_t ow) {
    const int64_t ih = oh * p.stride_h - p.pad_h, iw = ow * p.stride_w - p.pad_w;
    return ih < 0 || ih >= p.h || iw < 0 || iw >= p.w ? -1 : ih * p.w + iw;
}

// Gather (x -> X, zeros for padding) or scatter-add (X -> dx) between x's pixels and the
// pixels the outputs read. Distinct outputs read distinct inputs, so the adds never collide.
template <typename T, bool Gather>
void move_pixels(const ConvProblem& p, const Context& ctx, T* x, T* sub) {
    const int64_t pq = p.p * p.q, hw = p.h * p.w;
#pragma omp parallel for num_threads(ctx.threads()) schedule(static) collapse(2)
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t o = 0; o < pq; ++o) {
            const int64_t i = input_pixel(p, o / p.q, o % p.q);
            if (i < 0) {
                if (Gather) {
                    if (p.nhwc)
                        std::fill_n(sub + (n * pq + o) * p.c, p.c, T(0));
                    else
                        for (int64_t c = 0; c < p.c; ++c) sub[(n * p.c + c) * pq + o] = T(0);
                }
                continue;
            }
            if (p.nhwc) {
                T* xs = x + (n * hw + i) * p.c;
                T* ss = sub + (n * pq + o) * p.c;
                if (Gather)
                    std::copy_n(xs, p.c, ss);
                else
                    for (int64_t c = 0; c < p.c; ++c) xs[c] += ss[c];
            } else {
                for (int64_t c = 0; c < p.c; ++c) {
                    T& xv = x[(n * p.c + c) * hw + i];
                    T& sv = sub[(n * p.c + c) * pq + o];
                    if (Gather)
                        sv = xv;
                    else
                        xv += sv;
                }
            }
        }
}

// dX (x's layout, P*Q pixels per image) = alpha * grad + beta * dX.
template <typename T>
void data_gemms(const ConvProblem& p, const T* w, const T* dy, T* dx, T alpha, T beta) {
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), pq = p.p * p.q;
    if (p.nhwc) return nhwc_1x1_data_gemms(p.n * pq, p.c, p.k, p.groups, w, dy, dx, alpha, beta);
    for (int64_t g = 0; g < p.groups; ++g)
        for (int64_t n = 0; n < p.n; ++n)
            gemm(true, false, int(cg), int(pq), int(kg), alpha, w + g * kg * cg, int(cg), dy + (n * p.k + g * kg) * pq,
                 int(pq), beta, dx + (n * p.c + g * cg) * pq, int(pq));
}

// dW = alpha * grad + beta * dW, from X (x's layout, P*Q pixels per image).
template <typename T>
void filter_gemms(const ConvProblem& p, const T* x, const T* dy, T* dw, T alpha, T beta) {
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), pq = p.p * p.q;
    if (p.nhwc) return nhwc_1x1_filter_gemms(p.n * pq, p.c, p.k, p.groups, x, dy, dw, alpha, beta);
    for (int64_t g = 0; g < p.groups; ++g)
        for (int64_t n = 0; n < p.n; ++n)
            gemm(false, true, int(kg), int(cg), int(pq), alpha, dy + (n * p.k + g * kg) * pq, int(pq),
                 x + (n * p.c + g * cg) * pq, int(pq), n == 0 ? beta : T(1), dw + g * kg * cg, int(cg));
}

template <typename T>
void data_t(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    BlasThreads blas_threads(a.ctx.threads());
    const T* w = static_cast<const T*>(a.w);
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    if (in_place(p)) return data_gemms(p, w, dy, dx, T(a.alpha), T(a.beta));
    T* sub = static_cast<T*>(a.workspace);
    data_gemms(p, w, dy, sub, T(a.alpha), T(0));
    const int64_t count = p.x_elems();
    const T beta = T(a.beta);
#pragma omp parallel for num_threads(a.ctx.threads()) schedule(static)
    for (int64_t i = 0; i < count; ++i) dx[i] = beta == T(0) ? T(0) : beta * dx[i];
    move_pixels<T, false>(p, a.ctx, dx, sub);
}

template <typename T>
void filter_t(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    BlasThreads blas_threads(a.ctx.threads());
    const T* x = static_cast<const T*>(a.x);
    if (!in_place(p)) {
        move_pixels<T, true>(p, a.ctx, const_cast<T*>(x), static_cast<T*>(a.workspace));
        x = static_cast<const T*>(a.workspace);
    }
    filter_gemms(p, x, static_cast<const T*>(a.dy), static_cast<T*>(a.dw), T(a.alpha), T(a.beta));
}

void run_data(const BwdDataArgs& a) {
    if (data_via_forward(a.prob))
        via_forward::data_run(a, CONVCORE_FWD_ALGO_POINTWISE);
    else if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        data_t<double>(a);
    else
        data_t<float>(a);
}

void run_filter(const BwdFilterArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        filter_t<double>(a);
    else
        filter_t<float>(a);
}

}  // namespace

extern const Solver pointwise_bwd_data_solver;
const Solver pointwise_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_POINTWISE,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = data_workspace_bytes,
    .backward_data = run_data, .runs_nhwc = runs_nhwc, .made_for = made_for::yes};
extern const Solver pointwise_bwd_filter_solver;
const Solver pointwise_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_POINTWISE,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run_filter, .runs_nhwc = runs_nhwc, .made_for = made_for::yes};

}  // namespace cpu
}  // namespace convcore
