// The backward passes through the public C API: every backward-data and backward-filter
// algorithm against float64 references derived from reference.hpp's definition of the
// forward convolution (its adjoints, written as the same loops scattering instead of
// gathering), on random problems (odd sizes, padding, stride 1-3, dilation 1-2, groups, both
// modes, alpha/beta with a NaN-poisoned output when beta == 0, strided tensors), float32
// and float64, under the bounds docs/algorithms.md states; the bias gradient; the
// NOT_SUPPORTED paths with their reasons; bad parameters; names and rankings.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "epilogue_reference.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

std::string last_error() { return convcoreGetLastErrorString(); }

#define EXPECT_STATUS(call, status, fragment)                                           \
    do {                                                                                \
        convcoreStatus_t st_ = (call);                                                  \
        EXPECT_EQ(st_, status) << #call << ": " << last_error();                        \
        EXPECT_NE(last_error().find(fragment), std::string::npos)                       \
            << #call << ": reason '" << last_error() << "' lacks '" << fragment << "'"; \
    } while (0)

// ---- the algorithms, their applicability and bounds ---------------------------------------------

struct Bound {
    double f32, f64;
};

// The bounds convcore declares (docs/algorithms.md).
Bound data_bound(convcoreConvolutionBwdDataAlgo_t a) {
    return {declared_bound(CONVCORE_PASS_BACKWARD_DATA, a, false), declared_bound(CONVCORE_PASS_BACKWARD_DATA, a, true)};
}

Bound filter_bound(convcoreConvolutionBwdFilterAlgo_t a) {
    return {declared_bound(CONVCORE_PASS_BACKWARD_FILTER, a, false),
            declared_bound(CONVCORE_PASS_BACKWARD_FILTER, a, true)};
}

// Whether the algorithm's documented limits admit the problem (the test's own statement of
// the limits, checked against the library's answer).
bool data_applicable(convcoreConvolutionBwdDataAlgo_t a, const Shape& p) {
    switch (a) {
        case CONVCORE_BWD_DATA_ALGO_DIRECT:
        case CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM:
        case CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM: return true;
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3:
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3:
            if (p.r == 1 && p.s == 3)  // F(m,3) along W (the CPU's; 1-D convolutions)
                return p.stride_h == 1 && p.stride_w == 1 && p.dil_w == 1 && p.pad_h == 0 && p.pad_w <= 2;
            return p.r == 3 && p.s == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 &&
                   p.dil_w == 1 && p.pad_h <= 2 && p.pad_w <= 2;
        case CONVCORE_BWD_DATA_ALGO_DEPTHWISE: return p.c == p.groups;
        case CONVCORE_BWD_DATA_ALGO_POINTWISE: return p.r == 1 && p.s == 1;
        default:
            return p.stride_h == 1 && p.stride_w == 1 && p.pad_h <= p.dil_h * (p.r - 1) &&
                   p.pad_w <= p.dil_w * (p.s - 1);
    }
}

bool filter_applicable(convcoreConvolutionBwdFilterAlgo_t a, const Shape& p) {
    switch (a) {
        case CONVCORE_BWD_FILTER_ALGO_DIRECT:
        case CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM:
        case CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM: return true;
        case CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2:
            return p.r == 3 && p.s == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 &&
                   p.dil_w == 1;
        case CONVCORE_BWD_FILTER_ALGO_DEPTHWISE: return p.c == p.groups;
        case CONVCORE_BWD_FILTER_ALGO_POINTWISE: return p.r == 1 && p.s == 1;
        default: return p.stride_h == 1 && p.stride_w == 1;
    }
}

// Largest error seen per algorithm, direction and type (printed at the end, for the docs).
std::map<std::string, double>& worst() {
    static std::map<std::string, double> m;
    return m;
}
std::map<std::string, int>& runs() {
    static std::map<std::string, int> m;
    return m;
}

// Tensor layouts for dy / dx / x: packed, padded rows and planes, channels-last.
enum Layout { PACKED = 0, PADDED = 1, CHANNELS_LAST = 2 };

std::array<int64_t, 4> strides_of(Layout l, int64_t n, int64_t c, int64_t h, int64_t w) {
    if (l == PADDED) return {c * (h + 1) * (w + 3), (h + 1) * (w + 3), w + 3, 1};
    if (l == CHANNELS_LAST) return {h * w * c, 1, w * c, c};
    return {c * h * w, h * w, w, 1};
}

int64_t span_of(const std::array<int64_t, 4>& dims, const std::array<int64_t, 4>& st) {
    int64_t last = 0;
    for (int i = 0; i < 4; ++i) last += (dims[i] - 1) * st[i];
    return last + 1;
}

// A strided buffer holding `packed` (NCHW order) at the layout's positions, NaN elsewhere.
template <typename T>
std::vector<T> scatter(const std::vector<double>& packed, const std::array<int64_t, 4>& d,
                       const std::array<int64_t, 4>& st, double fill) {
    std::vector<T> out(size_t(span_of(d, st)), T(fill));
    size_t i = 0;
    for (int64_t a = 0; a < d[0]; ++a)
        for (int64_t b = 0; b < d[1]; ++b)
            for (int64_t c = 0; c < d[2]; ++c)
                for (int64_t e = 0; e < d[3]; ++e) out[a * st[0] + b * st[1] + c * st[2] + e * st[3]] = T(packed[i++]);
    return out;
}

template <typename T>
std::vector<double> gather(const std::vector<T>& buf, const std::array<int64_t, 4>& d,
                           const std::array<int64_t, 4>& st) {
    std::vector<double> out;
    for (int64_t a = 0; a < d[0]; ++a)
        for (int64_t b = 0; b < d[1]; ++b)
            for (int64_t c = 0; c < d[2]; ++c)
                for (int64_t e = 0; e < d[3]; ++e) out.push_back(double(buf[a * st[0] + b * st[1] + c * st[2] + e * st[3]]));
    return out;
}

struct Case {
    Shape shape;
    double alpha, beta;
    Layout in_layout, out_layout;  // backward data: dy, dx; backward filter: x, dy
};

