// 3-D convolutions through the C API's Nd descriptors (convcore.h, "Nd descriptors"; the depth
// decomposition of core/depth_decomposition.hpp) against a direct float64 3-D reference written
// here: odd sizes, depth stride, padding and dilation, groups, filter depths 1 to 3, a filter
// depth tap that reaches no output depth, both modes, NCDHW and NDHWC, alpha/beta (beta = 0 on
// NaN-filled outputs), every algorithm of the three passes (within its declared bound or
// NOT_SUPPORTED), float64, workspace queries, Get/Find/FindEx/Select, plans, the fused epilogue,
// the bias gradient of a 5-D dy, descriptor round trips and bad 3-D descriptors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
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
#define EXPECT_OK(call) EXPECT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << last_error()
#define ASSERT_OK(call) ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << last_error()

constexpr convcoreTensorFormat_t NCHW = CONVCORE_TENSOR_NCHW;
constexpr convcoreTensorFormat_t NHWC = CONVCORE_TENSOR_NHWC;

struct Case3d {
    int64_t n, c, d, h, w, k, t, r, s;
    int64_t pad_d, pad_h, pad_w, stride_d, stride_h, stride_w, dil_d, dil_h, dil_w, groups;
    bool flip;
    static int64_t out(int64_t in, int64_t pad, int64_t k, int64_t stride, int64_t dil) {
        return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    }
    int64_t od() const { return out(d, pad_d, t, stride_d, dil_d); }
    int64_t oh() const { return out(h, pad_h, r, stride_h, dil_h); }
    int64_t ow() const { return out(w, pad_w, s, stride_w, dil_w); }
    int64_t cg() const { return c / groups; }
    size_t x_size() const { return size_t(n * c * d * h * w); }
    size_t w_size() const { return size_t(k * cg() * t * r * s); }
    size_t y_size() const { return size_t(n * k * od() * oh() * ow()); }
    // The 2-D problems are 3x3, stride 1, dilation 1: the Winograd family must run them.
    bool winograd_plane() const {
        return r == 3 && s == 3 && stride_h == 1 && stride_w == 1 && dil_h == 1 && dil_w == 1;
    }
};

// Odd sizes; depth stride 2 and 3, depth padding 1 and 2, depth dilation 2, groups 2, T = 1, 2, 3;
// the last but one has an output depth no tap reaches... and a tap (T-1 when flipped) that
// reaches no output depth; the last reads only padding (every output is beta * y).
const Case3d kCases[] = {
    // n  c  d  h  w  k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
    {2, 4, 5, 7, 6, 6, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2, false},
    {1, 3, 5, 7, 6, 4, 2, 2, 3, 2, 0, 1, 1, 2, 1, 2, 1, 1, 1, true},
    {2, 2, 4, 5, 5, 3, 1, 3, 3, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
    {2, 3, 5, 6, 6, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},
    {2, 2, 2, 5, 4, 3, 3, 2, 2, 1, 0, 1, 3, 1, 2, 1, 1, 1, 1, true},
    {1, 2, 1, 4, 4, 2, 1, 1, 1, 1, 0, 0, 3, 1, 1, 1, 1, 1, 1, false},
};

std::string case_name(const Case3d& p, bool cl) {
    auto v = [](const char* name, int64_t a) { return std::string(" ") + name + std::to_string(a); };
    return std::string(cl ? "NDHWC" : "NCDHW") + v("n", p.n) + v("c", p.c) + v("d", p.d) + v("h", p.h) + v("w", p.w) +
           v("k", p.k) + v("t", p.t) + v("r", p.r) + v("s", p.s) + v("pd", p.pad_d) + v("sd", p.stride_d) +
           v("dd", p.dil_d) + v("g", p.groups) + (p.flip ? " conv" : " xcorr");
}

// f(yi, xi, wi) for every term of the direct 3-D convolution: y[n, k, od, oh, ow] +=
// x[n, cin, id, ih, iw] * w[k, c, wt, wr, ws] with id = od*stride_d - pad_d + t*dil_d (the same for
// H and W), out-of-range x zero, and (wt, wr, ws) = (t, r, s), or (T-1-t, R-1-r, S-1-s) in true
// convolution. Vectors in N, C, D, H, W order (filters K, C/g, T, R, S).
// The loops run tap by tap with a row of outputs innermost (contiguous x and y, the in-range
// columns computed once): each output sums its terms in the order c, t, r, s.
template <typename F>
void for_each_term_3d(const Case3d& p, F f) {
    const int64_t OD = p.od(), OH = p.oh(), OW = p.ow(), cg = p.cg(), kg = p.k / p.groups;
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t k = 0; k < p.k; ++k)
            for (int64_t c = 0; c < cg; ++c)
                for (int64_t t = 0; t < p.t; ++t)
                    for (int64_t r = 0; r < p.r; ++r)
                        for (int64_t s = 0; s < p.s; ++s) {
                            const int64_t wt = p.flip ? p.t - 1 - t : t, wr = p.flip ? p.r - 1 - r : r,
                                          ws = p.flip ? p.s - 1 - s : s;
                            const int64_t cin = (k / kg) * cg + c;
                            const int64_t wi = (((k * cg + c) * p.t + wt) * p.r + wr) * p.s + ws;
                            // the output columns e whose iw = e*stride_w + off is in [0, W)
                            const int64_t off = s * p.dil_w - p.pad_w;
                            const int64_t e0 = off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w;
                            const int64_t e1 = p.w - 1 - off < 0 ? 0 : std::min(OW, (p.w - 1 - off) / p.stride_w + 1);
                            for (int64_t a = 0; a < OD; ++a) {
                                const int64_t id = a * p.stride_d - p.pad_d + t * p.dil_d;
                                if (id < 0 || id >= p.d) continue;
                                for (int64_t b = 0; b < OH; ++b) {
                                    const int64_t ih = b * p.stride_h - p.pad_h + r * p.dil_h;
                                    if (ih < 0 || ih >= p.h) continue;
                                    const int64_t yrow = (((n * p.k + k) * OD + a) * OH + b) * OW;
                                    const int64_t xrow = (((n * p.c + cin) * p.d + id) * p.h + ih) * p.w + off;
                                    for (int64_t e = e0; e < e1; ++e) f(yrow + e, xrow + e * p.stride_w, wi);
                                }
                            }
                        }
}

// An A x B x D x H x W tensor from that order to memory: packed as is, or channels-last
// (A x D x H x W x B: NDHWC for tensors, K x T x R x S x C/g for filters); and back.
template <typename T>
std::vector<T> to_memory(const std::vector<double>& v, const int64_t dims[5], bool cl) {
    std::vector<T> out(v.size());
    const int64_t A = dims[0], B = dims[1], S = dims[2] * dims[3] * dims[4];
    for (int64_t a = 0; a < A; ++a)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < S; ++i)
                out[size_t(cl ? (a * S + i) * B + b : (a * B + b) * S + i)] = T(v[size_t((a * B + b) * S + i)]);
    return out;
}
template <typename T>
std::vector<double> from_memory(const std::vector<T>& v, const int64_t dims[5], bool cl) {
    std::vector<double> out(v.size());
    const int64_t A = dims[0], B = dims[1], S = dims[2] * dims[3] * dims[4];
    for (int64_t a = 0; a < A; ++a)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < S; ++i)
                out[size_t((a * B + b) * S + i)] = double(v[size_t(cl ? (a * S + i) * B + b : (a * B + b) * S + i)]);
    return out;
}

// The descriptors of a case: x and y packed NCDHW or NDHWC, the filter KCTRS or KTRSC (by default
// as x and y, or as filter_cl says).
struct Descs3d {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    int64_t xd[5], yd[5], wd[5];
    bool filter_cl;
    Descs3d(const Case3d& p, bool cl, convcoreDataType_t dt = CONVCORE_DATA_FLOAT) : Descs3d(p, cl, dt, cl) {}
    Descs3d(const Case3d& p, bool cl, convcoreDataType_t dt, bool filter_cl_)
        : xd{p.n, p.c, p.d, p.h, p.w}, yd{p.n, p.k, p.od(), p.oh(), p.ow()}, wd{p.k, p.cg(), p.t, p.r, p.s},
          filter_cl(filter_cl_) {
        const convcoreTensorFormat_t f = cl ? NHWC : NCHW;
        convcore::check(convcoreSetTensorNdDescriptorEx(x, f, dt, 5, xd));
        convcore::check(convcoreSetTensorNdDescriptorEx(y, f, dt, 5, yd));
        convcore::check(convcoreSetFilterNdDescriptor(w, dt, filter_cl ? NHWC : NCHW, 5, wd));
        const int64_t pad[3] = {p.pad_d, p.pad_h, p.pad_w}, stride[3] = {p.stride_d, p.stride_h, p.stride_w},
                      dil[3] = {p.dil_d, p.dil_h, p.dil_w};
        convcore::check(convcoreSetConvolutionNdDescriptor(conv, 3, pad, stride, dil,
                                                           p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION));
        conv.set_groups(p.groups);
    }
};

// Random inputs (rounded to T) in canonical order, in memory, and the three references.
template <typename T>
struct Data3d {
    std::vector<double> x, w, dy, y_ref, dx_ref, dw_ref;
    std::vector<T> xm, wm, dym;
    Data3d(const Case3d& p, const Descs3d& d, bool cl, std::mt19937& rng) {
        x = rounded<T>(random_vector(p.x_size(), rng));
        w = rounded<T>(random_vector(p.w_size(), rng));
        dy = rounded<T>(random_vector(p.y_size(), rng));
        xm = to_memory<T>(x, d.xd, cl);
        wm = to_memory<T>(w, d.wd, d.filter_cl);
        dym = to_memory<T>(dy, d.yd, cl);
        y_ref.assign(p.y_size(), 0.0);
        dx_ref.assign(p.x_size(), 0.0);
        dw_ref.assign(p.w_size(), 0.0);
        for_each_term_3d(p, [&](int64_t yi, int64_t xi, int64_t wi) {
            y_ref[yi] += x[xi] * w[wi];
            dx_ref[xi] += dy[yi] * w[wi];
            dw_ref[wi] += dy[yi] * x[xi];
        });
    }
};

// ||got - ref|| / ||ref||, infinite when got has a non-finite value; for an all-zero reference
// (a problem that reads only padding) the absolute norm.
double error_of(const std::vector<double>& got, const std::vector<double>& ref) {
    for (double v : got)
        if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
    return relative_error(got, ref);
}

// alpha * a + beta * b, elementwise.
std::vector<double> blend(double alpha, const std::vector<double>& a, double beta, const std::vector<double>& b) {
    std::vector<double> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = alpha * a[i] + beta * b[i];
    return out;
}

const float kOne = 1.0f, kZero = 0.0f;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

bool winograd_forward(int a) { return a == CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3 || a == CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3; }

}  // namespace

// ---- the passes against the reference ---------------------------------------------------------

