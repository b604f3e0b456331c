// A C++ project on the installed library: one small convolution checked by hand, then 1-D, 2-D
// and 3-D convolutions, every pass, and transposed convolutions (PyTorch's ConvTranspose, run as
// cuDNN runs it: backward data, the output size from convcoreGetConvolutionNdTransposedOutputDim
// with output_padding) through the handle's plan cache (convcore::execute, "auto" choosing),
// each twice, against float64 loops. Prints one line per case, then the cache's counts.
#include <convcore/convcore.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// One N-d problem (1 to 3 spatial axes; unused axes have size 1).
struct Case {
    const char* name;
    int dims;  // spatial axes
    int64_t n, c, k, groups;
    int64_t in[3], filter[3], pad[3], stride[3], dil[3], output_padding[3];
    bool transposed;  // run backward data on dy of the transposed convolution's input
};

int64_t out_size(const Case& t, int a, int64_t in) {
    return (in + 2 * t.pad[a] - t.dil[a] * (t.filter[a] - 1) - 1) / t.stride[a] + 1;
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
    std::vector<int64_t> s(dims.size(), 1);
    for (int i = int(dims.size()) - 2; i >= 0; --i) s[size_t(i)] = s[size_t(i) + 1] * dims[size_t(i) + 1];
    return s;
}

// The float64 reference of all three passes at once: y = conv(x, w), dx = grad_x(w, dy),
// dw = grad_w(x, dy), over one loop of (n, k, c, output position, tap).
struct Reference {
    std::vector<double> y, dx, dw;
};
Reference reference(const Case& t, const int64_t in[3], const int64_t out[3], const std::vector<float>& x,
                    const std::vector<float>& w, const std::vector<float>& dy) {
    const int64_t cg = t.c / t.groups, kg = t.k / t.groups;
    const int64_t in_size = in[0] * in[1] * in[2], out_size_ = out[0] * out[1] * out[2];
    const int64_t taps = t.filter[0] * t.filter[1] * t.filter[2];
    Reference r{std::vector<double>(size_t(t.n * t.k * out_size_)), std::vector<double>(size_t(t.n * t.c * in_size)),
                std::vector<double>(size_t(t.k * cg * taps))};
    for (int64_t n = 0; n < t.n; ++n)
        for (int64_t k = 0; k < t.k; ++k)
            for (int64_t ci = 0; ci < cg; ++ci) {
                const int64_t c = k / kg * cg + ci;
                for (int64_t o0 = 0; o0 < out[0]; ++o0)
                    for (int64_t o1 = 0; o1 < out[1]; ++o1)
                        for (int64_t o2 = 0; o2 < out[2]; ++o2)
                            for (int64_t f0 = 0; f0 < t.filter[0]; ++f0)
                                for (int64_t f1 = 0; f1 < t.filter[1]; ++f1)
                                    for (int64_t f2 = 0; f2 < t.filter[2]; ++f2) {
                                        const int64_t i0 = o0 * t.stride[0] + f0 * t.dil[0] - t.pad[0];
                                        const int64_t i1 = o1 * t.stride[1] + f1 * t.dil[1] - t.pad[1];
                                        const int64_t i2 = o2 * t.stride[2] + f2 * t.dil[2] - t.pad[2];
                                        if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                                            continue;
                                        const int64_t xi = ((n * t.c + c) * in[0] + i0) * in[1] * in[2] + i1 * in[2] + i2;
                                        const int64_t yi = ((n * t.k + k) * out[0] + o0) * out[1] * out[2] + o1 * out[2] + o2;
                                        const int64_t wi = ((k * cg + ci) * t.filter[0] + f0) * t.filter[1] * t.filter[2] +
                                                           f1 * t.filter[2] + f2;
                                        r.y[size_t(yi)] += double(x[size_t(xi)]) * w[size_t(wi)];
                                        r.dx[size_t(xi)] += double(dy[size_t(yi)]) * w[size_t(wi)];
                                        r.dw[size_t(wi)] += double(x[size_t(xi)]) * dy[size_t(yi)];
                                    }
            }
    return r;
}

// ||got - ref|| / ||ref||
double relative_error(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<float> values(size_t count, double seed) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = float(std::sin(seed * double(i + 1)));
    return v;
}

