// WINOGRAD_2X2_3X3, WINOGRAD_4X4_3X3, CYCLIC_MINIMAL and IM2WIN on CUDA against the CPU
// float64 reference (DIRECT in float64 on the same, rounded, inputs), through the public C API
// only. Random problems in each algorithm's domain (odd sizes, padding 0-2, groups, both
// modes, alpha/beta; for IM2WIN also stride and dilation), a few larger layers, float32 and
// float64. y is poisoned with NaN when beta == 0 (must never be read) and the workspace with
// NaN always (anything read must have been written first). The error is the relative L2 error
// ||y - ref|| / ||ref|| with the bounds of docs/algorithms.md. Problems outside an
// algorithm's domain must give NOT_SUPPORTED with a reason. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "cuda/grid_limits.hpp"

namespace {

#define CC_ASSERT_OK(call)                                                        \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << " failed: "            \
                                               << convcoreGetLastErrorString()

int visible_gpus() {
    int count = -1;
    EXPECT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    return count < 0 ? 0 : count;
}

const char* kNoGpu = "no CUDA GPU is visible (convcoreGetCudaDeviceCount() == 0): GPU test skipped";

struct Problem {
    int64_t n = 1, groups = 1, cpg = 1, kpg = 1, h = 1, w = 1, r = 3, s = 3;
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
    convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION;
    double alpha = 1.0, beta = 0.0;

    int64_t c() const { return groups * cpg; }
    int64_t k() const { return groups * kpg; }
    static int64_t out(int64_t in, int64_t pad, int64_t k, int64_t stride, int64_t dil) {
        const int64_t room = in + 2 * pad - dil * (k - 1) - 1;
        return room < 0 ? 0 : room / stride + 1;
    }
    int64_t p() const { return out(h, pad_h, r, stride_h, dil_h); }
    int64_t q() const { return out(w, pad_w, s, stride_w, dil_w); }

    std::string str() const {
        std::ostringstream o;
        o << "g" << groups << "mb" << n << "ic" << c() << "ih" << h << "iw" << w << "oc" << k()
          << "kh" << r << "kw" << s << "sh" << stride_h << "sw" << stride_w << "ph" << pad_h << "pw"
          << pad_w << "dh" << dil_h << "dw" << dil_w
          << (mode == CONVCORE_CONVOLUTION ? "_conv" : "_xcorr") << " alpha=" << alpha
          << " beta=" << beta;
        return o.str();
    }
};

// The tested algorithms, their domain and their bounds (docs/algorithms.md).
struct Algo {
    convcoreConvolutionFwdAlgo_t algo;
    bool any_geometry;  // false: 3x3 filter, stride 1, dilation 1 only
    double bound_f32, bound_f64;
};

const Algo kAlgos[] = {
    {CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, false, 1e-5, 1e-13},
    {CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3, false, 5e-5, 1e-12},
    {CONVCORE_FWD_ALGO_CYCLIC_MINIMAL, false, 1e-5, 1e-13},
    {CONVCORE_FWD_ALGO_IM2WIN, true, 1e-5, 1e-13},
};

Problem random_problem(std::mt19937& rng, bool any_geometry) {
    auto pick = [&](int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    Problem p;
    for (;;) {
        p.n = pick(1, 3);
        p.groups = pick(1, 3);
        p.cpg = pick(1, 6);
        p.kpg = pick(1, 6);
        p.h = pick(1, 23);
        p.w = pick(1, 23);
        p.pad_h = pick(0, 2);
        p.pad_w = pick(0, 2);
        if (any_geometry) {
            p.r = pick(1, 5);
            p.s = pick(1, 5);
            p.stride_h = pick(1, 3);
            p.stride_w = pick(1, 3);
            p.dil_h = pick(1, 2);
            p.dil_w = pick(1, 2);
        }
        if (p.p() >= 1 && p.q() >= 1) break;
    }
    p.mode = pick(0, 1) ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION;
    const double alphas[] = {1.0, 0.5, -1.25, 2.0};
    const double betas[] = {0.0, 0.0, 1.0, -0.75};
    p.alpha = alphas[pick(0, 3)];
    p.beta = betas[pick(0, 3)];
    return p;
}

template <typename T>
constexpr convcoreDataType_t dtype_of() {
    return sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
}

struct Descriptors {
    convcoreTensorDescriptor_t x = nullptr, y = nullptr;
    convcoreFilterDescriptor_t w = nullptr;
    convcoreConvolutionDescriptor_t conv = nullptr;
    ~Descriptors() {
        if (x) convcoreDestroyTensorDescriptor(x);
        if (y) convcoreDestroyTensorDescriptor(y);
        if (w) convcoreDestroyFilterDescriptor(w);
        if (conv) convcoreDestroyConvolutionDescriptor(conv);
    }
};

// Descriptors of `pr` in data type dt (packed NCHW).
void make_descriptors(const Problem& pr, convcoreDataType_t dt, Descriptors& d) {
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&d.x));
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&d.y));
    CC_ASSERT_OK(convcoreCreateFilterDescriptor(&d.w));
    CC_ASSERT_OK(convcoreCreateConvolutionDescriptor(&d.conv));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptor(d.x, dt, pr.n, pr.c(), pr.h, pr.w));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptor(d.y, dt, pr.n, pr.k(), pr.p(), pr.q()));
    CC_ASSERT_OK(convcoreSetFilter4dDescriptor(d.w, dt, pr.k(), pr.cpg, pr.r, pr.s));
    CC_ASSERT_OK(convcoreSetConvolution2dDescriptor(d.conv, pr.pad_h, pr.pad_w, pr.stride_h,
                                                    pr.stride_w, pr.dil_h, pr.dil_w, pr.mode));
    CC_ASSERT_OK(convcoreSetConvolutionGroupCount(d.conv, pr.groups));
}

