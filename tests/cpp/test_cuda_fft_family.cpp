// FFT, FFT_TILING, FINE_GRAINED_FFT and POLY_HANKEL on CUDA against the float64 reference
// convolution (reference.hpp) through the public C API: random problems (odd sizes, padding,
// stride, dilation, groups, both modes, alpha/beta) with inputs rounded to the tested type, y
// poisoned with NaN before every run when beta == 0 (a read of it makes the error NaN and
// fails), bounds of docs/algorithms.md (||y - ref|| / ||ref||: 5e-6 float32 (1e-5 POLY_HANKEL),
// 1e-13 float64); a few network-sized layers (several FFT_TILING tiles per image; several chunks
// are exercised by test_fft_geometry); the
// NOT_SUPPORTED cases with a reason; threads with a handle each. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "convcore/convcore.h"
#include "reference.hpp"

namespace {

using convcore_test::Shape;

int visible_gpus() {
    int count = -1;
    EXPECT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    return count < 0 ? 0 : count;
}

const char* kNoGpu = "no CUDA GPU is visible (convcoreGetCudaDeviceCount() == 0): GPU test skipped";

struct Descriptors {
    convcoreTensorDescriptor_t x = nullptr, y = nullptr;
    convcoreFilterDescriptor_t w = nullptr;
    convcoreConvolutionDescriptor_t conv = nullptr;
    Descriptors(const Shape& p, convcoreDataType_t dt) {
        EXPECT_EQ(convcoreCreateTensorDescriptor(&x), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateTensorDescriptor(&y), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateFilterDescriptor(&w), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateConvolutionDescriptor(&conv), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetTensor4dDescriptor(x, dt, p.n, p.c, p.h, p.w), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetFilter4dDescriptor(w, dt, p.k, p.c / p.groups, p.r, p.s), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h,
                                                     p.dil_w, p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetConvolutionGroupCount(conv, p.groups), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetTensor4dDescriptor(y, dt, p.n, p.k, p.out_h(), p.out_w()), CONVCORE_STATUS_SUCCESS);
    }
    ~Descriptors() {
        convcoreDestroyTensorDescriptor(x);
        convcoreDestroyTensorDescriptor(y);
        convcoreDestroyFilterDescriptor(w);
        convcoreDestroyConvolutionDescriptor(conv);
    }
};

struct DeviceBuffer {
    convcoreHandle_t h;
    void* p = nullptr;
    DeviceBuffer(convcoreHandle_t handle, size_t bytes) : h(handle) {
        if (bytes) EXPECT_EQ(convcoreMalloc(h, &p, bytes), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    }
    ~DeviceBuffer() {
        if (p) convcoreFree(h, p);
    }
};

std::string describe(const Shape& p) {
    return "n" + std::to_string(p.n) + " c" + std::to_string(p.c) + " " + std::to_string(p.h) + "x" +
           std::to_string(p.w) + " k" + std::to_string(p.k) + " " + std::to_string(p.r) + "x" + std::to_string(p.s) +
           " pad" + std::to_string(p.pad_h) + "," + std::to_string(p.pad_w) + " stride" + std::to_string(p.stride_h) +
           "," + std::to_string(p.stride_w) + " dil" + std::to_string(p.dil_h) + "," + std::to_string(p.dil_w) + " g" +
           std::to_string(p.groups) + (p.flip ? " conv" : " xcorr");
}

// Runs `algo` on the GPU handle; returns ||y - ref|| / ||ref|| (INFINITY after an EXPECT failure
// when a call fails).
template <typename T>
double gpu_error(convcoreHandle_t gpu, convcoreConvolutionFwdAlgo_t algo, const Shape& p, double alpha, double beta,
                 std::mt19937& rng) {
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    Descriptors d(p, dt);
    // inputs rounded to T, so the reference sees what the GPU sees
    std::vector<double> x = convcore_test::random_vector(size_t(p.n * p.c * p.h * p.w), rng);
    std::vector<double> w = convcore_test::random_vector(size_t(p.k * (p.c / p.groups) * p.r * p.s), rng);
    for (double& v : x) v = double(T(v));
    for (double& v : w) v = double(T(v));
    const std::vector<double> conv = convcore_test::reference_conv(p, x, w);
    std::vector<double> y0 = convcore_test::random_vector(conv.size(), rng);
    for (double& v : y0) v = beta == 0 ? std::numeric_limits<double>::quiet_NaN() : double(T(v));
    std::vector<double> want(conv.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = alpha * conv[i] + (beta == 0 ? 0.0 : beta * y0[i]);

    const std::vector<T> xt(x.begin(), x.end()), wt(w.begin(), w.end()), y0t(y0.begin(), y0.end());
    size_t ws = 0;
    if (convcoreGetConvolutionForwardWorkspaceSize(gpu, d.x, d.w, d.conv, d.y, algo, &ws) != CONVCORE_STATUS_SUCCESS) {
        ADD_FAILURE() << convcoreGetFwdAlgoName(algo) << ": " << convcoreGetLastErrorString();
        return INFINITY;
    }
    DeviceBuffer dx(gpu, xt.size() * sizeof(T)), dw(gpu, wt.size() * sizeof(T)), dy(gpu, y0t.size() * sizeof(T)),
        dws(gpu, ws);
    EXPECT_EQ(convcoreMemcpyToDevice(gpu, dx.p, xt.data(), xt.size() * sizeof(T)), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreMemcpyToDevice(gpu, dw.p, wt.data(), wt.size() * sizeof(T)), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreMemcpyToDevice(gpu, dy.p, y0t.data(), y0t.size() * sizeof(T)), CONVCORE_STATUS_SUCCESS);
    const T a = T(alpha), b = T(beta);
    if (convcoreConvolutionForward(gpu, &a, d.x, dx.p, d.w, dw.p, d.conv, algo, dws.p, ws, &b, d.y, dy.p) !=
            CONVCORE_STATUS_SUCCESS ||
        convcoreSynchronize(gpu) != CONVCORE_STATUS_SUCCESS) {
        ADD_FAILURE() << convcoreGetFwdAlgoName(algo) << ": " << convcoreGetLastErrorString();
        return INFINITY;
    }
    std::vector<T> yt(y0t.size());
    EXPECT_EQ(convcoreMemcpyToHost(gpu, yt.data(), dy.p, yt.size() * sizeof(T)), CONVCORE_STATUS_SUCCESS);
    const std::vector<double> got(yt.begin(), yt.end());
    return convcore_test::relative_error(got, want);
}

Shape random_shape(std::mt19937& rng) {
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    for (;;) {
        Shape p{};
        p.groups = pick(1, 3);
        p.n = pick(1, 3);
        p.c = p.groups * pick(1, 4);
        p.k = p.groups * pick(1, 6);
        p.h = pick(1, 23);
        p.w = pick(1, 23);
        p.r = pick(1, 5);
        p.s = pick(1, 5);
        p.pad_h = pick(0, 2);
        p.pad_w = pick(0, 2);
        p.stride_h = pick(1, 3);
        p.stride_w = pick(1, 3);
        p.dil_h = pick(1, 2);
        p.dil_w = pick(1, 2);
        p.flip = pick(0, 1) == 1;
        if (p.h + 2 * p.pad_h >= p.dil_h * (p.r - 1) + 1 && p.w + 2 * p.pad_w >= p.dil_w * (p.s - 1) + 1) return p;
    }
}

class CudaFftFamily : public ::testing::TestWithParam<convcoreConvolutionFwdAlgo_t> {
   protected:
    void SetUp() override {
        if (visible_gpus() == 0) GTEST_SKIP() << kNoGpu;
        ASSERT_EQ(convcoreCreateForDevice(&gpu_, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
    }
    void TearDown() override {
        if (gpu_) convcoreDestroy(gpu_);
    }
    double bound32() const { return GetParam() == CONVCORE_FWD_ALGO_POLY_HANKEL ? 1e-5 : 5e-6; }
    convcoreHandle_t gpu_ = nullptr;
};

TEST_P(CudaFftFamily, RandomProblemsFloat32) {
    std::mt19937 rng(2024 + int(GetParam()));
    const double alphas[] = {1.0, 0.5, -1.25}, betas[] = {0.0, 0.0, 1.0, -0.75};
    for (int i = 0; i < 60; ++i) {
        const Shape p = random_shape(rng);
        const double alpha = alphas[i % 3], beta = betas[i % 4];
        SCOPED_TRACE(describe(p) + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta));
        EXPECT_LT(gpu_error<float>(gpu_, GetParam(), p, alpha, beta, rng), bound32());
    }
}

TEST_P(CudaFftFamily, RandomProblemsFloat64) {
    std::mt19937 rng(99 + int(GetParam()));
    for (int i = 0; i < 30; ++i) {
        const Shape p = random_shape(rng);
        const double beta = i % 2 ? 0.5 : 0.0;
        SCOPED_TRACE(describe(p));
        EXPECT_LT(gpu_error<double>(gpu_, GetParam(), p, 1.0, beta, rng), 1e-13);
    }
}

// Network-sized layers: many frequencies and channels (the cuBLAS path), several FFT_TILING
// tiles per image, depthwise groups, a 1-row image, large filters.
TEST_P(CudaFftFamily, NetworkLayers) {
    std::mt19937 rng(7);
#if defined(CONVCORE_TESTS_ON_EMULATED_CUDA)
    // The same kinds of layer, smaller: the emulated device and its reference-loop cuFFT are slow.
    const Shape layers[] = {
        {2, 32, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},      // ResNet 3x3
        {1, 8, 50, 50, 16, 5, 5, 2, 2, 1, 1, 1, 1, 1, false},       // PolyHankel k = 5 sweep
        {1, 3, 67, 49, 8, 7, 7, 3, 3, 2, 2, 1, 1, 1, true},         // 7x7 stride-2 stem, convolution
        {1, 32, 20, 19, 32, 5, 5, 4, 4, 1, 1, 2, 2, 32, false},     // depthwise, dilated
        {2, 8, 1, 300, 8, 1, 9, 0, 4, 1, 1, 1, 1, 1, false},        // one-row image
        {1, 2, 64, 64, 2, 25, 25, 12, 12, 1, 1, 1, 1, 1, false},    // 25x25 filter (64x64 tiles)
    };
#else
    const Shape layers[] = {
        {8, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},      // VGG / ResNet 3x3
        {2, 16, 100, 100, 32, 5, 5, 2, 2, 1, 1, 1, 1, 1, false},    // PolyHankel k = 5 sweep
        {1, 3, 131, 97, 16, 7, 7, 3, 3, 2, 2, 1, 1, 1, true},       // 7x7 stride-2 stem, convolution
        {3, 32, 40, 37, 32, 5, 5, 4, 4, 1, 1, 2, 2, 32, false},     // depthwise, dilated
        {2, 8, 1, 300, 8, 1, 9, 0, 4, 1, 1, 1, 1, 1, false},        // one-row image
        {1, 4, 64, 64, 4, 25, 25, 12, 12, 1, 1, 1, 1, 1, false},    // 25x25 filter (64x64 tiles)
    };
#endif
    for (const Shape& p : layers) {
        SCOPED_TRACE(describe(p));
        EXPECT_LT(gpu_error<float>(gpu_, GetParam(), p, 1.0, 0.0, rng), bound32());
    }
}

TEST_P(CudaFftFamily, HugeProblemIsNotSupportedWithReason) {
    // a 70000 x 70000 filter on a 70000 x 70000 image: every workspace would pass the 4 GiB cap
    // (FFT_TILING's too: one tile holds the filter)
    const Shape p{1, 1, 70000, 70000, 1, 70000, 70000, 0, 0, 1, 1, 1, 1, 1, false};
    Descriptors d(p, CONVCORE_DATA_FLOAT);
    size_t ws = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(gpu_, d.x, d.w, d.conv, d.y, GetParam(), &ws),
              CONVCORE_STATUS_NOT_SUPPORTED);
    const std::string why = convcoreGetLastErrorString();
    EXPECT_NE(why.find(convcoreGetFwdAlgoName(GetParam())), std::string::npos) << why;
}

// Threads, each with its own handle (docs/thread_safety.md: a handle is used by one thread at
// a time), on one shape at once: per-handle plan caches, the process-wide work-size memo shared.
TEST_P(CudaFftFamily, ThreadsWithOwnHandles) {
    const Shape p{2, 8, 33, 29, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    std::vector<double> errors(4, INFINITY);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            convcoreHandle_t h = nullptr;
            if (convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0) != CONVCORE_STATUS_SUCCESS) return;
            std::mt19937 rng(100 + t);
            errors[size_t(t)] = gpu_error<float>(h, GetParam(), p, 1.0, 0.0, rng);
            convcoreDestroy(h);
        });
    for (auto& th : threads) th.join();
    for (double e : errors) EXPECT_LT(e, bound32());
}

TEST(CudaFftTiling, HugeStrideIsNotSupportedWithReason) {
    if (visible_gpus() == 0) GTEST_SKIP() << kNoGpu;
    convcoreHandle_t gpu = nullptr;
    ASSERT_EQ(convcoreCreateForDevice(&gpu, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_SUCCESS);
    const Shape p{1, 1, 1000, 1000, 1, 1, 1, 0, 0, 500, 500, 1, 1, 1, false};
    Descriptors d(p, CONVCORE_DATA_FLOAT);
    size_t ws = 0;
    EXPECT_EQ(convcoreGetConvolutionForwardWorkspaceSize(gpu, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_FFT_TILING, &ws),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("stride"), std::string::npos)
        << convcoreGetLastErrorString();
    convcoreDestroy(gpu);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaFftFamily,
                         ::testing::Values(CONVCORE_FWD_ALGO_FFT, CONVCORE_FWD_ALGO_FFT_TILING,
                                           CONVCORE_FWD_ALGO_FINE_GRAINED_FFT, CONVCORE_FWD_ALGO_POLY_HANKEL),
                         [](const ::testing::TestParamInfo<convcoreConvolutionFwdAlgo_t>& info) {
                             return std::string(convcoreGetFwdAlgoName(info.param));
                         });

}  // namespace
