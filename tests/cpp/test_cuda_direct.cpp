// Every forward algorithm on CUDA against DIRECT on the CPU, through the public C API only:
// random problems (odd sizes, padding, stride 1-3, dilation 1-2, groups, both modes, alpha/beta,
// strided x/y), float32 and float64, y poisoned (NaN) when beta == 0. An algorithm that is not
// compiled in or refuses a problem must say NOT_SUPPORTED with a reason; DIRECT, IM2COL_GEMM and
// IMPLICIT_GEMM must accept every problem. Skips when no GPU is visible; then it checks instead
// that a CUDA handle is refused with NOT_SUPPORTED and a reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "reference.hpp"

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

// ---- tests that run on machines without a GPU --------------------------------------------------

TEST(CudaDevice, CreateWithoutGpuIsNotSupported) {
    if (visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible: the no-GPU path cannot be tested here";
    convcoreHandle_t h = reinterpret_cast<convcoreHandle_t>(uintptr_t(1));
    EXPECT_EQ(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0), CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_STRNE(convcoreGetLastErrorString(), "") << "NOT_SUPPORTED must carry a reason";
    EXPECT_EQ(h, nullptr);
}

TEST(CudaDevice, DeviceIndexOutOfRange) {
    const int count = visible_gpus();
    if (count == 0) GTEST_SKIP() << kNoGpu;
    convcoreHandle_t h = nullptr;
    EXPECT_EQ(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, count), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("out of range"), std::string::npos)
        << convcoreGetLastErrorString();
}

TEST(CudaDevice, HandleReportsItsDevice) {
    const int count = visible_gpus();
    if (count == 0) GTEST_SKIP() << kNoGpu;
    convcoreHandle_t h = nullptr;
    CC_ASSERT_OK(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, count - 1));
    convcoreDeviceType_t dev = CONVCORE_DEVICE_CPU;
    int index = -1;
    EXPECT_EQ(convcoreGetDevice(h, &dev, &index), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(dev, CONVCORE_DEVICE_CUDA);
    EXPECT_EQ(index, count - 1);
    void* p = nullptr;
    EXPECT_EQ(convcoreMalloc(h, &p, 1024), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(convcoreFree(h, p), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreSynchronize(h), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreDestroy(h), CONVCORE_STATUS_SUCCESS);
}

// ---- the comparison ---------------------------------------------------------------------------

struct Problem {
    int64_t n = 1, groups = 1, cpg = 1, kpg = 1, h = 1, w = 1, r = 1, s = 1;
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
    convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION;
    double alpha = 1.0, beta = 0.0;
    bool strided_x = false, strided_y = false;

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
          << " beta=" << beta << (strided_x ? " x:strided" : "") << (strided_y ? " y:strided" : "");
        return o.str();
    }
};

