// The CUDA backward passes (DIRECT data and filter, the bias gradient) against the CPU DIRECT
// backward passes, through the public C API only: random problems (odd sizes, padding, stride
// 1-3, dilation 1-2, groups, both modes, alpha/beta with a NaN-poisoned output when beta == 0),
// float32 and float64; the epilogue's backward (convcoreActivationBackwardBias). Skips when no GPU is
// visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"
#include "api_test_util.hpp"

using namespace convcore_test;

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << " failed: " << convcoreGetLastErrorString()

int visible_gpus() {
    int count = -1;
    EXPECT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS);
    return count < 0 ? 0 : count;
}

// A device copy of a host vector, freed with the handle's convcoreFree.
template <typename T>
struct DeviceVec {
    convcoreHandle_t h;
    void* ptr = nullptr;
    size_t bytes;
    DeviceVec(convcoreHandle_t handle, const std::vector<T>& host) : h(handle), bytes(host.size() * sizeof(T)) {
        EXPECT_EQ(convcoreMalloc(h, &ptr, bytes), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreMemcpyToDevice(h, ptr, host.data(), bytes), CONVCORE_STATUS_SUCCESS);
    }
    ~DeviceVec() { convcoreFree(h, ptr); }
    std::vector<T> host() const {
        std::vector<T> out(bytes / sizeof(T));
        EXPECT_EQ(convcoreMemcpyToHost(h, out.data(), ptr, bytes), CONVCORE_STATUS_SUCCESS);
        return out;
    }
};


template <typename T>
void compare(const Shape& p, double alpha, double beta, std::mt19937& rng) {
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    convcore::Handle cpu;
    convcore::Handle gpu(CONVCORE_DEVICE_CUDA, 0);
    Descs d(p, dt);
    auto make = [&](size_t n) {
        const auto v = random_vector(n, rng);
        return std::vector<T>(v.begin(), v.end());
    };
    const auto x = make(size_t(p.n * p.c * p.h * p.w)), w = make(size_t(p.k * (p.c / p.groups) * p.r * p.s));
    const auto dy = make(size_t(p.n * p.k * p.out_h() * p.out_w()));
    auto dx0 = make(x.size()), dw0 = make(w.size()), db0 = make(size_t(p.k));
    if (beta == 0) {
        for (auto* v : {&dx0, &dw0, &db0}) v->assign(v->size(), std::numeric_limits<T>::quiet_NaN());
    }
    const T a = T(alpha), b = T(beta);
    std::vector<T> dx = dx0, dw = dw0, db = db0;
    CC_ASSERT_OK(convcoreConvolutionBackwardData(cpu, &a, d.w, w.data(), d.y, dy.data(), d.conv,
                                                 CONVCORE_BWD_DATA_ALGO_DIRECT, nullptr, 0, &b, d.x, dx.data()));
    CC_ASSERT_OK(convcoreConvolutionBackwardFilter(cpu, &a, d.x, x.data(), d.y, dy.data(), d.conv,
                                                   CONVCORE_BWD_FILTER_ALGO_DIRECT, nullptr, 0, &b, d.w, dw.data()));
    convcore::TensorDesc bd(dt, 1, p.k, 1, 1);
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(cpu, &a, d.y, dy.data(), &b, bd, db.data()));

    DeviceVec<T> gx(gpu, x), gw(gpu, w), gdy(gpu, dy), gdx(gpu, dx0), gdw(gpu, dw0), gdb(gpu, db0);
    CC_ASSERT_OK(convcoreConvolutionBackwardData(gpu, &a, d.w, gw.ptr, d.y, gdy.ptr, d.conv,
                                                 CONVCORE_BWD_DATA_ALGO_DIRECT, nullptr, 0, &b, d.x, gdx.ptr));
    CC_ASSERT_OK(convcoreConvolutionBackwardFilter(gpu, &a, d.x, gx.ptr, d.y, gdy.ptr, d.conv,
                                                   CONVCORE_BWD_FILTER_ALGO_DIRECT, nullptr, 0, &b, d.w, gdw.ptr));
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(gpu, &a, d.y, gdy.ptr, &b, bd, gdb.ptr));
    CC_ASSERT_OK(convcoreSynchronize(gpu));
    const double tol = sizeof(T) == 8 ? 1e-13 : 1e-6;
    auto rel = [](const std::vector<T>& u, const std::vector<T>& v) {
        return relative_error(std::vector<double>(u.begin(), u.end()), std::vector<double>(v.begin(), v.end()));
    };
    EXPECT_LE(rel(gdx.host(), dx), tol) << "backward data";
    EXPECT_LE(rel(gdw.host(), dw), tol) << "backward filter";
    EXPECT_LE(rel(gdb.host(), db), tol) << "bias";
}

}  // namespace