struct DeviceBuffer {
    convcoreHandle_t h = nullptr;
    void* p = nullptr;
    ~DeviceBuffer() {
        if (p) convcoreFree(h, p);
    }
};

// ---- without a GPU ----------------------------------------------------------------------------

TEST(CudaWinogradFamilyNoGpu, ACudaHandleIsRefused) {
    if (visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible: the no-GPU path cannot be tested here";
    convcoreHandle_t h = nullptr;
    EXPECT_EQ(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
}

// ---- with a GPU -------------------------------------------------------------------------------

class CudaWinogradFamily : public ::testing::Test {
   protected:
    void SetUp() override {
        if (visible_gpus() == 0) GTEST_SKIP() << kNoGpu;
        CC_ASSERT_OK(convcoreCreate(&cpu_));
        CC_ASSERT_OK(convcoreCreateForDevice(&gpu_, CONVCORE_DEVICE_CUDA, 0));
    }
    void TearDown() override {
        if (gpu_) convcoreDestroy(gpu_);
        if (cpu_) convcoreDestroy(cpu_);
    }

    template <typename T>
    void check(const Algo& al, const Problem& pr, std::mt19937& rng);
    template <typename T>
    void check_random(unsigned seed, int count);

    convcoreHandle_t cpu_ = nullptr, gpu_ = nullptr;
};

template <typename T>
void CudaWinogradFamily::check(const Algo& al, const Problem& pr, std::mt19937& rng) {
    SCOPED_TRACE(std::string(convcoreGetFwdAlgoName(al.algo)) + " " + pr.str() +
                 (sizeof(T) == 8 ? " float64" : " float32"));
    const double bound = sizeof(T) == 8 ? al.bound_f64 : al.bound_f32;
    Descriptors d, dd;
    make_descriptors(pr, dtype_of<T>(), d);
    make_descriptors(pr, CONVCORE_DATA_DOUBLE, dd);
    if (HasFatalFailure()) return;

    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    const size_t xn = size_t(pr.n * pr.c() * pr.h * pr.w), wn = size_t(pr.k() * pr.cpg * pr.r * pr.s);
    const size_t yn = size_t(pr.n * pr.k() * pr.p() * pr.q());
    std::vector<T> x(xn), w(wn), y0(yn);
    for (T& v : x) v = T(uni(rng));
    for (T& v : w) v = T(uni(rng));
    for (T& v : y0) v = pr.beta == 0.0 ? std::numeric_limits<T>::quiet_NaN() : T(uni(rng));

    // Reference: DIRECT in float64 on the CPU, on the same (rounded) numbers.
    std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), ref(y0.begin(), y0.end());
    const double one = 1.0, zero = 0.0;
    CC_ASSERT_OK(convcoreConvolutionForward(cpu_, &one, dd.x, xd.data(), dd.w, wd.data(), dd.conv,
                                            CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, dd.y,
                                            ref.data()));
    for (size_t i = 0; i < yn; ++i)
        ref[i] = pr.alpha * ref[i] + (pr.beta == 0.0 ? 0.0 : pr.beta * double(y0[i]));

    size_t ws = 0;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(gpu_, d.x, d.w, d.conv, d.y, al.algo, &ws));
    DeviceBuffer dx{gpu_}, dw{gpu_}, dy{gpu_}, dws{gpu_};
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dx.p, xn * sizeof(T)));
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dw.p, wn * sizeof(T)));
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dy.p, yn * sizeof(T)));
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dx.p, x.data(), xn * sizeof(T)));
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dw.p, w.data(), wn * sizeof(T)));
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dy.p, y0.data(), yn * sizeof(T)));
    if (ws) {
        CC_ASSERT_OK(convcoreMalloc(gpu_, &dws.p, ws));
        std::vector<unsigned char> poison(ws, 0xFF);  // all-ones bytes: NaN in float and double
        CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dws.p, poison.data(), ws));
    }
    const T alpha = T(pr.alpha), beta = T(pr.beta);
    CC_ASSERT_OK(convcoreConvolutionForward(gpu_, &alpha, d.x, dx.p, d.w, dw.p, d.conv, al.algo,
                                            dws.p, ws, &beta, d.y, dy.p));
    CC_ASSERT_OK(convcoreSynchronize(gpu_));
    std::vector<T> got(yn);
    CC_ASSERT_OK(convcoreMemcpyToHost(gpu_, got.data(), dy.p, yn * sizeof(T)));

    double num = 0, den = 0;
    for (size_t i = 0; i < yn; ++i) {
        ASSERT_TRUE(std::isfinite(double(got[i]))) << "element " << i << " is " << got[i]
                                                   << " (a NaN-poisoned y or workspace was read)";
        num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
        den += ref[i] * ref[i];
    }
    const double rel = std::sqrt(num / (den > 0 ? den : 1));
    EXPECT_LT(rel, bound);
}

