// The C API's CUDA paths beside the algorithms themselves, against the CPU handle's DIRECT
// through the public C API: Find and FindEx for the three passes (count, order, statuses,
// workspace limits, FindEx's output), Select in every mode with and without the caller's
// buffers, a user stream (convcoreSetStream with a stream from cudaStreamCreate), the bias
// gradient (float32 and float64, alpha/beta, a strided db), and the memory copies with their
// bad arguments. The GPU tests skip when no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "api_test_util.hpp"
#include "reference.hpp"
#ifdef CONVCORE_TESTS_ON_EMULATED_CUDA
#include "cuda_emulator/call_counts.hpp"
#endif

using namespace convcore_test;

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << " failed: " << convcoreGetLastErrorString()
#define CC_EXPECT_OK(call) \
    EXPECT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << " failed: " << convcoreGetLastErrorString()

int visible_gpus() {
    int count = -1;
    EXPECT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    return count < 0 ? 0 : count;
}

const char* kNoGpu = "no CUDA GPU is visible (convcoreGetCudaDeviceCount() == 0): GPU test skipped";


// A device buffer of `count` elements of T, freed with the handle's convcoreFree.
template <typename T>
struct DeviceVec {
    convcoreHandle_t h;
    void* ptr = nullptr;
    size_t count;
    DeviceVec(convcoreHandle_t handle, size_t n) : h(handle), count(n) {
        EXPECT_EQ(convcoreMalloc(h, &ptr, std::max<size_t>(bytes(), 1)), CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
    }
    DeviceVec(convcoreHandle_t handle, const std::vector<T>& host) : DeviceVec(handle, host.size()) { upload(host); }
    ~DeviceVec() { convcoreFree(h, ptr); }
    DeviceVec(const DeviceVec&) = delete;
    DeviceVec& operator=(const DeviceVec&) = delete;
    size_t bytes() const { return count * sizeof(T); }
    void upload(const std::vector<T>& host) {
        EXPECT_EQ(host.size(), count);
        EXPECT_EQ(convcoreMemcpyToDevice(h, ptr, host.data(), bytes()), CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
    }
    void poison() { upload(std::vector<T>(count, std::numeric_limits<T>::quiet_NaN())); }
    std::vector<T> host() const {
        std::vector<T> out(count);
        EXPECT_EQ(convcoreMemcpyToHost(h, out.data(), ptr, bytes()), CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        return out;
    }
};

template <typename T>
double rel(const std::vector<T>& got, const std::vector<T>& want) {
    for (const T& v : got)
        if (!std::isfinite(double(v))) return std::numeric_limits<double>::infinity();
    return relative_error(std::vector<double>(got.begin(), got.end()), std::vector<double>(want.begin(), want.end()));
}

enum class Dir { Fwd, BwdData, BwdFilter };
const char* dir_name(Dir d) { return d == Dir::Fwd ? "forward" : d == Dir::BwdData ? "backward data" : "backward filter"; }
int algo_count(Dir d) {
    return d == Dir::Fwd ? CONVCORE_FWD_ALGO_COUNT : d == Dir::BwdData ? CONVCORE_BWD_DATA_ALGO_COUNT
                                                                       : CONVCORE_BWD_FILTER_ALGO_COUNT;
}
bool is_classic(int algo) { return algo == 0 || algo == 1 || algo == 2; }  // DIRECT, IM2COL_GEMM, IMPLICIT_GEMM

// ||gpu - cpu DIRECT|| / ||cpu DIRECT|| allowed per algorithm: the bound convcore declares.
double bound(Dir d, int algo, bool f64) {
    const convcoreConvolutionPass_t pass = d == Dir::Fwd       ? CONVCORE_PASS_FORWARD
                                           : d == Dir::BwdData ? CONVCORE_PASS_BACKWARD_DATA
                                                               : CONVCORE_PASS_BACKWARD_FILTER;
    return convcore_test::declared_bound(pass, algo, f64);
}

// One entry of a ranking, whatever the pass.
struct Row {
    int algo;
    convcoreStatus_t status;
    float time;
    size_t memory;
};
template <typename Perf>
std::vector<Row> rows_of(const Perf* perf, int n) {
    std::vector<Row> rows;
    for (int i = 0; i < n; ++i) rows.push_back({int(perf[i].algo), perf[i].status, perf[i].time, perf[i].memory});
    return rows;
}
std::string describe(const std::vector<Row>& rows) {
    std::string s;
    for (const Row& r : rows)
        s += " [algo " + std::to_string(r.algo) + " " + convcoreGetStatusName(r.status) + " " +
             std::to_string(r.time) + " ms " + std::to_string(r.memory) + " B]";
    return s;
}


// 3x3, stride 1, padding 1: every algorithm family applies (Winograd, the FFT family, ...).
Shape small_3x3() {
    Shape p{};
    p.n = 2, p.c = 3, p.k = 4, p.h = 7, p.w = 9, p.r = 3, p.s = 3;
    p.pad_h = 1, p.pad_w = 1, p.stride_h = 1, p.stride_w = 1, p.dil_h = 1, p.dil_w = 1, p.groups = 1;
    p.flip = false;
    return p;
}

// One problem on both handles: host data, the CPU handle's DIRECT results of the three passes
// (alpha 1, beta 0), the GPU copies of the inputs and one output buffer per pass.
template <typename T>
struct Case {
    static constexpr bool f64 = sizeof(T) == 8;
    convcoreHandle_t cpu, gpu;
    Shape p;
    Descs d;
    std::vector<T> x, w, dy, y_ref, dx_ref, dw_ref;
    DeviceVec<T> gx, gw, gdy, gy, gdx, gdw;

    static std::vector<T> random(size_t n, std::mt19937& rng) {
        const auto v = random_vector(n, rng);
        return std::vector<T>(v.begin(), v.end());
    }
    Case(convcoreHandle_t cpu_handle, convcoreHandle_t gpu_handle, const Shape& shape, uint32_t seed)
        : cpu(cpu_handle),
          gpu(gpu_handle),
          p(shape),
          d(shape, f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT),
          x(make(size_t(p.n * p.c * p.h * p.w), seed)),
          w(make(size_t(p.k * (p.c / p.groups) * p.r * p.s), seed + 1)),
          dy(make(size_t(p.n * p.k * p.out_h() * p.out_w()), seed + 2)),
          y_ref(dy.size()),
          dx_ref(x.size()),
          dw_ref(w.size()),
          gx(gpu, x),
          gw(gpu, w),
          gdy(gpu, dy),
          gy(gpu, dy.size()),
          gdx(gpu, x.size()),
          gdw(gpu, w.size()) {
        const T one = 1, zero = 0;
        EXPECT_EQ(convcoreConvolutionForward(cpu, &one, d.x, x.data(), d.w, w.data(), d.conv, CONVCORE_FWD_ALGO_DIRECT,
                                             nullptr, 0, &zero, d.y, y_ref.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        EXPECT_EQ(convcoreConvolutionBackwardData(cpu, &one, d.w, w.data(), d.y, dy.data(), d.conv,
                                                  CONVCORE_BWD_DATA_ALGO_DIRECT, nullptr, 0, &zero, d.x, dx_ref.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        EXPECT_EQ(convcoreConvolutionBackwardFilter(cpu, &one, d.x, x.data(), d.y, dy.data(), d.conv,
                                                    CONVCORE_BWD_FILTER_ALGO_DIRECT, nullptr, 0, &zero, d.w,
                                                    dw_ref.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
    }
    static std::vector<T> make(size_t n, uint32_t seed) {
        std::mt19937 rng(seed);
        return random(n, rng);
    }

    DeviceVec<T>& out(Dir dir) { return dir == Dir::Fwd ? gy : dir == Dir::BwdData ? gdx : gdw; }
    const std::vector<T>& ref(Dir dir) const { return dir == Dir::Fwd ? y_ref : dir == Dir::BwdData ? dx_ref : dw_ref; }

    // The pass's inputs on the GPU are unchanged (Find, FindEx and Select only read them).
    void expect_inputs_intact(Dir dir) const {
        if (dir != Dir::BwdFilter) EXPECT_EQ(gw.host(), w) << dir_name(dir) << ": w changed";
        if (dir != Dir::BwdData) EXPECT_EQ(gx.host(), x) << dir_name(dir) << ": x changed";
        if (dir != Dir::Fwd) EXPECT_EQ(gdy.host(), dy) << dir_name(dir) << ": dy changed";
    }

    convcoreStatus_t workspace(Dir dir, int algo, size_t* bytes) const {
        switch (dir) {
            case Dir::Fwd:
                return convcoreGetConvolutionForwardWorkspaceSize(gpu, d.x, d.w, d.conv, d.y,
                                                                  convcoreConvolutionFwdAlgo_t(algo), bytes);
            case Dir::BwdData:
                return convcoreGetConvolutionBackwardDataWorkspaceSize(gpu, d.w, d.y, d.conv, d.x,
                                                                       convcoreConvolutionBwdDataAlgo_t(algo), bytes);
            default:
                return convcoreGetConvolutionBackwardFilterWorkspaceSize(
                    gpu, d.x, d.y, d.conv, d.w, convcoreConvolutionBwdFilterAlgo_t(algo), bytes);
        }
    }

    // Get's ranking on the GPU handle.
    convcoreStatus_t get(Dir dir, std::vector<Row>* rows) const {
        int n = 0;
        convcoreStatus_t st;
        if (dir == Dir::Fwd) {
            convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
            st = convcoreGetConvolutionForwardAlgorithm(gpu, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT, &n, perf);
            *rows = rows_of(perf, n);
        } else if (dir == Dir::BwdData) {
            convcoreConvolutionBwdDataAlgoPerf_t perf[CONVCORE_BWD_DATA_ALGO_COUNT];
            st = convcoreGetConvolutionBackwardDataAlgorithm(gpu, d.w, d.y, d.conv, d.x, CONVCORE_BWD_DATA_ALGO_COUNT,
                                                             &n, perf);
            *rows = rows_of(perf, n);
        } else {
            convcoreConvolutionBwdFilterAlgoPerf_t perf[CONVCORE_BWD_FILTER_ALGO_COUNT];
            st = convcoreGetConvolutionBackwardFilterAlgorithm(gpu, d.x, d.y, d.conv, d.w,
                                                               CONVCORE_BWD_FILTER_ALGO_COUNT, &n, perf);
            *rows = rows_of(perf, n);
        }
        return st;
    }

    // Find (ex == false) or FindEx on the GPU inputs and out(dir), with the workspace given.
    convcoreStatus_t find(Dir dir, bool ex, int requested, std::vector<Row>* rows, void* ws = nullptr,
                          size_t ws_bytes = 0) {
        std::vector<convcoreConvolutionFwdAlgoPerf_t> pf(size_t(std::max(requested, 1)));
        std::vector<convcoreConvolutionBwdDataAlgoPerf_t> pd(pf.size());
        std::vector<convcoreConvolutionBwdFilterAlgoPerf_t> pw(pf.size());
        int n = 0;
        convcoreStatus_t st;
        void* o = out(dir).ptr;
        switch (dir) {
            case Dir::Fwd:
                st = ex ? convcoreFindConvolutionForwardAlgorithmEx(gpu, d.x, gx.ptr, d.w, gw.ptr, d.conv, d.y, o,
                                                                    requested, &n, pf.data(), ws, ws_bytes)
                        : convcoreFindConvolutionForwardAlgorithm(gpu, d.x, d.w, d.conv, d.y, requested, &n, pf.data());
                *rows = rows_of(pf.data(), n);
                break;
            case Dir::BwdData:
                st = ex ? convcoreFindConvolutionBackwardDataAlgorithmEx(gpu, d.w, gw.ptr, d.y, gdy.ptr, d.conv, d.x,
                                                                         o, requested, &n, pd.data(), ws, ws_bytes)
                        : convcoreFindConvolutionBackwardDataAlgorithm(gpu, d.w, d.y, d.conv, d.x, requested, &n,
                                                                       pd.data());
                *rows = rows_of(pd.data(), n);
                break;
            default:
                st = ex ? convcoreFindConvolutionBackwardFilterAlgorithmEx(gpu, d.x, gx.ptr, d.y, gdy.ptr, d.conv,
                                                                           d.w, o, requested, &n, pw.data(), ws,
                                                                           ws_bytes)
                        : convcoreFindConvolutionBackwardFilterAlgorithm(gpu, d.x, d.y, d.conv, d.w, requested, &n,
                                                                         pw.data());
                *rows = rows_of(pw.data(), n);
                break;
        }
        return st;
    }

    convcoreStatus_t select(Dir dir, convcoreSelectMode_t mode, bool buffers, int* algo) {
        const void* x_ = buffers ? gx.ptr : nullptr;
        const void* w_ = buffers ? gw.ptr : nullptr;
        const void* dy_ = buffers ? gdy.ptr : nullptr;
        void* o = buffers ? out(dir).ptr : nullptr;
        convcoreStatus_t st;
        if (dir == Dir::Fwd) {
            convcoreConvolutionFwdAlgo_t a = CONVCORE_FWD_ALGO_COUNT;
            st = convcoreSelectConvolutionForwardAlgorithm(gpu, d.x, x_, d.w, w_, d.conv, d.y, o, mode, &a);
            *algo = int(a);
        } else if (dir == Dir::BwdData) {
            convcoreConvolutionBwdDataAlgo_t a = CONVCORE_BWD_DATA_ALGO_COUNT;
            st = convcoreSelectConvolutionBackwardDataAlgorithm(gpu, d.w, w_, d.y, dy_, d.conv, d.x, o, mode, &a);
            *algo = int(a);
        } else {
            convcoreConvolutionBwdFilterAlgo_t a = CONVCORE_BWD_FILTER_ALGO_COUNT;
            st = convcoreSelectConvolutionBackwardFilterAlgorithm(gpu, d.x, x_, d.y, dy_, d.conv, d.w, o, mode, &a);
            *algo = int(a);
        }
        return st;
    }

    // out = alpha * pass(...) + beta * out with `algo` and the workspace its query asks for.
    convcoreStatus_t run(Dir dir, int algo, T alpha = 1, T beta = 0) {
        size_t bytes = 0;
        const convcoreStatus_t q = workspace(dir, algo, &bytes);
        if (q != CONVCORE_STATUS_SUCCESS) return q;
        DeviceVec<unsigned char> ws(gpu, bytes);
        void* wsp = bytes ? ws.ptr : nullptr;
        switch (dir) {
            case Dir::Fwd:
                return convcoreConvolutionForward(gpu, &alpha, d.x, gx.ptr, d.w, gw.ptr, d.conv,
                                                  convcoreConvolutionFwdAlgo_t(algo), wsp, bytes, &beta, d.y, gy.ptr);
            case Dir::BwdData:
                return convcoreConvolutionBackwardData(gpu, &alpha, d.w, gw.ptr, d.y, gdy.ptr, d.conv,
                                                       convcoreConvolutionBwdDataAlgo_t(algo), wsp, bytes, &beta, d.x,
                                                       gdx.ptr);
            default:
                return convcoreConvolutionBackwardFilter(gpu, &alpha, d.x, gx.ptr, d.y, gdy.ptr, d.conv,
                                                         convcoreConvolutionBwdFilterAlgo_t(algo), wsp, bytes, &beta,
                                                         d.w, gdw.ptr);
        }
    }

    // Runs `algo` into a NaN-poisoned output and compares it with the CPU.
    void expect_runs_correctly(Dir dir, int algo) {
        SCOPED_TRACE(std::string(dir_name(dir)) + " algo " + std::to_string(algo));
        out(dir).poison();
        ASSERT_EQ(run(dir, algo), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
        CC_ASSERT_OK(convcoreSynchronize(gpu));
        EXPECT_LE(rel(out(dir).host(), ref(dir)), bound(dir, algo, f64));
    }
};

// The applicable algorithms of a pass on the GPU handle and their workspaces (the query's answer).
template <typename T>
std::vector<std::pair<int, size_t>> applicable(const Case<T>& c, Dir dir) {
    std::vector<std::pair<int, size_t>> out;
    for (int a = 0; a < algo_count(dir); ++a) {
        size_t bytes = 0;
        const convcoreStatus_t st = c.workspace(dir, a, &bytes);
        if (st == CONVCORE_STATUS_SUCCESS)
            out.push_back({a, bytes});
        else
            EXPECT_EQ(st, CONVCORE_STATUS_NOT_SUPPORTED) << "algo " << a << ": " << convcoreGetLastErrorString();
    }
    return out;
}

// What Find and FindEx must return with every algorithm requested, under a workspace limit:
// each algorithm once; those that ran (SUCCESS, time >= 0) first and by time, then the others in
// enum order; an applicable algorithm within the limit ran, one over it is ALLOC_FAILED with the
// workspace it needs, an inapplicable one is NOT_SUPPORTED with memory 0. Returns the largest
// error bound among the algorithms that ran.
template <typename T>
double check_find_rows(const Case<T>& c, Dir dir, const std::vector<Row>& rows, size_t limit) {
    SCOPED_TRACE(std::string(dir_name(dir)) + " rows:" + describe(rows));
    EXPECT_EQ(int(rows.size()), algo_count(dir));
    const auto ok = applicable(c, dir);
    std::vector<int> seen(size_t(algo_count(dir)), 0);
    double worst = 0;
    int ran = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        if (r.algo < 0 || r.algo >= algo_count(dir)) {
            ADD_FAILURE() << "algo " << r.algo << " out of range";
            continue;
        }
        ++seen[size_t(r.algo)];
        const auto it = std::find_if(ok.begin(), ok.end(), [&](const auto& e) { return e.first == r.algo; });
        if (it == ok.end()) {
            EXPECT_EQ(r.status, CONVCORE_STATUS_NOT_SUPPORTED) << "algo " << r.algo;
            EXPECT_EQ(r.memory, 0u) << "algo " << r.algo;
        } else if (it->second > limit) {
            EXPECT_EQ(r.status, CONVCORE_STATUS_ALLOC_FAILED) << "algo " << r.algo << " needs " << it->second;
            EXPECT_EQ(r.memory, it->second) << "algo " << r.algo;
        } else {
            EXPECT_EQ(r.status, CONVCORE_STATUS_SUCCESS) << "algo " << r.algo;
            EXPECT_EQ(r.memory, it->second) << "algo " << r.algo;
        }
        if (r.status == CONVCORE_STATUS_SUCCESS) {
            EXPECT_EQ(size_t(ran), i) << "algo " << r.algo << " ran but comes after one that did not";
            EXPECT_GE(r.time, 0.0f) << "algo " << r.algo;
            EXPECT_LE(r.memory, limit) << "algo " << r.algo;
            if (ran > 0) EXPECT_LE(rows[i - 1].time, r.time) << "not sorted by time";
            worst = std::max(worst, bound(dir, r.algo, Case<T>::f64));
            ++ran;
        } else {
            EXPECT_EQ(r.time, -1.0f) << "algo " << r.algo;
            if (i > 0 && rows[i - 1].status != CONVCORE_STATUS_SUCCESS)
                EXPECT_LT(rows[i - 1].algo, r.algo) << "failures not in enum order";
        }
    }
    for (int a = 0; a < algo_count(dir); ++a) EXPECT_EQ(seen[size_t(a)], 1) << "algo " << a;
    if (limit == SIZE_MAX)
        for (const Row& r : rows)
            if (is_classic(r.algo))
                EXPECT_EQ(r.status, CONVCORE_STATUS_SUCCESS) << "classic algo " << r.algo << " did not run";
    return worst;
}

class CudaApi : public ::testing::Test {
   protected:
    void SetUp() override {
        if (visible_gpus() == 0) GTEST_SKIP() << kNoGpu;
        setenv("CONVCORE_FIND_DB", "off", 1);  // nothing read from or written to the user's find-db
        unsetenv("CONVCORE_AUTO");
        unsetenv("CONVCORE_DISABLE_ALGOS");
        CC_ASSERT_OK(convcoreClearFindCache());
        CC_ASSERT_OK(convcoreCreate(&cpu_));
        CC_ASSERT_OK(convcoreCreateForDevice(&gpu_, CONVCORE_DEVICE_CUDA, 0));
    }
    void TearDown() override {
        if (gpu_) convcoreDestroy(gpu_);
        if (cpu_) convcoreDestroy(cpu_);
    }

    void find_suite(Dir dir);
    void select_suite(Dir dir);

    convcoreHandle_t cpu_ = nullptr, gpu_ = nullptr;
};

void CudaApi::find_suite(Dir dir) {
    Case<float> c(cpu_, gpu_, small_3x3(), 11);
    const int count = algo_count(dir);
    const auto ok = applicable(c, dir);
    ASSERT_GE(ok.size(), 3u);

    // Find on its own buffers: every applicable algorithm timed once.
    std::vector<Row> rows;
    int64_t t0 = timed_runs();
    CC_ASSERT_OK(c.find(dir, false, count, &rows));
    check_find_rows(c, dir, rows, SIZE_MAX);
    EXPECT_EQ(timed_runs() - t0, int64_t(ok.size()));

    // Again, fewer entries requested: answered from the in-process cache, the same order.
    std::vector<Row> top;
    t0 = timed_runs();
    const int64_t h0 = db_hits();
    CC_ASSERT_OK(c.find(dir, false, 2, &top));
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(timed_runs(), t0);
    EXPECT_EQ(db_hits() - h0, 1);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(top[i].algo, rows[i].algo);
        EXPECT_EQ(top[i].time, rows[i].time);
    }
    // More than exist: all of them.
    CC_ASSERT_OK(c.find(dir, false, count + 5, &top));
    EXPECT_EQ(int(top.size()), count);

    // FindEx on the caller's buffers with room for every workspace: the output (NaN before) holds
    // the pass's result afterwards, the inputs are unchanged.
    size_t max_ws = 0, min_nonzero = SIZE_MAX;
    for (const auto& e : ok) {
        max_ws = std::max(max_ws, e.second);
        if (e.second) min_nonzero = std::min(min_nonzero, e.second);
    }
    DeviceVec<unsigned char> ws(gpu_, max_ws);
    CC_ASSERT_OK(convcoreClearFindCache());
    c.out(dir).poison();
    t0 = timed_runs();
    CC_ASSERT_OK(c.find(dir, true, count, &rows, max_ws ? ws.ptr : nullptr, max_ws));
    double worst = check_find_rows(c, dir, rows, max_ws);
    EXPECT_EQ(timed_runs() - t0, int64_t(ok.size()));
    EXPECT_LE(rel(c.out(dir).host(), c.ref(dir)), worst) << dir_name(dir) << ": FindEx output";
    c.expect_inputs_intact(dir);

    // FindEx with a smaller workspace: the algorithms that need more are ALLOC_FAILED, the
    // others (DIRECT among them) still run and the output is right.
    ASSERT_NE(min_nonzero, SIZE_MAX) << "no algorithm needs a workspace: the limit cannot be tested";
    ASSERT_LT(min_nonzero, max_ws) << "every workspace is the same size: the limit cannot be tested";
    CC_ASSERT_OK(convcoreClearFindCache());
    c.out(dir).poison();
    CC_ASSERT_OK(c.find(dir, true, count, &rows, ws.ptr, min_nonzero));
    worst = check_find_rows(c, dir, rows, min_nonzero);
    EXPECT_EQ(rows[0].status, CONVCORE_STATUS_SUCCESS);
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.status == CONVCORE_STATUS_ALLOC_FAILED; }));
    EXPECT_LE(rel(c.out(dir).host(), c.ref(dir)), worst) << dir_name(dir) << ": FindEx output under a limit";

    // FindEx without a workspace: only the algorithms that need none.
    CC_ASSERT_OK(convcoreClearFindCache());
    c.out(dir).poison();
    CC_ASSERT_OK(c.find(dir, true, count, &rows, nullptr, 0));
    worst = check_find_rows(c, dir, rows, 0);
    EXPECT_EQ(rows[0].status, CONVCORE_STATUS_SUCCESS) << "DIRECT needs no workspace";
    EXPECT_LE(rel(c.out(dir).host(), c.ref(dir)), worst) << dir_name(dir) << ": FindEx output without a workspace";

    // Find under the handle's workspace limit; the limit lifted again.
    CC_ASSERT_OK(convcoreClearFindCache());
    CC_ASSERT_OK(convcoreSetFindWorkspaceLimit(gpu_, min_nonzero));
    CC_ASSERT_OK(c.find(dir, false, count, &rows));
    check_find_rows(c, dir, rows, min_nonzero);
    CC_ASSERT_OK(convcoreSetFindWorkspaceLimit(gpu_, SIZE_MAX));
    CC_ASSERT_OK(convcoreClearFindCache());
    CC_ASSERT_OK(c.find(dir, false, count, &rows));
    check_find_rows(c, dir, rows, SIZE_MAX);

    // Bad arguments: a workspace size without a workspace, no entries requested.
    EXPECT_EQ(c.find(dir, true, count, &rows, nullptr, 64), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    EXPECT_EQ(c.find(dir, true, 0, &rows, ws.ptr, max_ws), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    EXPECT_EQ(c.find(dir, false, 0, &rows), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
}

TEST_F(CudaApi, FindForward) { find_suite(Dir::Fwd); }
TEST_F(CudaApi, FindBackwardData) { find_suite(Dir::BwdData); }
TEST_F(CudaApi, FindBackwardFilter) { find_suite(Dir::BwdFilter); }

void CudaApi::select_suite(Dir dir) {
    Case<float> c(cpu_, gpu_, small_3x3(), 23);
    const auto ok = applicable(c, dir);
    ASSERT_GE(ok.size(), 3u);
    std::vector<Row> get_rows;
    CC_ASSERT_OK(c.get(dir, &get_rows));
    ASSERT_EQ(get_rows[0].status, CONVCORE_STATUS_SUCCESS);

    for (const convcoreSelectMode_t mode : {CONVCORE_SELECT_HEURISTIC, CONVCORE_SELECT_MEASURED, CONVCORE_SELECT_FIND}) {
        for (const bool buffers : {true, false}) {
            SCOPED_TRACE(std::string(dir_name(dir)) + " mode " + std::to_string(int(mode)) +
                         (buffers ? " with buffers" : " with NULL buffers"));
            CC_ASSERT_OK(convcoreClearFindCache());
            if (buffers) c.out(dir).poison();
            int algo = -1;
            int64_t t0 = timed_runs();
            CC_ASSERT_OK(c.select(dir, mode, buffers, &algo));
            const int64_t timed = timed_runs() - t0;
            ASSERT_GE(algo, 0);
            ASSERT_LT(algo, algo_count(dir));
            ASSERT_TRUE(std::any_of(ok.begin(), ok.end(), [&](const auto& e) { return e.first == algo; }))
                << "selected algo " << algo << " cannot run the problem";
            switch (mode) {
                case CONVCORE_SELECT_HEURISTIC:
                    EXPECT_EQ(timed, 0) << "HEURISTIC timed something";
                    EXPECT_EQ(algo, get_rows[0].algo) << "HEURISTIC is Get's first applicable algorithm";
                    break;
                case CONVCORE_SELECT_MEASURED: {
                    // Get's first candidates and the algorithms made for a 3x3 stride-1 problem
                    // (the Winograd family; forward: the general lowerings too; core/solver.hpp's
                    // made_for), whatever their rank.
                    std::set<int> timed_set;
                    for (size_t i = 0; i < std::min<size_t>(CONVCORE_SELECT_CANDIDATES, ok.size()); ++i)
                        timed_set.insert(get_rows[i].algo);
                    const std::vector<int> made =
                        dir == Dir::Fwd ? std::vector<int>{CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3,
                                                           CONVCORE_FWD_ALGO_IM2COL_GEMM, CONVCORE_FWD_ALGO_IMPLICIT_GEMM,
                                                           CONVCORE_FWD_ALGO_IM2WIN}
                        : dir == Dir::BwdData
                            ? std::vector<int>{CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3, CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3}
                            : std::vector<int>{CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2};
                    for (int m : made)
                        if (std::any_of(ok.begin(), ok.end(), [&](const auto& e) { return e.first == m; })) timed_set.insert(m);
                    EXPECT_EQ(timed, int64_t(timed_set.size()));
                    EXPECT_TRUE(timed_set.count(algo)) << "MEASURED chose algo " << algo
                                                       << ", neither one of Get's first candidates nor made for the problem";
                    break;
                }
                default: {
                    EXPECT_EQ(timed, int64_t(ok.size()));
                    // Find now answers from what Select timed: its fastest is the choice.
                    std::vector<Row> rows;
                    t0 = timed_runs();
                    CC_ASSERT_OK(c.find(dir, false, algo_count(dir), &rows));
                    EXPECT_EQ(timed_runs(), t0);
                    EXPECT_EQ(rows[0].algo, algo) << describe(rows);
                    break;
                }
            }
            if (buffers) {
                c.expect_inputs_intact(dir);
                if (mode != CONVCORE_SELECT_HEURISTIC)  // timed on the output: written, finite
                    for (float v : c.out(dir).host()) ASSERT_TRUE(std::isfinite(v)) << "output not written by Select";
            }
            // The decision is cached: asked again, nothing is timed and the answer is the same.
            int again = -1;
            t0 = timed_runs();
            CC_ASSERT_OK(c.select(dir, mode, !buffers, &again));
            EXPECT_EQ(again, algo);
            EXPECT_EQ(timed_runs(), t0);
            // The choice runs and gives the pass's result.
            c.expect_runs_correctly(dir, algo);
        }
    }
}

TEST_F(CudaApi, SelectForward) { select_suite(Dir::Fwd); }
TEST_F(CudaApi, SelectBackwardData) { select_suite(Dir::BwdData); }
TEST_F(CudaApi, SelectBackwardFilter) { select_suite(Dir::BwdFilter); }

// Select FIND in float64 (on CUDA only DIRECT, and what else accepts float64): a valid choice that
// runs correctly, for each pass.
TEST_F(CudaApi, SelectFindFloat64) {
    Case<double> c(cpu_, gpu_, small_3x3(), 31);
    for (const Dir dir : {Dir::Fwd, Dir::BwdData, Dir::BwdFilter}) {
        int algo = -1;
        CC_ASSERT_OK(c.select(dir, CONVCORE_SELECT_FIND, false, &algo));
        size_t bytes = 0;
        ASSERT_EQ(c.workspace(dir, algo, &bytes), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
        c.expect_runs_correctly(dir, algo);
    }
}

// ---- a user stream ----------------------------------------------------------------------------

TEST_F(CudaApi, UserStream) {
    Case<float> c(cpu_, gpu_, small_3x3(), 47);
    void* got = reinterpret_cast<void*>(uintptr_t(1));
    CC_ASSERT_OK(convcoreGetStream(gpu_, &got));
    EXPECT_EQ(got, nullptr) << "a new CUDA handle starts on the default stream";

    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    ASSERT_NE(stream, nullptr);
    CC_ASSERT_OK(convcoreSetStream(gpu_, stream));
    CC_ASSERT_OK(convcoreGetStream(gpu_, &got));
    EXPECT_EQ(got, static_cast<void*>(stream));

    // Every applicable algorithm of every pass on the stream, with alpha/beta blending into an
    // output that holds known values; the stream is synchronized, then the results compared.
    const float alpha = 0.5f, beta = -0.75f;
    for (const Dir dir : {Dir::Fwd, Dir::BwdData, Dir::BwdFilter}) {
        const std::vector<float>& ref = c.ref(dir);
        std::vector<float> prior(ref.size()), want(ref.size());
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> u(-1, 1);
        for (size_t i = 0; i < prior.size(); ++i) {
            prior[i] = u(rng);
            want[i] = alpha * ref[i] + beta * prior[i];
        }
        for (const auto& e : applicable(c, dir)) {
            SCOPED_TRACE(std::string(dir_name(dir)) + " algo " + std::to_string(e.first) + " on a user stream");
            c.out(dir).upload(prior);
            ASSERT_EQ(c.run(dir, e.first, alpha, beta), CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
            ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
            EXPECT_LE(rel(c.out(dir).host(), want), bound(dir, e.first, false));
        }
    }

    // The bias gradient on the stream.
    const int64_t k = c.p.k;
    convcore::TensorDesc bd(CONVCORE_DATA_FLOAT, 1, k, 1, 1);
    std::vector<float> db_ref(size_t(k), 0.25f);
    const float ba = 1.5f, bb = 0.5f;
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(cpu_, &ba, c.d.y, c.dy.data(), &bb, bd, db_ref.data()));
    DeviceVec<float> gdb(gpu_, std::vector<float>(size_t(k), 0.25f));
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(gpu_, &ba, c.d.y, c.gdy.ptr, &bb, bd, gdb.ptr));
    CC_ASSERT_OK(convcoreSynchronize(gpu_));
    EXPECT_LE(rel(gdb.host(), db_ref), 1e-6);

#ifdef CONVCORE_TESTS_ON_EMULATED_CUDA
    // The handle really works on the stream it was given: with a destroyed one (the emulated
    // device checks streams; on a GPU this would be undefined) its calls fail, with the reason.
    {
        cudaStream_t doomed = nullptr;
        ASSERT_EQ(cudaStreamCreate(&doomed), cudaSuccess);
        CC_ASSERT_OK(convcoreSetStream(gpu_, doomed));
        ASSERT_EQ(cudaStreamDestroy(doomed), cudaSuccess);
        EXPECT_EQ(convcoreSynchronize(gpu_), CONVCORE_STATUS_EXECUTION_FAILED);
        EXPECT_STRNE(convcoreGetLastErrorString(), "");
        std::vector<float> host(4, 1.0f);
        EXPECT_EQ(convcoreMemcpyToDevice(gpu_, c.gy.ptr, host.data(), 16), CONVCORE_STATUS_EXECUTION_FAILED);
        const float one = 1, zero = 0;
        EXPECT_EQ(convcoreConvolutionForward(gpu_, &one, c.d.x, c.gx.ptr, c.d.w, c.gw.ptr, c.d.conv,
                                             CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &zero, c.d.y, c.gy.ptr),
                  CONVCORE_STATUS_EXECUTION_FAILED);
        EXPECT_STRNE(convcoreGetLastErrorString(), "");
        CC_ASSERT_OK(convcoreSetStream(gpu_, stream));
        CC_ASSERT_OK(convcoreSynchronize(gpu_));
    }
#endif

    // Back to the default stream: the handle keeps working there, and the user's stream may go.
    CC_ASSERT_OK(convcoreSetStream(gpu_, nullptr));
    CC_ASSERT_OK(convcoreGetStream(gpu_, &got));
    EXPECT_EQ(got, nullptr);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    c.expect_runs_correctly(Dir::Fwd, CONVCORE_FWD_ALGO_IMPLICIT_GEMM);
    c.expect_runs_correctly(Dir::BwdData, CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM);
    c.expect_runs_correctly(Dir::BwdFilter, CONVCORE_BWD_FILTER_ALGO_DIRECT);
    CC_EXPECT_OK(convcoreSynchronize(gpu_));
}

TEST_F(CudaApi, StreamBadArguments) {
    EXPECT_EQ(convcoreSetStream(nullptr, nullptr), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    EXPECT_EQ(convcoreGetStream(gpu_, nullptr), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    void* got = nullptr;
    EXPECT_EQ(convcoreGetStream(nullptr, &got), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    // Streams belong to CUDA handles.
    EXPECT_EQ(convcoreSetStream(cpu_, reinterpret_cast<void*>(uintptr_t(64))), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("CPU handle"), std::string::npos)
        << convcoreGetLastErrorString();
    EXPECT_EQ(convcoreSynchronize(nullptr), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
}

// ---- the bias gradient ----------------------------------------------------------------------------

// db = alpha * sum_{n,p,q} dy + beta * db on CUDA, against the CPU handle and a sum in long double;
// db packed, or strided (cStride 3) with sentinels in the gaps that must stay untouched.
template <typename T>
void bias_case(convcoreHandle_t cpu, convcoreHandle_t gpu, int64_t n, int64_t k, int64_t p, int64_t q, double alpha,
               double beta, int64_t c_stride, uint32_t seed) {
    SCOPED_TRACE("dy " + std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(p) + "x" +
                 std::to_string(q) + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta) +
                 " db cStride " + std::to_string(c_stride) + (sizeof(T) == 8 ? " float64" : " float32"));
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    std::mt19937 rng(seed);
    const auto v = random_vector(size_t(n * k * p * q), rng);
    const std::vector<T> dy(v.begin(), v.end());
    convcore::TensorDesc dyd(dt, n, k, p, q);
    convcore::TensorDesc dbd(dt, 1, k, 1, 1);
    dbd.set_strided(dt, {1, k, 1, 1}, {k * c_stride, c_stride, 1, 1});
    const T sentinel = T(-777.25);
    std::vector<T> db0(size_t((k - 1) * c_stride + 1), sentinel);
    for (int64_t i = 0; i < k; ++i)
        db0[size_t(i * c_stride)] = beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(0.5 + 0.125 * double(i));

    std::vector<T> want(db0.size(), sentinel);
    for (int64_t kk = 0; kk < k; ++kk) {
        long double sum = 0;
        for (int64_t a = 0; a < n; ++a)
            for (int64_t i = 0; i < p * q; ++i) sum += dy[size_t((a * k + kk) * p * q + i)];
        const double prior = beta == 0 ? 0.0 : double(db0[size_t(kk * c_stride)]);
        want[size_t(kk * c_stride)] = T(alpha * double(sum) + beta * prior);
    }
    const T a = T(alpha), b = T(beta);
    std::vector<T> cpu_db = db0;
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(cpu, &a, dyd, dy.data(), &b, dbd, cpu_db.data()));
    DeviceVec<T> gdy(gpu, dy), gdb(gpu, db0);
    CC_ASSERT_OK(convcoreConvolutionBackwardBias(gpu, &a, dyd, gdy.ptr, &b, dbd, gdb.ptr));
    CC_ASSERT_OK(convcoreSynchronize(gpu));
    const std::vector<T> got = gdb.host();
    const double tol = sizeof(T) == 8 ? 1e-13 : 1e-6;
    for (size_t i = 0; i < got.size(); ++i) {
        if (i % size_t(c_stride) != 0) {
            EXPECT_EQ(got[i], sentinel) << "CUDA wrote into the gap at " << i;
            EXPECT_EQ(cpu_db[i], sentinel) << "CPU wrote into the gap at " << i;
        }
    }
    std::vector<T> g, c, w;
    for (int64_t i = 0; i < k; ++i) {
        g.push_back(got[size_t(i * c_stride)]);
        c.push_back(cpu_db[size_t(i * c_stride)]);
        w.push_back(want[size_t(i * c_stride)]);
    }
    EXPECT_LE(rel(g, c), tol) << "CUDA against the CPU";
    EXPECT_LE(rel(g, w), tol) << "CUDA against the sum";
    EXPECT_LE(rel(c, w), tol) << "CPU against the sum";
}

TEST_F(CudaApi, BackwardBiasMatchesCpu) {
    for (const double beta : {0.0, 1.0, -0.75}) {
        for (const double alpha : {1.0, 0.5}) {
            bias_case<float>(cpu_, gpu_, 3, 5, 7, 6, alpha, beta, 1, 1);
            bias_case<double>(cpu_, gpu_, 2, 4, 9, 5, alpha, beta, 1, 2);
            if (HasFatalFailure()) return;
        }
    }
    // Strided db; one output channel; a large plane (many partial sums per channel).
    bias_case<float>(cpu_, gpu_, 2, 6, 5, 5, 0.5, 0.25, 3, 3);
    bias_case<double>(cpu_, gpu_, 1, 3, 4, 4, -1.25, 0.0, 3, 4);
    bias_case<float>(cpu_, gpu_, 2, 1, 3, 3, 1.0, 0.0, 1, 5);
    bias_case<double>(cpu_, gpu_, 1, 2, 61, 67, 1.0, 0.5, 1, 6);
}

// ---- the fused epilogue ---------------------------------------------------------------------------

// act(alpha1 * conv(x, w) + alpha2 * z + bias) on the GPU (the core's epilogue kernel after the
// convolution; no CUDA solver fuses it) against the CPU handle's DIRECT (which fuses it), in
// NCHW and NHWC, z separate or y itself.
template <typename T>
void epilogue_case(convcoreHandle_t cpu, convcoreHandle_t gpu, convcoreConvolutionFwdAlgo_t algo, bool nhwc,
                   bool in_place, bool with_bias, convcoreActivationMode_t act) {
    const convcoreDataType_t dt = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    const convcoreTensorFormat_t fmt = nhwc ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW;
    const int64_t n = 2, c = 3, h = 6, wd = 5, k = 4;
    convcore::TensorDesc xd(fmt, dt, n, c, h, wd), yd(fmt, dt, n, k, h, wd), bd(dt, 1, k, 1, 1);
    convcore::FilterDesc fd(dt, k, c, 3, 3);
    convcore::ConvDesc conv(1);
    std::mt19937 rng(unsigned(int(act) * 8 + nhwc * 4 + in_place * 2 + with_bias));
    const auto xr = random_vector(size_t(n * c * h * wd), rng), wr = random_vector(size_t(k * c * 9), rng);
    const auto zr = random_vector(size_t(n * k * h * wd), rng), br = random_vector(size_t(k), rng);
    const std::vector<T> x(xr.begin(), xr.end()), w(wr.begin(), wr.end()), z(zr.begin(), zr.end());
    std::vector<T> b(br.begin(), br.end());
    for (T& v : b) v *= T(3);
    const T a1 = T(1.5), a2 = T(-0.5);
    std::vector<T> cpu_y = in_place ? z : std::vector<T>(z.size(), std::numeric_limits<T>::quiet_NaN());
    const void* bias_cpu = with_bias ? b.data() : nullptr;
    size_t cpu_bytes = 0;  // NHWC tensors are staged through the workspace
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(cpu, xd, fd, conv, yd, CONVCORE_FWD_ALGO_DIRECT, &cpu_bytes));
    std::vector<double> cpu_ws(cpu_bytes / sizeof(double) + 1);
    CC_ASSERT_OK(convcoreConvolutionBiasActivationForward(cpu, &a1, xd, x.data(), fd, w.data(), conv,
                                                          CONVCORE_FWD_ALGO_DIRECT, cpu_ws.data(), cpu_bytes, &a2, yd,
                                                          in_place ? cpu_y.data() : z.data(), bd, bias_cpu, act,
                                                          yd, cpu_y.data()));
    size_t bytes = 0;
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(gpu, xd, fd, conv, yd, algo, &bytes));
    DeviceVec<T> gx(gpu, x), gw(gpu, w), gz(gpu, z), gb(gpu, b), gy(gpu, z.size());
    DeviceVec<char> ws(gpu, bytes);
    if (in_place)
        gy.upload(z);
    else
        gy.poison();
    CC_ASSERT_OK(convcoreConvolutionBiasActivationForward(gpu, &a1, xd, gx.ptr, fd, gw.ptr, conv, algo,
                                                          bytes ? ws.ptr : nullptr, bytes, &a2, yd,
                                                          in_place ? gy.ptr : gz.ptr, bd,
                                                          with_bias ? gb.ptr : nullptr, act, yd, gy.ptr));
    CC_ASSERT_OK(convcoreSynchronize(gpu));
    const double tol = sizeof(T) == 8 ? 1e-12 : 1e-5;
    EXPECT_LE(rel(gy.host(), cpu_y), tol) << convcoreGetFwdAlgoName(algo) << " act " << int(act)
                                          << (nhwc ? " NHWC" : " NCHW") << (in_place ? " z==y" : " z")
                                          << (with_bias ? " bias" : "");
}

TEST_F(CudaApi, EpilogueMatchesCpu) {
    for (const convcoreActivationMode_t act :
         {CONVCORE_ACTIVATION_IDENTITY, CONVCORE_ACTIVATION_RELU, CONVCORE_ACTIVATION_RELU6, CONVCORE_ACTIVATION_SILU,
          CONVCORE_ACTIVATION_GELU, CONVCORE_ACTIVATION_GELU_TANH})
        for (const bool nhwc : {false, true})
            for (const bool in_place : {false, true}) {
                epilogue_case<float>(cpu_, gpu_, CONVCORE_FWD_ALGO_IM2COL_GEMM, nhwc, in_place, true, act);
                epilogue_case<float>(cpu_, gpu_, CONVCORE_FWD_ALGO_DIRECT, nhwc, in_place, !in_place, act);
                epilogue_case<double>(cpu_, gpu_, CONVCORE_FWD_ALGO_DIRECT, nhwc, in_place, true, act);
                if (HasFatalFailure()) return;
            }
}

// ---- memory copies ----------------------------------------------------------------------------

TEST_F(CudaApi, MemcpyRoundTrip) {
    constexpr size_t kBytes = 4096;
    std::vector<unsigned char> src(kBytes), back(kBytes, 0);
    for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>((i * 131 + 7) & 0xFF);
    void* dev = nullptr;
    CC_ASSERT_OK(convcoreMalloc(gpu_, &dev, kBytes));
    ASSERT_NE(dev, nullptr);
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, dev, src.data(), kBytes));
    CC_ASSERT_OK(convcoreMemcpyToHost(gpu_, back.data(), dev, kBytes));
    EXPECT_EQ(back, src);
    // Part of the allocation, at an offset, from an offset in the host buffer.
    std::vector<unsigned char> patch(100, 0xA5);
    unsigned char* d = static_cast<unsigned char*>(dev);
    CC_ASSERT_OK(convcoreMemcpyToDevice(gpu_, d + 1000, patch.data(), patch.size()));
    std::vector<unsigned char> want = src;
    std::fill(want.begin() + 1000, want.begin() + 1100, 0xA5);
    CC_ASSERT_OK(convcoreMemcpyToHost(gpu_, back.data(), dev, kBytes));
    EXPECT_EQ(back, want);
    std::vector<unsigned char> part(50, 0);
    CC_ASSERT_OK(convcoreMemcpyToHost(gpu_, part.data(), d + 1075, part.size()));
    EXPECT_EQ(part, std::vector<unsigned char>(want.begin() + 1075, want.begin() + 1125));

    // Bad arguments: BAD_PARAM with the reason; nothing is copied.
    const auto bad = [](convcoreStatus_t st, const char* what) {
        EXPECT_EQ(st, CONVCORE_STATUS_BAD_PARAM) << what;
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find(what), std::string::npos)
            << "reason \"" << convcoreGetLastErrorString() << "\" does not name " << what;
    };
    bad(convcoreMemcpyToDevice(nullptr, dev, src.data(), 16), "handle");
    bad(convcoreMemcpyToDevice(gpu_, nullptr, src.data(), 16), "dst");
    bad(convcoreMemcpyToDevice(gpu_, dev, nullptr, 16), "src");
    bad(convcoreMemcpyToHost(nullptr, back.data(), dev, 16), "handle");
    bad(convcoreMemcpyToHost(gpu_, nullptr, dev, 16), "dst");
    bad(convcoreMemcpyToHost(gpu_, back.data(), nullptr, 16), "src");
    CC_ASSERT_OK(convcoreMemcpyToHost(gpu_, back.data(), dev, kBytes));
    EXPECT_EQ(back, want);
    // Zero bytes: nothing to do, even with NULL pointers; the error string is cleared.
    EXPECT_EQ(convcoreMemcpyToDevice(gpu_, nullptr, nullptr, 0), CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(convcoreGetLastErrorString(), "");
    EXPECT_EQ(convcoreMemcpyToHost(gpu_, nullptr, nullptr, 0), CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(convcoreGetLastErrorString(), "");
    CC_EXPECT_OK(convcoreFree(gpu_, dev));
}

// On a CPU handle the copies are host copies (its "device" memory is host memory), with the same
// argument checks. Needs no GPU.
// Through the handle's plan cache (convcoreConvolutionExecute), every algorithm of every pass: after
// one call, 20 more make no plan and allocate no workspace and, on the emulated device, call no
// cudaMalloc, cudaFree, synchronisation, memcpy, cublasCreate or cuFFT planning; each result
// matches the CPU's DIRECT.
TEST_F(CudaApi, CachedCallsAllocateAndSynchronizeNothing) {
    Case<float> c(cpu_, gpu_, small_3x3(), 23);
    int checked = 0;
    for (Dir dir : {Dir::Fwd, Dir::BwdData, Dir::BwdFilter}) {
        const auto pass = convcoreConvolutionPass_t(int(dir));
        for (int algo = 0; algo < algo_count(dir); ++algo) {
            SCOPED_TRACE(std::string(dir_name(dir)) + " algo " + std::to_string(algo));
            convcoreConvolutionArgs_t args{};
            args.in0 = dir == Dir::BwdData ? c.gdy.ptr : c.gx.ptr;
            args.in1 = dir == Dir::BwdFilter ? c.gdy.ptr : c.gw.ptr;
            args.out = c.out(dir).ptr;
            const convcoreStatus_t st = convcoreConvolutionExecute(gpu_, pass, c.d.x, c.d.w, c.d.conv, c.d.y, algo,
                                                                   &args, nullptr);
            if (st == CONVCORE_STATUS_NOT_SUPPORTED) continue;
            ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
            convcorePlanCacheInfo_t before{}, after{};
            CC_ASSERT_OK(convcoreGetPlanCacheInfo(gpu_, &before));
#ifdef CONVCORE_TESTS_ON_EMULATED_CUDA
            const cuda_emulator::CallCounts calls_before = cuda_emulator::call_counts();
#endif
            for (int i = 0; i < 20; ++i)
                CC_ASSERT_OK(convcoreConvolutionExecute(gpu_, pass, c.d.x, c.d.w, c.d.conv, c.d.y, algo, &args, nullptr));
#ifdef CONVCORE_TESTS_ON_EMULATED_CUDA
            const cuda_emulator::CallCounts calls = cuda_emulator::call_counts();
            EXPECT_EQ(calls.mallocs, calls_before.mallocs);
            EXPECT_EQ(calls.frees, calls_before.frees);
            EXPECT_EQ(calls.synchronizes, calls_before.synchronizes);
            EXPECT_EQ(calls.memcpys, calls_before.memcpys);
            EXPECT_EQ(calls.cublas_handles, calls_before.cublas_handles);
            EXPECT_EQ(calls.cufft_plans, calls_before.cufft_plans);
#endif
            CC_ASSERT_OK(convcoreGetPlanCacheInfo(gpu_, &after));
            EXPECT_EQ(after.hits - before.hits, 20);
            EXPECT_EQ(after.misses, before.misses);
            EXPECT_EQ(after.workspaceAllocations, before.workspaceAllocations);
            const std::vector<float> got = c.out(dir).host();
            const std::vector<double> got64(got.begin(), got.end()), ref64(c.ref(dir).begin(), c.ref(dir).end());
            EXPECT_LE(relative_error(got64, ref64), declared_bound(pass, algo, false));
            ++checked;
        }
    }
    EXPECT_GE(checked, 10);
}

TEST(CpuApi, MemcpyOnCpuHandle) {
    convcore::Handle cpu;
    std::vector<int> src{1, 2, 3, 4, 5, 6, 7, 8}, mid(8, 0), back(8, 0);
    void* mem = nullptr;
    CC_ASSERT_OK(convcoreMalloc(cpu, &mem, sizeof(int) * 8));
    CC_ASSERT_OK(convcoreMemcpyToDevice(cpu, mem, src.data(), sizeof(int) * 8));
    std::memcpy(mid.data(), mem, sizeof(int) * 8);
    EXPECT_EQ(mid, src);
    CC_ASSERT_OK(convcoreMemcpyToHost(cpu, back.data(), mem, sizeof(int) * 8));
    EXPECT_EQ(back, src);
    EXPECT_EQ(convcoreMemcpyToDevice(cpu, nullptr, src.data(), 4), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    EXPECT_EQ(convcoreMemcpyToHost(cpu, back.data(), nullptr, 4), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STRNE(convcoreGetLastErrorString(), "");
    EXPECT_EQ(convcoreMemcpyToHost(cpu, nullptr, nullptr, 0), CONVCORE_STATUS_SUCCESS);
    CC_EXPECT_OK(convcoreFree(cpu, mem));
}

}  // namespace