struct Descs {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    Descs(const Shape& p, convcoreDataType_t dt)
        : x(dt, p.n, p.c, p.h, p.w), y(dt, p.n, p.k, p.out_h(), p.out_w()),
          w(dt, p.k, p.c / p.groups, p.r, p.s) {
        conv.set(p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                 p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
        conv.set_groups(p.groups);
    }
};

// Runs backward data; returns the relative error, or -1 when the algorithm said NOT_SUPPORTED.
template <typename T>
double run_data(convcoreConvolutionBwdDataAlgo_t algo, const Case& tc, std::mt19937& rng) {
    const Shape& p = tc.shape;
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    convcore::Handle h;
    Descs d(p, dt);
    const std::array<int64_t, 4> yd{p.n, p.k, p.out_h(), p.out_w()}, xd{p.n, p.c, p.h, p.w};
    const auto dys = strides_of(tc.in_layout, yd[0], yd[1], yd[2], yd[3]);
    const auto dxs = strides_of(tc.out_layout, xd[0], xd[1], xd[2], xd[3]);
    d.y.set_strided(dt, yd, dys);
    d.x.set_strided(dt, xd, dxs);

    const auto wr = rounded<T>(random_vector(size_t(p.k * (p.c / p.groups) * p.r * p.s), rng));
    const auto dyr = rounded<T>(random_vector(size_t(yd[0] * yd[1] * yd[2] * yd[3]), rng));
    const auto dx0 = rounded<T>(random_vector(size_t(xd[0] * xd[1] * xd[2] * xd[3]), rng));
    auto ref = reference_bwd_data(p, wr, dyr);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = tc.alpha * ref[i] + tc.beta * dx0[i];
    std::vector<T> w(wr.begin(), wr.end());
    const auto dy = scatter<T>(dyr, yd, dys, std::nan(""));
    const double poison = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> dx_init = dx0;
    if (tc.beta == 0) std::fill(dx_init.begin(), dx_init.end(), poison);
    auto dx = scatter<T>(dx_init, xd, dxs, 7.0);  // 7: the gaps, which must stay untouched

    size_t bytes = 0;
    const convcoreStatus_t st =
        convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, &bytes);
    if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
        EXPECT_FALSE(last_error().empty());
        EXPECT_NE(last_error().find(convcoreGetBwdDataAlgoName(algo)), std::string::npos) << last_error();
        return -1;
    }
    EXPECT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
    std::vector<char> ws(bytes + 1);
    const T alpha = T(tc.alpha), beta = T(tc.beta);
    const convcoreStatus_t rs = convcoreConvolutionBackwardData(
        h, &alpha, d.w, w.data(), d.y, dy.data(), d.conv, algo, bytes ? ws.data() : nullptr, bytes,
        &beta, d.x, dx.data());
    EXPECT_EQ(rs, CONVCORE_STATUS_SUCCESS) << convcoreGetBwdDataAlgoName(algo) << ": " << last_error();
    // The gaps between strided elements are never written.
    const auto packed_dx = gather(dx, xd, dxs);
    size_t untouched = 0;
    for (const T v : dx) untouched += v == T(7.0);
    EXPECT_GE(untouched, dx.size() - packed_dx.size());
    return relative_error(packed_dx, ref);
}

template <typename T>
double run_filter(convcoreConvolutionBwdFilterAlgo_t algo, const Case& tc, std::mt19937& rng) {
    const Shape& p = tc.shape;
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    convcore::Handle h;
    Descs d(p, dt);
    const std::array<int64_t, 4> yd{p.n, p.k, p.out_h(), p.out_w()}, xd{p.n, p.c, p.h, p.w};
    const auto xs = strides_of(tc.in_layout, xd[0], xd[1], xd[2], xd[3]);
    const auto dys = strides_of(tc.out_layout, yd[0], yd[1], yd[2], yd[3]);
    d.x.set_strided(dt, xd, xs);
    d.y.set_strided(dt, yd, dys);

    const auto xr = rounded<T>(random_vector(size_t(xd[0] * xd[1] * xd[2] * xd[3]), rng));
    const auto dyr = rounded<T>(random_vector(size_t(yd[0] * yd[1] * yd[2] * yd[3]), rng));
    const auto dw0 = rounded<T>(random_vector(size_t(p.k * (p.c / p.groups) * p.r * p.s), rng));
    auto ref = reference_bwd_filter(p, xr, dyr);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = tc.alpha * ref[i] + tc.beta * dw0[i];
    const auto x = scatter<T>(xr, xd, xs, std::nan(""));
    const auto dy = scatter<T>(dyr, yd, dys, std::nan(""));
    std::vector<T> dw(dw0.size());
    for (size_t i = 0; i < dw.size(); ++i)
        dw[i] = tc.beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(dw0[i]);

    size_t bytes = 0;
    const convcoreStatus_t st =
        convcoreGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo, &bytes);
    if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
        EXPECT_FALSE(last_error().empty());
        EXPECT_NE(last_error().find(convcoreGetBwdFilterAlgoName(algo)), std::string::npos) << last_error();
        return -1;
    }
    EXPECT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
    std::vector<char> ws(bytes + 1);
    const T alpha = T(tc.alpha), beta = T(tc.beta);
    const convcoreStatus_t rs = convcoreConvolutionBackwardFilter(
        h, &alpha, d.x, x.data(), d.y, dy.data(), d.conv, algo, bytes ? ws.data() : nullptr, bytes,
        &beta, d.w, dw.data());
    EXPECT_EQ(rs, CONVCORE_STATUS_SUCCESS) << convcoreGetBwdFilterAlgoName(algo) << ": " << last_error();
    return relative_error(std::vector<double>(dw.begin(), dw.end()), ref);
}

std::string str(const Shape& p) {
    char b[256];
    std::snprintf(b, sizeof b, "n%ldc%ldh%ldw%ldk%ldr%lds%ld pad%ldx%ld stride%ldx%ld dil%ldx%ld g%ld %s",
                  long(p.n), long(p.c), long(p.h), long(p.w), long(p.k), long(p.r), long(p.s),
                  long(p.pad_h), long(p.pad_w), long(p.stride_h), long(p.stride_w), long(p.dil_h),
                  long(p.dil_w), long(p.groups), p.flip ? "conv" : "xcorr");
    return b;
}

// Seeded random problems: odd sizes, padding 0-3, stride 1-3, dilation 1-2, groups 1-4 and
// depthwise, both modes; a third of them 3x3 stride 1 (the Winograd / FFT shapes).
std::vector<Case> random_cases(int count, unsigned seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    std::vector<Case> cases;
    while (int(cases.size()) < count) {
        Shape p{};
        const int64_t kind = pick(0, 5);
        if (kind == 5) {  // depthwise
            p.c = pick(1, 6);
            p.groups = p.c;
            p.k = p.c * pick(1, 2);
        } else {
            p.groups = std::vector<int64_t>{1, 1, 2, 3, 4}[kind];
            p.c = p.groups * pick(1, 4);
            p.k = p.groups * pick(1, 3);
        }
        p.n = pick(1, 3);
        p.h = pick(1, 15);
        p.w = pick(1, 15);
        const bool winograd_shape = cases.size() % 3 == 0;
        p.r = winograd_shape ? 3 : pick(1, 5);
        p.s = winograd_shape ? 3 : pick(1, 5);
        p.pad_h = pick(0, 3);
        p.pad_w = pick(0, 3);
        p.stride_h = winograd_shape ? 1 : pick(1, 3);
        p.stride_w = winograd_shape ? 1 : pick(1, 3);
        p.dil_h = winograd_shape && cases.size() % 2 == 0 ? 1 : pick(1, 2);
        p.dil_w = winograd_shape && cases.size() % 2 == 0 ? 1 : pick(1, 2);
        p.flip = pick(0, 1) == 1;
        if (p.out_h() < 1 || p.out_w() < 1 || p.h + 2 * p.pad_h < p.dil_h * (p.r - 1) + 1 ||
            p.w + 2 * p.pad_w < p.dil_w * (p.s - 1) + 1)
            continue;
        Case c{p, 1.0, 0.0, PACKED, PACKED};
        switch (cases.size() % 4) {
            case 0: break;
            case 1: c.alpha = 0.5, c.beta = 0.0; break;
            case 2: c.alpha = -1.5, c.beta = 0.75; break;
            case 3: c.alpha = 2.0, c.beta = 1.0; break;
        }
        if (cases.size() % 4 == 1) {  // channels-last throughout: the NHWC-native solvers run it as it is
            c.in_layout = c.out_layout = CHANNELS_LAST;
        } else {
            c.in_layout = Layout(pick(0, 2) == 0 ? pick(1, 2) : 0);
            c.out_layout = Layout(pick(0, 2) == 0 ? pick(1, 2) : 0);
        }
        cases.push_back(c);
    }
    return cases;
}