template <typename T>
void CudaWinogradFamily::check_random(unsigned seed, int count) {
    for (const Algo& al : kAlgos) {
        std::mt19937 rng(seed);
        for (int i = 0; i < count; ++i) {
            check<T>(al, random_problem(rng, al.any_geometry), rng);
            if (HasFatalFailure()) return;
        }
    }
}

TEST_F(CudaWinogradFamily, RandomProblemsFloat32) { check_random<float>(20261122, 60); }
TEST_F(CudaWinogradFamily, RandomProblemsFloat64) { check_random<double>(4242, 25); }

// Larger layers: many tiles (several waves, a GEMM of real size), deep channels, a
// depthwise layer, Pitas' single-channel image.
TEST_F(CudaWinogradFamily, LayersFloat32) {
    std::mt19937 rng(99);
    std::vector<Problem> ps;
    Problem p;
    p.n = 2; p.cpg = 64; p.kpg = 64; p.h = 28; p.w = 28; p.pad_h = p.pad_w = 1;  // VGG-like
    ps.push_back(p);
    p = Problem();
    p.n = 1; p.cpg = 256; p.kpg = 32; p.h = 14; p.w = 15; p.pad_h = p.pad_w = 1;
    p.mode = CONVCORE_CONVOLUTION; p.alpha = 0.5; p.beta = 1.0;
    ps.push_back(p);
    p = Problem();
    p.n = 3; p.groups = 48; p.cpg = 1; p.kpg = 1; p.h = 33; p.w = 29; p.pad_h = p.pad_w = 1;  // depthwise
    ps.push_back(p);
    p = Problem();
    p.n = 1; p.cpg = 1; p.kpg = 1; p.h = 513; p.w = 511;  // Pitas: one image, one filter
    ps.push_back(p);
    for (const Algo& al : kAlgos)
        for (const Problem& q : ps) {
            check<float>(al, q, rng);
            if (HasFatalFailure()) return;
        }
}