TEST(CudaBackward, DirectMatchesCpu) {
    if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA GPU is visible: GPU test skipped";
    std::mt19937 rng(99);
    auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    for (int i = 0; i < 30; ++i) {
        Shape p{};
        p.groups = pick(1, 3);
        p.c = p.groups * pick(1, 4);
        p.k = p.groups * pick(1, 4);
        p.n = pick(1, 3);
        p.h = pick(1, 17);
        p.w = pick(1, 17);
        p.r = pick(1, 5);
        p.s = pick(1, 5);
        p.pad_h = pick(0, 3);
        p.pad_w = pick(0, 3);
        p.stride_h = pick(1, 3);
        p.stride_w = pick(1, 3);
        p.dil_h = pick(1, 2);
        p.dil_w = pick(1, 2);
        p.flip = pick(0, 1) == 1;
        if (p.h + 2 * p.pad_h < p.dil_h * (p.r - 1) + 1 || p.w + 2 * p.pad_w < p.dil_w * (p.s - 1) + 1) continue;
        const double alpha = i % 2 ? 0.5 : 1.0, beta = i % 3 == 0 ? 0.75 : 0.0;
        if (i % 2)
            compare<float>(p, alpha, beta, rng);
        else
            compare<double>(p, alpha, beta, rng);
    }
}

// ---- every CUDA backward algorithm ---------------------------------------------------------------

