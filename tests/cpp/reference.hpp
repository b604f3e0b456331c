// An independent float64 reference convolution for the C++ tests (straight from the
// definition: no shared index helpers, so a mistake in them cannot hide here).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "convcore/convcore.h"

namespace convcore_test {

// A pass's name for test names: "Forward", "BackwardData", "BackwardFilter".
inline const char* pass_test_name(convcoreConvolutionPass_t pass) {
    return pass == CONVCORE_PASS_FORWARD ? "Forward" : pass == CONVCORE_PASS_BACKWARD_DATA ? "BackwardData" : "BackwardFilter";
}

// The bound ||out - ref|| / ||ref|| that convcore declares for an algorithm of a pass (its one
// list of algorithms, through convcoreGetAlgorithmInfo); 0, which fails every comparison, for
// an algorithm the list does not have.
inline double declared_bound(convcoreConvolutionPass_t pass, int algo, bool f64) {
    convcoreAlgorithmInfo_t info{};
    if (convcoreGetAlgorithmInfo(pass, algo, &info) != CONVCORE_STATUS_SUCCESS) return 0.0;
    return f64 ? info.errorBoundDouble : info.errorBoundFloat;
}

struct Shape {
    int64_t n, c, h, w, k, r, s;
    int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
    bool flip;
    int64_t out_h() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
    int64_t out_w() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
};

// Calls f(yi, xi, wi) for every term y[yi] += x[xi] * w[wi] of the convolution. The loops run
// filter tap by filter tap with a row of outputs innermost (contiguous x and y), so the tests'
// reference stays fast on deep layers; each output still sums its terms in the order c, r, s.
template <typename F>
inline void for_each_term(const Shape& p, F f) {
    const int64_t P = p.out_h(), Q = p.out_w(), cg = p.c / p.groups, kg = p.k / p.groups;
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t k = 0; k < p.k; ++k)
            for (int64_t c = 0; c < cg; ++c) {
                const int64_t cin = (k / kg) * cg + c;
                for (int64_t r = 0; r < p.r; ++r)
                    for (int64_t s = 0; s < p.s; ++s) {
                        const int64_t wr = p.flip ? p.r - 1 - r : r;
                        const int64_t ws = p.flip ? p.s - 1 - s : s;
                        const int64_t wi = ((k * cg + c) * p.r + wr) * p.s + ws;
                        // the outputs j whose input column iw = j*stride_w - pad_w + s*dil_w is in [0, W)
                        const int64_t off = s * p.dil_w - p.pad_w;
                        const int64_t j0 = off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w;
                        const int64_t j1 = p.w - 1 - off < 0 ? 0 : std::min(Q, (p.w - 1 - off) / p.stride_w + 1);
                        for (int64_t i = 0; i < P; ++i) {
                            const int64_t ih = i * p.stride_h - p.pad_h + r * p.dil_h;
                            if (ih < 0 || ih >= p.h) continue;
                            const int64_t xrow = ((n * p.c + cin) * p.h + ih) * p.w + off;
                            const int64_t yrow = ((n * p.k + k) * P + i) * Q;
                            for (int64_t j = j0; j < j1; ++j) f(yrow + j, xrow + j * p.stride_w, wi);
                        }
                    }
            }
}

inline std::vector<double> reference_conv(const Shape& p, const std::vector<double>& x,
                                          const std::vector<double>& w) {
    std::vector<double> y(size_t(p.n * p.k * p.out_h() * p.out_w()), 0.0);
    for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { y[yi] += x[xi] * w[wi]; });
    return y;
}

inline std::vector<double> reference_bwd_data(const Shape& p, const std::vector<double>& w,
                                                     const std::vector<double>& dy) {
    std::vector<double> dx(size_t(p.n * p.c * p.h * p.w), 0.0);
    for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { dx[xi] += dy[yi] * w[wi]; });
    return dx;
}

inline std::vector<double> reference_bwd_filter(const Shape& p, const std::vector<double>& x,
                                                       const std::vector<double>& dy) {
    std::vector<double> dw(size_t(p.k * (p.c / p.groups) * p.r * p.s), 0.0);
    for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { dw[wi] += dy[yi] * x[xi]; });
    return dw;
}

inline std::vector<double> random_vector(size_t size, std::mt19937& rng) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> v(size);
    for (auto& e : v) e = u(rng);
    return v;
}

// Rounds to T and back, so that the reference sees the inputs the library sees.
template <typename T>
std::vector<double> rounded(const std::vector<double>& v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = double(T(v[i]));
    return out;
}

// ||a - b|| / ||b||
inline double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}

}  // namespace convcore_test
