// DEPTHWISE's fused epilogue, at the solver: in NHWC, fuses_epilogue says true and the run itself
// applies ConvArgs::epilogue, y = act(alpha * conv(x, w) + alpha2 * z + bias[k]), in every store
// (the sliding kernel for 3, 5 and 7 taps at stride 1 and 2, the pixel blocks of 4, 2 and 1
// vectors of channels, the row ends, the channels past the last whole vector, channel
// multipliers), against the float64 reference: every activation, with and without bias and z,
// z == y in place, float32 and float64. NCHW leaves the epilogue to the core (fuses_epilogue
// false). The solver is called directly, so a run that left the epilogue out fails here instead
// of being hidden by the core's pass after it: libconvcore exports only the C API, so this
// program links the solver's objects, the ones libconvcore links (tests/cpp/CMakeLists.txt). CMake re-runs it with
// CONVCORE_CPU_ISA=avx2 and baseline. The public entry points are checked in test_epilogue.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/solver.hpp"
#include "cpu/cpu_isa.hpp"
#include "epilogue_reference.hpp"
#include "reference.hpp"

// libconvcore's definition is hidden; the solver compiled in here needs its own.
int convcoreContext::threads() const { return num_threads > 0 ? num_threads : omp_get_max_threads(); }

namespace convcore {
namespace cpu {
extern const Solver depthwise_solver;
}
}  // namespace convcore

using convcore::ConvArgs;
using convcore::ConvProblem;
using convcore::cpu::depthwise_solver;
using convcore_test::Shape;