// Hand-picked problems: the shapes the fast algorithms target and the classic edges.
std::vector<Case> named_cases() {
    auto S = [](int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                int64_t pad, int64_t stride, int64_t dil, int64_t g, bool flip) {
        return Shape{n, c, h, w, k, r, s, pad, pad, stride, stride, dil, dil, g, flip};
    };
    return {
        {S(1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, false), 1, 0, PACKED, PACKED},
        {S(2, 4, 9, 7, 5, 3, 3, 0, 1, 1, 1, true), 1, 0, PACKED, PACKED},
        {S(2, 16, 13, 11, 16, 3, 3, 1, 1, 1, 1, false), 1, 0, PACKED, PACKED},
        {S(1, 12, 9, 9, 6, 3, 3, 1, 1, 1, 3, false), 0.5, 0.5, PACKED, PACKED},
        {S(1, 8, 6, 6, 8, 1, 1, 0, 1, 1, 1, false), 1, 0, PACKED, PACKED},  // 1x1
        {S(1, 3, 20, 20, 4, 7, 7, 3, 2, 1, 1, false), 1, 0, PACKED, PACKED},
        {S(1, 3, 27, 27, 4, 11, 11, 0, 4, 1, 1, true), 1, 0, PACKED, PACKED},
        {S(2, 6, 10, 10, 6, 3, 3, 1, 1, 1, 6, false), 1, 0, PACKED, PACKED},  // depthwise
        {S(1, 4, 12, 12, 4, 3, 3, 2, 1, 2, 1, true), 1, 0, PACKED, PACKED},   // dilated
        {S(1, 2, 5, 5, 3, 5, 5, 0, 1, 1, 1, false), 1, 0, PACKED, PACKED},    // filter == input
        {S(1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1, false), 1, 0, PACKED, PACKED},    // 1x1 image
        {S(1, 3, 4, 4, 2, 3, 3, 3, 1, 1, 1, false), 1, 0, PACKED, PACKED},    // pad > radius
        {S(3, 5, 17, 16, 7, 3, 3, 1, 1, 1, 1, true), -1, 2, CHANNELS_LAST, PADDED},
        {S(4, 32, 14, 14, 24, 3, 3, 1, 1, 1, 1, false), 1, 0, PACKED, PACKED},  // bigger reductions
        // Channels-last throughout, as a channels_last network trains: 1x1 (in place, strided,
        // padded, grouped), 3x3 and the stem, strided and grouped.
        {S(2, 24, 7, 9, 40, 1, 1, 0, 1, 1, 1, false), 1, 0, CHANNELS_LAST, CHANNELS_LAST},
        {S(2, 24, 7, 9, 40, 1, 1, 0, 1, 1, 1, false), -0.5, 1.5, CHANNELS_LAST, CHANNELS_LAST},
        {S(3, 16, 11, 10, 20, 1, 1, 0, 2, 1, 1, false), 1, 0, CHANNELS_LAST, CHANNELS_LAST},
        {S(1, 12, 6, 7, 18, 1, 1, 1, 3, 2, 3, true), 0.5, 0.5, CHANNELS_LAST, CHANNELS_LAST},
        {S(2, 9, 8, 8, 6, 1, 1, 0, 1, 1, 3, false), 1, 0, PACKED, PACKED},
        {S(1, 10, 9, 5, 4, 1, 1, 2, 2, 1, 1, false), 1, 0, PACKED, PACKED},
        {S(2, 12, 13, 11, 16, 3, 3, 1, 1, 1, 1, false), 1, 0, CHANNELS_LAST, CHANNELS_LAST},
        {S(2, 12, 13, 11, 16, 3, 3, 1, 2, 1, 4, true), 2, 1, CHANNELS_LAST, CHANNELS_LAST},
        {S(1, 3, 23, 21, 8, 7, 7, 3, 2, 1, 1, false), 1, 0, CHANNELS_LAST, CHANNELS_LAST},
        {S(2, 8, 10, 12, 8, 3, 3, 2, 1, 2, 1, false), 1, 0, CHANNELS_LAST, CHANNELS_LAST},
        // Disjoint windows (IM2COL_GEMM's scatter form): ConvTranspose2d(k=2, s=2)'s with odd
        // sizes (a last row and column no window covers) and groups, and 3x3 stride 3 with padding.
        {S(2, 6, 9, 8, 10, 2, 2, 0, 2, 1, 2, true), -0.5, 1.5, CHANNELS_LAST, CHANNELS_LAST},
        {S(1, 5, 11, 10, 4, 3, 3, 1, 3, 1, 1, false), 1, 0, CHANNELS_LAST, CHANNELS_LAST},
    };
}

struct Totals {
    int ok = 0, not_supported = 0;
};

template <typename T>
void check_all_data(const std::vector<Case>& cases, unsigned seed) {
    std::mt19937 rng(seed);
    for (int ai = 0; ai < CONVCORE_BWD_DATA_ALGO_COUNT; ++ai) {
        const auto algo = convcoreConvolutionBwdDataAlgo_t(ai);
        const double bound = sizeof(T) == 8 ? data_bound(algo).f64 : data_bound(algo).f32;
        const std::string key = std::string("data ") + convcoreGetBwdDataAlgoName(algo) +
                                (sizeof(T) == 8 ? " f64" : " f32");
        for (const Case& tc : cases) {
            const double err = run_data<T>(algo, tc, rng);
            const bool expected = data_applicable(algo, tc.shape);
            if (err < 0) {
                EXPECT_FALSE(expected) << key << " refused " << str(tc.shape) << ": " << last_error();
                continue;
            }
            EXPECT_TRUE(expected) << key << " accepted " << str(tc.shape);
            EXPECT_LE(err, bound) << key << " " << str(tc.shape) << " alpha " << tc.alpha << " beta "
                                  << tc.beta;
            worst()[key] = std::max(worst()[key], err);
            ++runs()[key];
        }
        // Every algorithm ran on some problems (its applicability is not vacuous).
        EXPECT_GE(runs()[key], 5) << key;
        std::printf("worst relative error  %-32s %.3g  (%d problems)\n", key.c_str(), worst()[key],
                    runs()[key]);
    }
}

