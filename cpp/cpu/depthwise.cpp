// DEPTHWISE forward on the CPU: y[n][k] = sum over taps of w[k][r][s] * x[n][k/m] shifted, for
// groups == C (one input channel per group), any kernel, stride, dilation and padding, in NCHW
// and NHWC natively (cpu/depthwise.hpp). The zero padding is skipped, not multiplied.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "common/blend.hpp"
#include "core/solver.hpp"
#include "cpu/depthwise.hpp"

namespace convcore {
namespace cpu {
namespace {

size_t workspace_bytes(const ConvProblem& p) { return depthwise::taps_bytes(p); }

// NCHW: one task per output row (n, k, oh). The row accumulates in a buffer of Q elements, one
// tap at a time, each tap a unit-stride (stride 1) pass along the input row.
template <typename T>
void forward_nchw(const ConvProblem& p, const T* x, const T* taps, T* y, T alpha, T beta, int threads) {
    const int64_t m = p.k / p.c;
#pragma omp parallel num_threads(threads)
    {
        std::vector<T> acc(size_t(p.q));
#pragma omp for collapse(2) schedule(static)
        for (int64_t nk = 0; nk < p.n * p.k; ++nk) {
            for (int64_t oh = 0; oh < p.p; ++oh) {
                const int64_t n = nk / p.k, k = nk % p.k;
                const T* xp = x + (n * p.c + k / m) * p.h * p.w;
                const T* t = taps + k * p.r * p.s;
                std::fill(acc.begin(), acc.end(), T(0));
                T* a = acc.data();
                const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
                for (int64_t r = rr.begin; r < rr.end; ++r) {
                    const T* xr = xp + conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h) * p.w;
                    for (int64_t s = 0; s < p.s; ++s) {
                        const TapRange qv = conv_valid_outputs(s, p.w, p.q, p.pad_w, p.stride_w, p.dil_w);
                        const int64_t w0 = conv_input_coord(0, s, p.pad_w, p.stride_w, p.dil_w);
                        const T wt = t[r * p.s + s];
                        if (p.stride_w == 1) {
                            const T* xs = xr + w0;
                            for (int64_t q = qv.begin; q < qv.end; ++q) a[q] += wt * xs[q];
                        } else {
                            for (int64_t q = qv.begin; q < qv.end; ++q) a[q] += wt * xr[q * p.stride_w + w0];
                        }
                    }
                }
                T* yr = y + (nk * p.p + oh) * p.q;
                if (beta == T(0))
                    for (int64_t q = 0; q < p.q; ++q) yr[q] = alpha * a[q];
                else
                    for (int64_t q = 0; q < p.q; ++q) yr[q] = alpha * a[q] + beta * yr[q];
            }
        }
    }
}

// NHWC: one task per output row (n, oh); each output pixel runs over its channels in blocks,
// the accumulators in registers, the taps [r][s][k] contiguous along k like x and y.
template <typename T>
void forward_nhwc(const ConvProblem& p, const T* x, const T* taps, T* y, T alpha, T beta, int threads) {
    constexpr int64_t B = depthwise::kChannelBlock;
    const int64_t m = p.k / p.c;
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static)
    for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t oh = 0; oh < p.p; ++oh) {
            const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
            for (int64_t ow = 0; ow < p.q; ++ow) {
                const TapRange sr = conv_valid_taps(ow, p.w, p.s, p.pad_w, p.stride_w, p.dil_w);
                T* yo = y + ((n * p.p + oh) * p.q + ow) * p.k;
                for (int64_t k0 = 0; k0 < p.k; k0 += B) {
                    const int64_t kb = std::min(B, p.k - k0);
                    T acc[B] = {};
                    for (int64_t r = rr.begin; r < rr.end; ++r) {
                        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                        for (int64_t s = sr.begin; s < sr.end; ++s) {
                            const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
                            const T* xi = x + ((n * p.h + ih) * p.w + iw) * p.c;
                            const T* wt = taps + (r * p.s + s) * p.k + k0;
                            if (m == 1) {
                                const T* xk = xi + k0;
                                for (int64_t j = 0; j < kb; ++j) acc[j] += wt[j] * xk[j];
                            } else {
                                for (int64_t j = 0; j < kb; ++j) acc[j] += wt[j] * xi[(k0 + j) / m];
                            }
                        }
                    }
                    T* yk = yo + k0;
                    if (beta == T(0))
                        for (int64_t j = 0; j < kb; ++j) yk[j] = alpha * acc[j];
                    else
                        for (int64_t j = 0; j < kb; ++j) yk[j] = alpha * acc[j] + beta * yk[j];
                }
            }
        }
    }
}

template <typename T>
void run_t(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const T* taps = depthwise::taps_for<T>(p, a.w, a.prepared_filter, a.workspace);
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (p.nhwc)
        forward_nhwc(p, x, taps, y, T(a.alpha), T(a.beta), a.ctx.threads());
    else
        forward_nchw(p, x, taps, y, T(a.alpha), T(a.beta), a.ctx.threads());
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_t<double>(a);
    else
        run_t<float>(a);
}

size_t prepared_filter_bytes(const ConvProblem& p) { return depthwise::taps_bytes(p); }

void prepare_filter(const ConvProblem& p, const Context&, const void* w, void* out) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        depthwise::make_taps(p, static_cast<const double*>(w), static_cast<double*>(out));
    else
        depthwise::make_taps(p, static_cast<const float*>(w), static_cast<float*>(out));
}

}  // namespace

extern const Solver depthwise_solver;
const Solver depthwise_solver = {CONVCORE_FWD_ALGO_DEPTHWISE, CONVCORE_DEVICE_CPU, /*deterministic=*/true,
                                 depthwise::why_not, workspace_bytes, run, prepared_filter_bytes,
                                 prepare_filter, depthwise::runs_nhwc};

}  // namespace cpu
}  // namespace convcore