// Every forward algorithm runs each case within its declared bound or says NOT_SUPPORTED; DIRECT,
// IM2COL_GEMM and IMPLICIT_GEMM run every case, both Winograd tiles the 3x3x3 stride-1 ones (and
// refuse the others). y starts as NaN and beta is 0.
TEST(Conv3d, ForwardAgainstReference) {
    convcore::Handle handle;
    std::mt19937 rng(31);
    for (const Case3d& p : kCases)
        for (bool cl : {false, true}) {
            SCOPED_TRACE(case_name(p, cl));
            const Descs3d d(p, cl);
            const Data3d<float> data(p, d, cl, rng);
            int ran = 0;
            for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
                const auto algo = convcoreConvolutionFwdAlgo_t(a);
                SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
                size_t bytes = 0;
                const convcoreStatus_t st =
                    convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, algo, &bytes);
                const bool must_run = a == CONVCORE_FWD_ALGO_DIRECT || a == CONVCORE_FWD_ALGO_IM2COL_GEMM ||
                                      a == CONVCORE_FWD_ALGO_IMPLICIT_GEMM || (winograd_forward(a) && p.winograd_plane());
                if (winograd_forward(a) && !p.winograd_plane()) {
                    EXPECT_EQ(st, CONVCORE_STATUS_NOT_SUPPORTED) << last_error();
                    EXPECT_NE(last_error().find("WINOGRAD"), std::string::npos) << last_error();
                    std::vector<float> y(p.y_size());
                    EXPECT_STATUS(convcoreConvolutionForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(),
                                                             d.conv, algo, nullptr, 0, &kZero, d.y, y.data()),
                                  CONVCORE_STATUS_NOT_SUPPORTED, "WINOGRAD");
                    continue;
                }
                if (st == CONVCORE_STATUS_NOT_SUPPORTED && !must_run) {
                    EXPECT_FALSE(last_error().empty());
                    continue;
                }
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                std::vector<char> ws(bytes);
                std::vector<float> y(p.y_size(), kNaN);
                ASSERT_OK(convcoreConvolutionForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                                     algo, ws.data(), bytes, &kZero, d.y, y.data()));
                EXPECT_LE(error_of(from_memory(y, d.yd, cl), data.y_ref), declared_bound(CONVCORE_PASS_FORWARD, a, false));
                ++ran;
            }
            EXPECT_GE(ran, p.winograd_plane() ? 5 : 3);
        }
}

// Backward data and backward filter: every algorithm within its bound or NOT_SUPPORTED; DIRECT,
// IM2COL_GEMM and IMPLICIT_GEMM run every case. Outputs start as NaN, beta is 0.
TEST(Conv3d, BackwardAgainstReference) {
    convcore::Handle handle;
    std::mt19937 rng(32);
    for (const Case3d& p : kCases)
        for (bool cl : {false, true}) {
            SCOPED_TRACE(case_name(p, cl));
            const Descs3d d(p, cl);
            const Data3d<float> data(p, d, cl, rng);
            for (int a = 0; a < CONVCORE_BWD_DATA_ALGO_COUNT; ++a) {
                const auto algo = convcoreConvolutionBwdDataAlgo_t(a);
                SCOPED_TRACE(std::string("backward data ") + convcoreGetBwdDataAlgoName(algo));
                size_t bytes = 0;
                const convcoreStatus_t st =
                    convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x, algo, &bytes);
                if (st == CONVCORE_STATUS_NOT_SUPPORTED && a > CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM) continue;
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                std::vector<char> ws(bytes);
                std::vector<float> dx(p.x_size(), kNaN);
                ASSERT_OK(convcoreConvolutionBackwardData(handle, &kOne, d.w, data.wm.data(), d.y, data.dym.data(),
                                                          d.conv, algo, ws.data(), bytes, &kZero, d.x, dx.data()));
                EXPECT_LE(error_of(from_memory(dx, d.xd, cl), data.dx_ref),
                          declared_bound(CONVCORE_PASS_BACKWARD_DATA, a, false));
            }
            for (int a = 0; a < CONVCORE_BWD_FILTER_ALGO_COUNT; ++a) {
                const auto algo = convcoreConvolutionBwdFilterAlgo_t(a);
                SCOPED_TRACE(std::string("backward filter ") + convcoreGetBwdFilterAlgoName(algo));
                size_t bytes = 0;
                const convcoreStatus_t st =
                    convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, d.x, d.y, d.conv, d.w, algo, &bytes);
                if (st == CONVCORE_STATUS_NOT_SUPPORTED && a > CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM) continue;
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                std::vector<char> ws(bytes);
                std::vector<float> dw(p.w_size(), kNaN);
                ASSERT_OK(convcoreConvolutionBackwardFilter(handle, &kOne, d.x, data.xm.data(), d.y, data.dym.data(),
                                                            d.conv, algo, ws.data(), bytes, &kZero, d.w, dw.data()));
                EXPECT_LE(error_of(from_memory(dw, d.wd, cl), data.dw_ref),
                          declared_bound(CONVCORE_PASS_BACKWARD_FILTER, a, false));
            }
        }
}

// alpha = 1.5, beta = 0.5 on outputs holding earlier values, in each pass, with DIRECT and
// IM2COL_GEMM.
TEST(Conv3d, AlphaBeta) {
    convcore::Handle handle;
    std::mt19937 rng(33);
    const float alpha = 1.5f, beta = 0.5f;
    for (const Case3d& p : kCases)
        for (bool cl : {false, true}) {
            SCOPED_TRACE(case_name(p, cl));
            const Descs3d d(p, cl);
            const Data3d<float> data(p, d, cl, rng);
            const auto y0 = rounded<float>(random_vector(p.y_size(), rng));
            const auto x0 = rounded<float>(random_vector(p.x_size(), rng));
            const auto w0 = rounded<float>(random_vector(p.w_size(), rng));
            for (int a : {0, 1}) {
                SCOPED_TRACE(a == 0 ? "DIRECT" : "IM2COL_GEMM");
                size_t bytes = 0;
                ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y,
                                                                     convcoreConvolutionFwdAlgo_t(a), &bytes));
                std::vector<char> ws(bytes);
                std::vector<float> y = to_memory<float>(y0, d.yd, cl);
                ASSERT_OK(convcoreConvolutionForward(handle, &alpha, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                                     convcoreConvolutionFwdAlgo_t(a), ws.data(), bytes, &beta, d.y,
                                                     y.data()));
                EXPECT_LE(error_of(from_memory(y, d.yd, cl), blend(alpha, data.y_ref, beta, y0)), 1e-5);

                ASSERT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x,
                                                                          convcoreConvolutionBwdDataAlgo_t(a), &bytes));
                ws.assign(bytes, 0);
                std::vector<float> dx = to_memory<float>(x0, d.xd, cl);
                ASSERT_OK(convcoreConvolutionBackwardData(handle, &alpha, d.w, data.wm.data(), d.y, data.dym.data(),
                                                          d.conv, convcoreConvolutionBwdDataAlgo_t(a), ws.data(), bytes,
                                                          &beta, d.x, dx.data()));
                EXPECT_LE(error_of(from_memory(dx, d.xd, cl), blend(alpha, data.dx_ref, beta, x0)), 1e-5);

                ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(
                    handle, d.x, d.y, d.conv, d.w, convcoreConvolutionBwdFilterAlgo_t(a), &bytes));
                ws.assign(bytes, 0);
                std::vector<float> dw = to_memory<float>(w0, d.wd, cl);
                ASSERT_OK(convcoreConvolutionBackwardFilter(handle, &alpha, d.x, data.xm.data(), d.y, data.dym.data(),
                                                            d.conv, convcoreConvolutionBwdFilterAlgo_t(a), ws.data(),
                                                            bytes, &beta, d.w, dw.data()));
                EXPECT_LE(error_of(from_memory(dw, d.wd, cl), blend(alpha, data.dw_ref, beta, w0)), 1e-5);
            }
        }
}

// float64 through DIRECT and IM2COL_GEMM in each pass (NaN-filled outputs, beta 0).
TEST(Conv3d, Float64) {
    convcore::Handle handle;
    std::mt19937 rng(34);
    const double one = 1.0, zero = 0.0, nan = std::numeric_limits<double>::quiet_NaN();
    for (const Case3d& p : {kCases[0], kCases[1], kCases[4]})
        for (bool cl : {false, true}) {
            SCOPED_TRACE(case_name(p, cl));
            const Descs3d d(p, cl, CONVCORE_DATA_DOUBLE);
            const Data3d<double> data(p, d, cl, rng);
            for (int a : {0, 1}) {
                SCOPED_TRACE(a == 0 ? "DIRECT" : "IM2COL_GEMM");
                size_t bytes = 0;
                ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y,
                                                                     convcoreConvolutionFwdAlgo_t(a), &bytes));
                std::vector<char> ws(bytes);
                std::vector<double> y(p.y_size(), nan), dx(p.x_size(), nan), dw(p.w_size(), nan);
                ASSERT_OK(convcoreConvolutionForward(handle, &one, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                                     convcoreConvolutionFwdAlgo_t(a), ws.data(), bytes, &zero, d.y,
                                                     y.data()));
                EXPECT_LE(error_of(from_memory(y, d.yd, cl), data.y_ref), declared_bound(CONVCORE_PASS_FORWARD, a, true));
                ASSERT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x,
                                                                          convcoreConvolutionBwdDataAlgo_t(a), &bytes));
                ws.assign(bytes, 0);
                ASSERT_OK(convcoreConvolutionBackwardData(handle, &one, d.w, data.wm.data(), d.y, data.dym.data(),
                                                          d.conv, convcoreConvolutionBwdDataAlgo_t(a), ws.data(), bytes,
                                                          &zero, d.x, dx.data()));
                EXPECT_LE(error_of(from_memory(dx, d.xd, cl), data.dx_ref),
                          declared_bound(CONVCORE_PASS_BACKWARD_DATA, a, true));
                ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(
                    handle, d.x, d.y, d.conv, d.w, convcoreConvolutionBwdFilterAlgo_t(a), &bytes));
                ws.assign(bytes, 0);
                ASSERT_OK(convcoreConvolutionBackwardFilter(handle, &one, d.x, data.xm.data(), d.y, data.dym.data(),
                                                            d.conv, convcoreConvolutionBwdFilterAlgo_t(a), ws.data(),
                                                            bytes, &zero, d.w, dw.data()));
                EXPECT_LE(error_of(from_memory(dw, d.wd, cl), data.dw_ref),
                          declared_bound(CONVCORE_PASS_BACKWARD_FILTER, a, true));
            }
        }
}