template <typename T>
void check_all_filter(const std::vector<Case>& cases, unsigned seed) {
    std::mt19937 rng(seed);
    for (int ai = 0; ai < CONVCORE_BWD_FILTER_ALGO_COUNT; ++ai) {
        const auto algo = convcoreConvolutionBwdFilterAlgo_t(ai);
        const double bound = sizeof(T) == 8 ? filter_bound(algo).f64 : filter_bound(algo).f32;
        const std::string key = std::string("filter ") + convcoreGetBwdFilterAlgoName(algo) +
                                (sizeof(T) == 8 ? " f64" : " f32");
        for (const Case& tc : cases) {
            const double err = run_filter<T>(algo, tc, rng);
            const bool expected = filter_applicable(algo, tc.shape);
            if (err < 0) {
                EXPECT_FALSE(expected) << key << " refused " << str(tc.shape) << ": " << last_error();
                continue;
            }
            EXPECT_TRUE(expected) << key << " accepted " << str(tc.shape);
            EXPECT_LE(err, bound) << key << " " << str(tc.shape) << " alpha " << tc.alpha << " beta "
                                  << tc.beta;
            worst()[key] = std::max(worst()[key], err);
            ++runs()[key];
        }
        EXPECT_GE(runs()[key], 5) << key;
        std::printf("worst relative error  %-32s %.3g  (%d problems)\n", key.c_str(), worst()[key],
                    runs()[key]);
    }
}

std::vector<Case> all_cases() {
    auto cases = named_cases();
    const auto more = random_cases(40, 2024);
    cases.insert(cases.end(), more.begin(), more.end());
    return cases;
}

}  // namespace

TEST(BackwardData, Float32MatchesReference) { check_all_data<float>(all_cases(), 1); }
TEST(BackwardData, Float64MatchesReference) { check_all_data<double>(all_cases(), 2); }
TEST(BackwardFilter, Float32MatchesReference) { check_all_filter<float>(all_cases(), 3); }
TEST(BackwardFilter, Float64MatchesReference) { check_all_filter<double>(all_cases(), 4); }

// ---- the bias gradient --------------------------------------------------------------------------