namespace {

// ||gpu - cpu DIRECT|| / ||cpu DIRECT|| allowed: the bound convcore declares.
double bwd_bound(int algo, bool data, bool f64) {
    return convcore_test::declared_bound(data ? CONVCORE_PASS_BACKWARD_DATA : CONVCORE_PASS_BACKWARD_FILTER, algo, f64);
}

// Runs every backward-data and backward-filter algorithm that accepts p on the GPU (NaN-poisoned
// outputs when beta == 0, workspace from the query) against the CPU's DIRECT; adds the
// algorithms that ran to data_ran / filter_ran. A refusal must carry a reason, and the classic
// algorithms must never refuse.
template <typename T>
void compare_all(const Shape& p, double alpha, double beta, std::mt19937& rng,
                 std::vector<int>& data_ran, std::vector<int>& filter_ran) {
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    convcore::Handle cpu;
    convcore::Handle gpu(CONVCORE_DEVICE_CUDA, 0);
    Descs d(p, dt);
    auto make = [&](size_t n) {
        const auto v = random_vector(n, rng);
        return std::vector<T>(v.begin(), v.end());
    };
    const auto x = make(size_t(p.n * p.c * p.h * p.w)), w = make(size_t(p.k * (p.c / p.groups) * p.r * p.s));
    const auto dy = make(size_t(p.n * p.k * p.out_h() * p.out_w()));
    auto dx0 = make(x.size()), dw0 = make(w.size());
    if (beta == 0)
        for (auto* v : {&dx0, &dw0}) v->assign(v->size(), std::numeric_limits<T>::quiet_NaN());
    const T a = T(alpha), b = T(beta);
    std::vector<T> dx = dx0, dw = dw0;
    CC_ASSERT_OK(convcoreConvolutionBackwardData(cpu, &a, d.w, w.data(), d.y, dy.data(), d.conv,
                                                 CONVCORE_BWD_DATA_ALGO_DIRECT, nullptr, 0, &b, d.x, dx.data()));
    CC_ASSERT_OK(convcoreConvolutionBackwardFilter(cpu, &a, d.x, x.data(), d.y, dy.data(), d.conv,
                                                   CONVCORE_BWD_FILTER_ALGO_DIRECT, nullptr, 0, &b, d.w, dw.data()));
    auto rel = [](const std::vector<T>& u, const std::vector<T>& v) {
        return relative_error(std::vector<double>(u.begin(), u.end()), std::vector<double>(v.begin(), v.end()));
    };
    DeviceVec<T> gx(gpu, x), gw(gpu, w), gdy(gpu, dy);
    for (int ai = 0; ai < CONVCORE_BWD_DATA_ALGO_COUNT; ++ai) {
        const auto algo = static_cast<convcoreConvolutionBwdDataAlgo_t>(ai);
        size_t ws = 0;
        const convcoreStatus_t st =
            convcoreGetConvolutionBackwardDataWorkspaceSize(gpu, d.w, d.y, d.conv, d.x, algo, &ws);
        if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
            EXPECT_STRNE(convcoreGetLastErrorString(), "");
            EXPECT_GT(ai, 2) << "a classic algorithm refused: " << convcoreGetLastErrorString();
            continue;
        }
        CC_ASSERT_OK(st);
        DeviceVec<T> gdx(gpu, dx0), gws(gpu, std::vector<T>(ws / sizeof(T) + 1));
        CC_ASSERT_OK(convcoreConvolutionBackwardData(gpu, &a, d.w, gw.ptr, d.y, gdy.ptr, d.conv, algo,
                                                     ws ? gws.ptr : nullptr, ws, &b, d.x, gdx.ptr));
        CC_ASSERT_OK(convcoreSynchronize(gpu));
        EXPECT_LE(rel(gdx.host(), dx), bwd_bound(ai, true, sizeof(T) == 8)) << "backward data algo " << ai;
        data_ran.push_back(ai);
    }
    for (int ai = 0; ai < CONVCORE_BWD_FILTER_ALGO_COUNT; ++ai) {
        const auto algo = static_cast<convcoreConvolutionBwdFilterAlgo_t>(ai);
        size_t ws = 0;
        const convcoreStatus_t st =
            convcoreGetConvolutionBackwardFilterWorkspaceSize(gpu, d.x, d.y, d.conv, d.w, algo, &ws);
        if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
            EXPECT_STRNE(convcoreGetLastErrorString(), "");
            EXPECT_GT(ai, 2) << "a classic algorithm refused: " << convcoreGetLastErrorString();
            continue;
        }
        CC_ASSERT_OK(st);
        DeviceVec<T> gdw(gpu, dw0), gws(gpu, std::vector<T>(ws / sizeof(T) + 1));
        CC_ASSERT_OK(convcoreConvolutionBackwardFilter(gpu, &a, d.x, gx.ptr, d.y, gdy.ptr, d.conv, algo,
                                                       ws ? gws.ptr : nullptr, ws, &b, d.w, gdw.ptr));
        CC_ASSERT_OK(convcoreSynchronize(gpu));
        EXPECT_LE(rel(gdw.host(), dw), bwd_bound(ai, false, sizeof(T) == 8)) << "backward filter algo " << ai;
        filter_ran.push_back(ai);
    }
}

}  // namespace