// x with explicit strides (each row padded, a gap between depth planes) through the non-Ex setter.
TEST(Conv3d, StridedInput) {
    convcore::Handle handle;
    std::mt19937 rng(35);
    const Case3d p = kCases[0];
    const Descs3d d(p, false);
    const Data3d<float> data(p, d, false, rng);
    const int64_t row = p.w + 2, plane = p.h * row + 3, image_c = p.d * plane + 1;
    const int64_t dims[5] = {p.n, p.c, p.d, p.h, p.w}, strides[5] = {p.c * image_c, image_c, plane, row, 1};
    convcore::TensorDesc xs;
    ASSERT_OK(convcoreSetTensorNdDescriptor(xs, CONVCORE_DATA_FLOAT, 5, dims, strides));
    std::vector<float> xm(size_t(p.n * p.c * image_c), kNaN);
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t c = 0; c < p.c; ++c)
            for (int64_t z = 0; z < p.d; ++z)
                for (int64_t i = 0; i < p.h; ++i)
                    for (int64_t j = 0; j < p.w; ++j)
                        xm[size_t(n * strides[0] + c * strides[1] + z * strides[2] + i * strides[3] + j)] =
                            float(data.x[size_t((((n * p.c + c) * p.d + z) * p.h + i) * p.w + j)]);
    for (auto algo : {CONVCORE_FWD_ALGO_DIRECT, CONVCORE_FWD_ALGO_IM2COL_GEMM, CONVCORE_FWD_ALGO_IMPLICIT_GEMM}) {
        SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
        size_t bytes = 0;
        ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, xs, d.w, d.conv, d.y, algo, &bytes));
        std::vector<char> ws(bytes);
        std::vector<float> y(p.y_size(), kNaN);
        ASSERT_OK(convcoreConvolutionForward(handle, &kOne, xs, xm.data(), d.w, data.wm.data(), d.conv, algo,
                                             ws.data(), bytes, &kZero, d.y, y.data()));
        EXPECT_LE(error_of(from_memory(y, d.yd, false), data.y_ref), declared_bound(CONVCORE_PASS_FORWARD, algo, false));
    }
}

// ---- workspaces, Get, Find, Select, plans ----------------------------------------------------

// The workspace query is what a run needs: one byte less is BAD_PARAM naming the query.
TEST(Conv3d, WorkspaceQueries) {
    convcore::Handle handle;
    std::mt19937 rng(36);
    const Case3d p = kCases[0];
    const Descs3d d(p, false);
    const Data3d<float> data(p, d, false, rng);
    size_t bytes = 0;
    ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_IM2COL_GEMM,
                                                         &bytes));
    ASSERT_GT(bytes, 0u);  // NCDHW depth ranges are staged, and im2col has its columns
    std::vector<char> ws(bytes);
    std::vector<float> y(p.y_size());
    EXPECT_STATUS(convcoreConvolutionForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                             CONVCORE_FWD_ALGO_IM2COL_GEMM, ws.data(), bytes - 1, &kZero, d.y, y.data()),
                  CONVCORE_STATUS_BAD_PARAM, "convcoreGetConvolutionForwardWorkspaceSize");
    EXPECT_OK(convcoreConvolutionForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                         CONVCORE_FWD_ALGO_IM2COL_GEMM, ws.data(), bytes, &kZero, d.y, y.data()));
    ASSERT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x,
                                                              CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM, &bytes));
    ASSERT_GT(bytes, 0u);
    ws.assign(bytes, 0);
    std::vector<float> dx(p.x_size());
    EXPECT_STATUS(convcoreConvolutionBackwardData(handle, &kOne, d.w, data.wm.data(), d.y, data.dym.data(), d.conv,
                                                  CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM, ws.data(), bytes - 1, &kZero, d.x,
                                                  dx.data()),
                  CONVCORE_STATUS_BAD_PARAM, "convcoreGetConvolutionBackwardDataWorkspaceSize");
    ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, d.x, d.y, d.conv, d.w,
                                                                CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM, &bytes));
    ASSERT_GT(bytes, 0u);
    ws.assign(bytes, 0);
    std::vector<float> dw(p.w_size());
    EXPECT_STATUS(convcoreConvolutionBackwardFilter(handle, &kOne, d.x, data.xm.data(), d.y, data.dym.data(), d.conv,
                                                    CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM, ws.data(), bytes - 1, &kZero,
                                                    d.w, dw.data()),
                  CONVCORE_STATUS_BAD_PARAM, "convcoreGetConvolutionBackwardFilterWorkspaceSize");
    // NDHWC with depth stride 1: the depth ranges are packed NHWC batches, nothing to stage for DIRECT.
    const Case3d q = kCases[3];
    const Descs3d e(q, true);
    ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, e.x, e.w, e.conv, e.y, CONVCORE_FWD_ALGO_DIRECT,
                                                         &bytes));
    size_t nchw_bytes = 0;
    const Descs3d f(q, false);
    ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, f.x, f.w, f.conv, f.y, CONVCORE_FWD_ALGO_DIRECT,
                                                         &nchw_bytes));
    EXPECT_GT(nchw_bytes, 0u);  // NCDHW: x and y depth ranges staged
}

// Get ranks algorithms for the 3-D problem; its best, Find's best and Select's choice each run it
// correctly in every pass.
// A forward call with `algo` on its queried workspace matches the float64 reference.
template <typename T>
void expect_forward_matches(convcoreHandle_t handle, const Case3d& p, const Descs3d& d, const Data3d<T>& data,
                            bool cl, convcoreConvolutionFwdAlgo_t algo) {
    SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
    const T one = 1, zero = 0;
    size_t bytes = 0;
    ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, algo, &bytes));
    std::vector<char> ws(bytes);
    std::vector<T> y(p.y_size(), std::numeric_limits<T>::quiet_NaN());
    ASSERT_OK(convcoreConvolutionForward(handle, &one, d.x, data.xm.data(), d.w, data.wm.data(), d.conv, algo,
                                         ws.data(), bytes, &zero, d.y, y.data()));
    EXPECT_LE(error_of(from_memory(y, d.yd, cl), data.y_ref),
              declared_bound(CONVCORE_PASS_FORWARD, algo, sizeof(T) == sizeof(double)));
}

TEST(Conv3d, GetFindSelect) {
    convcore::Handle handle;
    std::mt19937 rng(37);
    const Case3d p = kCases[3];
    for (bool cl : {false, true}) {
        SCOPED_TRACE(case_name(p, cl));
        const Descs3d d(p, cl);
        const Data3d<float> data(p, d, cl, rng);
        const auto forward_ok = [&](convcoreConvolutionFwdAlgo_t algo) {
            expect_forward_matches(handle, p, d, data, cl, algo);
        };
        convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
        int returned = 0;
        ASSERT_OK(convcoreGetConvolutionForwardAlgorithm(handle, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT,
                                                         &returned, perf));
        ASSERT_GT(returned, 0);
        ASSERT_EQ(perf[0].status, CONVCORE_STATUS_SUCCESS);
        forward_ok(perf[0].algo);
        ASSERT_OK(convcoreFindConvolutionForwardAlgorithm(handle, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT,
                                                          &returned, perf));
        ASSERT_GT(returned, 0);
        ASSERT_EQ(perf[0].status, CONVCORE_STATUS_SUCCESS);
        EXPECT_GE(perf[0].time, 0.0f);
        forward_ok(perf[0].algo);
        convcoreConvolutionFwdAlgo_t chosen;
        ASSERT_OK(convcoreSelectConvolutionForwardAlgorithm(handle, d.x, nullptr, d.w, nullptr, d.conv, d.y, nullptr,
                                                            CONVCORE_SELECT_HEURISTIC, &chosen));
        forward_ok(chosen);

        // FindEx on the caller's buffers writes nowhere outside them: guards of NaN around y.
        const size_t guard = 256;
        std::vector<float> y_guarded(p.y_size() + 2 * guard, 12345.0f);
        std::vector<char> ws(size_t(1) << 22);
        ASSERT_OK(convcoreFindConvolutionForwardAlgorithmEx(handle, d.x, data.xm.data(), d.w, data.wm.data(), d.conv,
                                                            d.y, y_guarded.data() + guard, CONVCORE_FWD_ALGO_COUNT,
                                                            &returned, perf, ws.data(), ws.size()));
        ASSERT_EQ(perf[0].status, CONVCORE_STATUS_SUCCESS);
        forward_ok(perf[0].algo);
        for (size_t i = 0; i < guard; ++i) {
            EXPECT_EQ(y_guarded[i], 12345.0f) << i;
            EXPECT_EQ(y_guarded[guard + p.y_size() + i], 12345.0f) << i;
        }

        // Backward data: Get's best, Find's best.
        convcoreConvolutionBwdDataAlgoPerf_t dperf[CONVCORE_BWD_DATA_ALGO_COUNT];
        for (int find = 0; find < 2; ++find) {
            ASSERT_OK(find ? convcoreFindConvolutionBackwardDataAlgorithm(handle, d.w, d.y, d.conv, d.x,
                                                                          CONVCORE_BWD_DATA_ALGO_COUNT, &returned, dperf)
                           : convcoreGetConvolutionBackwardDataAlgorithm(handle, d.w, d.y, d.conv, d.x,
                                                                         CONVCORE_BWD_DATA_ALGO_COUNT, &returned, dperf));
            ASSERT_EQ(dperf[0].status, CONVCORE_STATUS_SUCCESS);
            size_t bytes = 0;
            ASSERT_OK(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x, dperf[0].algo, &bytes));
            std::vector<char> w2(bytes);
            std::vector<float> dx(p.x_size(), kNaN);
            ASSERT_OK(convcoreConvolutionBackwardData(handle, &kOne, d.w, data.wm.data(), d.y, data.dym.data(), d.conv,
                                                      dperf[0].algo, w2.data(), bytes, &kZero, d.x, dx.data()));
            EXPECT_LE(error_of(from_memory(dx, d.xd, cl), data.dx_ref),
                      declared_bound(CONVCORE_PASS_BACKWARD_DATA, dperf[0].algo, false));
        }
        // Backward filter: Get's best, Find's best, FindEx on guarded dw.
        convcoreConvolutionBwdFilterAlgoPerf_t fperf[CONVCORE_BWD_FILTER_ALGO_COUNT];
        std::vector<float> dw_guarded(p.w_size() + 2 * guard, 12345.0f);
        for (int find = 0; find < 3; ++find) {
            ASSERT_OK(find == 2 ? convcoreFindConvolutionBackwardFilterAlgorithmEx(
                                      handle, d.x, data.xm.data(), d.y, data.dym.data(), d.conv, d.w,
                                      dw_guarded.data() + guard, CONVCORE_BWD_FILTER_ALGO_COUNT, &returned, fperf,
                                      ws.data(), ws.size())
                      : find ? convcoreFindConvolutionBackwardFilterAlgorithm(handle, d.x, d.y, d.conv, d.w,
                                                                              CONVCORE_BWD_FILTER_ALGO_COUNT, &returned,
                                                                              fperf)
                             : convcoreGetConvolutionBackwardFilterAlgorithm(handle, d.x, d.y, d.conv, d.w,
                                                                             CONVCORE_BWD_FILTER_ALGO_COUNT, &returned,
                                                                             fperf));
            ASSERT_EQ(fperf[0].status, CONVCORE_STATUS_SUCCESS);
            size_t bytes = 0;
            ASSERT_OK(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, d.x, d.y, d.conv, d.w, fperf[0].algo,
                                                                        &bytes));
            std::vector<char> w2(bytes);
            std::vector<float> dw(p.w_size(), kNaN);
            ASSERT_OK(convcoreConvolutionBackwardFilter(handle, &kOne, d.x, data.xm.data(), d.y, data.dym.data(),
                                                        d.conv, fperf[0].algo, w2.data(), bytes, &kZero, d.w,
                                                        dw.data()));
            EXPECT_LE(error_of(from_memory(dw, d.wd, cl), data.dw_ref),
                      declared_bound(CONVCORE_PASS_BACKWARD_FILTER, fperf[0].algo, false));
        }
        for (size_t i = 0; i < guard; ++i) {
            EXPECT_EQ(dw_guarded[i], 12345.0f) << i;
            EXPECT_EQ(dw_guarded[guard + p.w_size() + i], 12345.0f) << i;
        }
    }
}