template <typename T>
void check_bias(Layout layout, double alpha, double beta) {
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    std::mt19937 rng(7);
    const std::array<int64_t, 4> d{3, 5, 7, 9};
    const auto st = strides_of(layout, d[0], d[1], d[2], d[3]);
    const auto dyr = rounded<T>(random_vector(size_t(d[0] * d[1] * d[2] * d[3]), rng));
    const auto db0 = rounded<T>(random_vector(5, rng));
    const auto dy = scatter<T>(dyr, d, st, std::nan(""));
    convcore::Handle h;
    convcore::TensorDesc yd(dt, 1, 1, 1, 1), bd(dt, 1, 5, 1, 1);
    yd.set_strided(dt, d, st);
    bd.set_strided(dt, {1, 5, 1, 1}, {10, 2, 1, 1});  // every other element
    std::vector<T> db(10, T(7));
    for (int k = 0; k < 5; ++k) db[2 * k] = beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(db0[k]);
    const T a = T(alpha), b = T(beta);
    ASSERT_EQ(convcoreConvolutionBackwardBias(h, &a, yd, dy.data(), &b, bd, db.data()),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
    std::vector<double> ref(5, 0.0), got(5);
    for (int64_t n = 0; n < d[0]; ++n)
        for (int64_t k = 0; k < d[1]; ++k)
            for (int64_t i = 0; i < d[2] * d[3]; ++i) ref[k] += dyr[(n * d[1] + k) * d[2] * d[3] + i];
    for (int k = 0; k < 5; ++k) {
        ref[k] = alpha * ref[k] + beta * db0[k];
        got[k] = double(db[2 * k]);
        EXPECT_EQ(db[2 * k + 1], T(7));
    }
    EXPECT_LE(relative_error(got, ref), sizeof(T) == 8 ? 1e-14 : 1e-6);
}

TEST(BackwardBias, MatchesSum) {
    for (Layout l : {PACKED, PADDED, CHANNELS_LAST}) {
        check_bias<float>(l, 1.0, 0.0);
        check_bias<float>(l, -0.5, 2.0);
        check_bias<double>(l, 1.0, 0.0);
        check_bias<double>(l, 3.0, 0.25);
    }
}

TEST(BackwardBias, BadParams) {
    convcore::Handle h;
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 2, 4, 3, 3), bd(CONVCORE_DATA_FLOAT, 1, 4, 1, 1),
        bad(CONVCORE_DATA_FLOAT, 1, 3, 1, 1), bd64(CONVCORE_DATA_DOUBLE, 1, 4, 1, 1);
    std::vector<float> dy(72, 1.0f), db(4);
    float one = 1, zero = 0;
    EXPECT_STATUS(convcoreConvolutionBackwardBias(nullptr, &one, yd, dy.data(), &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "handle is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, nullptr, dy.data(), &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dyDesc is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, yd, dy.data(), &zero, nullptr, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dbDesc is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, yd, dy.data(), &zero, bad, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "1x4x1x1");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, yd, dy.data(), &zero, bd64, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "db: data type float64");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, nullptr, yd, dy.data(), &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "alpha is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, yd, nullptr, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dy is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, yd, dy.data(), &zero, bd, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "db is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, yd, dy.data(), &zero, bd, dy.data() + 8),
                  CONVCORE_STATUS_BAD_PARAM, "db overlaps dy");
    convcoreTensorDescriptor_t unset;
    ASSERT_EQ(convcoreCreateTensorDescriptor(&unset), CONVCORE_STATUS_SUCCESS);
    EXPECT_STATUS(convcoreConvolutionBackwardBias(h, &one, unset, dy.data(), &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dyDesc was created but never set");
    convcoreDestroyTensorDescriptor(unset);
}

// ---- the epilogue's backward: activation and bias gradients in one pass -----------------------

// act'(v) in float64, from v (the reference: the derivative where v is not on a clamp's edge).
double act_grad_ref(double v, convcoreActivationMode_t act) {
    switch (act) {
        case CONVCORE_ACTIVATION_RELU: return v > 0 ? 1 : 0;
        case CONVCORE_ACTIVATION_RELU6: return v > 0 && v < 6 ? 1 : 0;
        case CONVCORE_ACTIVATION_SILU: {
            const double s = 1 / (1 + std::exp(-v));
            return s * (1 + v * (1 - s));
        }
        case CONVCORE_ACTIVATION_GELU:  // Phi(v) + v phi(v)
            return 0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
        case CONVCORE_ACTIVATION_GELU_TANH: {  // d/dv of v (1 + tanh(z)) / 2
            const double b = std::sqrt(2 / M_PI), z = b * (v + 0.044715 * v * v * v), t = std::tanh(z);
            return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * b * (1 + 3 * 0.044715 * v * v);
        }
        default: return 1;
    }
}

// dv = dy * act'(v) and db = alpha * sum(dv) + beta * db0 against float64, with y (or v) in
// `a_layout`, dy and dv in `layout` (the packed paths where they agree, strides otherwise), dv
// written to its own buffer or to dy's (in place), db given or not. Sizes odd (3x5x7x9: a plane of
// 63 values, 7 vectors and a tail; and runs past the kernel's chunks of 256); v spans the clamps of
// RELU6, none exactly on an edge.
template <typename T>
void check_activation_backward(convcoreActivationMode_t act, Layout layout, Layout a_layout, bool in_place,
                               bool with_bias, double alpha, double beta,
                               const std::array<int64_t, 4>& d = {3, 5, 7, 9}) {
    SCOPED_TRACE(std::string(act_name(act)) + " layout " + std::to_string(layout) + " y/v layout " +
                 std::to_string(a_layout) + (in_place ? " in place" : "") + (with_bias ? " with db" : "") + " K " +
                 std::to_string(d[1]) + " plane " + std::to_string(d[2] * d[3]));
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    std::mt19937 rng(11);
    const int64_t k = d[1];
    const size_t count = size_t(d[0] * d[1] * d[2] * d[3]);
    std::vector<double> v = random_vector(count, rng), dyr = rounded<T>(random_vector(count, rng)), y(count);
    for (size_t i = 0; i < count; ++i) {
        v[i] = double(T(8 * v[i] + (v[i] > 0 ? 0.01 : -0.01)));  // in (-8, 8), off the edges
        y[i] = double(T(act_ref(v[i], act)));
    }
    const bool silu = act == CONVCORE_ACTIVATION_SILU || act == CONVCORE_ACTIVATION_GELU ||
                      act == CONVCORE_ACTIVATION_GELU_TANH;  // reads the pre-activation v
    const auto st = strides_of(layout, d[0], d[1], d[2], d[3]), ast = strides_of(a_layout, d[0], d[1], d[2], d[3]);
    auto dy = scatter<T>(dyr, d, st, std::nan(""));
    const auto a = scatter<T>(silu ? v : y, d, ast, std::nan(""));
    std::vector<T> own_dv = scatter<T>(std::vector<double>(count, 0.0), d, st, 7.0);  // 7: gaps stay
    std::vector<T>& dv = in_place ? dy : own_dv;
    const auto db0 = rounded<T>(random_vector(size_t(k), rng));
    std::vector<T> db(size_t(2 * k), T(7));
    for (int64_t c = 0; c < k; ++c) db[2 * c] = beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(db0[c]);
    convcore::Handle h;
    convcore::TensorDesc dyd(dt, 1, 1, 1, 1), ad(dt, 1, 1, 1, 1), bd(dt, 1, k, 1, 1);
    dyd.set_strided(dt, d, st);
    ad.set_strided(dt, d, ast);
    bd.set_strided(dt, {1, k, 1, 1}, {2 * k, 2, 1, 1});  // every other element
    const T al = T(alpha), be = T(beta);
    ASSERT_EQ(convcoreActivationBackwardBias(h, act, silu ? nullptr : static_cast<convcoreTensorDescriptor_t>(ad), silu ? nullptr : a.data(),
                                             silu ? static_cast<convcoreTensorDescriptor_t>(ad) : nullptr, silu ? a.data() : nullptr, dyd, dy.data(), dyd,
                                             dv.data(), &al, &be, with_bias ? static_cast<convcoreTensorDescriptor_t>(bd) : nullptr,
                                             with_bias ? db.data() : nullptr),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
    std::vector<double> want(count), bias_want(size_t(k), 0.0);
    for (size_t i = 0; i < count; ++i) {
        want[i] = dyr[i] * act_grad_ref(v[i], act);
        bias_want[(i / size_t(d[2] * d[3])) % size_t(k)] += want[i];
    }
    EXPECT_LE(relative_error(gather(dv, d, st), want), sizeof(T) == 8 ? 1e-14 : 1e-6);
    if (!in_place) {  // the gaps untouched
        const auto filled = scatter<T>(std::vector<double>(count, 0.0), d, st, 7.0);
        for (size_t i = 0; i < dv.size(); ++i)
            if (filled[i] == T(7)) ASSERT_EQ(dv[i], T(7)) << "gap " << i;
    }
    for (int64_t c = 0; c < k; ++c) {
        EXPECT_EQ(db[2 * c + 1], T(7));
        if (!with_bias) EXPECT_TRUE(beta == 0 ? std::isnan(double(db[2 * c])) : db[2 * c] == T(db0[c]));
        bias_want[c] = alpha * bias_want[c] + beta * db0[c];
    }
    if (with_bias) {
        std::vector<double> got(static_cast<size_t>(k));
        for (int64_t c = 0; c < k; ++c) got[c] = double(db[2 * c]);
        EXPECT_LE(relative_error(got, bias_want), sizeof(T) == 8 ? 1e-13 : 1e-5);
    }
}

TEST(ActivationBackwardBias, MatchesReference) {
    for (convcoreActivationMode_t act :
         {CONVCORE_ACTIVATION_IDENTITY, CONVCORE_ACTIVATION_RELU, CONVCORE_ACTIVATION_RELU6, CONVCORE_ACTIVATION_SILU,
          CONVCORE_ACTIVATION_GELU, CONVCORE_ACTIVATION_GELU_TANH})
        for (Layout l : {PACKED, PADDED, CHANNELS_LAST}) {
            check_activation_backward<float>(act, l, l, false, true, 1.0, 0.0);
            check_activation_backward<double>(act, l, l, false, true, -0.5, 2.0);
            check_activation_backward<float>(act, l, l, true, true, 2.0, 0.5);
            check_activation_backward<double>(act, l, l, true, false, 1.0, 0.0);
            check_activation_backward<float>(act, l, l, false, false, 1.0, 0.0);
            check_activation_backward<float>(act, l, l == CHANNELS_LAST ? PACKED : CHANNELS_LAST, false, true, 1.0,
                                             0.0);
            // runs longer than one chunk of 256: channels (NHWC), a plane (NCHW)
            check_activation_backward<double>(act, l, l, false, true, 1.0, 0.0, {2, 300, 3, 5});
            check_activation_backward<float>(act, l, l, false, true, 1.0, 0.5, {2, 3, 17, 19});
        }
}

// The sums do not depend on the number of threads: NHWC, whose pixels are split into blocks
// (50 * 7 * 9 = 3150 pixels: 6 blocks), bit for bit in float64 with 1, 2 and 3 threads.
TEST(ActivationBackwardBias, SameBitsWithAnyThreadCount) {
    const std::array<int64_t, 4> d{50, 6, 7, 9};
    std::mt19937 rng(3);
    const auto dy = random_vector(size_t(d[0] * d[1] * d[2] * d[3]), rng);
    std::vector<double> db(6);
    std::vector<std::vector<double>> results;
    for (int threads : {1, 2, 3}) {
        convcore::Handle h;
        ASSERT_EQ(convcoreSetNumThreads(h, threads), CONVCORE_STATUS_SUCCESS);
        convcore::TensorDesc dyd(CONVCORE_DATA_DOUBLE, 1, 1, 1, 1), bd(CONVCORE_DATA_DOUBLE, 1, 6, 1, 1);
        dyd.set_strided(CONVCORE_DATA_DOUBLE, d, strides_of(CHANNELS_LAST, d[0], d[1], d[2], d[3]));
        const double one = 1, zero = 0;
        ASSERT_EQ(convcoreConvolutionBackwardBias(h, &one, dyd, dy.data(), &zero, bd, db.data()),
                  CONVCORE_STATUS_SUCCESS);
        results.push_back(db);
    }
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
}

TEST(ActivationBackwardBias, BadParams) {
    convcore::Handle h;
    convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 2, 4, 3, 3), bd(CONVCORE_DATA_FLOAT, 1, 4, 1, 1),
        other(CONVCORE_DATA_FLOAT, 2, 4, 3, 2), yd64(CONVCORE_DATA_DOUBLE, 2, 4, 3, 3);
    std::vector<float> y(72, 1.0f), dy(72, 1.0f), dv(72), db(4);
    const float one = 1, zero = 0;
    const auto relu = CONVCORE_ACTIVATION_RELU, silu = CONVCORE_ACTIVATION_SILU;
    EXPECT_STATUS(convcoreActivationBackwardBias(h, convcoreActivationMode_t(9), yd, y.data(), nullptr, nullptr, yd,
                                                 dy.data(), yd, dv.data(), &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "mode 9 is not a convcoreActivationMode_t");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, nullptr, nullptr, yd, y.data(), yd, dy.data(), yd, dv.data(),
                                                 &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "yDesc is NULL");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, silu, yd, y.data(), nullptr, nullptr, yd, dy.data(), yd, dv.data(),
                                                 &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "vDesc is NULL");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, other, y.data(), nullptr, nullptr, yd, dy.data(), yd,
                                                 dv.data(), &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "y: shape 2x4x3x2 does not match dy: 2x4x3x3");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, yd64, y.data(), nullptr, nullptr, yd, dy.data(), yd,
                                                 dv.data(), &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "y: data type float64 does not match dy: float32");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, yd, y.data(), nullptr, nullptr, yd, dy.data(), yd,
                                                 dy.data() + 1, &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dv overlaps dy");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, yd, y.data(), nullptr, nullptr, yd, dy.data(), yd, y.data(),
                                                 &one, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dv overlaps y");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, yd, y.data(), nullptr, nullptr, yd, dy.data(), yd,
                                                 dv.data(), &one, &zero, bd, dv.data() + 3),
                  CONVCORE_STATUS_BAD_PARAM, "db overlaps dv");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, yd, y.data(), nullptr, nullptr, yd, dy.data(), yd,
                                                 dv.data(), nullptr, &zero, bd, db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "alpha is NULL");
    EXPECT_STATUS(convcoreActivationBackwardBias(h, relu, yd, y.data(), nullptr, nullptr, yd, dy.data(), nullptr,
                                                 dv.data(), &one, &zero, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "dvDesc is NULL");
    // in place, and nothing but db: both fine
    EXPECT_EQ(convcoreActivationBackwardBias(h, relu, yd, y.data(), nullptr, nullptr, yd, dy.data(), yd, dy.data(),
                                             &one, &zero, bd, db.data()),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreActivationBackwardBias(h, silu, nullptr, nullptr, yd, y.data(), yd, dy.data(), nullptr, nullptr,
                                             &one, &zero, bd, db.data()),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_NEAR(db[0], 18 * 0.9276705, 1e-4);  // silu'(1) = 0.9276705, 18 ones per channel
}

// ---- names, rankings ----------------------------------------------------------------------------

TEST(BackwardNames, RoundTrip) {
    EXPECT_STREQ(convcoreGetBwdDataAlgoName(CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3), "WINOGRAD_2X2_3X3");
    EXPECT_STREQ(convcoreGetBwdFilterAlgoName(CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2), "WINOGRAD_3X3_2X2");
    EXPECT_EQ(convcoreGetBwdDataAlgoName(CONVCORE_BWD_DATA_ALGO_COUNT), nullptr);
    EXPECT_EQ(convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(-1)), nullptr);
    for (int i = 0; i < CONVCORE_BWD_DATA_ALGO_COUNT; ++i) {
        convcoreConvolutionBwdDataAlgo_t a;
        ASSERT_EQ(convcoreGetBwdDataAlgoByName(convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(i)), &a),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(int(a), i);
    }
    for (int i = 0; i < CONVCORE_BWD_FILTER_ALGO_COUNT; ++i) {
        convcoreConvolutionBwdFilterAlgo_t a;
        ASSERT_EQ(convcoreGetBwdFilterAlgoByName(
                      convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(i)), &a),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(int(a), i);
    }
    convcoreConvolutionBwdDataAlgo_t a;
    EXPECT_EQ(convcoreGetBwdDataAlgoByName("fft_tiling", &a), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(a, CONVCORE_BWD_DATA_ALGO_FFT_TILING);
    EXPECT_STATUS(convcoreGetBwdDataAlgoByName("winograd_3x3_2x2", &a), CONVCORE_STATUS_BAD_PARAM,
                  "expected one of");
    EXPECT_STATUS(convcoreGetBwdDataAlgoByName(nullptr, &a), CONVCORE_STATUS_BAD_PARAM, "name is NULL");
    EXPECT_STATUS(convcoreGetBwdDataAlgoByName("direct", nullptr), CONVCORE_STATUS_BAD_PARAM, "algo is NULL");
    convcoreConvolutionBwdFilterAlgo_t f;
    EXPECT_STATUS(convcoreGetBwdFilterAlgoByName("winograd_2x2_3x3", &f), CONVCORE_STATUS_BAD_PARAM,
                  "WINOGRAD_3X3_2X2");
}

TEST(BackwardRanking, ApplicableFirstWithExactWorkspace) {
    convcore::Handle h;
    const Shape p{2, 8, 11, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false};
    Descs d(p, CONVCORE_DATA_FLOAT);
    convcoreConvolutionBwdDataAlgoPerf_t dp[CONVCORE_BWD_DATA_ALGO_COUNT];
    int count = 0;
    ASSERT_EQ(convcoreGetConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x,
                                                          CONVCORE_BWD_DATA_ALGO_COUNT, &count, dp),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
    ASSERT_EQ(count, CONVCORE_BWD_DATA_ALGO_COUNT);
    bool seen_unsupported = false;
    for (int i = 0; i < count; ++i) {
        if (dp[i].status != CONVCORE_STATUS_SUCCESS) {
            seen_unsupported = true;
            EXPECT_EQ(dp[i].memory, 0u);
            continue;
        }
        EXPECT_FALSE(seen_unsupported) << "applicable algorithms come first";
        size_t bytes = 0;
        EXPECT_EQ(convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, dp[i].algo, &bytes),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(bytes, dp[i].memory);
        EXPECT_EQ(dp[i].time, -1.0f);
    }
    int last_ok = -1;
    for (int i = 0; i < count; ++i)
        if (dp[i].status == CONVCORE_STATUS_SUCCESS) last_ok = i;
    ASSERT_GE(last_ok, 2);
    EXPECT_EQ(dp[last_ok].algo, CONVCORE_BWD_DATA_ALGO_DIRECT) << "the reference is the last resort";
    convcoreConvolutionBwdFilterAlgoPerf_t fp[CONVCORE_BWD_FILTER_ALGO_COUNT];
    ASSERT_EQ(convcoreGetConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w, 3, &count, fp),
              CONVCORE_STATUS_SUCCESS)
        << last_error();
    EXPECT_EQ(count, 3);
    for (int i = 0; i < count; ++i) {
        EXPECT_EQ(fp[i].status, CONVCORE_STATUS_SUCCESS);
        size_t bytes = 0;
        EXPECT_EQ(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, fp[i].algo, &bytes),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(bytes, fp[i].memory);
    }
    EXPECT_STATUS(convcoreGetConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w, 0, &count, fp),
                  CONVCORE_STATUS_BAD_PARAM, "requestedAlgoCount=0");
    EXPECT_STATUS(convcoreGetConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x, 1, nullptr, dp),
                  CONVCORE_STATUS_BAD_PARAM, "returnedAlgoCount is NULL");
}