Problem random_problem(std::mt19937& rng) {
    auto pick = [&](int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    Problem p;
    for (;;) {
        p.n = pick(1, 3);
        p.groups = pick(1, 3);
        p.cpg = pick(1, 4);
        p.kpg = pick(1, 4);
        p.h = pick(1, 19);
        p.w = pick(1, 19);
        p.r = pick(1, 5);
        p.s = pick(1, 5);
        p.pad_h = pick(0, 2);
        p.pad_w = pick(0, 2);
        p.stride_h = pick(1, 3);
        p.stride_w = pick(1, 3);
        p.dil_h = pick(1, 2);
        p.dil_w = pick(1, 2);
        if (p.p() >= 1 && p.q() >= 1) break;
    }
    p.mode = pick(0, 1) ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION;
    const double alphas[] = {1.0, 0.5, -1.25, 2.0};
    const double betas[] = {0.0, 0.0, 1.0, -0.75};
    p.alpha = alphas[pick(0, 3)];
    p.beta = betas[pick(0, 3)];
    p.strided_x = pick(0, 3) == 0;
    p.strided_y = pick(0, 3) == 0;
    return p;
}

// A 4-D tensor layout: packed NCHW, or a strided one (x: NHWC order; y: padded rows and planes).
struct Layout {
    int64_t dims[4];
    int64_t strides[4];
    int64_t span() const {  // elements the buffer must hold
        int64_t last = 0;
        for (int d = 0; d < 4; ++d) last += (dims[d] - 1) * strides[d];
        return last + 1;
    }
};

Layout packed_layout(int64_t n, int64_t c, int64_t h, int64_t w) {
    return {{n, c, h, w}, {c * h * w, h * w, w, 1}};
}
Layout nhwc_layout(int64_t n, int64_t c, int64_t h, int64_t w) {
    return {{n, c, h, w}, {h * w * c, 1, w * c, c}};
}
Layout padded_layout(int64_t n, int64_t c, int64_t h, int64_t w) {
    const int64_t hs = w + 3, cs = hs * (h + 1), ns = cs * c + 7;
    return {{n, c, h, w}, {ns, cs, hs, 1}};
}

// Offsets of the view's elements in the buffer: in_view[i] says whether element i belongs.
std::vector<char> view_mask(const Layout& l) {
    std::vector<char> mask(size_t(l.span()), 0);
    for (int64_t a = 0; a < l.dims[0]; ++a)
        for (int64_t b = 0; b < l.dims[1]; ++b)
            for (int64_t c = 0; c < l.dims[2]; ++c)
                for (int64_t d = 0; d < l.dims[3]; ++d)
                    mask[size_t(a * l.strides[0] + b * l.strides[1] + c * l.strides[2] +
                                d * l.strides[3])] = 1;
    return mask;
}

template <typename T>
constexpr convcoreDataType_t dtype_of() {
    return sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
}

// RAII for the descriptors of one problem.
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

// Device buffers freed on scope exit.
struct DeviceBuffer {
    convcoreHandle_t h = nullptr;
    void* p = nullptr;
    ~DeviceBuffer() {
        if (p) convcoreFree(h, p);
    }
};

class CudaDirect : public ::testing::Test {
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

    // Runs `algo` on the GPU; *ran is false when it (correctly) refuses the problem.
    template <typename T>
    void check(const Problem& pr, convcoreConvolutionFwdAlgo_t algo, std::mt19937& rng, bool* ran);
    // Every algorithm on each problem; fails when a classic one refuses, or when an algorithm
    // compiled in never runs any of them.
    template <typename T>
    void check_all(const std::vector<Problem>& problems, std::mt19937& rng);

    convcoreHandle_t cpu_ = nullptr, gpu_ = nullptr;
};

// max |gpu - cpu| / max |cpu| allowed per algorithm: the bound convcore declares.
double error_bound(convcoreConvolutionFwdAlgo_t algo, bool f64) {
    return convcore_test::declared_bound(CONVCORE_PASS_FORWARD, algo, f64);
}

bool is_classic(convcoreConvolutionFwdAlgo_t algo) {
    return algo == CONVCORE_FWD_ALGO_DIRECT || algo == CONVCORE_FWD_ALGO_IM2COL_GEMM ||
           algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM;
}

template <typename T>
void CudaDirect::check(const Problem& pr, convcoreConvolutionFwdAlgo_t algo, std::mt19937& rng,
                       bool* ran) {
    SCOPED_TRACE(pr.str() + " algo " + std::to_string(int(algo)));
    const double bound = error_bound(algo, sizeof(T) == 8);
    *ran = false;
    const convcoreDataType_t dt = dtype_of<T>();
    const int64_t P = pr.p(), Q = pr.q();
    const Layout xl = pr.strided_x ? nhwc_layout(pr.n, pr.c(), pr.h, pr.w)
                                   : packed_layout(pr.n, pr.c(), pr.h, pr.w);
    const Layout yl = pr.strided_y ? padded_layout(pr.n, pr.k(), P, Q)
                                   : packed_layout(pr.n, pr.k(), P, Q);

    Descriptors d;
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&d.x));
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&d.y));
    CC_ASSERT_OK(convcoreCreateFilterDescriptor(&d.w));
    CC_ASSERT_OK(convcoreCreateConvolutionDescriptor(&d.conv));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptorEx(d.x, dt, xl.dims[0], xl.dims[1], xl.dims[2],
                                                 xl.dims[3], xl.strides[0], xl.strides[1],
                                                 xl.strides[2], xl.strides[3]));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptorEx(d.y, dt, yl.dims[0], yl.dims[1], yl.dims[2],
                                                 yl.dims[3], yl.strides[0], yl.strides[1],
                                                 yl.strides[2], yl.strides[3]));
    CC_ASSERT_OK(convcoreSetFilter4dDescriptor(d.w, dt, pr.k(), pr.cpg, pr.r, pr.s));
    CC_ASSERT_OK(convcoreSetConvolution2dDescriptor(d.conv, pr.pad_h, pr.pad_w, pr.stride_h,
                                                    pr.stride_w, pr.dil_h, pr.dil_w, pr.mode));
    CC_ASSERT_OK(convcoreSetConvolutionGroupCount(d.conv, pr.groups));
    int64_t on = 0, oc = 0, oh = 0, ow = 0;
    CC_ASSERT_OK(convcoreGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &oc, &oh, &ow));
    ASSERT_EQ(on, pr.n);
    ASSERT_EQ(oc, pr.k());
    ASSERT_EQ(oh, P);
    ASSERT_EQ(ow, Q);

    // Inputs: fresh random values, never zeros. y: NaN inside the view when beta == 0 (must
    // never be read), random values otherwise; a sentinel in the gaps of a strided y (must
    // stay untouched).
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::vector<T> x(size_t(xl.span())), w(size_t(pr.k() * pr.cpg * pr.r * pr.s));
    for (T& v : x) v = T(uni(rng));
    for (T& v : w) v = T(uni(rng));
    const std::vector<char> ymask = view_mask(yl);
    const T sentinel = T(-777.25);
    std::vector<T> y0(ymask.size());
    for (size_t i = 0; i < y0.size(); ++i)
        y0[i] = !ymask[i] ? sentinel
                          : (pr.beta == 0.0 ? std::numeric_limits<T>::quiet_NaN() : T(uni(rng)));

    const T alpha = T(pr.alpha), beta = T(pr.beta);

    // GPU workspace first: an algorithm that cannot run the problem says so, with a reason.
    size_t ws_gpu = 0;
    const convcoreStatus_t st =
        convcoreGetConvolutionForwardWorkspaceSize(gpu_, d.x, d.w, d.conv, d.y, algo, &ws_gpu);
    if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
        EXPECT_STRNE(convcoreGetLastErrorString(), "") << "NOT_SUPPORTED without a reason";
        EXPECT_FALSE(is_classic(algo)) << "refused: " << convcoreGetLastErrorString();
        return;
    }
    CC_ASSERT_OK(st);
    *ran = true;

    // CPU reference: DIRECT.
    std::vector<T> y_ref = y0;
    size_t ws_cpu = 0;
    const convcoreConvolutionFwdAlgo_t cpu_algo = CONVCORE_FWD_ALGO_DIRECT;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(cpu_, d.x, d.w, d.conv, d.y, cpu_algo, &ws_cpu));
    std::vector<unsigned char> ws_cpu_buf(ws_cpu + 1);
    CC_ASSERT_OK(convcoreConvolutionForward(cpu_, &alpha, d.x, x.data(), d.w, w.data(), d.conv,
                                            cpu_algo, ws_cpu ? ws_cpu_buf.data() : nullptr, ws_cpu,
                                            &beta, d.y, y_ref.data()));

    // GPU.
    DeviceBuffer dx{gpu_}, dw{gpu_}, dy{gpu_}, dws{gpu_};
    const size_t xb = x.size() * sizeof(T), wb = w.size() * sizeof(T), yb = y0.size() * sizeof(T);
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dx.p, xb));
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dw.p, wb));
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dy.p, yb));
    if (ws_gpu) {
        CC_ASSERT_OK(convcoreMalloc(gpu_, &dws.p, ws_gpu));
    }
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dx.p, x.data(), xb));
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dw.p, w.data(), wb));
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dy.p, y0.data(), yb));
    CC_ASSERT_OK(convcoreConvolutionForward(gpu_, &alpha, d.x, dx.p, d.w, dw.p, d.conv, algo,
                                            dws.p, ws_gpu, &beta, d.y, dy.p));
    CC_ASSERT_OK(convcoreSynchronize(gpu_));
    std::vector<T> y_gpu(y0.size());
    CC_ASSERT_OK(convcoreMemcpyToHost(gpu_, y_gpu.data(), dy.p, yb));

    // Error relative to the output's scale: max |gpu - ref| / max |ref|.
    double max_ref = 0.0, max_diff = 0.0;
    int64_t bad_gap = -1, non_finite = -1, worst = -1;
    for (size_t i = 0; i < y0.size(); ++i) {
        if (!ymask[i]) {
            if (y_gpu[i] != sentinel && bad_gap < 0) bad_gap = int64_t(i);
            continue;
        }
        ASSERT_TRUE(std::isfinite(double(y_ref[i]))) << "CPU reference is not finite at " << i;
        if (!std::isfinite(double(y_gpu[i]))) {
            if (non_finite < 0) non_finite = int64_t(i);
            continue;
        }
        max_ref = std::max(max_ref, std::fabs(double(y_ref[i])));
        const double diff = std::fabs(double(y_gpu[i]) - double(y_ref[i]));
        if (diff > max_diff) {
            max_diff = diff;
            worst = int64_t(i);
        }
    }
    EXPECT_LT(bad_gap, 0) << "GPU wrote outside the y view at element " << bad_gap;
    EXPECT_LT(non_finite, 0) << "GPU output is not finite at element " << non_finite
                             << " (beta == 0 must not read y)";
    const double rel = max_diff / std::max(max_ref, std::numeric_limits<double>::min());
    EXPECT_LE(rel, bound) << "max |gpu - cpu| = " << max_diff << " at element " << worst
                          << ", max |cpu| = " << max_ref;
}