// 3-D plans of each pass (an algorithm, and a heuristic choice): run twice with new data pointers;
// preparing their filters keeps nothing (each depth tap's filter is transformed per call).
TEST(Conv3d, Plans) {
    convcore::Handle handle;
    std::mt19937 rng(38);
    const Case3d p = kCases[1];
    for (bool cl : {false, true}) {
        SCOPED_TRACE(case_name(p, cl));
        const Descs3d d(p, cl);
        const Data3d<float> data(p, d, cl, rng);
        for (int algo : {int(CONVCORE_FWD_ALGO_IM2COL_GEMM), int(CONVCORE_PLAN_SELECT_HEURISTIC)}) {
            convcore::Plan fwd(handle, CONVCORE_PASS_FORWARD, d.x, d.w, d.conv, d.y, algo);
            size_t prepared = 99;
            ASSERT_OK(convcorePrepareConvolutionPlanFilters(fwd, data.wm.data(), &prepared));
            EXPECT_EQ(prepared, 0u);
            std::vector<char> ws(fwd.workspace_size());
            for (int rep = 0; rep < 2; ++rep) {
                std::vector<float> y(p.y_size(), kNaN);
                fwd.execute(&kOne, data.xm.data(), data.wm.data(), &kZero, y.data(), ws.data(), ws.size());
                EXPECT_LE(error_of(from_memory(y, d.yd, cl), data.y_ref),
                          declared_bound(CONVCORE_PASS_FORWARD, fwd.algorithm(), false));
            }
            convcore::Plan bwd_data(handle, CONVCORE_PASS_BACKWARD_DATA, d.x, d.w, d.conv, d.y, algo);
            ws.assign(bwd_data.workspace_size(), 0);
            std::vector<float> dx(p.x_size(), kNaN);
            bwd_data.execute(&kOne, data.dym.data(), data.wm.data(), &kZero, dx.data(), ws.data(), ws.size());
            EXPECT_LE(error_of(from_memory(dx, d.xd, cl), data.dx_ref),
                      declared_bound(CONVCORE_PASS_BACKWARD_DATA, bwd_data.algorithm(), false));
            convcore::Plan bwd_filter(handle, CONVCORE_PASS_BACKWARD_FILTER, d.x, d.w, d.conv, d.y, algo);
            ws.assign(bwd_filter.workspace_size(), 0);
            std::vector<float> dw(p.w_size(), kNaN);
            bwd_filter.execute(&kOne, data.xm.data(), data.dym.data(), &kZero, dw.data(), ws.data(), ws.size());
            EXPECT_LE(error_of(from_memory(dw, d.wd, cl), data.dw_ref),
                      declared_bound(CONVCORE_PASS_BACKWARD_FILTER, bwd_filter.algorithm(), false));
        }
    }
}

// Every algorithm of every pass through the handle's plan cache (convcoreConvolutionExecute, the
// handle's workspace), in both layouts, against the reference; the second call finds its plan and
// gives the same bits. The backward-data pass is the transposed convolution (cuDNN's convention):
// its output dims come from convcoreGetConvolutionNdTransposedOutputDim.
TEST(Conv3d, EveryPassThroughThePlanCache) {
    convcore::Handle handle;
    std::mt19937 rng(61);
    const Case3d p = kCases[3];
    int ran = 0, tried = 0;
    for (bool cl : {false, true}) {
        SCOPED_TRACE(case_name(p, cl));
        const Descs3d d(p, cl);
        const Data3d<float> data(p, d, cl, rng);
        int64_t transposed[5];
        ASSERT_OK(convcoreGetConvolutionNdTransposedOutputDim(d.conv, d.y, d.w, 5, nullptr, transposed));
        EXPECT_EQ(std::vector<int64_t>(transposed, transposed + 5), std::vector<int64_t>(d.xd, d.xd + 5));
        const int counts[3] = {CONVCORE_FWD_ALGO_COUNT, CONVCORE_BWD_DATA_ALGO_COUNT, CONVCORE_BWD_FILTER_ALGO_COUNT};
        for (int pass = 0; pass < 3; ++pass)
            for (int algo = 0; algo < counts[pass]; ++algo) {
                SCOPED_TRACE("pass " + std::to_string(pass) + " algo " + std::to_string(algo));
                const size_t size = pass == 0 ? p.y_size() : pass == 1 ? p.x_size() : p.w_size();
                std::vector<float> first(size, kNaN), again(size, kNaN);
                convcoreConvolutionArgs_t args{};
                args.in0 = pass == 1 ? data.dym.data() : data.xm.data();
                args.in1 = pass == 2 ? data.dym.data() : data.wm.data();
                args.out = first.data();
                const auto pass_t = convcoreConvolutionPass_t(pass);
                const convcoreStatus_t st =
                    convcoreConvolutionExecute(handle, pass_t, d.x, d.w, d.conv, d.y, algo, &args, nullptr);
                ++tried;
                if (st == CONVCORE_STATUS_NOT_SUPPORTED) continue;
                ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << last_error();
                args.out = again.data();
                ASSERT_OK(convcoreConvolutionExecute(handle, pass_t, d.x, d.w, d.conv, d.y, algo, &args, nullptr));
                EXPECT_EQ(first, again);
                const int64_t* dims = pass == 0 ? d.yd : pass == 1 ? d.xd : d.wd;
                const std::vector<double>& ref = pass == 0 ? data.y_ref : pass == 1 ? data.dx_ref : data.dw_ref;
                EXPECT_LE(error_of(from_memory(first, dims, pass == 2 ? d.filter_cl : cl), ref),
                          declared_bound(pass_t, algo, false));
                ++ran;
            }
    }
    convcorePlanCacheInfo_t info{};
    ASSERT_OK(convcoreGetPlanCacheInfo(handle, &info));
    EXPECT_EQ(info.hits, ran);  // each second call
    EXPECT_EQ(info.misses, tried);  // each first call (one that is NOT_SUPPORTED keeps no plan)
    EXPECT_GE(ran, 2 * 8);
}

// ---- the native 3-D Winograd -----------------------------------------------------------------

// WINOGRAD_2X2_3X3 / 4X4_3X3 run a 3-D problem with T x 3 x 3 filters natively (cpu/winograd_3d.hpp)
// when x and y are NDHWC, the filter packed KCTRS and C at least a vector: odd channel counts (the
// taps' rows padded to whole vectors), depth padding, stride and dilation, taps in the depth
// padding, T = 1, true convolution. 3x3x3 filters with depth stride 1 over enough output depths
// run the nested F(m x m x m, 3x3x3) (winograd_3d::nests): the first case and the three after
// the T = 1 one, with output depths that are not whole tiles and depth padding 0 to 2. The last
// four have stride 2x2 in the planes (F(m,3) at stride 2 per axis): with depth stride 2 (per tap),
// depth stride 1 (nested), T = 1, and planes whose last tile reads past the image.
const Case3d kNativeCases[] = {
    // n   c  d  h  w   k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
    {2, 17, 5, 7, 6, 19, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
    {1, 16, 6, 5, 9, 8, 2, 3, 3, 2, 0, 1, 2, 1, 1, 2, 1, 1, 1, true},
    {1, 24, 1, 4, 4, 33, 3, 3, 3, 1, 0, 2, 1, 1, 1, 1, 1, 1, 1, false},
    {2, 16, 3, 6, 5, 5, 1, 3, 3, 0, 1, 1, 3, 1, 1, 1, 1, 1, 1, true},
    {2, 17, 9, 7, 6, 19, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},
    {1, 16, 10, 5, 8, 8, 3, 3, 3, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
    {1, 24, 6, 4, 5, 33, 3, 3, 3, 2, 0, 2, 1, 1, 1, 1, 1, 1, 1, false},
    {1, 17, 5, 9, 8, 12, 3, 3, 3, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, false},
    {1, 16, 8, 6, 7, 5, 3, 3, 3, 1, 1, 0, 1, 2, 2, 1, 1, 1, 1, true},
    {2, 20, 3, 9, 10, 7, 1, 3, 3, 0, 1, 1, 1, 2, 2, 1, 1, 1, 1, false},
    {1, 16, 4, 4, 5, 9, 2, 3, 3, 0, 2, 1, 1, 2, 2, 1, 1, 1, 1, true},
};

// One case in one precision and tile size: a call (y NaN, beta 0); alpha 1.5 and beta 0.5 on earlier
// values; a plan whose prepared filters (U, prepared_bytes > 0: the decomposition prepares none)
// serve its filter pointer, while another filter pointer is transformed per call.
template <typename T>
void check_native(convcoreHandle_t handle, const Case3d& p, convcoreConvolutionFwdAlgo_t algo, std::mt19937& rng) {
    const bool f64 = std::is_same<T, double>::value;
    const Descs3d d(p, true, f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT, /*filter_cl=*/false);
    const Data3d<T> data(p, d, true, rng);
    const double bound = declared_bound(CONVCORE_PASS_FORWARD, algo, f64);
    const T one = 1, zero = 0, alpha = T(1.5), beta = T(0.5), nan = std::numeric_limits<T>::quiet_NaN();
    expect_forward_matches(handle, p, d, data, true, algo);  // a call (y NaN, beta 0)
    size_t bytes = 0;
    ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, algo, &bytes));
    std::vector<char> ws(bytes);

    const auto y0 = rounded<T>(random_vector(p.y_size(), rng));
    std::vector<T> y = to_memory<T>(y0, d.yd, true);
    ASSERT_OK(convcoreConvolutionForward(handle, &alpha, d.x, data.xm.data(), d.w, data.wm.data(), d.conv, algo,
                                         ws.data(), bytes, &beta, d.y, y.data()));
    EXPECT_LE(error_of(from_memory(y, d.yd, true), blend(1.5, data.y_ref, 0.5, y0)), bound);

    convcore::Plan plan(handle, CONVCORE_PASS_FORWARD, d.x, d.w, d.conv, d.y, algo);
    size_t prepared = 0;
    ASSERT_OK(convcorePrepareConvolutionPlanFilters(plan, data.wm.data(), &prepared));
    EXPECT_GT(prepared, 0u) << "the native path prepares U";
    ws.assign(plan.workspace_size(), 0);
    for (int rep = 0; rep < 2; ++rep) {
        y.assign(p.y_size(), nan);
        plan.execute(&one, data.xm.data(), data.wm.data(), &zero, y.data(), ws.data(), ws.size());
        EXPECT_LE(error_of(from_memory(y, d.yd, true), data.y_ref), bound);
    }
    std::vector<T> negated(data.wm.size());
    for (size_t i = 0; i < negated.size(); ++i) negated[i] = -data.wm[i];
    y.assign(p.y_size(), nan);
    plan.execute(&one, data.xm.data(), negated.data(), &zero, y.data(), ws.data(), ws.size());
    EXPECT_LE(error_of(from_memory(y, d.yd, true), blend(-1.0, data.y_ref, 0.0, data.y_ref)), bound);
}