// "auto" times only the ranking's first CONVCORE_SELECT_CANDIDATES: the rankings must put there
// the algorithms that win such layers (docs/algorithms.md, "Backward passes": selection).
TEST(BackwardRanking, CandidatesCoverGroupedAndNchwLayers) {
    convcore::Handle h;
    const auto data_top = [&](const Shape& p) {
        Descs d(p, CONVCORE_DATA_FLOAT);
        convcoreConvolutionBwdDataAlgoPerf_t dp[CONVCORE_SELECT_CANDIDATES];
        int count = 0;
        EXPECT_EQ(convcoreGetConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x, CONVCORE_SELECT_CANDIDATES,
                                                              &count, dp),
                  CONVCORE_STATUS_SUCCESS);
        std::set<int> top;
        for (int i = 0; i < count; ++i) top.insert(dp[i].algo);
        return top;
    };
    const auto filter_top = [&](const Shape& p) {
        Descs d(p, CONVCORE_DATA_FLOAT);
        convcoreConvolutionBwdFilterAlgoPerf_t fp[CONVCORE_SELECT_CANDIDATES];
        int count = 0;
        EXPECT_EQ(convcoreGetConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w,
                                                                CONVCORE_SELECT_CANDIDATES, &count, fp),
                  CONVCORE_STATUS_SUCCESS);
        std::set<int> top;
        for (int i = 0; i < count; ++i) top.insert(fp[i].algo);
        return top;
    };
    // grouped 3x3 (ResNeXt: 4 channels per group): IMPLICIT_GEMM and FFT for dx, PolyHankel for dw
    const Shape grouped{2, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 8, false};
    EXPECT_TRUE(data_top(grouped).count(CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM));
    EXPECT_TRUE(data_top(grouped).count(CONVCORE_BWD_DATA_ALGO_FFT));
    EXPECT_TRUE(filter_top(grouped).count(CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL));
    // ungrouped NCHW 3x3: im2col's GEMM and col2im beside the two Winograd sizes
    const Shape plain{2, 16, 13, 13, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    EXPECT_TRUE(data_top(plain).count(CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM));
    EXPECT_TRUE(data_top(plain).count(CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3));
    // 5x5, stride 1: PolyHankel's dw among the GEMMs
    const Shape five{2, 16, 13, 13, 16, 5, 5, 2, 2, 1, 1, 1, 1, 1, false};
    EXPECT_TRUE(filter_top(five).count(CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL));
}

