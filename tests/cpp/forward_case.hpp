// One forward problem run through the public C API against the float64 reference
// (reference.hpp), shared by the per-algorithm CPU tests: random inputs rounded to the tested
// type (so the reference sees what the algorithm sees), alpha/beta applied to the reference
// too, y NaN-poisoned when beta == 0 (a leaked poison value makes the error NaN, which fails
// every EXPECT_LT), optionally y stored NHWC through strides, a chosen thread count and a
// workspace base misaligned by a chosen number of bytes.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

namespace convcore_test {

struct ForwardCase {
    Shape shape;
    double alpha = 1.0, beta = 0.0;
    bool strided_y = false;  // y stored NHWC, described with strides
    int threads = 0;         // 0: the handle's default
    size_t ws_offset = 0;    // the workspace base is 16-byte aligned plus this many bytes
    bool nhwc = false;       // x and y NHWC, described by their format (the NHWC solvers' own path)
};

inline Shape make_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                        int64_t pad, int64_t stride = 1, int64_t dil = 1, int64_t groups = 1,
                        bool flip = false) {
    return Shape{n, c, h, w, k, r, s, pad, pad, stride, stride, dil, dil, groups, flip};
}

inline std::string describe(const Shape& p) {
    return "n" + std::to_string(p.n) + " c" + std::to_string(p.c) + " " + std::to_string(p.h) + "x" +
           std::to_string(p.w) + " k" + std::to_string(p.k) + " " + std::to_string(p.r) + "x" +
           std::to_string(p.s) + " pad" + std::to_string(p.pad_h) + "," + std::to_string(p.pad_w) + " g" +
           std::to_string(p.groups) + " stride" + std::to_string(p.stride_h) + "," + std::to_string(p.stride_w) +
           " dil" + std::to_string(p.dil_h) + "," + std::to_string(p.dil_w) + (p.flip ? " conv" : " xcorr");
}

// A random case of any geometry (trial picks the mode, alpha, beta and a strided y): groups 1-3,
// filters up to 5x5, padding up to 3, stride up to 3, dilation up to 2, images up to 17x17. For
// the algorithms that run every problem (DIRECT, IM2COL_GEMM, IMPLICIT_GEMM).
inline ForwardCase any_geometry_case(std::mt19937& rng, int trial) {
    std::uniform_int_distribution<int> u(0, 1 << 20);
    auto pick = [&](int lo, int hi) { return int64_t(lo + u(rng) % (hi - lo + 1)); };
    Shape p{};
    p.groups = pick(1, 3);
    p.n = pick(1, 3);
    p.c = p.groups * pick(1, 4);
    p.k = p.groups * pick(1, 6);
    p.r = pick(1, 5);
    p.s = pick(1, 5);
    p.pad_h = pick(0, 3);
    p.pad_w = pick(0, 3);
    p.stride_h = pick(1, 3);
    p.stride_w = pick(1, 3);
    p.dil_h = pick(1, 2);
    p.dil_w = pick(1, 2);
    p.flip = trial % 2 == 1;
    p.h = pick(int(p.dil_h * (p.r - 1) + 1), 17);
    p.w = pick(int(p.dil_w * (p.s - 1) + 1), 17);
    ForwardCase tc;
    tc.shape = p;
    tc.alpha = trial % 3 == 0 ? 1.0 : 0.75;
    tc.beta = trial % 4 == 0 ? 0.5 : 0.0;
    tc.strided_y = trial % 5 == 0;
    return tc;
}