TEST(Conv3d, NativeWinograd) {
    convcore::Handle handle;
    std::mt19937 rng(41);
    for (const Case3d& p : kNativeCases)
        for (auto algo : {CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3}) {
            SCOPED_TRACE(case_name(p, true) + " " + convcoreGetFwdAlgoName(algo));
            check_native<float>(handle, p, algo, rng);
            check_native<double>(handle, p, algo, rng);
        }
}

// Backward data where every stride and dilation is 1 runs natively too, as the forward Winograd of
// dy by w transposed and mirrored (per tap, or nested): the cases of kNativeCases with unit
// strides, both precisions, beta 0 on a NaN dx and alpha/beta on earlier values. Nothing is
// prepared for it.
template <typename T>
void check_native_backward_data(convcoreHandle_t handle, const Case3d& p, convcoreConvolutionBwdDataAlgo_t algo,
                                std::mt19937& rng) {
    const bool f64 = std::is_same<T, double>::value;
    const Descs3d d(p, true, f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT, /*filter_cl=*/false);
    const Data3d<T> data(p, d, true, rng);
    const double bound = declared_bound(CONVCORE_PASS_BACKWARD_DATA, algo, f64);
    const T one = 1, zero = 0, alpha = T(1.5), beta = T(0.5);
    convcore::Plan plan(handle, CONVCORE_PASS_BACKWARD_DATA, d.x, d.w, d.conv, d.y, algo);
    size_t prepared = 99;
    ASSERT_OK(convcorePrepareConvolutionPlanFilters(plan, data.wm.data(), &prepared));
    EXPECT_EQ(prepared, 0u);
    std::vector<char> ws(plan.workspace_size());
    std::vector<T> dx(p.x_size(), std::numeric_limits<T>::quiet_NaN());
    plan.execute(&one, data.dym.data(), data.wm.data(), &zero, dx.data(), ws.data(), ws.size());
    EXPECT_LE(error_of(from_memory(dx, d.xd, true), data.dx_ref), bound);
    const auto dx0 = rounded<T>(random_vector(p.x_size(), rng));
    dx = to_memory<T>(dx0, d.xd, true);
    plan.execute(&alpha, data.dym.data(), data.wm.data(), &beta, dx.data(), ws.data(), ws.size());
    EXPECT_LE(error_of(from_memory(dx, d.xd, true), blend(1.5, data.dx_ref, 0.5, dx0)), bound);
}

TEST(Conv3d, NativeWinogradBackwardData) {
    convcore::Handle handle;
    std::mt19937 rng(43);
    for (const Case3d& p : kNativeCases) {
        if (p.stride_d != 1 || p.dil_d != 1 || p.stride_h != 1 || p.stride_w != 1) continue;
        for (auto algo : {CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3, CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3}) {
            SCOPED_TRACE(case_name(p, true) + " " + convcoreGetBwdDataAlgoName(algo));
            check_native_backward_data<float>(handle, p, algo, rng);
            check_native_backward_data<double>(handle, p, algo, rng);
        }
    }
}