// ---- NOT_SUPPORTED paths ------------------------------------------------------------------------

TEST(BackwardNotSupported, ReasonsNameTheAlgorithmAndTheLimit) {
    convcore::Handle h;
    size_t bytes = 0;
    {  // stride 2: the reductions to forward solvers need stride 1
        const Shape p{1, 4, 9, 9, 4, 3, 3, 1, 1, 2, 2, 1, 1, 1, false};
        Descs d(p, CONVCORE_DATA_FLOAT);
        for (auto a : {CONVCORE_BWD_DATA_ALGO_FFT, CONVCORE_BWD_DATA_ALGO_FFT_TILING,
                       CONVCORE_BWD_DATA_ALGO_FINE_GRAINED_FFT, CONVCORE_BWD_DATA_ALGO_POLY_HANKEL,
                       CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3}) {
            EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a, &bytes),
                          CONVCORE_STATUS_NOT_SUPPORTED, "stride");
            EXPECT_NE(last_error().find(convcoreGetBwdDataAlgoName(a)), std::string::npos) << last_error();
        }
        for (auto a : {CONVCORE_BWD_FILTER_ALGO_FFT, CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL,
                       CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2}) {
            EXPECT_STATUS(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a, &bytes),
                          CONVCORE_STATUS_NOT_SUPPORTED, "stride");
            EXPECT_NE(last_error().find(convcoreGetBwdFilterAlgoName(a)), std::string::npos) << last_error();
        }
        // ... and the classic algorithms run it.
        for (auto a : {CONVCORE_BWD_DATA_ALGO_DIRECT, CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM,
                       CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM})
            EXPECT_EQ(convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a, &bytes),
                      CONVCORE_STATUS_SUCCESS);
    }
    {  // 5x5: no Winograd
        const Shape p{1, 2, 9, 9, 2, 5, 5, 2, 2, 1, 1, 1, 1, 1, false};
        Descs d(p, CONVCORE_DATA_FLOAT);
        EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(
                          h, d.w, d.y, d.conv, d.x, CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3, &bytes),
                      CONVCORE_STATUS_NOT_SUPPORTED, "3x3");
        EXPECT_STATUS(convcoreGetConvolutionBackwardFilterWorkspaceSize(
                          h, d.x, d.y, d.conv, d.w, CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2, &bytes),
                      CONVCORE_STATUS_NOT_SUPPORTED, "3x3");
    }
    {  // padding beyond the dilated filter's reach: dy would need negative padding
        const Shape p{1, 2, 6, 6, 2, 3, 3, 3, 3, 1, 1, 1, 1, 1, false};
        Descs d(p, CONVCORE_DATA_DOUBLE);
        EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                                      CONVCORE_BWD_DATA_ALGO_FFT, &bytes),
                      CONVCORE_STATUS_NOT_SUPPORTED, "padding");
    }
}

// ---- bad parameters -----------------------------------------------------------------------------