// Runs `algo` on the case; returns ||y - ref|| / ||ref|| (INFINITY when a call fails, after
// an EXPECT failure naming the algorithm and the library's reason). `out` receives y.
template <typename T>
double run_forward_case(convcoreConvolutionFwdAlgo_t algo, const ForwardCase& tc, std::mt19937& rng,
                        std::vector<T>* out = nullptr) {
    const Shape& p = tc.shape;
    const char* name = convcoreGetFwdAlgoName(algo);
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    convcore::Handle h;
    if (tc.threads > 0) EXPECT_EQ(convcoreSetNumThreads(h, tc.threads), CONVCORE_STATUS_SUCCESS);
    convcore::TensorDesc xd(tc.nhwc ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW, dt, p.n, p.c, p.h, p.w);
    convcore::FilterDesc wd(dt, p.k, p.c / p.groups, p.r, p.s);
    convcore::ConvDesc conv;
    conv.set(p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
             p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
    conv.set_groups(p.groups);
    const int64_t P = p.out_h(), Q = p.out_w();
    convcore::TensorDesc yd(tc.nhwc ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW, dt, p.n, p.k, P, Q);
    if (tc.strided_y) yd.set_strided(dt, {p.n, p.k, P, Q}, {P * Q * p.k, 1, Q * p.k, p.k});

    const auto xr = random_vector(size_t(p.n * p.c * p.h * p.w), rng);
    const auto wr = random_vector(size_t(p.k * (p.c / p.groups) * p.r * p.s), rng);
    const auto y0 = random_vector(size_t(p.n * p.k * P * Q), rng);
    std::vector<T> x(xr.size()), w(wr.begin(), wr.end()), y(y0.size());
    for (size_t i = 0; i < xr.size(); ++i) {  // packed NCHW index i -> storage index
        const int64_t j = int64_t(i), iw = j % p.w, ih = j / p.w % p.h, c = j / (p.h * p.w) % p.c, n = j / (p.h * p.w * p.c);
        x[tc.nhwc ? size_t(((n * p.h + ih) * p.w + iw) * p.c + c) : i] = T(xr[i]);
    }
    std::vector<double> x_rounded(xr.size());
    for (size_t i = 0; i < xr.size(); ++i) x_rounded[i] = double(T(xr[i]));
    auto ref = reference_conv(p, x_rounded, std::vector<double>(w.begin(), w.end()));
    auto y_index = [&](int64_t i) -> size_t {  // packed NCHW index -> storage index
        if (!tc.strided_y && !tc.nhwc) return size_t(i);
        const int64_t q = i % Q, pp = (i / Q) % P, k = (i / (P * Q)) % p.k, n = i / (P * Q * p.k);
        return size_t(((n * P + pp) * Q + q) * p.k + k);
    };
    for (size_t i = 0; i < y0.size(); ++i)
        y[y_index(int64_t(i))] = tc.beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(y0[i]);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = tc.alpha * ref[i] + tc.beta * double(T(y0[i]));

    size_t bytes = 0;
    const convcoreStatus_t st = convcoreGetConvolutionForwardWorkspaceSize(h, xd, wd, conv, yd, algo, &bytes);
    EXPECT_EQ(st, CONVCORE_STATUS_SUCCESS) << name << ": " << convcoreGetLastErrorString();
    if (st != CONVCORE_STATUS_SUCCESS) return INFINITY;
    std::vector<char> ws(bytes + tc.ws_offset + 16);
    char* wsp = ws.data() + (16 - reinterpret_cast<uintptr_t>(ws.data()) % 16) % 16 + tc.ws_offset;
    const T alpha = T(tc.alpha), beta = T(tc.beta);
    const convcoreStatus_t run = convcoreConvolutionForward(h, &alpha, xd, x.data(), wd, w.data(), conv, algo,
                                                            wsp, bytes, &beta, yd, y.data());
    EXPECT_EQ(run, CONVCORE_STATUS_SUCCESS) << name << ": " << convcoreGetLastErrorString();
    if (run != CONVCORE_STATUS_SUCCESS) return INFINITY;
    std::vector<double> got(ref.size());
    for (size_t i = 0; i < got.size(); ++i) got[i] = double(y[y_index(int64_t(i))]);
    if (out) *out = y;
    return relative_error(got, ref);
}

}  // namespace convcore_test