// The decomposition still serves what the native path does not take: a KTRSC filter, NCDHW
// tensors. Its plans prepare nothing.
TEST(Conv3d, NativeWinogradOnlyWhereItApplies) {
    convcore::Handle handle;
    std::mt19937 rng(42);
    const Case3d& p = kNativeCases[0];
    for (bool cl : {false, true}) {
        const Descs3d d(p, cl, CONVCORE_DATA_FLOAT, /*filter_cl=*/true);
        SCOPED_TRACE(case_name(p, cl) + " filter KTRSC");
        const Data3d<float> data(p, d, cl, rng);
        convcore::Plan plan(handle, CONVCORE_PASS_FORWARD, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
        size_t prepared = 99;
        ASSERT_OK(convcorePrepareConvolutionPlanFilters(plan, data.wm.data(), &prepared));
        EXPECT_EQ(prepared, 0u);
        std::vector<char> ws(plan.workspace_size());
        std::vector<float> y(p.y_size(), kNaN);
        plan.execute(&kOne, data.xm.data(), data.wm.data(), &kZero, y.data(), ws.data(), ws.size());
        EXPECT_LE(error_of(from_memory(y, d.yd, cl), data.y_ref),
                  declared_bound(CONVCORE_PASS_FORWARD, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3, false));
    }
}

// FFT runs a 3-D problem whose output more than one depth tap reaches natively (cpu/fft_3d.hpp):
// FFTW's rank-3 transforms, x and y in any strides (NCDHW and NDHWC), w packed KCTRS. Odd sizes,
// T = 2 to 5 with R and S of 1 to 5, depth and plane padding, stride 2 and 3, dilation 2, groups
// 2 and 3, true convolution. Forward and (unit strides, one group) backward data, in both
// precisions and layouts: beta 0 on a NaN output, then alpha 1.5 and beta 0.5 on earlier values,
// through a plan (which prepares nothing) and a call.
const Case3d kFftCases[] = {
    // n  c  d  h  w  k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
    {2, 3, 7, 6, 5, 4, 5, 3, 5, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1, false},
    {1, 4, 9, 7, 8, 6, 3, 3, 3, 1, 1, 1, 2, 1, 3, 2, 1, 1, 2, true},
    {2, 5, 6, 5, 7, 3, 2, 1, 4, 0, 0, 3, 1, 2, 1, 3, 1, 2, 1, false},
    {1, 6, 5, 9, 6, 3, 3, 5, 1, 2, 2, 0, 3, 1, 1, 1, 2, 1, 3, true},
    {1, 2, 6, 5, 4, 3, 3, 2, 3, 4, 1, 2, 1, 1, 1, 2, 2, 1, 1, true},
};

// A native form's pass against the reference: beta 0 on a NaN output through a plan, then alpha
// 1.5 / beta 0.5 on earlier values through a call; w (dw) packed KCTRS; nothing prepared. `algo`:
// the pass's algorithm; `workspace`: the bytes the plan must ask for (the native form's own), or
// 0 for no check.
template <typename T>
void check_native_pass(convcoreHandle_t handle, const Case3d& p, bool cl, convcoreConvolutionPass_t pass, int algo,
                       size_t workspace, std::mt19937& rng) {
    const bool f64 = std::is_same<T, double>::value;
    const Descs3d d(p, cl, f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT, /*filter_cl=*/false);
    const Data3d<T> data(p, d, cl, rng);
    const double bound = declared_bound(pass, algo, f64);
    const bool forward = pass == CONVCORE_PASS_FORWARD, filter = pass == CONVCORE_PASS_BACKWARD_FILTER;
    const std::vector<double>& ref = forward ? data.y_ref : filter ? data.dw_ref : data.dx_ref;
    const int64_t* dims = forward ? d.yd : filter ? d.wd : d.xd;
    const bool out_cl = filter ? false : cl;  // dw packed KCTRS
    const T* in0 = pass == CONVCORE_PASS_BACKWARD_DATA ? data.dym.data() : data.xm.data();
    const T* in1 = filter ? data.dym.data() : data.wm.data();
    const T one = 1, zero = 0, alpha = T(1.5), beta = T(0.5);
    convcore::Plan plan(handle, pass, d.x, d.w, d.conv, d.y, algo);
    if (workspace > 0) EXPECT_EQ(plan.workspace_size(), workspace) << "the native form runs it";
    if (!filter) {
        size_t prepared = 99;
        ASSERT_OK(convcorePrepareConvolutionPlanFilters(plan, data.wm.data(), &prepared));
        EXPECT_EQ(prepared, 0u);
    }
    std::vector<char> ws(plan.workspace_size());
    std::vector<T> out(ref.size(), std::numeric_limits<T>::quiet_NaN());
    plan.execute(&one, in0, in1, &zero, out.data(), ws.data(), ws.size());
    EXPECT_LE(error_of(from_memory(out, dims, out_cl), ref), bound);
    const auto out0 = rounded<T>(random_vector(ref.size(), rng));
    out = to_memory<T>(out0, dims, out_cl);
    if (forward)
        ASSERT_OK(convcoreConvolutionForward(handle, &alpha, d.x, in0, d.w, in1, d.conv,
                                             convcoreConvolutionFwdAlgo_t(algo), ws.data(), ws.size(), &beta, d.y,
                                             out.data()));
    else if (filter)
        ASSERT_OK(convcoreConvolutionBackwardFilter(handle, &alpha, d.x, in0, d.y, in1, d.conv,
                                                    convcoreConvolutionBwdFilterAlgo_t(algo), ws.data(), ws.size(),
                                                    &beta, d.w, out.data()));
    else
        ASSERT_OK(convcoreConvolutionBackwardData(handle, &alpha, d.w, in1, d.y, in0, d.conv,
                                                  convcoreConvolutionBwdDataAlgo_t(algo), ws.data(), ws.size(), &beta,
                                                  d.x, out.data()));
    EXPECT_LE(error_of(from_memory(out, dims, out_cl), blend(1.5, ref, 0.5, out0)), bound);
}

template <typename T>
void check_native_fft(convcoreHandle_t handle, const Case3d& p, bool cl, convcoreConvolutionPass_t pass,
                      std::mt19937& rng) {
    check_native_pass<T>(handle, p, cl, pass,
                         pass == CONVCORE_PASS_FORWARD ? int(CONVCORE_FWD_ALGO_FFT) : int(CONVCORE_BWD_DATA_ALGO_FFT), 0,
                         rng);
}

TEST(Conv3d, NativeFft) {
    convcore::Handle handle;
    std::mt19937 rng(44);
    int backward = 0;
    for (const Case3d& p : kFftCases)
        for (bool cl : {false, true}) {
            SCOPED_TRACE(case_name(p, cl));
            check_native_fft<float>(handle, p, cl, CONVCORE_PASS_FORWARD, rng);
            check_native_fft<double>(handle, p, cl, CONVCORE_PASS_FORWARD, rng);
            if (p.stride_d * p.stride_h * p.stride_w != 1 || p.groups != 1) continue;
            SCOPED_TRACE("backward data");
            check_native_fft<float>(handle, p, cl, CONVCORE_PASS_BACKWARD_DATA, rng);
            check_native_fft<double>(handle, p, cl, CONVCORE_PASS_BACKWARD_DATA, rng);
            ++backward;
        }
    EXPECT_EQ(backward, 4);
}

// CYCLIC_MINIMAL runs a 3-D forward problem natively, nested over the depth
// (cpu/cyclic_minimal_3d.hpp), where its 5 products per tile of 4 - T + 1 output planes are fewer
// 2-D convolutions than the per-tap form's: 2 and 3 depth taps with depth padding 0 to 1, the
// plane filters the 2-D CYCLIC_MINIMAL takes (3x3, 2x2, 1x3, 3x1; its fused path at C/g <= 4 and its
// GEMM path above), groups, true convolution, odd sizes and output depths that are not whole
// tiles. Both layouts and precisions: beta 0 on a NaN y, alpha 1.5 / beta 0.5 on earlier values,
// through a plan and a call. The workspace says the nested form ran: 5 depth-transformed filters,
// input planes and output planes, then the 2-D CYCLIC_MINIMAL's own for the batch of (tile, image)
// planes (asked of the C API as a 2-D problem).
const Case3d kCyclicCases[] = {
    // n  c  d  h  w  k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
    {2, 3, 8, 6, 5, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
    {1, 6, 11, 5, 7, 4, 3, 2, 2, 0, 1, 0, 1, 1, 1, 1, 1, 1, 2, true},
    {1, 4, 9, 7, 6, 6, 2, 3, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, true},
    {2, 5, 10, 1, 9, 3, 3, 1, 3, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, false},
    {1, 3, 8, 7, 4, 5, 3, 3, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, true},
    {1, 9, 8, 6, 6, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
};

// The nested form's workspace for p (cyclic_minimal_3d.cpp's Sizes), in bytes.
size_t nested_cyclic_workspace(convcoreHandle_t handle, const Case3d& p, convcoreDataType_t dt) {
    const size_t elem = dt == CONVCORE_DATA_DOUBLE ? 8 : 4;
    const int64_t outputs = 4 - p.t + 1, batch = p.n * ((p.od() + outputs - 1) / outputs);
    const auto lines = [&](int64_t elems) { return (size_t(elems) * elem + 63) / 64 * 64; };
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    convcore::check(convcoreSetTensor4dDescriptor(x, dt, batch, p.c, p.h, p.w));
    convcore::check(convcoreSetTensor4dDescriptor(y, dt, batch, p.k, p.oh(), p.ow()));
    convcore::check(convcoreSetFilter4dDescriptor(w, dt, p.k, p.cg(), p.r, p.s));
    convcore::check(convcoreSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, 1, 1, 1, 1,
                                                       p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION));
    conv.set_groups(p.groups);
    size_t plane_bytes = 0;
    convcore::check(convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, CONVCORE_FWD_ALGO_CYCLIC_MINIMAL,
                                                               &plane_bytes));
    return 5 * (lines(p.k * p.cg() * p.r * p.s) + lines(batch * p.c * p.h * p.w) +
                lines(batch * p.k * p.oh() * p.ow())) + lines(int64_t((plane_bytes + elem - 1) / elem));
}

template <typename T>
void check_native_cyclic(convcoreHandle_t handle, const Case3d& p, bool cl, std::mt19937& rng) {
    const bool f64 = std::is_same<T, double>::value;
    const convcoreDataType_t dt = f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    const Descs3d d(p, cl, dt, /*filter_cl=*/false);
    const Data3d<T> data(p, d, cl, rng);
    const auto algo = CONVCORE_FWD_ALGO_CYCLIC_MINIMAL;
    const double bound = declared_bound(CONVCORE_PASS_FORWARD, algo, f64);
    const T one = 1, zero = 0, alpha = T(1.5), beta = T(0.5);
    convcore::Plan plan(handle, CONVCORE_PASS_FORWARD, d.x, d.w, d.conv, d.y, algo);
    EXPECT_EQ(plan.workspace_size(), nested_cyclic_workspace(handle, p, dt)) << "the nested form runs it";
    std::vector<char> ws(plan.workspace_size());
    std::vector<T> y(p.y_size(), std::numeric_limits<T>::quiet_NaN());
    plan.execute(&one, data.xm.data(), data.wm.data(), &zero, y.data(), ws.data(), ws.size());
    EXPECT_LE(error_of(from_memory(y, d.yd, cl), data.y_ref), bound);
    const auto y0 = rounded<T>(random_vector(p.y_size(), rng));
    y = to_memory<T>(y0, d.yd, cl);
    ASSERT_OK(convcoreConvolutionForward(handle, &alpha, d.x, data.xm.data(), d.w, data.wm.data(), d.conv, algo,
                                         ws.data(), ws.size(), &beta, d.y, y.data()));
    EXPECT_LE(error_of(from_memory(y, d.yd, cl), blend(1.5, data.y_ref, 0.5, y0)), bound);
}

TEST(Conv3d, NativeCyclic) {
    convcore::Handle handle;
    std::mt19937 rng(45);
    for (const Case3d& p : kCyclicCases)
        for (bool cl : {false, true}) {
            SCOPED_TRACE(case_name(p, cl));
            check_native_cyclic<float>(handle, p, cl, rng);
            check_native_cyclic<double>(handle, p, cl, rng);
        }
}

// IM2COL_GEMM runs 3-D problems natively (cpu/im2col_gemm_nd.hpp): forward on any windows (the
// 3-D im2col per block of output pixels, one GEMM over every tap), backward data where the
// outputs' windows are disjoint (one GEMM and a scatter) or, with overlapping windows, where every
// stride is 1 and there is one group (the forward form on dy by w transposed and mirrored). kDisjointCases: ConvTranspose3d(k=2,
// s=2)'s problem with every element covered; odd sizes whose last plane, row and column no window
// covers, with groups and true convolution; 1x1x1 stride 2 (gaps between the windows); a stride
// above the filter with padding, and a 1-tap depth with dilation. The forward pass also runs
// kCases (overlapping windows, padding beyond the filter, dilation, a depth no tap reaches). Both
// layouts and precisions, beta 0 on a NaN output, alpha 1.5 / beta 0.5 on earlier values, a plan
// and a call. The workspace says the native form ran: the filters in K x (T*R*S*C/g) order and
// nothing else.
const Case3d kDisjointCases[] = {
    // n  c  d  h  w  k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
    {2, 4, 6, 8, 6, 6, 2, 2, 2, 0, 0, 0, 2, 2, 2, 1, 1, 1, 1, false},
    {1, 6, 7, 9, 8, 4, 2, 2, 2, 0, 0, 0, 2, 2, 2, 1, 1, 1, 2, true},
    {2, 4, 5, 7, 9, 3, 1, 1, 1, 0, 0, 0, 2, 2, 2, 1, 1, 1, 1, false},
    {1, 3, 7, 8, 9, 5, 1, 2, 3, 1, 0, 2, 3, 2, 3, 2, 1, 1, 1, true},
    {1, 5, 6, 7, 6, 4, 3, 2, 1, 1, 1, 0, 3, 3, 2, 1, 1, 3, 1, false},
};

template <typename T>
void check_native_im2col(convcoreHandle_t handle, const Case3d& p, bool cl, convcoreConvolutionPass_t pass,
                         std::mt19937& rng) {
    // IM2COL_GEMM is algorithm 1 of every pass
    static_assert(int(CONVCORE_FWD_ALGO_IM2COL_GEMM) == int(CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM) &&
                  int(CONVCORE_FWD_ALGO_IM2COL_GEMM) == int(CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM));
    check_native_pass<T>(handle, p, cl, pass, int(CONVCORE_FWD_ALGO_IM2COL_GEMM), p.w_size() * sizeof(T), rng);
}

TEST(Conv3d, NativeIm2colGemm) {
    convcore::Handle handle;
    std::mt19937 rng(46);
    for (bool cl : {false, true}) {
        for (const Case3d& p : kDisjointCases) {
            SCOPED_TRACE(case_name(p, cl));
            for (auto pass : {CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA, CONVCORE_PASS_BACKWARD_FILTER}) {
                check_native_im2col<float>(handle, p, cl, pass, rng);
                check_native_im2col<double>(handle, p, cl, pass, rng);
            }
        }
        // ... and one input channel, and one channel per group (window rows copied as runs in NCDHW)
        const Case3d one_channel[] = {
            // n  c  d  h  w  k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
            {1, 1, 5, 6, 7, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
            {2, 4, 6, 7, 9, 8, 2, 3, 3, 0, 1, 2, 2, 2, 1, 1, 1, 1, 4, true},
        };
        std::vector<Case3d> any_windows(std::begin(one_channel), std::end(one_channel));
        any_windows.insert(any_windows.end(), std::begin(kCases), std::end(kCases));
        for (const Case3d& p : any_windows)
            for (auto pass : {CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_FILTER}) {
                SCOPED_TRACE(case_name(p, cl) + (pass == CONVCORE_PASS_FORWARD ? " forward" : " backward filter"));
                check_native_im2col<float>(handle, p, cl, pass, rng);
                check_native_im2col<double>(handle, p, cl, pass, rng);
            }
        // Backward data with overlapping windows, stride 1 and one group: the forward IM2COL_GEMM
        // of dy by w transposed and mirrored (padding dil*(k-1)-pad): padding 0 and up to the
        // filter's reach, dilation in D and W, true convolution, many channels on a small plane.
        // Its workspace: w transposed (on whole 64-byte lines), then the transposed filter's rows.
        const Case3d overlapping[] = {
            // n  c  d  h  w  k  t  r  s  pd ph pw sd sh sw dd dh dw  g  flip
            {2, 4, 5, 7, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},
            {1, 3, 6, 7, 5, 5, 2, 3, 2, 1, 2, 0, 1, 1, 1, 2, 1, 2, 1, true},
            {1, 5, 3, 4, 9, 7, 3, 1, 3, 2, 0, 1, 1, 1, 1, 1, 1, 1, 1, false},
            {1, 40, 2, 3, 3, 36, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},
        };
        for (const Case3d& p : overlapping) {
            SCOPED_TRACE(case_name(p, cl) + " backward data");
            const auto workspace = [&](size_t elem) { return (p.w_size() * elem + 63) / 64 * 64 + p.w_size() * elem; };
            const int algo = int(CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM);
            check_native_pass<float>(handle, p, cl, CONVCORE_PASS_BACKWARD_DATA, algo, workspace(4), rng);
            check_native_pass<double>(handle, p, cl, CONVCORE_PASS_BACKWARD_DATA, algo, workspace(8), rng);
        }
        // Forward with an image's output pixels (18) no more than the filters (24) and rows longer
        // than a sixteenth of half of any L2 up to 4 MiB (L = 27 * 1280): each image unfolded
        // whole and one multi-threaded GEMM per image; the same in backward data's transposed form.
        const Case3d few_pixels = {2, 1280, 2, 3, 3, 24, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, true};
        for (auto pass : {CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_FILTER}) {
            SCOPED_TRACE(case_name(few_pixels, cl) + (pass == CONVCORE_PASS_FORWARD ? " forward" : " backward filter"));
            check_native_im2col<float>(handle, few_pixels, cl, pass, rng);
            check_native_im2col<double>(handle, few_pixels, cl, pass, rng);
        }
        // Backward filter with few output pixels (2 x 16) against the filters (700 per group):
        // each image unfolded in w's order and one multi-threaded GEMM per image into dw,
        // accumulated over the images, per group.
        const Case3d wide = {2, 64, 2, 2, 4, 1400, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, true};
        SCOPED_TRACE(case_name(wide, cl) + " backward filter");
        check_native_im2col<float>(handle, wide, cl, CONVCORE_PASS_BACKWARD_FILTER, rng);
        check_native_im2col<double>(handle, wide, cl, CONVCORE_PASS_BACKWARD_FILTER, rng);
    }
}

// Get, Find and Select answer for the 3-D problem itself, not only its representative 2-D one:
// Get's and Find's memory is each algorithm's 3-D workspace (the native Winograd's U holds T
// taps: more than the 2-D problem's), Find times 3-D runs under a find-db key of its own (a 2-D
// problem of the representative's shape is timed anew), and Select's choice runs correctly.
TEST(Conv3d, GetFindSelectAnswerForThe3dProblem) {
    const char* db = std::getenv("CONVCORE_FIND_DB");
    const std::string saved = db ? db : "";
    setenv("CONVCORE_FIND_DB", "off", 1);  // the process's records only, none from earlier runs
    ASSERT_OK(convcoreClearFindCache());
    convcore::Handle handle;
    std::mt19937 rng(43);
    const auto w4 = CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3;
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int returned = 0;
    {  // T = 3: the native Winograd's U holds three taps
        const Descs3d d(kNativeCases[0], true, CONVCORE_DATA_FLOAT, /*filter_cl=*/false);
        for (int find = 0; find < 2; ++find) {
            SCOPED_TRACE(find ? "Find" : "Get");
            ASSERT_OK(find ? convcoreFindConvolutionForwardAlgorithm(handle, d.x, d.w, d.conv, d.y,
                                                                     CONVCORE_FWD_ALGO_COUNT, &returned, perf)
                           : convcoreGetConvolutionForwardAlgorithm(handle, d.x, d.w, d.conv, d.y,
                                                                    CONVCORE_FWD_ALGO_COUNT, &returned, perf));
            int checked = 0;
            for (int i = 0; i < returned; ++i) {
                if (perf[i].status != CONVCORE_STATUS_SUCCESS) continue;
                size_t bytes = 0;
                ASSERT_OK(
                    convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, perf[i].algo, &bytes));
                EXPECT_EQ(perf[i].memory, bytes) << convcoreGetFwdAlgoName(perf[i].algo);
                checked += perf[i].algo == w4;
            }
            EXPECT_EQ(checked, 1);
        }
    }
    // T = 1 and depth stride 1: the representative 2-D problem is a packed NHWC batch of one
    // image's output depths with a packed filter, which a 2-D problem states exactly (the same
    // find-db key but for the depth axis).
    const Case3d p{2, 16, 4, 6, 5, 5, 1, 3, 3, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, false};
    const Descs3d d(p, true, CONVCORE_DATA_FLOAT, /*filter_cl=*/false);
    const Data3d<float> data(p, d, true, rng);
    ASSERT_OK(convcoreFindConvolutionForwardAlgorithm(handle, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT,
                                                      &returned, perf));
    // That 2-D problem's own Find times it.
    const int64_t xd[4] = {p.od(), p.c, p.h, p.w}, wd[4] = {p.k, p.c, p.r, p.s}, yd[4] = {p.od(), p.k, p.oh(), p.ow()};
    convcore::TensorDesc x2, y2;
    convcore::FilterDesc w2;
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(x2, NHWC, CONVCORE_DATA_FLOAT, 4, xd));
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(y2, NHWC, CONVCORE_DATA_FLOAT, 4, yd));
    ASSERT_OK(convcoreSetFilterNdDescriptor(w2, CONVCORE_DATA_FLOAT, NCHW, 4, wd));
    convcore::ConvDesc conv2;
    const int64_t pad[2] = {p.pad_h, p.pad_w}, one[2] = {1, 1};
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv2, 2, pad, one, one, CONVCORE_CROSS_CORRELATION));
    int64_t timed_before = 0, timed_after = 0;
    ASSERT_OK(convcoreGetFindStats(&timed_before, nullptr));
    ASSERT_OK(convcoreFindConvolutionForwardAlgorithm(handle, x2, w2, conv2, y2, CONVCORE_FWD_ALGO_COUNT, &returned,
                                                      perf));
    ASSERT_OK(convcoreGetFindStats(&timed_after, nullptr));
    EXPECT_GT(timed_after, timed_before) << "the 2-D problem read the 3-D problem's find-db records";

    convcoreConvolutionFwdAlgo_t chosen;
    ASSERT_OK(convcoreSelectConvolutionForwardAlgorithm(handle, d.x, data.xm.data(), d.w, data.wm.data(), d.conv, d.y,
                                                        nullptr, CONVCORE_SELECT_FIND, &chosen));
    expect_forward_matches(handle, p, d, data, true, chosen);
    db ? setenv("CONVCORE_FIND_DB", saved.c_str(), 1) : unsetenv("CONVCORE_FIND_DB");
}