TEST(BackwardBadParams, DataAndFilter) {
    convcore::Handle h;
    const Shape p{2, 4, 9, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    Descs d(p, CONVCORE_DATA_FLOAT);
    std::vector<float> x(2 * 4 * 9 * 7, 0.5f), w(6 * 4 * 9, 0.25f), y(2 * 6 * 9 * 7, 1.0f);
    std::vector<float> dx(x.size()), dw(w.size());
    float one = 1, zero = 0;
    const auto D = CONVCORE_BWD_DATA_ALGO_DIRECT;
    const auto F = CONVCORE_BWD_FILTER_ALGO_DIRECT;
    EXPECT_STATUS(convcoreConvolutionBackwardData(nullptr, &one, d.w, w.data(), d.y, y.data(), d.conv, D,
                                                  nullptr, 0, &zero, d.x, dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "handle is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), nullptr, y.data(), d.conv, D,
                                                  nullptr, 0, &zero, d.x, dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dyDesc is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv, D,
                                                  nullptr, 0, &zero, nullptr, dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dxDesc is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, nullptr, d.w, w.data(), d.y, y.data(), d.conv, D,
                                                  nullptr, 0, &zero, d.x, dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "alpha is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, nullptr, d.conv, D,
                                                  nullptr, 0, &zero, d.x, dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dy is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv, D,
                                                  nullptr, 0, &zero, d.x, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "dx is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv,
                                                  convcoreConvolutionBwdDataAlgo_t(42), nullptr, 0, &zero,
                                                  d.x, dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "algo 42");
    EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv, D,
                                                  nullptr, 0, &zero, d.x, y.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dx overlaps dy");
    {  // dy of the wrong shape, named dy
        convcore::TensorDesc bad(CONVCORE_DATA_FLOAT, 2, 6, 8, 7);
        EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), bad, y.data(), d.conv, D,
                                                      nullptr, 0, &zero, d.x, dx.data()),
                      CONVCORE_STATUS_BAD_PARAM, "dy: shape 2x6x8x7");
        convcore::TensorDesc badx(CONVCORE_DATA_FLOAT, 2, 5, 9, 7);
        EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv, D,
                                                      nullptr, 0, &zero, badx, dx.data()),
                      CONVCORE_STATUS_BAD_PARAM, "dx: C=5");
        convcore::TensorDesc y64(CONVCORE_DATA_DOUBLE, 2, 6, 9, 7);
        EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), y64, y.data(), d.conv, F,
                                                        nullptr, 0, &zero, d.w, dw.data()),
                      CONVCORE_STATUS_BAD_PARAM, "dy: data type float64");
    }
    {  // workspace too small
        size_t bytes = 0;
        ASSERT_EQ(convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                                  CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM, &bytes),
                  CONVCORE_STATUS_SUCCESS);
        ASSERT_GT(bytes, 0u);
        std::vector<char> ws(bytes);
        EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv,
                                                      CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM, ws.data(), bytes - 1,
                                                      &zero, d.x, dx.data()),
                      CONVCORE_STATUS_BAD_PARAM, "workspace");
        EXPECT_STATUS(convcoreConvolutionBackwardData(h, &one, d.w, w.data(), d.y, y.data(), d.conv,
                                                      CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM, nullptr, bytes,
                                                      &zero, d.x, dx.data()),
                      CONVCORE_STATUS_BAD_PARAM, "workspace is NULL");
        ASSERT_EQ(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                                    CONVCORE_BWD_FILTER_ALGO_FFT, &bytes),
                  CONVCORE_STATUS_SUCCESS)
            << last_error();
        ws.assign(bytes, 0);
        EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv,
                                                        CONVCORE_BWD_FILTER_ALGO_FFT, ws.data(), bytes / 2,
                                                        &zero, d.w, dw.data()),
                      CONVCORE_STATUS_BAD_PARAM, "convcoreGetConvolutionBackwardFilterWorkspaceSize");
    }
    EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv, F,
                                                    nullptr, 0, &zero, nullptr, dw.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dwDesc is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv, F,
                                                    nullptr, 0, &zero, d.w, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "dw is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, nullptr, d.y, y.data(), d.conv, F,
                                                    nullptr, 0, &zero, d.w, dw.data()),
                  CONVCORE_STATUS_BAD_PARAM, "x is NULL");
    EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv, F,
                                                    nullptr, 0, &zero, d.w, x.data() + 4),
                  CONVCORE_STATUS_BAD_PARAM, "dw overlaps x");
    EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv,
                                                    convcoreConvolutionBwdFilterAlgo_t(-3), nullptr, 0,
                                                    &zero, d.w, dw.data()),
                  CONVCORE_STATUS_BAD_PARAM, "algo -3");
    {  // dw with the wrong C/groups: named dw
        convcore::FilterDesc bad(CONVCORE_DATA_FLOAT, 6, 3, 3, 3);
        EXPECT_STATUS(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv, F,
                                                        nullptr, 0, &zero, bad, dw.data()),
                      CONVCORE_STATUS_BAD_PARAM, "dw: C/groups=3");
    }
    size_t bytes = 0;
    EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, D, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "sizeInBytes is NULL");
    EXPECT_STATUS(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, nullptr, d.w, F, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "convDesc is NULL");
}

// The documented beta == 0 rule with the CONVCORE_CONVOLUTION mode and every thread count:
// identical results with 1 and 2 threads (the algorithms are deterministic).
TEST(Backward, DeterministicAcrossThreadCounts) {
    const Shape p{3, 6, 11, 13, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, true};
    std::mt19937 rng(5);
    const auto x = random_vector(size_t(p.n * p.c * p.h * p.w), rng);
    const auto w = random_vector(size_t(p.k * 3 * 9), rng);
    const auto y = random_vector(size_t(p.n * p.k * p.out_h() * p.out_w()), rng);
    for (int ai = 0; ai < CONVCORE_BWD_FILTER_ALGO_COUNT; ++ai) {
        std::vector<double> out[2];
        for (int t = 0; t < 2; ++t) {
            convcore::Handle h;
            ASSERT_EQ(convcoreSetNumThreads(h, t + 1), CONVCORE_STATUS_SUCCESS);
            Descs d(p, CONVCORE_DATA_DOUBLE);
            size_t bytes = 0;
            const auto a = convcoreConvolutionBwdFilterAlgo_t(ai);
            if (!filter_applicable(a, p)) continue;
            ASSERT_EQ(convcoreGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a, &bytes),
                      CONVCORE_STATUS_SUCCESS)
                << last_error();
            std::vector<char> ws(bytes);
            out[t].assign(w.size(), 0.0);
            const double one = 1, zero = 0;
            ASSERT_EQ(convcoreConvolutionBackwardFilter(h, &one, d.x, x.data(), d.y, y.data(), d.conv, a,
                                                        ws.data(), bytes, &zero, d.w, out[t].data()),
                      CONVCORE_STATUS_SUCCESS)
                << last_error();
        }
        EXPECT_EQ(out[0], out[1]) << convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(ai));
    }
}