template <typename T>
void CudaDirect::check_all(const std::vector<Problem>& problems, std::mt19937& rng) {
    for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        const auto algo = static_cast<convcoreConvolutionFwdAlgo_t>(a);
        int runs = 0;
        for (const Problem& p : problems) {
            bool ran = false;
            check<T>(p, algo, rng, &ran);
            if (HasFatalFailure()) return;
            runs += ran;
        }
        RecordProperty("algo" + std::to_string(a) + "_runs", runs);
        if (is_classic(algo)) EXPECT_EQ(runs, int(problems.size())) << "algo " << a;
    }
}

std::vector<Problem> random_problems(int count, std::mt19937& rng) {
    std::vector<Problem> ps;
    for (int i = 0; i < count; ++i) ps.push_back(random_problem(rng));
    return ps;
}

TEST_F(CudaDirect, RandomProblemsFloat32) {
    std::mt19937 rng(20240611);
    check_all<float>(random_problems(80, rng), rng);
}

TEST_F(CudaDirect, RandomProblemsFloat64) {
    std::mt19937 rng(777);
    check_all<double>(random_problems(30, rng), rng);
}

// 3x3 stride-1 problems, where the fast algorithms (Winograd, FFT family, CYCLIC_MINIMAL) apply.
TEST_F(CudaDirect, ThreeByThreeFloat32) {
    std::mt19937 rng(99);
    std::vector<Problem> ps = random_problems(20, rng);
    for (Problem& p : ps) {
        p.r = p.s = 3;
        p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
        p.h += 2;
        p.w += 2;
    }
    check_all<float>(ps, rng);
}