TEST(CudaBackward, EveryAlgorithmMatchesCpu) {
    if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA GPU is visible: GPU test skipped";
    std::mt19937 rng(4242);
    auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    std::vector<int> data_ran, filter_ran;
    for (int i = 0; i < 40; ++i) {
        Shape p{};
        p.groups = pick(1, 3);
        p.c = p.groups * pick(1, 4);
        p.k = p.groups * pick(1, 4);
        p.n = pick(1, 3);
        p.h = pick(3, 17);
        p.w = pick(3, 17);
        // Every other problem 3x3 stride 1 (where Winograd and the FFT family apply).
        const bool fast = i % 2 == 0;
        p.r = fast ? 3 : pick(1, 5);
        p.s = fast ? 3 : pick(1, 5);
        p.pad_h = pick(0, fast ? 2 : 3);
        p.pad_w = pick(0, fast ? 2 : 3);
        p.stride_h = fast ? 1 : pick(1, 3);
        p.stride_w = fast ? 1 : pick(1, 3);
        p.dil_h = fast ? 1 : pick(1, 2);
        p.dil_w = fast ? 1 : pick(1, 2);
        p.flip = pick(0, 1) == 1;
        if (p.h + 2 * p.pad_h < p.dil_h * (p.r - 1) + 1 || p.w + 2 * p.pad_w < p.dil_w * (p.s - 1) + 1) continue;
        const double alpha = i % 3 ? 0.5 : 1.0, beta = i % 4 == 1 ? 0.75 : 0.0;
        if (i % 4 < 3)
            compare_all<float>(p, alpha, beta, rng, data_ran, filter_ran);
        else
            compare_all<double>(p, alpha, beta, rng, data_ran, filter_ran);
        if (HasFatalFailure()) return;
    }
    // Each classic algorithm ran; the log says which others did (compiled in and applicable).
    for (int ai = 0; ai < 3; ++ai) {
        EXPECT_NE(std::count(data_ran.begin(), data_ran.end(), ai), 0) << "backward data algo " << ai;
        EXPECT_NE(std::count(filter_ran.begin(), filter_ran.end(), ai), 0) << "backward filter algo " << ai;
    }
    std::string ran = "backward data algos run:";
    for (int ai = 0; ai < CONVCORE_BWD_DATA_ALGO_COUNT; ++ai)
        ran += " " + std::to_string(ai) + "x" + std::to_string(std::count(data_ran.begin(), data_ran.end(), ai));
    ran += "; backward filter algos run:";
    for (int ai = 0; ai < CONVCORE_BWD_FILTER_ALGO_COUNT; ++ai)
        ran += " " + std::to_string(ai) + "x" + std::to_string(std::count(filter_ran.begin(), filter_ran.end(), ai));
    RecordProperty("algorithms_run", ran);
    std::printf("%s\n", ran.c_str());
}

