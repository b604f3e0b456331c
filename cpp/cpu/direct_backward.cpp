// DIRECT backward passes: the reference loops of the two gradients, accumulating in double,
// for every stride, padding, dilation, group count and both modes (the forward pass of
// cpu/direct.cpp, transposed).
//   dx[n, g*Cg + c, h, w] = sum_{k in g, r, s} dy[n, k, p, q] * w[k, c, r', s']
//       over the taps r, s for which h = p*stride_h - pad_h + r*dil_h (likewise w) has an
//       integer output p in [0, P);
//   dw[k, c, r', s'] = sum_{n, p, q} dy[n, k, p, q] * x[n, g*Cg + c, p*stride_h - pad_h + r*dil_h, ...]
// where r' = conv_filter_tap(r): r itself for cross-correlation, R-1-r for true convolution.
#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "core/solver.hpp"

namespace convcore {
namespace cpu {
namespace {

std::string why_not(const ConvProblem&) { return ""; }
size_t workspace_bytes(const ConvProblem&) { return 0; }

template <typename T>
void data_t(const BwdDataArgs& a) {
    const ConvProblem& p = a.prob;
    const T* w = static_cast<const T*>(a.w);
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    const T alpha = T(a.alpha), beta = T(a.beta);
    // One task per input row (n, c, h).
#pragma omp parallel for collapse(3) num_threads(a.ctx.threads()) schedule(static)
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t c = 0; c < p.c; ++c) {
            for (int64_t ih = 0; ih < p.h; ++ih) {
                const int64_t g = c / cg, cl = c % cg;
                for (int64_t iw = 0; iw < p.w; ++iw) {
                    double acc = 0.0;
                    for (int64_t r = 0; r < p.r; ++r) {
                        const int64_t oh = conv_output_reading(ih, r, p.pad_h, p.stride_h, p.dil_h, p.p);
                        if (oh < 0) continue;
                        const int64_t fr = conv_filter_tap(r, p.r, p.flip);
                        for (int64_t s = 0; s < p.s; ++s) {
                            const int64_t ow = conv_output_reading(iw, s, p.pad_w, p.stride_w, p.dil_w, p.q);
                            if (ow < 0) continue;
                            const int64_t fs = conv_filter_tap(s, p.s, p.flip);
                            for (int64_t k = g * kg; k < (g + 1) * kg; ++k)
                                acc += double(dy[offset4(n, k, oh, ow, p.y_strides)]) *
                                       double(w[((k * cg + cl) * p.r + fr) * p.s + fs]);
                        }
                    }
                    blend_store(dx + offset4(n, c, ih, iw, p.x_strides), T(acc), alpha, beta);
                }
            }
        }
    }
}

template <typename T>
void filter_t(const BwdFilterArgs& a) {
    const ConvProblem& p = a.prob;
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* dw = static_cast<T*>(a.dw);
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    const T alpha = T(a.alpha), beta = T(a.beta);
    // One task per filter row (k, c, r').
#pragma omp parallel for collapse(3) num_threads(a.ctx.threads()) schedule(static)
    for (int64_t k = 0; k < p.k; ++k) {
        for (int64_t c = 0; c < cg; ++c) {
            for (int64_t fr = 0; fr < p.r; ++fr) {
                const int64_t g = k / kg;
                const int64_t r = conv_filter_tap(fr, p.r, p.flip);
                const TapRange pr = conv_valid_outputs(r, p.h, p.p, p.pad_h, p.stride_h, p.dil_h);
                for (int64_t fs = 0; fs < p.s; ++fs) {
                    const int64_t s = conv_filter_tap(fs, p.s, p.flip);
                    const TapRange qr = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
                    double acc = 0.0;
                    for (int64_t n = 0; n < p.n; ++n) {
                        const T* xc = x + offset4(n, g * cg + c, 0, 0, p.x_strides);
                        const T* dk = dy + offset4(n, k, 0, 0, p.y_strides);
                        for (int64_t oh = pr.begin; oh < pr.end; ++oh) {
                            const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                            for (int64_t ow = qr.begin; ow < qr.end; ++ow) {
                                const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
                                acc += double(dk[oh * p.y_strides[2] + ow * p.y_strides[3]]) *
                                       double(xc[ih * p.x_strides[2] + iw * p.x_strides[3]]);
                            }
                        }
                    }
                    blend_store(dw + ((k * cg + c) * p.r + fr) * p.s + fs, T(acc), alpha, beta);
                }
            }
        }
    }
}

void run_data(const BwdDataArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
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

extern const Solver direct_bwd_data_solver;
const Solver direct_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_DIRECT,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_data = run_data};
extern const Solver direct_bwd_filter_solver;
const Solver direct_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_DIRECT,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run_filter};

}  // namespace cpu
}  // namespace convcore