// Find on a CUDA handle (buffers it allocates, CUDA-event timing): every algorithm comes back,
// the classic ones ran, the ones that ran first and sorted by time.
TEST_F(CudaDirect, FindTimesTheApplicableAlgorithms) {
    setenv("CONVCORE_FIND_DB", "off", 1);
    Descriptors d;
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&d.x));
    CC_ASSERT_OK(convcoreCreateTensorDescriptor(&d.y));
    CC_ASSERT_OK(convcoreCreateFilterDescriptor(&d.w));
    CC_ASSERT_OK(convcoreCreateConvolutionDescriptor(&d.conv));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptorEx(d.x, CONVCORE_DATA_FLOAT, 1, 4, 8, 8, 256, 64, 8, 1));
    CC_ASSERT_OK(convcoreSetTensor4dDescriptorEx(d.y, CONVCORE_DATA_FLOAT, 1, 4, 8, 8, 256, 64, 8, 1));
    CC_ASSERT_OK(convcoreSetFilter4dDescriptor(d.w, CONVCORE_DATA_FLOAT, 4, 4, 3, 3));
    CC_ASSERT_OK(convcoreSetConvolution2dDescriptor(d.conv, 1, 1, 1, 1, 1, 1, CONVCORE_CROSS_CORRELATION));
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int returned = 0;
    CC_ASSERT_OK(convcoreFindConvolutionForwardAlgorithm(gpu_, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT,
                                                         &returned, perf));
    unsetenv("CONVCORE_FIND_DB");
    ASSERT_EQ(returned, CONVCORE_FWD_ALGO_COUNT);
    int ran = 0;
    for (int i = 0; i < returned; ++i) {
        if (perf[i].status != CONVCORE_STATUS_SUCCESS) continue;
        EXPECT_EQ(ran, i) << "an algorithm that ran after one that did not";
        EXPECT_GE(perf[i].time, 0.0f) << "algo " << perf[i].algo;
        if (ran > 0) EXPECT_LE(perf[i - 1].time, perf[i].time);
        ++ran;
    }
    for (convcoreConvolutionFwdAlgo_t classic :
         {CONVCORE_FWD_ALGO_DIRECT, CONVCORE_FWD_ALGO_IM2COL_GEMM, CONVCORE_FWD_ALGO_IMPLICIT_GEMM}) {
        bool found = false;
        for (int i = 0; i < ran; ++i) found = found || perf[i].algo == classic;
        EXPECT_TRUE(found) << "classic algo " << classic << " did not run";
    }
}