// ---- the fused epilogue and the bias gradient --------------------------------------------------

// y = relu(conv + alpha2 * z + bias) on 3-D tensors: after the whole sum over the depth taps; z in
// place (z == y) too.
TEST(Conv3d, BiasActivation) {
    convcore::Handle handle;
    std::mt19937 rng(39);
    const Case3d p = kCases[0];
    for (bool cl : {false, true}) {
        SCOPED_TRACE(case_name(p, cl));
        const Descs3d d(p, cl);
        const Data3d<float> data(p, d, cl, rng);
        const auto z0 = rounded<float>(random_vector(p.y_size(), rng));
        const auto b0 = rounded<float>(random_vector(size_t(p.k), rng));
        const std::vector<float> bias(b0.begin(), b0.end()), zm = to_memory<float>(z0, d.yd, cl);
        const int64_t bd[5] = {1, p.k, 1, 1, 1};
        convcore::TensorDesc bias_desc;
        ASSERT_OK(convcoreSetTensorNdDescriptorEx(bias_desc, NCHW, CONVCORE_DATA_FLOAT, 5, bd));
        const float alpha2 = 0.75f;
        std::vector<double> ref(p.y_size());
        const int64_t plane = p.od() * p.oh() * p.ow();
        for (size_t i = 0; i < ref.size(); ++i)
            ref[i] = std::max(0.0, data.y_ref[i] + alpha2 * z0[i] + b0[size_t(int64_t(i) / plane % p.k)]);
        size_t bytes = 0;
        ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_DIRECT,
                                                             &bytes));
        std::vector<char> ws(bytes);
        std::vector<float> y(p.y_size(), kNaN);
        ASSERT_OK(convcoreConvolutionBiasActivationForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(),
                                                           d.conv, CONVCORE_FWD_ALGO_DIRECT, ws.data(), bytes, &alpha2,
                                                           d.y, zm.data(), bias_desc, bias.data(),
                                                           CONVCORE_ACTIVATION_RELU, d.y, y.data()));
        EXPECT_LE(error_of(from_memory(y, d.yd, cl), ref), 1e-5);
        std::vector<float> yz = zm;  // z == y
        ASSERT_OK(convcoreConvolutionBiasActivationForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(),
                                                           d.conv, CONVCORE_FWD_ALGO_DIRECT, ws.data(), bytes, &alpha2,
                                                           d.y, yz.data(), bias_desc, bias.data(),
                                                           CONVCORE_ACTIVATION_RELU, d.y, yz.data()));
        EXPECT_LE(error_of(from_memory(yz, d.yd, cl), ref), 1e-5);
        // A 2-D z with a 3-D y is the caller's mistake.
        convcore::TensorDesc z2(CONVCORE_DATA_FLOAT, p.n, p.k, p.oh(), p.ow());
        EXPECT_STATUS(convcoreConvolutionBiasActivationForward(handle, &kOne, d.x, data.xm.data(), d.w, data.wm.data(),
                                                               d.conv, CONVCORE_FWD_ALGO_DIRECT, ws.data(), bytes,
                                                               &alpha2, z2, zm.data(), bias_desc, bias.data(),
                                                               CONVCORE_ACTIVATION_RELU, d.y, y.data()),
                      CONVCORE_STATUS_BAD_PARAM, "zDesc");
    }
}

// db = alpha * sum over N, D, H, W of dy + beta * db for a 5-D dy, NCDHW and NDHWC.
TEST(Conv3d, BackwardBias) {
    convcore::Handle handle;
    std::mt19937 rng(40);
    const int64_t n = 2, k = 3, d = 4, h = 3, w = 5;
    const int64_t dims[5] = {n, k, d, h, w}, bd[5] = {1, k, 1, 1, 1};
    const auto dy = rounded<float>(random_vector(size_t(n * k * d * h * w), rng));
    std::vector<double> sum(size_t(k), 0.0);
    for (size_t i = 0; i < dy.size(); ++i) sum[size_t(int64_t(i) / (d * h * w) % k)] += dy[i];
    convcore::TensorDesc db_desc;
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(db_desc, NCHW, CONVCORE_DATA_FLOAT, 5, bd));
    for (bool cl : {false, true}) {
        SCOPED_TRACE(cl ? "NDHWC" : "NCDHW");
        convcore::TensorDesc dy_desc;
        ASSERT_OK(convcoreSetTensorNdDescriptorEx(dy_desc, cl ? NHWC : NCHW, CONVCORE_DATA_FLOAT, 5, dims));
        const std::vector<float> dym = to_memory<float>(dy, dims, cl);
        const float alpha = 2.0f, beta = 0.5f;
        std::vector<float> db(size_t(k), 4.0f);
        ASSERT_OK(convcoreConvolutionBackwardBias(handle, &alpha, dy_desc, dym.data(), &beta, db_desc, db.data()));
        std::vector<double> ref(static_cast<size_t>(k));
        for (int64_t i = 0; i < k; ++i) ref[size_t(i)] = 2.0 * sum[size_t(i)] + 2.0;
        EXPECT_LE(error_of(std::vector<double>(db.begin(), db.end()), ref), 1e-6);
        std::vector<float> db0(size_t(k), kNaN);
        ASSERT_OK(convcoreConvolutionBackwardBias(handle, &kOne, dy_desc, dym.data(), &kZero, db_desc, db0.data()));
        EXPECT_LE(error_of(std::vector<double>(db0.begin(), db0.end()), sum), 1e-6);
    }
    // A 4-D dv with a 5-D dy is named.
    convcore::TensorDesc dy_desc, dv4(CONVCORE_DATA_FLOAT, n, k, h, w);
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(dy_desc, NCHW, CONVCORE_DATA_FLOAT, 5, dims));
    std::vector<float> dym(dy.size()), dv(dy.size()), db(static_cast<size_t>(k));
    EXPECT_STATUS(convcoreActivationBackwardBias(handle, CONVCORE_ACTIVATION_IDENTITY, nullptr, nullptr, nullptr,
                                                 nullptr, dy_desc, dym.data(), dv4, dv.data(), &kOne, &kZero, db_desc,
                                                 db.data()),
                  CONVCORE_STATUS_BAD_PARAM, "dv: 2-D tensor (nbDims 4) of depth 1 does not match dy: 3-D tensor");
}

// ---- descriptors -------------------------------------------------------------------------------

