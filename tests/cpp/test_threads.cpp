// Thread safety of the C API (docs/thread_safety.md): one handle per thread, many threads at
// once, each running different problems with every applicable algorithm (so the shared state
// behind the solvers, such as the FFT plan cache, is hit concurrently); descriptors shared
// read-only by all threads; the per-thread error string.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

using namespace convcore_test;

namespace {

constexpr int kThreads = 8;

// Problems of different shapes, one per thread (3x3 stride 1 ones let Winograd, the FFTs and
// CYCLIC_MINIMAL run too).
Shape problem_for(int t) {
    const Shape shapes[kThreads] = {
        {1, 4, 12, 12, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},
        {2, 3, 9, 11, 5, 3, 3, 0, 0, 1, 1, 1, 1, 1, false},
        {1, 6, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},
        {1, 8, 7, 7, 4, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},
        {2, 2, 15, 13, 3, 5, 5, 2, 2, 2, 2, 1, 1, 1, true},
        {1, 4, 16, 16, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, false},
        {1, 3, 20, 18, 2, 7, 7, 3, 3, 2, 2, 1, 1, 1, false},
        {1, 5, 13, 9, 7, 3, 3, 2, 2, 1, 1, 2, 2, 1, false},
    };
    return shapes[t];
}

struct Problem {
    Shape s;
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    explicit Problem(const Shape& sh)
        : s(sh),
          x(CONVCORE_DATA_FLOAT, sh.n, sh.c, sh.h, sh.w),
          y(CONVCORE_DATA_FLOAT, sh.n, sh.k, sh.out_h(), sh.out_w()),
          w(CONVCORE_DATA_FLOAT, sh.k, sh.c / sh.groups, sh.r, sh.s),
          conv(0, 1, 1, sh.groups, sh.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION) {
        conv.set(sh.pad_h, sh.pad_w, sh.stride_h, sh.stride_w, sh.dil_h, sh.dil_w,
                 sh.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
    }
};

// Runs `algo` on fresh data and returns the relative error against the float64 reference,
// or -1 when the algorithm does not apply.
double run_once(convcoreHandle_t h, const Problem& pr, convcoreConvolutionFwdAlgo_t algo,
                std::mt19937& rng, std::string* error) {
    const Shape& s = pr.s;
    const auto xs = random_vector(size_t(s.n * s.c * s.h * s.w), rng);
    const auto wsv = random_vector(size_t(s.k * (s.c / s.groups) * s.r * s.s), rng);
    std::vector<float> xf(xs.begin(), xs.end()), wf(wsv.begin(), wsv.end());
    std::vector<float> y(size_t(s.n * s.k * s.out_h() * s.out_w()), std::nanf(""));
    size_t bytes = 0;
    convcoreStatus_t st =
        convcoreGetConvolutionForwardWorkspaceSize(h, pr.x, pr.w, pr.conv, pr.y, algo, &bytes);
    if (st == CONVCORE_STATUS_NOT_SUPPORTED) return -1;
    if (st != CONVCORE_STATUS_SUCCESS) {
        *error = convcoreGetLastErrorString();
        return 1e9;
    }
    std::vector<double> ws(bytes / sizeof(double) + 1);
    const float one = 1, zero = 0;
    st = convcoreConvolutionForward(h, &one, pr.x, xf.data(), pr.w, wf.data(), pr.conv, algo,
                                    ws.data(), bytes, &zero, pr.y, y.data());
    if (st != CONVCORE_STATUS_SUCCESS) {
        *error = convcoreGetLastErrorString();
        return 1e9;
    }
    std::vector<double> xd(xf.begin(), xf.end()), wd(wf.begin(), wf.end());
    return relative_error(std::vector<double>(y.begin(), y.end()), reference_conv(s, xd, wd));
}

// One handle per thread; 8 threads with different problems, every algorithm, a few rounds.
TEST(Threads, OneHandlePerThreadEveryAlgorithm) {
    std::atomic<int> failures{0}, runs{0};
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            convcore::Handle h;
            convcoreSetNumThreads(h, 1 + t % 2);  // each handle its own OpenMP team size
            const Problem pr(problem_for(t));
            std::mt19937 rng(1000 + t);
            for (int round = 0; round < 3; ++round)
                for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
                    const auto algo = convcoreConvolutionFwdAlgo_t((a + t) % CONVCORE_FWD_ALGO_COUNT);
                    std::string err;
                    const double e = run_once(h, pr, algo, rng, &err);
                    if (e < 0) continue;
                    ++runs;
                    if (!(e < 2e-3)) {  // float32: every algorithm's bound is far below this
                        ++failures;
                        errors[t] += std::string(convcoreGetFwdAlgoName(algo)) + ": error " +
                                     std::to_string(e) + " " + err + "; ";
                    }
                }
        });
    }
    for (auto& th : pool) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GE(runs.load(), kThreads * 3 * 3);  // at least DIRECT and the two GEMMs everywhere
}

// Descriptors are plain data: one set, read by every thread at once (each with its handle).
TEST(Threads, SharedDescriptorsReadOnly) {
    const Problem pr(problem_for(0));
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            convcore::Handle h;
            std::mt19937 rng(77 + t);
            const convcoreConvolutionFwdAlgo_t algos[] = {CONVCORE_FWD_ALGO_DIRECT,
                                                          CONVCORE_FWD_ALGO_IM2COL_GEMM,
                                                          CONVCORE_FWD_ALGO_IMPLICIT_GEMM};
            for (int i = 0; i < 6; ++i) {
                std::string err;
                const double e = run_once(h, pr, algos[(i + t) % 3], rng, &err);
                if (!(e >= 0 && e < 1e-5)) errors[t] += std::to_string(e) + " " + err + "; ";
            }
        });
    }
    for (auto& th : pool) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
}

// convcoreGetLastErrorString is per thread: a failure on one thread does not show on another.
TEST(Threads, LastErrorStringIsPerThread) {
    std::atomic<int> step{0};
    std::string seen_by_ok;
    std::thread failing([&] {
        convcoreTensorDescriptor_t d = nullptr;
        convcoreCreateTensorDescriptor(&d);
        EXPECT_EQ(convcoreSetTensor4dDescriptor(d, CONVCORE_DATA_FLOAT, -1, 1, 1, 1),
                  CONVCORE_STATUS_BAD_PARAM);
        step = 1;
        while (step != 2) std::this_thread::yield();
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find("n=-1"), std::string::npos);
        convcoreDestroyTensorDescriptor(d);
    });
    std::thread ok([&] {
        while (step != 1) std::this_thread::yield();
        int count = 0;
        EXPECT_EQ(convcoreGetCudaDeviceCount(&count), CONVCORE_STATUS_SUCCESS);
        seen_by_ok = convcoreGetLastErrorString();
        step = 2;
    });
    failing.join();
    ok.join();
    EXPECT_EQ(seen_by_ok, "");
}

}  // namespace