// A few shapes from real networks, larger than the random ones (more blocks than one wave,
// grid-stride loop exercised), including depthwise and strided layers.
TEST_F(CudaDirect, NetworkLayersFloat32) {
    std::mt19937 rng(5);
    std::vector<Problem> ps;
    Problem p;
    // ResNet-like 3x3, stride 2, padded.
    p.n = 2; p.groups = 1; p.cpg = 16; p.kpg = 24; p.h = 33; p.w = 31; p.r = 3; p.s = 3;
    p.pad_h = 1; p.pad_w = 1; p.stride_h = 2; p.stride_w = 2;
    ps.push_back(p);
    // Depthwise 5x5, dilation 2, true convolution, alpha/beta.
    p = Problem();
    p.n = 3; p.groups = 32; p.cpg = 1; p.kpg = 1; p.h = 40; p.w = 37; p.r = 5; p.s = 5;
    p.pad_h = 4; p.pad_w = 4; p.dil_h = 2; p.dil_w = 2; p.mode = CONVCORE_CONVOLUTION;
    p.alpha = 0.5; p.beta = -1.0;
    ps.push_back(p);
    // 7x7 stride-2 stem on a non-square image, strided x and y.
    p = Problem();
    p.n = 1; p.groups = 1; p.cpg = 3; p.kpg = 16; p.h = 65; p.w = 47; p.r = 7; p.s = 7;
    p.pad_h = 3; p.pad_w = 3; p.stride_h = 2; p.stride_w = 2; p.strided_x = true; p.strided_y = true;
    ps.push_back(p);
    // Grouped 1x1 (ResNeXt-like), 1xN filter.
    p = Problem();
    p.n = 4; p.groups = 4; p.cpg = 8; p.kpg = 8; p.h = 14; p.w = 14; p.r = 1; p.s = 1;
    ps.push_back(p);
    p = Problem();
    p.n = 2; p.groups = 2; p.cpg = 5; p.kpg = 3; p.h = 9; p.w = 50; p.r = 1; p.s = 7;
    p.pad_w = 3; p.stride_w = 3;
    ps.push_back(p);
    check_all<float>(ps, rng);
}

}  // namespace