// The case's passes through the handle's cache; false on a wrong result.
bool run(convcoreHandle_t handle, const Case& t) {
    const int nb = t.dims + 2;
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
    for (int a = 0; a < t.dims; ++a) in[3 - t.dims + a] = t.in[a];
    std::vector<int64_t> pads(t.pad, t.pad + t.dims), strides(t.stride, t.stride + t.dims), dils(t.dil, t.dil + t.dims);
    std::vector<int64_t> w_dims = {t.k, t.c / t.groups};
    w_dims.insert(w_dims.end(), t.filter, t.filter + t.dims);
    convcore::TensorDesc xd, yd;
    convcore::FilterDesc wd;
    convcore::ConvDesc cd;
    convcore::check(convcoreSetConvolutionNdDescriptor(cd, t.dims, pads.data(), strides.data(), dils.data(),
                                                       CONVCORE_CROSS_CORRELATION));
    convcore::check(convcoreSetConvolutionGroupCount(cd, t.groups));
    convcore::check(convcoreSetFilterNdDescriptor(wd, CONVCORE_DATA_FLOAT, CONVCORE_TENSOR_NCHW, nb, w_dims.data()));
    std::vector<int64_t> y_dims(static_cast<size_t>(nb));
    if (t.transposed) {
        // The transposed convolution's input is dy (N x K x in); its output dx comes from the
        // core with output_padding (PyTorch's rule), and x takes that shape.
        std::vector<int64_t> dy_dims = {t.n, t.k};
        dy_dims.insert(dy_dims.end(), t.in, t.in + t.dims);
        convcore::check(convcoreSetTensorNdDescriptor(yd, CONVCORE_DATA_FLOAT, nb, dy_dims.data(),
                                                      packed_strides(dy_dims).data()));
        std::vector<int64_t> x_dims(static_cast<size_t>(nb));
        convcore::check(convcoreGetConvolutionNdTransposedOutputDim(cd, yd, wd, nb, t.output_padding, x_dims.data()));
        convcore::check(convcoreSetTensorNdDescriptor(xd, CONVCORE_DATA_FLOAT, nb, x_dims.data(),
                                                      packed_strides(x_dims).data()));
        for (int a = 0; a < t.dims; ++a) in[3 - t.dims + a] = x_dims[size_t(2 + a)];
        y_dims = dy_dims;
    } else {
        std::vector<int64_t> x_dims = {t.n, t.c};
        x_dims.insert(x_dims.end(), t.in, t.in + t.dims);
        convcore::check(convcoreSetTensorNdDescriptor(xd, CONVCORE_DATA_FLOAT, nb, x_dims.data(),
                                                      packed_strides(x_dims).data()));
        convcore::check(convcoreGetConvolutionNdForwardOutputDim(cd, xd, wd, nb, y_dims.data()));
        convcore::check(convcoreSetTensorNdDescriptor(yd, CONVCORE_DATA_FLOAT, nb, y_dims.data(),
                                                      packed_strides(y_dims).data()));
    }
    for (int a = 0; a < t.dims; ++a) {
        out[3 - t.dims + a] = y_dims[size_t(2 + a)];
        if (!t.transposed && out[3 - t.dims + a] != out_size(t, a, t.in[a])) return false;
    }
    // The reference's axes are (D, H, W); a 1-D or 2-D case's filter and geometry move right too.
    Case r = t;
    for (int a = 0; a < 3; ++a) r.filter[a] = 1, r.pad[a] = 0, r.stride[a] = 1, r.dil[a] = 1;
    for (int a = 0; a < t.dims; ++a) {
        const int to = 3 - t.dims + a;
        r.filter[to] = t.filter[a], r.pad[to] = t.pad[a], r.stride[to] = t.stride[a], r.dil[to] = t.dil[a];
    }
    const size_t x_count = size_t(t.n * t.c * in[0] * in[1] * in[2]);
    const size_t y_count = size_t(t.n * t.k * out[0] * out[1] * out[2]);
    const size_t w_count = size_t(t.k * (t.c / t.groups) * r.filter[0] * r.filter[1] * r.filter[2]);
    const std::vector<float> x = values(x_count, 0.7), w = values(w_count, 1.3), dy = values(y_count, 0.9);
    const Reference ref = reference(r, in, out, x, w, dy);
    std::vector<float> y(y_count), dx(x_count), dw(w_count);

    struct Pass {
        convcoreConvolutionPass_t pass;
        const char* what;
        const void *in0, *in1;
        std::vector<float>* out;
        const std::vector<double>* ref;
    };
    std::vector<Pass> passes = {{CONVCORE_PASS_BACKWARD_DATA, "backward data", dy.data(), w.data(), &dx, &ref.dx}};
    if (!t.transposed) {
        passes.insert(passes.begin(), {CONVCORE_PASS_FORWARD, "forward", x.data(), w.data(), &y, &ref.y});
        passes.push_back({CONVCORE_PASS_BACKWARD_FILTER, "backward filter", x.data(), dy.data(), &dw, &ref.dw});
    }
    bool ok = true;
    for (const Pass& p : passes) {
        convcoreConvolutionArgs_t args{};
        args.in0 = p.in0;
        args.in1 = p.in1;
        args.out = p.out->data();
        int first = convcore::execute(handle, p.pass, xd, wd, cd, yd, CONVCORE_PLAN_SELECT_MEASURED, args);
        std::fill(p.out->begin(), p.out->end(), 0.0f);
        int again = convcore::execute(handle, p.pass, xd, wd, cd, yd, CONVCORE_PLAN_SELECT_MEASURED, args);
        const double err = relative_error(*p.out, *p.ref);
        const bool good = err < 1e-3 && first == again;
        ok = ok && good;
        const char* name = p.pass == CONVCORE_PASS_FORWARD ? convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(again))
                           : p.pass == CONVCORE_PASS_BACKWARD_DATA
                               ? convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(again))
                               : convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(again));
        std::printf("%s %s: %s, relative error %.1e%s\n", t.name, t.transposed ? "transposed" : p.what, name, err,
                    good ? "" : "  <- WRONG");
    }
    return ok;
}

}  // namespace