namespace {

// The epilogue's backward (convcoreActivationBackwardBias) on the device against the CPU: every
// activation, dy and dv channels-last with y or v in NCHW (the strided path), db and dv together,
// then db alone, float32 and float64.
template <typename T>
void compare_activation_backward(convcoreActivationMode_t act) {
    SCOPED_TRACE(int(act));
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    std::mt19937 rng(5);
    const int64_t n = 2, k = 7, p = 5, q = 3;
    const size_t count = size_t(n * k * p * q);
    auto make = [&](double scale) {
        const auto v = random_vector(count, rng);
        std::vector<T> out(count);
        for (size_t i = 0; i < count; ++i) out[i] = T(scale * v[i]);
        return out;
    };
    const std::vector<T> a = make(8), dy = make(1);
    convcore::Handle cpu;
    convcore::Handle gpu(CONVCORE_DEVICE_CUDA, 0);
    convcore::TensorDesc nhwc(dt, 1, 1, 1, 1), nchw(dt, n, k, p, q), bd(dt, 1, k, 1, 1);
    nhwc.set_strided(dt, {n, k, p, q}, {p * q * k, 1, q * k, k});
    const bool silu = act == CONVCORE_ACTIVATION_SILU || act == CONVCORE_ACTIVATION_GELU ||
                      act == CONVCORE_ACTIVATION_GELU_TANH;  // reads the pre-activation v
    const convcoreTensorDescriptor_t ad = nchw;
    const T one = 1, half = T(0.5);
    std::vector<T> dv(count), db(size_t(k), T(1));
    CC_ASSERT_OK(convcoreActivationBackwardBias(cpu, act, silu ? nullptr : ad, silu ? nullptr : a.data(),
                                                silu ? ad : nullptr, silu ? a.data() : nullptr, nhwc, dy.data(), nhwc,
                                                dv.data(), &one, &half, bd, db.data()));
    DeviceVec<T> ga(gpu, a), gdy(gpu, dy), gdv(gpu, std::vector<T>(count)), gdb(gpu, std::vector<T>(size_t(k), T(1)));
    CC_ASSERT_OK(convcoreActivationBackwardBias(gpu, act, silu ? nullptr : ad, silu ? nullptr : ga.ptr,
                                                silu ? ad : nullptr, silu ? ga.ptr : nullptr, nhwc, gdy.ptr, nhwc,
                                                gdv.ptr, &one, &half, bd, gdb.ptr));
    const double bound = sizeof(T) == 8 ? 1e-13 : 1e-5;
    auto as_double = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
    EXPECT_LE(relative_error(as_double(gdv.host()), as_double(dv)), bound);
    EXPECT_LE(relative_error(as_double(gdb.host()), as_double(db)), bound);
    // db alone (no dv), from the device's dy again
    DeviceVec<T> gdb2(gpu, std::vector<T>(size_t(k), T(1)));
    CC_ASSERT_OK(convcoreActivationBackwardBias(gpu, act, silu ? nullptr : ad, silu ? nullptr : ga.ptr,
                                                silu ? ad : nullptr, silu ? ga.ptr : nullptr, nhwc, gdy.ptr, nullptr,
                                                nullptr, &one, &half, bd, gdb2.ptr));
    EXPECT_LE(relative_error(as_double(gdb2.host()), as_double(db)), bound);
    // In place (dv is dy): dy becomes dv, and db is the same. IDENTITY has nothing to write there
    // (dv = dy already): with db it only sums, without db it does nothing.
    DeviceVec<T> gio(gpu, dy), gdb3(gpu, std::vector<T>(size_t(k), T(1)));
    CC_ASSERT_OK(convcoreActivationBackwardBias(gpu, act, silu ? nullptr : ad, silu ? nullptr : ga.ptr,
                                                silu ? ad : nullptr, silu ? ga.ptr : nullptr, nhwc, gio.ptr, nhwc,
                                                gio.ptr, &one, &half, bd, gdb3.ptr));
    EXPECT_LE(relative_error(as_double(gio.host()), as_double(dv)), bound);
    EXPECT_LE(relative_error(as_double(gdb3.host()), as_double(db)), bound);
    if (act == CONVCORE_ACTIVATION_IDENTITY) {
        CC_ASSERT_OK(convcoreActivationBackwardBias(gpu, act, nullptr, nullptr, nullptr, nullptr, nhwc, gio.ptr, nhwc,
                                                    gio.ptr, &one, &half, nullptr, nullptr));
        EXPECT_EQ(gio.host(), dy);
    }
}

}  // namespace

TEST(CudaBackward, ActivationBackwardBiasMatchesCpu) {
    if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA device visible";
    for (convcoreActivationMode_t act :
         {CONVCORE_ACTIVATION_IDENTITY, CONVCORE_ACTIVATION_RELU, CONVCORE_ACTIVATION_RELU6, CONVCORE_ACTIVATION_SILU,
          CONVCORE_ACTIVATION_GELU, CONVCORE_ACTIVATION_GELU_TANH}) {
        compare_activation_backward<float>(act);
        compare_activation_backward<double>(act);
    }
}