// IM2WIN's tiling edges: several and partial 64-channel blocks, windows longer than many
// 16-element steps, strides, dilation, groups; and more (groups x channel blocks) than the
// grid's kMaxGridY y-blocks (the kernel loops over them; 1024 on the emulated device).
TEST_F(CudaWinogradFamily, Im2winTilingEdgesFloat32) {
    std::mt19937 rng(7);
    const Algo& im2win = kAlgos[3];
    ASSERT_EQ(im2win.algo, CONVCORE_FWD_ALGO_IM2WIN);
    Problem p;
    p.n = 2; p.cpg = 35; p.kpg = 96; p.h = 37; p.w = 41; p.r = 5; p.s = 5;
    p.pad_h = p.pad_w = 2; p.stride_h = p.stride_w = 2; p.mode = CONVCORE_CONVOLUTION;
    check<float>(im2win, p, rng);
    p = Problem();
    p.n = 1; p.groups = 2; p.cpg = 20; p.kpg = 130; p.h = 19; p.w = 23; p.dil_h = p.dil_w = 2;
    p.pad_h = 1; p.pad_w = 2; p.alpha = -1.25; p.beta = 1.0;
    check<float>(im2win, p, rng);
    p = Problem();
    p.n = 1; p.groups = convcore::cuda::kMaxGridY + 100; p.cpg = 1; p.kpg = 1; p.h = 4; p.w = 4;
    p.pad_h = p.pad_w = 1;
    check<float>(im2win, p, rng);
}

// Winograd with more tiles than one block (1225 tiles, blocks of 1024 for 2x2 here).
TEST_F(CudaWinogradFamily, WinogradSeveralBlocksFloat32) {
    std::mt19937 rng(8);
    Problem p;
    p.n = 1; p.groups = 4096; p.cpg = 1; p.kpg = 1; p.h = 70; p.w = 70; p.pad_h = p.pad_w = 1;
    check<float>(kAlgos[0], p, rng);
    check<float>(kAlgos[1], p, rng);
}

// The fused F(2x2,3x3) kernel (opt-in: CONVCORE_WINOGRAD_FUSED=1, float32): random problems
// and the layers, including several channel chunks and output-channel blocks.
struct FusedWinogradOn {
    FusedWinogradOn() { setenv("CONVCORE_WINOGRAD_FUSED", "1", 1); }
    ~FusedWinogradOn() { unsetenv("CONVCORE_WINOGRAD_FUSED"); }
};

TEST_F(CudaWinogradFamily, FusedWinograd2x2Float32) {
    FusedWinogradOn fused;
    std::mt19937 rng(31337);
    for (int i = 0; i < 60; ++i) {
        check<float>(kAlgos[0], random_problem(rng, false), rng);
        if (HasFatalFailure()) return;
    }
    Problem p;
    p.n = 2; p.cpg = 64; p.kpg = 40; p.h = 28; p.w = 27; p.pad_h = p.pad_w = 1;
    check<float>(kAlgos[0], p, rng);
    p = Problem();
    p.n = 3; p.groups = 70; p.cpg = 3; p.kpg = 17; p.h = 9; p.w = 11; p.pad_h = 2; p.pad_w = 0;
    p.mode = CONVCORE_CONVOLUTION; p.alpha = 0.5; p.beta = -0.75;
    check<float>(kAlgos[0], p, rng);
}

// Outside the domain: NOT_SUPPORTED with a reason naming the limit.
TEST_F(CudaWinogradFamily, NotSupportedCasesSayWhy) {
    for (const Algo& al : kAlgos) {
        if (al.any_geometry) continue;
        Problem bad[3];
        bad[0].h = bad[0].w = 9;
        bad[0].r = bad[0].s = 5;
        bad[1].h = bad[1].w = 9;
        bad[1].stride_h = bad[1].stride_w = 2;
        bad[2].h = bad[2].w = 9;
        bad[2].dil_h = bad[2].dil_w = 2;
        const char* words[] = {"3x3", "stride", "dilation"};
        for (int i = 0; i < 3; ++i) {
            SCOPED_TRACE(std::string(convcoreGetFwdAlgoName(al.algo)) + " " + bad[i].str());
            Descriptors d;
            make_descriptors(bad[i], CONVCORE_DATA_FLOAT, d);
            if (HasFatalFailure()) return;
            size_t ws = 0;
            EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(gpu_, d.x, d.w, d.conv, d.y, al.algo, &ws),
                      CONVCORE_STATUS_NOT_SUPPORTED);
            const std::string why = convcoreGetLastErrorString();
            // (A build without cuBLAS refuses Winograd for that reason first.)
            EXPECT_TRUE(why.find(words[i]) != std::string::npos || why.find("cuBLAS") != std::string::npos) << why;
        }
    }
}

}  // namespace