int main() {
    try {
        convcore::Handle handle;
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 2, 5, 5);
        convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 3, 2, 3, 3);
        convcore::ConvDesc conv(1, 1);
        const auto out = conv.output_dims(x, w);
        convcore::TensorDesc y(CONVCORE_DATA_FLOAT, out[0], out[1], out[2], out[3]);
        std::vector<float> xs(50, 1.0f), ws(54, 1.0f), ys(size_t(out[1] * out[2] * out[3]), 0.0f);
        const float alpha = 1, beta = 0;
        convcore::check(convcoreConvolutionForward(handle, &alpha, x, xs.data(), w, ws.data(), conv,
                                                   CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &beta, y,
                                                   ys.data()));
        // Centre of a 5x5 all-ones image, 2 channels, 3x3 all-ones filter: 18.
        const float centre = ys[size_t(2 * out[3] + 2)];
        std::printf("convcore %zu: output %ldx%ldx%ldx%ld, centre %.1f\n", convcoreGetVersion(),
                    long(out[0]), long(out[1]), long(out[2]), long(out[3]), centre);
        if (std::fabs(centre - 18.0f) >= 1e-5f) return 1;

        //                 dims  n  c  k  g   in          filter     pad        stride     dil        out_pad
        const Case cases[] = {
            {"1-D", 1, 2, 3, 4, 1, {11}, {3}, {1}, {1}, {1}, {0}, false},
            {"1-D strided", 1, 2, 4, 6, 2, {12}, {3}, {2}, {2}, {2}, {0}, false},
            {"2-D", 2, 2, 3, 4, 1, {7, 6}, {3, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, false},
            {"2-D strided", 2, 1, 4, 4, 2, {9, 8}, {3, 3}, {1, 0}, {2, 1}, {1, 2}, {0, 0}, false},
            {"3-D", 3, 2, 3, 4, 1, {4, 5, 6}, {3, 3, 2}, {1, 1, 0}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, false},
            {"3-D strided", 3, 1, 2, 4, 1, {5, 6, 5}, {2, 3, 3}, {0, 1, 1}, {2, 2, 1}, {1, 1, 2}, {0, 0, 0}, false},
            {"1-D", 1, 2, 3, 4, 1, {6}, {3}, {1}, {2}, {1}, {1}, true},
            {"2-D", 2, 1, 3, 4, 1, {4, 5}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, {1, 0}, true},
            {"3-D", 3, 1, 2, 3, 1, {3, 4, 3}, {2, 3, 3}, {0, 1, 1}, {2, 2, 2}, {1, 1, 1}, {1, 1, 0}, true},
        };
        convcorePlanCacheInfo_t before, info;
        convcore::check(convcoreGetPlanCacheInfo(handle, &before));
        bool ok = true;
        for (const Case& t : cases) ok = run(handle, t) && ok;
        convcore::check(convcoreGetPlanCacheInfo(handle, &info));
        const long hits = long(info.hits - before.hits), misses = long(info.misses - before.misses);
        std::printf("every pass through the cache: %s, hits %ld, misses %ld\n", ok ? "right" : "WRONG", hits, misses);
        return ok && hits == misses ? 0 : 1;  // each problem's second call finds its plan
    } catch (const convcore::Exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