TEST(Conv3d, DescriptorRoundTrips) {
    const int64_t dims[5] = {2, 3, 4, 5, 6};
    convcore::TensorDesc t;
    int nb = 0;
    int64_t gd[5], gs[5];
    convcoreDataType_t dt;
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(t, NCHW, CONVCORE_DATA_DOUBLE, 5, dims));
    ASSERT_OK(convcoreGetTensorNdDescriptor(t, 5, &dt, &nb, gd, gs));
    EXPECT_EQ(dt, CONVCORE_DATA_DOUBLE);
    EXPECT_EQ(nb, 5);
    EXPECT_EQ(std::vector<int64_t>(gd, gd + 5), std::vector<int64_t>(dims, dims + 5));
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 5), (std::vector<int64_t>{360, 120, 30, 6, 1}));
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(t, NHWC, CONVCORE_DATA_FLOAT, 5, dims));
    ASSERT_OK(convcoreGetTensorNdDescriptor(t, 5, nullptr, nullptr, nullptr, gs));
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 5), (std::vector<int64_t>{360, 1, 90, 18, 3}));
    const int64_t strides[5] = {1000, 200, 40, 7, 1};
    ASSERT_OK(convcoreSetTensorNdDescriptor(t, CONVCORE_DATA_FLOAT, 5, dims, strides));
    ASSERT_OK(convcoreGetTensorNdDescriptor(t, 3, nullptr, &nb, gd, gs));  // the first 3 only
    EXPECT_EQ(nb, 5);
    EXPECT_EQ(std::vector<int64_t>(gs, gs + 3), (std::vector<int64_t>{1000, 200, 40}));
    // No 4-D form of a 3-D descriptor; the 4d setter makes it 2-D again.
    int64_t n, c, h, w;
    EXPECT_STATUS(convcoreGetTensor4dDescriptor(t, nullptr, &n, &c, &h, &w, nullptr, nullptr, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "convcoreGetTensorNdDescriptor");
    ASSERT_OK(convcoreSetTensor4dDescriptor(t, CONVCORE_DATA_FLOAT, 1, 2, 3, 4));
    ASSERT_OK(convcoreGetTensorNdDescriptor(t, 5, nullptr, &nb, gd, nullptr));
    EXPECT_EQ(nb, 4);

    convcore::FilterDesc f;
    const int64_t fd[5] = {4, 3, 2, 3, 5};
    convcoreTensorFormat_t fmt;
    ASSERT_OK(convcoreSetFilterNdDescriptor(f, CONVCORE_DATA_FLOAT, NHWC, 5, fd));
    int64_t gf[5];
    ASSERT_OK(convcoreGetFilterNdDescriptor(f, 5, nullptr, &fmt, &nb, gf));
    EXPECT_EQ(fmt, NHWC);
    EXPECT_EQ(nb, 5);
    EXPECT_EQ(std::vector<int64_t>(gf, gf + 5), std::vector<int64_t>(fd, fd + 5));
    int64_t k, cg, r, s;
    EXPECT_STATUS(convcoreGetFilter4dDescriptor(f, nullptr, &k, &cg, &r, &s), CONVCORE_STATUS_BAD_PARAM,
                  "convcoreGetFilterNdDescriptor");

    convcore::ConvDesc conv;
    const int64_t pads[3] = {1, 2, 3}, st[3] = {4, 5, 6}, dl[3] = {7, 8, 9};
    ASSERT_OK(convcoreSetConvolutionNdDescriptor(conv, 3, pads, st, dl, CONVCORE_CONVOLUTION));
    int len = 0;
    int64_t gp[3], gst[3], gdl[3];
    convcoreConvolutionMode_t mode;
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(conv, 3, &len, gp, gst, gdl, &mode));
    EXPECT_EQ(len, 3);
    EXPECT_EQ(mode, CONVCORE_CONVOLUTION);
    EXPECT_EQ(std::vector<int64_t>(gp, gp + 3), std::vector<int64_t>(pads, pads + 3));
    EXPECT_EQ(std::vector<int64_t>(gst, gst + 3), std::vector<int64_t>(st, st + 3));
    EXPECT_EQ(std::vector<int64_t>(gdl, gdl + 3), std::vector<int64_t>(dl, dl + 3));
    int64_t a, b;
    EXPECT_STATUS(convcoreGetConvolution2dDescriptor(conv, &a, &b, nullptr, nullptr, nullptr, nullptr, nullptr),
                  CONVCORE_STATUS_BAD_PARAM, "convcoreGetConvolutionNdDescriptor");
    ASSERT_OK(convcoreSetConvolution2dDescriptor(conv, 0, 0, 1, 1, 1, 1, CONVCORE_CROSS_CORRELATION));
    ASSERT_OK(convcoreGetConvolutionNdDescriptor(conv, 3, &len, gp, nullptr, nullptr, nullptr));
    EXPECT_EQ(len, 2);

    // The output dims, and the 2d query refusing 3-D.
    const Case3d p = kCases[0];
    const Descs3d d(p, false);
    int64_t out[5];
    ASSERT_OK(convcoreGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, 5, out));
    EXPECT_EQ(std::vector<int64_t>(out, out + 5), std::vector<int64_t>(d.yd, d.yd + 5));
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, 4, out), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=4 does not match xDesc's 5 dimensions");
    EXPECT_STATUS(convcoreGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h, &w), CONVCORE_STATUS_BAD_PARAM,
                  "convcoreGetConvolutionNdForwardOutputDim");
}

// Bad 3-D descriptors: mixed dimension counts, an empty output (filter depth beyond the padded
// depth), a y of the wrong depth, bad values, each named.
TEST(Conv3d, BadDescriptors) {
    convcore::Handle handle;
    const Case3d p = kCases[0];
    const Descs3d d(p, false);
    convcore::TensorDesc x2(CONVCORE_DATA_FLOAT, p.n, p.c, p.h, p.w), y2(CONVCORE_DATA_FLOAT, p.n, p.k, p.oh(), p.ow());
    convcore::FilterDesc w2(CONVCORE_DATA_FLOAT, p.k, p.cg(), p.r, p.s);
    convcore::ConvDesc conv2(1, 1, 1);
    conv2.set_groups(p.groups);
    size_t bytes = 0;
    const auto fwd = CONVCORE_FWD_ALGO_DIRECT;
    EXPECT_OK(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, fwd, &bytes));
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, w2, d.conv, d.y, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "w: 2-D filter (nbDims 4) does not match x: 3-D tensor (nbDims 5)");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x2, d.w, conv2, y2, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "w: 3-D filter (nbDims 5) does not match x: 2-D tensor (nbDims 4)");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, conv2, d.y, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "arrayLength 3");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x2, w2, d.conv, y2, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "convDesc: 3-D convolution (arrayLength 3) does not match x: 2-D tensor");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, y2, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "y: 2-D tensor (nbDims 4) does not match x: 3-D tensor (nbDims 5)");
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, x2, w2, conv2, d.y, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "y: 3-D tensor (nbDims 5) does not match x: 2-D tensor (nbDims 4)");
    // The backward passes name dx, dy, dw.
    EXPECT_STATUS(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, d.w, y2, d.conv, d.x,
                                                                  CONVCORE_BWD_DATA_ALGO_DIRECT, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "dy: 2-D tensor (nbDims 4) does not match dx: 3-D tensor (nbDims 5)");
    EXPECT_STATUS(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, d.x, d.y, d.conv, w2,
                                                                    CONVCORE_BWD_FILTER_ALGO_DIRECT, &bytes),
                  CONVCORE_STATUS_BAD_PARAM, "dw: 2-D filter (nbDims 4) does not match x: 3-D tensor (nbDims 5)");
    // y of another depth.
    convcore::TensorDesc y_deep;
    const int64_t yd[5] = {p.n, p.k, p.od() + 1, p.oh(), p.ow()};
    ASSERT_OK(convcoreSetTensorNdDescriptorEx(y_deep, NCHW, CONVCORE_DATA_FLOAT, 5, yd));
    EXPECT_STATUS(convcoreGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, y_deep, fwd, &bytes),
                  CONVCORE_STATUS_BAD_PARAM,
                  "y: shape 2x6x" + std::to_string(p.od() + 1) + "x7x6 does not match the output shape 2x6x" +
                      std::to_string(p.od()) + "x7x6");
    // A filter depth beyond the padded input depth: an empty output.
    convcore::FilterDesc deep;
    const int64_t fd[5] = {p.k, p.cg(), 8, p.r, p.s};
    ASSERT_OK(convcoreSetFilterNdDescriptor(deep, CONVCORE_DATA_FLOAT, NCHW, 5, fd));
    int64_t out[5];
    EXPECT_STATUS(convcoreGetConvolutionNdForwardOutputDim(d.conv, d.x, deep, 5, out), CONVCORE_STATUS_BAD_PARAM,
                  "empty output: the filter depth T=8 with dilation 1 spans 8 but the padded input depth is 7 (D=5 + "
                  "2*pad 1)");
    std::vector<float> x(p.x_size()), w(size_t(p.k * p.cg() * 8 * p.r * p.s)), y(p.y_size());
    EXPECT_STATUS(convcoreConvolutionForward(handle, &kOne, d.x, x.data(), deep, w.data(), d.conv, fwd, nullptr, 0,
                                             &kZero, d.y, y.data()),
                  CONVCORE_STATUS_BAD_PARAM, "empty output: the filter depth T=8");
    // Bad values in the setters.
    convcore::TensorDesc t;
    const int64_t zero_d[5] = {2, 3, 0, 4, 4}, st5[5] = {48, 16, 16, 4, 1};
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(t, CONVCORE_DATA_FLOAT, 5, zero_d, st5), CONVCORE_STATUS_BAD_PARAM,
                  "tensor descriptor: dims[2]=0 must be >= 1");
    EXPECT_STATUS(convcoreSetTensorNdDescriptor(t, CONVCORE_DATA_FLOAT, 6, zero_d, st5), CONVCORE_STATUS_BAD_PARAM,
                  "nbDims=6 must be 3 (1-D), 4 (2-D) or 5 (3-D)");
    const int64_t neg_pad[3] = {-1, 0, 0}, ones[3] = {1, 1, 1}, zero_dil[3] = {1, 1, 0};
    convcore::ConvDesc c3;
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(c3, 3, neg_pad, ones, ones, CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "pads[0]=-1 must be >= 0");
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(c3, 3, ones, ones, zero_dil, CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "dilations[2]=0 must be >= 1");
    const int64_t huge[3] = {int64_t(1) << 41, 1, 1};
    EXPECT_STATUS(convcoreSetConvolutionNdDescriptor(c3, 3, ones, huge, ones, CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_BAD_PARAM, "<= 2^40");
    // The fused 1x1 -> depthwise pair is 2-D only.
    convcorePointwiseDepthwisePlan_t pair = nullptr;
    convcore::FilterDesc pw;
    const int64_t pwd[5] = {p.k, p.c, 1, 1, 1};
    ASSERT_OK(convcoreSetFilterNdDescriptor(pw, CONVCORE_DATA_FLOAT, NCHW, 5, pwd));
    EXPECT_EQ(convcoreCreatePointwiseDepthwisePlan(handle, d.x, pw, d.w, d.conv, d.y, &pair),
              CONVCORE_STATUS_NOT_SUPPORTED)
        << last_error();
    EXPECT_EQ(pair, nullptr);
}