namespace {

enum class Residual { None, Separate, InPlace };

// The problem a plan hands the solver: packed x and y, NHWC or NCHW as asked.
ConvProblem problem(const Shape& s, bool nhwc, bool f64) {
    ConvProblem p;
    p.dtype = f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    p.n = s.n, p.c = s.c, p.h = s.h, p.w = s.w, p.k = s.k, p.r = s.r, p.s = s.s, p.groups = s.groups;
    p.pad_h = s.pad_h, p.pad_w = s.pad_w, p.stride_h = s.stride_h, p.stride_w = s.stride_w;
    p.dil_h = s.dil_h, p.dil_w = s.dil_w, p.flip = s.flip, p.p = s.out_h(), p.q = s.out_w();
    ConvProblem out = p.packed();
    if (nhwc) {
        convcore::packed_nhwc_strides(out.n, out.c, out.h, out.w, out.x_strides);
        convcore::packed_nhwc_strides(out.n, out.k, out.p, out.q, out.y_strides);
        out.nhwc = true;
    }
    return out;
}

// NCHW index i of an N x C x H x W tensor -> its NHWC index.
size_t nhwc_at(const int64_t d[4], size_t i) {
    const int64_t w = int64_t(i) % d[3], h = int64_t(i) / d[3] % d[2], c = int64_t(i) / (d[3] * d[2]) % d[1];
    const int64_t n = int64_t(i) / (d[3] * d[2] * d[1]);
    return size_t(((n * d[2] + h) * d[3] + w) * d[1] + c);
}

const char* isa_name() {  // which kernels run (CONVCORE_CPU_ISA caps them)
    switch (convcore::cpu::cpu_isa()) {
        case convcore::cpu::CpuIsa::avx512: return "avx512";
        case convcore::cpu::CpuIsa::avx2: return "avx2";
        default: return "baseline";
    }
}

// Every epilogue on one shape, by the solver's run in NHWC.
template <typename T>
void check_shape(const Shape& s, uint32_t seed) {
    const bool f64 = sizeof(T) == 8;
    SCOPED_TRACE(std::string(f64 ? "f64 " : "f32 ") + isa_name() + " kernels");
    const ConvProblem p = problem(s, true, f64);
    ASSERT_EQ(depthwise_solver.why_not(p), "");
    ASSERT_TRUE(depthwise_solver.fuses_epilogue && depthwise_solver.fuses_epilogue(p));
    const int64_t P = p.p, Q = p.q, xd[4] = {s.n, s.c, s.h, s.w}, yd[4] = {s.n, s.k, P, Q};
    std::mt19937 rng(seed);
    auto rounded = [&](size_t size) {
        std::vector<double> v = convcore_test::random_vector(size, rng);
        for (double& e : v) e = double(T(e));
        return v;
    };
    const std::vector<double> xr = rounded(size_t(s.n * s.c * s.h * s.w)), wr = rounded(size_t(s.k * s.r * s.s));
    const std::vector<double> zr = rounded(size_t(s.n * s.k * P * Q));
    std::vector<double> br = rounded(size_t(s.k));
    for (double& b : br) b = double(T(3 * b));  // moves values across ReLU6's bounds
    const std::vector<double> conv = convcore_test::reference_conv(s, xr, wr);
    std::vector<T> x(xr.size()), w(wr.begin(), wr.end()), z(zr.size()), b(br.begin(), br.end());
    for (size_t i = 0; i < xr.size(); ++i) x[nhwc_at(xd, i)] = T(xr[i]);
    for (size_t i = 0; i < zr.size(); ++i) z[nhwc_at(yd, i)] = T(zr[i]);
    std::vector<char> ws(depthwise_solver.workspace_bytes(p) + 64);
    convcore::Context ctx;
    const double alpha = 1.5, bound = 4 * convcore_test::declared_bound(CONVCORE_PASS_FORWARD,
                                                                         CONVCORE_FWD_ALGO_DEPTHWISE, f64);

    for (const Residual zm : {Residual::None, Residual::Separate, Residual::InPlace})
        for (const bool bias : {false, true})
            for (const convcoreActivationMode_t act :
                 {CONVCORE_ACTIVATION_IDENTITY, CONVCORE_ACTIVATION_RELU, CONVCORE_ACTIVATION_RELU6,
                  CONVCORE_ACTIVATION_SILU, CONVCORE_ACTIVATION_GELU, CONVCORE_ACTIVATION_GELU_TANH}) {
                const std::string what = std::string(act_name(act)) + (bias ? " bias" : "") +
                                         (zm == Residual::Separate ? " z" : zm == Residual::InPlace ? " z==y" : "");
                const double alpha2 = zm == Residual::None ? 0.0 : -0.75;
                std::vector<double> ref(conv.size()), pre(conv.size());  // with and without the activation
                for (size_t i = 0; i < ref.size(); ++i) {
                    const size_t k = size_t(int64_t(i) / (P * Q) % s.k);
                    pre[i] = alpha * conv[i] + alpha2 * zr[i] + (bias ? br[k] : 0.0);
                    ref[i] = act_ref(pre[i], act);
                }
                // The case can fail: leaving the activation out is far past the bound.
                if (act != CONVCORE_ACTIVATION_IDENTITY)
                    ASSERT_GT(convcore_test::relative_error(pre, ref), 100 * bound) << what;
                // y is read only as z == y (beta is 0): NaN elsewhere would leak into the result.
                std::vector<T> y = zm == Residual::InPlace ? z : std::vector<T>(z.size(), std::numeric_limits<T>::quiet_NaN());
                ConvArgs args{p, ctx, x.data(), w.data(), y.data(), alpha, 0.0, ws.data()};
                args.epilogue.bias = bias ? b.data() : nullptr;
                args.epilogue.z = zm == Residual::None ? nullptr : zm == Residual::InPlace ? y.data() : z.data();
                args.epilogue.alpha2 = alpha2;
                args.epilogue.activation = act;
                depthwise_solver.run(args);
                std::vector<double> got(y.size());
                for (size_t i = 0; i < got.size(); ++i) got[i] = double(y[nhwc_at(yd, i)]);
                EXPECT_LE(convcore_test::relative_error(got, ref), bound) << what;
            }
}

// n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, flip. Channel
// counts past whole vectors (and past 4 vectors: the blocks of 4, 2, 1 vectors, then single
// channels) in float32 and float64 at 16, 32 and 64 vector bytes; rows long enough for whole
// sliding blocks (16 pixels) and their halving tails.
const Shape kSliding[] = {
    {1, 37, 5, 41, 37, 3, 3, 1, 1, 1, 1, 1, 1, 37, false},     // 3 taps, stride 1
    {1, 119, 4, 39, 119, 3, 3, 1, 1, 1, 1, 1, 1, 119, false},  // 3 taps, channels in every block width
    {2, 37, 6, 47, 37, 3, 3, 1, 1, 2, 2, 1, 1, 37, true},      // 3 taps, stride 2, true convolution
    {1, 21, 5, 44, 21, 5, 5, 2, 2, 1, 1, 1, 1, 21, false},     // 5 taps
    {1, 21, 7, 50, 21, 5, 5, 2, 2, 2, 2, 1, 1, 21, false},     // 5 taps, stride 2
    {1, 19, 7, 45, 19, 7, 7, 3, 3, 1, 1, 1, 1, 19, false},     // 7 taps
    {1, 19, 9, 61, 19, 7, 7, 3, 3, 2, 2, 1, 1, 19, false},     // 7 taps, stride 2
};
const Shape kOther[] = {
    {1, 119, 6, 23, 119, 3, 3, 2, 2, 1, 1, 2, 2, 119, false},  // dilation 2: pixel blocks of 4, 2, 1 vectors
    {1, 37, 7, 20, 37, 3, 3, 1, 1, 3, 3, 1, 1, 37, false},     // stride 3: pixel blocks too
    {1, 37, 5, 9, 37, 2, 4, 0, 1, 1, 1, 1, 1, 37, false},      // 2x4, asymmetric padding
    {2, 5, 6, 7, 10, 3, 3, 1, 1, 2, 2, 1, 1, 5, false},        // multiplier 2: one pixel at a time
    {1, 70, 4, 5, 140, 3, 3, 1, 1, 1, 1, 1, 1, 70, true},      // multiplier 2, past one channel block
    {1, 3, 8, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},         // fewer channels than a vector
    {1, 17, 5, 5, 17, 3, 3, 3, 3, 1, 1, 1, 1, 17, false},      // padding wider than the filter: no interior
};

TEST(DepthwiseEpilogue, SlidingKernelsApplyItInTheirStores) {
    uint32_t seed = 1;
    for (const Shape& s : kSliding) {
        SCOPED_TRACE("shape c=" + std::to_string(s.c) + " w=" + std::to_string(s.w) + " s=" + std::to_string(s.s) +
                     " stride=" + std::to_string(s.stride_w));
        check_shape<float>(s, seed++);
        check_shape<double>(s, seed++);
    }
}

TEST(DepthwiseEpilogue, PixelBlocksEdgesAndMultipliersApplyItInTheirStores) {
    uint32_t seed = 100;
    for (const Shape& s : kOther) {
        SCOPED_TRACE("shape c=" + std::to_string(s.c) + " k=" + std::to_string(s.k) + " w=" + std::to_string(s.w) +
                     " " + std::to_string(s.r) + "x" + std::to_string(s.s));
        check_shape<float>(s, seed++);
        check_shape<double>(s, seed++);
    }
}

// In NCHW the core applies it after the run: the solver must not say it fuses.
TEST(DepthwiseEpilogue, NchwLeavesItToTheCore) {
    const Shape s{1, 8, 6, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, false};
    for (const bool f64 : {false, true}) {
        EXPECT_FALSE(depthwise_solver.fuses_epilogue(problem(s, false, f64)));
        EXPECT_TRUE(depthwise_solver.fuses_epilogue(problem(s, true, f64)));
    }
}

}  // namespace
