// DIRECT: the reference algorithm. Plain loops over every output element, accumulating in
// double, supporting every stride, padding, dilation, group count and both modes. Simple on
// purpose: the other algorithms are checked against it in convcore bench. It fuses the epilogue
// (ConvArgs::epilogue) into its stores, in double: the reference of the fused contract.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/epilogue.hpp"
#include "core/solver.hpp"
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace {

struct NonfiniteSlices;  // thread_buffer site

std::string why_not(const ConvProblem&) { return ""; }
size_t workspace_bytes(const ConvProblem&) { return 0; }
bool fuses_epilogue(const ConvProblem&) { return true; }

template <typename T>
void run_t(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    const T alpha = T(a.alpha), beta = T(a.beta);
    const Epilogue& e = a.epilogue;
    const bool fused = !e.none();  // then beta == 0 (the core's contract)
    const T* bias = static_cast<const T*>(e.bias);
    const T* z = static_cast<const T*>(e.z);  // y's layout; may be y itself
    // Filter slices (k, c) holding a NaN or an Inf. The loops skip the zero padding; for these
    // slices its taps still count, as 0 * w (NaN for w = +-Inf or NaN), which is what PyTorch
    // and the GEMM algorithms give, since they multiply the padding (docs/algorithms.md).
    char* const nonfinite = thread_buffer<char, NonfiniteSlices>(size_t(p.k * cg));
    std::fill_n(nonfinite, p.k * cg, char(0));
    for (int64_t i = 0; i < p.k * cg; ++i)
        for (int64_t t = 0; t < p.r * p.s && !nonfinite[size_t(i)]; ++t)
            nonfinite[size_t(i)] = !std::isfinite(double(w[i * p.r * p.s + t]));
    // One task per output row (n, k, oh).
#pragma omp parallel for collapse(3) num_threads(a.ctx.threads()) schedule(static)
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t k = 0; k < p.k; ++k) {
            for (int64_t oh = 0; oh < p.p; ++oh) {
                const int64_t g = k / kg;
                const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
                for (int64_t ow = 0; ow < p.q; ++ow) {
                    const TapRange sr = conv_valid_taps(ow, p.w, p.s, p.pad_w, p.stride_w, p.dil_w);
                    double acc = 0.0;
                    for (int64_t c = 0; c < cg; ++c) {
                        const T* xc = x + offset4(n, g * cg + c, 0, 0, p.x_strides);
                        const T* wc = w + (k * cg + c) * p.r * p.s;
                        const bool padded = rr.begin > 0 || rr.end < p.r || sr.begin > 0 || sr.end < p.s;
                        if (padded && nonfinite[size_t(k * cg + c)])
                            for (int64_t r = 0; r < p.r; ++r)
                                for (int64_t s = 0; s < p.s; ++s)
                                    if (r < rr.begin || r >= rr.end || s < sr.begin || s >= sr.end)
                                        acc += 0.0 * double(wc[conv_filter_tap(r, p.r, p.flip) * p.s +
                                                              conv_filter_tap(s, p.s, p.flip)]);
                        for (int64_t r = rr.begin; r < rr.end; ++r) {
                            const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                            const int64_t fr = conv_filter_tap(r, p.r, p.flip);
                            for (int64_t s = sr.begin; s < sr.end; ++s) {
                                const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
                                const int64_t fs = conv_filter_tap(s, p.s, p.flip);
                                acc += double(xc[ih * p.x_strides[2] + iw * p.x_strides[3]]) *
                                       double(wc[fr * p.s + fs]);
                            }
                        }
                    }
                    const int64_t o = offset4(n, k, oh, ow, p.y_strides);
                    if (fused)
                        y[o] = T(epilogue::finish(a.alpha * acc, z ? e.alpha2 * double(z[o]) : 0.0,
                                                  bias ? double(bias[k]) : 0.0, e.activation));
                    else
                        blend_store(y + o, T(acc), alpha, beta);
                }
            }
        }
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_t<double>(a);
    else
        run_t<float>(a);
}

}  // namespace

extern const Solver direct_solver;
const Solver direct_solver = {.algo = CONVCORE_FWD_ALGO_DIRECT, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .fuses_epilogue = fuses_epilogue};

}  // namespace cpu
}  // namespace convcore
