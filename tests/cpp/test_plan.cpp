// Convolution plans (convcore.h "plans") on the CPU: every pass and every applicable algorithm
// through a plan, against the float64 reference and bit for bit against the descriptor-style
// call; strided tensors; repeated runs; descriptors copied at creation; the
// CONVCORE_PLAN_SELECT_* values; workspace, argument and NOT_SUPPORTED errors; one plan run
// from several threads. The handle's plan cache (convcoreConvolutionExecute): every algorithm
// and pass, in both layouts, allocates nothing after its first call; kept filters follow their
// pointer and version; the cache's bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <new>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "reference.hpp"

using namespace convcore_test;

// Every operator new of the process (libconvcore's included) is counted, so that a test can see
// that a cached call makes none. Not under the sanitizers, which replace operator new themselves.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CONVCORE_TEST_COUNTS_NEW 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CONVCORE_TEST_COUNTS_NEW 0
#endif
#endif
#ifndef CONVCORE_TEST_COUNTS_NEW
#define CONVCORE_TEST_COUNTS_NEW 1
#endif
#if CONVCORE_TEST_COUNTS_NEW
static std::atomic<int64_t> g_news{0};
void* operator new(size_t bytes) {
    g_news.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(bytes ? bytes : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#endif

namespace {

#define CC_ASSERT_OK(call) \
    ASSERT_EQ((call), CONVCORE_STATUS_SUCCESS) << #call << ": " << convcoreGetLastErrorString()

// A float32 problem; x and y are strided (a gap after each row) when `strided`.
struct Problem {
    Shape shape;
    bool strided = false;
    convcoreHandle_t handle = nullptr;
    convcoreTensorDescriptor_t x = nullptr, y = nullptr;
    convcoreFilterDescriptor_t w = nullptr;
    convcoreConvolutionDescriptor_t conv = nullptr;
    int64_t x_row = 0, y_row = 0;  // row strides (elements)

    Problem(const Shape& s, bool strided_tensors) : shape(s), strided(strided_tensors) {
        EXPECT_EQ(convcoreCreate(&handle), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateTensorDescriptor(&x), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateTensorDescriptor(&y), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateFilterDescriptor(&w), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreCreateConvolutionDescriptor(&conv), CONVCORE_STATUS_SUCCESS);
        const int64_t P = s.out_h(), Q = s.out_w();
        x_row = s.w + (strided ? 3 : 0);
        y_row = Q + (strided ? 2 : 0);
        EXPECT_EQ(convcoreSetTensor4dDescriptorEx(x, CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w, s.c * s.h * x_row,
                                                  s.h * x_row, x_row, 1),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetTensor4dDescriptorEx(y, CONVCORE_DATA_FLOAT, s.n, s.k, P, Q, s.k * P * y_row, P * y_row,
                                                  y_row, 1),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetFilter4dDescriptor(w, CONVCORE_DATA_FLOAT, s.k, s.c / s.groups, s.r, s.s),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.dil_h,
                                                     s.dil_w, s.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(convcoreSetConvolutionGroupCount(conv, s.groups), CONVCORE_STATUS_SUCCESS);
    }
    ~Problem() {
        convcoreDestroyTensorDescriptor(x);
        convcoreDestroyTensorDescriptor(y);
        convcoreDestroyFilterDescriptor(w);
        convcoreDestroyConvolutionDescriptor(conv);
        convcoreDestroy(handle);
    }
    Problem(const Problem&) = delete;
    Problem& operator=(const Problem&) = delete;

    size_t x_size() const { return size_t(shape.n * shape.c * shape.h * x_row); }
    size_t y_size() const { return size_t(shape.n * shape.k * shape.out_h() * y_row); }
    size_t w_size() const { return size_t(shape.k * (shape.c / shape.groups) * shape.r * shape.s); }
    // Packed (reference) index -> the strided buffer's index.
    size_t x_at(size_t i) const { return i / size_t(shape.w) * size_t(x_row) + i % size_t(shape.w); }
    size_t y_at(size_t i) const { return i / size_t(shape.out_w()) * size_t(y_row) + i % size_t(shape.out_w()); }
};

// Packed float64 values into a strided float32 buffer (gaps NaN), and back.
std::vector<float> spread(const std::vector<double>& packed, size_t size, size_t (Problem::*at)(size_t) const,
                          const Problem& p) {
    std::vector<float> out(size, std::nanf(""));
    for (size_t i = 0; i < packed.size(); ++i) out[(p.*at)(i)] = float(packed[i]);
    return out;
}
std::vector<double> gather(const std::vector<float>& strided, size_t count, size_t (Problem::*at)(size_t) const,
                           const Problem& p) {
    std::vector<double> out(count);
    for (size_t i = 0; i < count; ++i) out[i] = strided[(p.*at)(i)];
    return out;
}

int algo_count(convcoreConvolutionPass_t pass) {
    if (pass == CONVCORE_PASS_FORWARD) return CONVCORE_FWD_ALGO_COUNT;
    if (pass == CONVCORE_PASS_BACKWARD_DATA) return CONVCORE_BWD_DATA_ALGO_COUNT;
    return CONVCORE_BWD_FILTER_ALGO_COUNT;
}

// The pass's descriptor-style call, for comparison.
convcoreStatus_t descriptor_call(const Problem& p, convcoreConvolutionPass_t pass, int algo, const float* x,
                                 const float* w, const float* y, float* out, void* ws, size_t ws_bytes) {
    const float one = 1.0f, zero = 0.0f;
    if (pass == CONVCORE_PASS_FORWARD)
        return convcoreConvolutionForward(p.handle, &one, p.x, x, p.w, w, p.conv, convcoreConvolutionFwdAlgo_t(algo),
                                          ws, ws_bytes, &zero, p.y, out);
    if (pass == CONVCORE_PASS_BACKWARD_DATA)
        return convcoreConvolutionBackwardData(p.handle, &one, p.w, w, p.y, y, p.conv,
                                               convcoreConvolutionBwdDataAlgo_t(algo), ws, ws_bytes, &zero, p.x, out);
    return convcoreConvolutionBackwardFilter(p.handle, &one, p.x, x, p.y, y, p.conv,
                                             convcoreConvolutionBwdFilterAlgo_t(algo), ws, ws_bytes, &zero, p.w, out);
}

class PlanPasses : public ::testing::TestWithParam<convcoreConvolutionPass_t> {};

// Every applicable algorithm of the pass: the plan's result matches the float64 reference and,
// bit for bit, the descriptor-style call; a second run gives the same bits.
TEST_P(PlanPasses, EveryAlgorithmMatchesTheReferenceAndTheDescriptorCall) {
    const convcoreConvolutionPass_t pass = GetParam();
    std::mt19937 rng(31 + int(pass));
    const Shape shapes[] = {
        {2, 6, 11, 10, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // 3x3 stride 1: every family applies
        {1, 4, 13, 9, 6, 3, 2, 0, 1, 2, 1, 1, 2, 2, true},    // stride, dilation, groups, convolution
    };
    for (const Shape& s : shapes) {
        for (bool strided : {false, true}) {
            SCOPED_TRACE("shape " + std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                         (strided ? " strided" : " packed"));
            Problem p(s, strided);
            const size_t x_count = size_t(s.n * s.c * s.h * s.w), y_count = size_t(s.n * s.k * s.out_h() * s.out_w());
            const auto x64 = random_vector(x_count, rng), w64 = random_vector(p.w_size(), rng),
                       y64 = random_vector(y_count, rng);
            // float-rounded inputs for the reference
            std::vector<double> xr(x64.size()), wr(w64.size()), yr(y64.size());
            for (size_t i = 0; i < xr.size(); ++i) xr[i] = float(x64[i]);
            for (size_t i = 0; i < wr.size(); ++i) wr[i] = float(w64[i]);
            for (size_t i = 0; i < yr.size(); ++i) yr[i] = float(y64[i]);
            const std::vector<float> x = spread(xr, p.x_size(), &Problem::x_at, p);
            const std::vector<float> y = spread(yr, p.y_size(), &Problem::y_at, p);
            const std::vector<float> w(wr.begin(), wr.end());
            std::vector<double> expected;
            size_t out_size = 0;
            if (pass == CONVCORE_PASS_FORWARD) {
                expected = reference_conv(s, xr, wr);
                out_size = p.y_size();
            } else if (pass == CONVCORE_PASS_BACKWARD_DATA) {
                expected = reference_bwd_data(s, wr, yr);
                out_size = p.x_size();
            } else {
                expected = reference_bwd_filter(s, xr, yr);
                out_size = p.w_size();
            }
            int ran = 0;
            for (int algo = 0; algo < algo_count(pass); ++algo) {
                convcoreConvolutionPlan_t plan = reinterpret_cast<convcoreConvolutionPlan_t>(1);
                const convcoreStatus_t st = convcoreCreateConvolutionPlan(p.handle, pass, p.x, p.w, p.conv, p.y, algo, &plan);
                if (st == CONVCORE_STATUS_NOT_SUPPORTED) {
                    EXPECT_EQ(plan, nullptr);
                    EXPECT_STRNE(convcoreGetLastErrorString(), "");
                    continue;
                }
                CC_ASSERT_OK(st);
                int got = -1;
                size_t ws_bytes = 1;
                CC_ASSERT_OK(convcoreGetConvolutionPlanAlgorithm(plan, &got));
                EXPECT_EQ(got, algo);
                CC_ASSERT_OK(convcoreGetConvolutionPlanWorkspaceSize(plan, &ws_bytes));
                std::vector<double> ws(ws_bytes / sizeof(double) + 1);
                const float one = 1.0f, zero = 0.0f;
                const float* in0 = pass == CONVCORE_PASS_BACKWARD_DATA ? y.data() : x.data();
                const float* in1 = pass == CONVCORE_PASS_BACKWARD_FILTER ? y.data() : w.data();
                std::vector<float> first(out_size, std::nanf("")), second = first, direct = first;
                CC_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &one, in0, in1, &zero, first.data(), ws.data(), ws_bytes));
                CC_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &one, in0, in1, &zero, second.data(), ws.data(), ws_bytes));
                CC_ASSERT_OK(descriptor_call(p, pass, algo, x.data(), w.data(), y.data(), direct.data(), ws.data(), ws_bytes));
                CC_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
                std::vector<double> result;
                if (pass == CONVCORE_PASS_FORWARD)
                    result = gather(first, expected.size(), &Problem::y_at, p);
                else if (pass == CONVCORE_PASS_BACKWARD_DATA)
                    result = gather(first, expected.size(), &Problem::x_at, p);
                else
                    result = std::vector<double>(first.begin(), first.end());
                EXPECT_LE(relative_error(result, expected), declared_bound(pass, algo, false)) << "algo " << algo;
                for (size_t i = 0; i < out_size; ++i) {
                    if (std::isnan(first[i]) && std::isnan(direct[i])) continue;  // a gap of a strided output
                    ASSERT_EQ(first[i], second[i]) << "algo " << algo << ": a second run differs at " << i;
                    ASSERT_EQ(first[i], direct[i]) << "algo " << algo << ": the descriptor call differs at " << i;
                }
                ++ran;
            }
            EXPECT_GE(ran, 3) << "the classic algorithms apply to every problem";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Plan, PlanPasses,
                         ::testing::Values(CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA,
                                           CONVCORE_PASS_BACKWARD_FILTER),
                         [](const auto& info) { return std::string(convcore_test::pass_test_name(info.param)); });

const Shape kSmall{1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};

TEST(Plan, DescriptorsAreCopiedAtCreation) {
    Problem p(kSmall, false);
    std::mt19937 rng(5);
    const auto x64 = random_vector(p.x_size(), rng), w64 = random_vector(p.w_size(), rng);
    const std::vector<float> x(x64.begin(), x64.end()), w(w64.begin(), w64.end());
    convcoreConvolutionPlan_t plan = nullptr;
    CC_ASSERT_OK(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y,
                                               CONVCORE_FWD_ALGO_DIRECT, &plan));
    const float one = 1.0f, zero = 0.0f;
    std::vector<float> before(p.y_size()), after(p.y_size());
    CC_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, before.data(), nullptr, 0));
    // Another padding and stride on the descriptor: the plan keeps the problem it was made for.
    CC_ASSERT_OK(convcoreSetConvolution2dDescriptor(p.conv, 0, 0, 2, 2, 1, 1, CONVCORE_CROSS_CORRELATION));
    CC_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, after.data(), nullptr, 0));
    EXPECT_EQ(before, after);
    std::vector<double> xr(x.begin(), x.end()), wr(w.begin(), w.end());
    EXPECT_LT(relative_error(std::vector<double>(before.begin(), before.end()), reference_conv(kSmall, xr, wr)), 1e-6);
    CC_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
}

TEST(Plan, SelectValuesChooseAsSelectDoes) {
    setenv("CONVCORE_FIND_DB", "off", 1);
    Problem p(kSmall, false);
    const struct {
        int select;
        convcoreSelectMode_t mode;
    } modes[] = {{CONVCORE_PLAN_SELECT_HEURISTIC, CONVCORE_SELECT_HEURISTIC},
                 {CONVCORE_PLAN_SELECT_MEASURED, CONVCORE_SELECT_MEASURED},
                 {CONVCORE_PLAN_SELECT_FIND, CONVCORE_SELECT_FIND}};
    for (const auto& m : modes) {
        for (convcoreConvolutionPass_t pass :
             {CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA, CONVCORE_PASS_BACKWARD_FILTER}) {
            convcoreConvolutionPlan_t plan = nullptr;
            CC_ASSERT_OK(convcoreCreateConvolutionPlan(p.handle, pass, p.x, p.w, p.conv, p.y, m.select, &plan));
            int chosen = -1;
            CC_ASSERT_OK(convcoreGetConvolutionPlanAlgorithm(plan, &chosen));
            CC_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
            int selected = -2;  // Select's decision for the same problem (cached in the process)
            if (pass == CONVCORE_PASS_FORWARD) {
                convcoreConvolutionFwdAlgo_t a{};
                CC_ASSERT_OK(convcoreSelectConvolutionForwardAlgorithm(p.handle, p.x, nullptr, p.w, nullptr, p.conv, p.y,
                                                                       nullptr, m.mode, &a));
                selected = a;
            } else if (pass == CONVCORE_PASS_BACKWARD_DATA) {
                convcoreConvolutionBwdDataAlgo_t a{};
                CC_ASSERT_OK(convcoreSelectConvolutionBackwardDataAlgorithm(p.handle, p.w, nullptr, p.y, nullptr,
                                                                            p.conv, p.x, nullptr, m.mode, &a));
                selected = a;
            } else {
                convcoreConvolutionBwdFilterAlgo_t a{};
                CC_ASSERT_OK(convcoreSelectConvolutionBackwardFilterAlgorithm(p.handle, p.x, nullptr, p.y, nullptr,
                                                                              p.conv, p.w, nullptr, m.mode, &a));
                selected = a;
            }
            EXPECT_EQ(chosen, selected) << "pass " << pass << ", select " << m.select;
        }
    }
    unsetenv("CONVCORE_FIND_DB");
}

TEST(Plan, WorkspaceIsTheDescriptorQueryAndIsChecked) {
    Problem p(kSmall, true);  // strided: staging adds to the solver's own workspace
    convcoreConvolutionPlan_t plan = nullptr;
    CC_ASSERT_OK(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y,
                                               CONVCORE_FWD_ALGO_IM2COL_GEMM, &plan));
    size_t plan_bytes = 0, query_bytes = 0;
    CC_ASSERT_OK(convcoreGetConvolutionPlanWorkspaceSize(plan, &plan_bytes));
    CC_ASSERT_OK(convcoreGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y,
                                                            CONVCORE_FWD_ALGO_IM2COL_GEMM, &query_bytes));
    EXPECT_EQ(plan_bytes, query_bytes);
    ASSERT_GT(plan_bytes, 0u);
    std::vector<float> x(p.x_size(), 1.0f), w(p.w_size(), 1.0f), y(p.y_size());
    std::vector<double> ws(plan_bytes / sizeof(double) + 1);
    const float one = 1.0f, zero = 0.0f;
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, y.data(), ws.data(), plan_bytes - 1),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("convcoreGetConvolutionForwardWorkspaceSize"),
              std::string::npos)
        << convcoreGetLastErrorString();
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, y.data(), nullptr, plan_bytes),
              CONVCORE_STATUS_BAD_PARAM);
    CC_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, y.data(), ws.data(), plan_bytes));
    CC_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
}

TEST(Plan, BadArgumentsAreNamed) {
    Problem p(kSmall, false);
    convcoreConvolutionPlan_t plan = reinterpret_cast<convcoreConvolutionPlan_t>(1);
    EXPECT_EQ(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y, 0, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "plan is NULL");
    EXPECT_EQ(convcoreCreateConvolutionPlan(p.handle, convcoreConvolutionPass_t(3), p.x, p.w, p.conv, p.y, 0, &plan),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(plan, nullptr);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("pass 3"), std::string::npos);
    EXPECT_EQ(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y, -4, &plan),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_BACKWARD_DATA, p.x, p.w, p.conv, p.y,
                                            CONVCORE_BWD_DATA_ALGO_COUNT, &plan),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("convcoreConvolutionBwdDataAlgo_t"), std::string::npos)
        << convcoreGetLastErrorString();
    EXPECT_EQ(convcoreCreateConvolutionPlan(nullptr, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y, 0, &plan),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "handle is NULL");
    // A 5x5 filter: Winograd F(2x2, 3x3) cannot run it, and says why.
    Shape five = kSmall;
    five.r = five.s = 5;
    five.pad_h = five.pad_w = 2;
    Problem q(five, false);
    EXPECT_EQ(convcoreCreateConvolutionPlan(q.handle, CONVCORE_PASS_FORWARD, q.x, q.w, q.conv, q.y,
                                            CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, &plan),
              CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(plan, nullptr);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("WINOGRAD"), std::string::npos);

    CC_ASSERT_OK(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_BACKWARD_DATA, p.x, p.w, p.conv, p.y,
                                               CONVCORE_BWD_DATA_ALGO_DIRECT, &plan));
    std::vector<float> x(p.x_size()), w(p.w_size()), y(p.y_size());
    const float one = 1.0f, zero = 0.0f;
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, &one, nullptr, w.data(), &zero, x.data(), nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "dy is NULL");
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, &one, y.data(), w.data(), &zero, nullptr, nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "dx is NULL");
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, nullptr, y.data(), w.data(), &zero, x.data(), nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "alpha is NULL");
    EXPECT_EQ(convcoreExecuteConvolutionPlan(plan, &one, y.data(), w.data(), &zero, y.data(), nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("dx overlaps dy"), std::string::npos)
        << convcoreGetLastErrorString();
    CC_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
    EXPECT_EQ(convcoreExecuteConvolutionPlan(nullptr, &one, y.data(), w.data(), &zero, x.data(), nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    int algo = 0;
    size_t bytes = 0;
    EXPECT_EQ(convcoreGetConvolutionPlanAlgorithm(nullptr, &algo), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreGetConvolutionPlanWorkspaceSize(nullptr, &bytes), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreDestroyConvolutionPlan(nullptr), CONVCORE_STATUS_SUCCESS);
}

// One plan, several threads, each with its own output: the results are the single-thread ones.
TEST(Plan, OnePlanRunsFromSeveralThreads) {
    Problem p(Shape{2, 8, 14, 14, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, false);
    std::mt19937 rng(9);
    const auto x64 = random_vector(p.x_size(), rng), w64 = random_vector(p.w_size(), rng);
    const std::vector<float> x(x64.begin(), x64.end()), w(w64.begin(), w64.end());
    convcoreConvolutionPlan_t plan = nullptr;
    CC_ASSERT_OK(convcoreCreateConvolutionPlan(p.handle, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y,
                                               CONVCORE_FWD_ALGO_IM2COL_GEMM, &plan));
    size_t ws_bytes = 0;
    CC_ASSERT_OK(convcoreGetConvolutionPlanWorkspaceSize(plan, &ws_bytes));
    const float one = 1.0f, zero = 0.0f;
    std::vector<double> ws0(ws_bytes / sizeof(double) + 1);
    std::vector<float> expected(p.y_size());
    CC_ASSERT_OK(convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, expected.data(), ws0.data(), ws_bytes));
    constexpr int kThreads = 4;
    std::vector<std::vector<float>> outs(kThreads, std::vector<float>(p.y_size()));
    std::vector<convcoreStatus_t> status(kThreads, CONVCORE_STATUS_SUCCESS);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            std::vector<double> ws(ws_bytes / sizeof(double) + 1);
            for (int rep = 0; rep < 3 && status[t] == CONVCORE_STATUS_SUCCESS; ++rep)
                status[t] = convcoreExecuteConvolutionPlan(plan, &one, x.data(), w.data(), &zero, outs[t].data(),
                                                           ws.data(), ws_bytes);
        });
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(status[t], CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(outs[t], expected) << "thread " << t;
    }
    CC_ASSERT_OK(convcoreDestroyConvolutionPlan(plan));
}

// Filters prepared once (Winograd's U, IM2WIN's packed filter, the GEMMs' packed panels, ...):
// the same bits as transforming them in the call. Returns false when the algorithm does not run
// the shape or has nothing to prepare for it.
template <typename T>
bool check_prepared(convcoreConvolutionFwdAlgo_t algo, const Shape& s, uint32_t seed) {
    const convcoreDataType_t t = sizeof(T) == 8 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
    convcore::Handle h;
    convcore::TensorDesc x(t, s.n, s.c, s.h, s.w), y(t, s.n, s.k, s.out_h(), s.out_w());
    convcore::FilterDesc w(t, s.k, s.c / s.groups, s.r, s.s);
    convcore::ConvDesc conv(s.pad_h, 1, 1, s.groups);
    convcoreConvolutionPlan_t probe = nullptr;
    if (convcoreCreateConvolutionPlan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, algo, &probe) != CONVCORE_STATUS_SUCCESS)
        return false;
    convcoreDestroyConvolutionPlan(probe);
    convcore::Plan plan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, algo);
    std::mt19937 rng(seed);
    const auto x64 = random_vector(size_t(s.n * s.c * s.h * s.w), rng);
    const auto w64 = random_vector(size_t(s.k * (s.c / s.groups) * s.r * s.s), rng);
    const std::vector<T> xv(x64.begin(), x64.end());
    std::vector<T> wv(w64.begin(), w64.end());
    std::vector<double> ws(plan.workspace_size() / sizeof(double) + 1);
    const T one = 1, zero = 0;
    const size_t y_count = size_t(s.n * s.k * s.out_h() * s.out_w());
    auto run = [&](const std::vector<T>& filters) {
        std::vector<T> out(y_count);
        plan.execute(&one, xv.data(), filters.data(), &zero, out.data(), ws.data(), ws.size() * sizeof(double));
        return out;
    };
    const std::vector<T> unprepared = run(wv);
    size_t bytes = 0;
    EXPECT_EQ(convcorePrepareConvolutionPlanFilters(plan, wv.data(), &bytes), CONVCORE_STATUS_SUCCESS);
    if (bytes == 0) return false;
    EXPECT_EQ(run(wv), unprepared) << "prepared filters must give the bits of the per-call transform";
    // New weights in the same buffer: without the "filters changed" call the plan still runs
    // the prepared ones (w is not read again); with it, the new ones.
    for (T& v : wv) v = -v;
    EXPECT_EQ(run(wv), unprepared) << "the prepared filters were not used";
    EXPECT_EQ(convcorePrepareConvolutionPlanFilters(plan, wv.data(), &bytes), CONVCORE_STATUS_SUCCESS);
    std::vector<T> negated = run(wv);
    for (T& v : negated) v = -v;
    EXPECT_EQ(negated, unprepared);
    // Other weights at another address are transformed in the call, not taken from the plan.
    std::vector<T> other(wv.size());
    for (size_t i = 0; i < other.size(); ++i) other[i] = -wv[i];
    EXPECT_EQ(run(other), unprepared);
    return true;
}

// Every forward algorithm, on shapes of the layers each is made for: whatever a plan prepares
// is checked, so an algorithm that starts preparing filters is covered without a list here.
// Winograd holds the whole U privately (small) or in shared blocks (blocks).
TEST(Plan, PreparedFiltersMatchTheCall) {
    const Shape shapes[] = {
        {1, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},      // small 3x3
        {2, 64, 30, 30, 48, 3, 3, 1, 1, 1, 1, 1, 1, 2, false},    // larger, grouped
        {2, 24, 7, 9, 40, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},      // 1x1
        {1, 16, 11, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, false},    // depthwise
    };
    int prepared = 0;
    for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        const auto algo = convcoreConvolutionFwdAlgo_t(a);
        SCOPED_TRACE(convcoreGetFwdAlgoName(algo));
        uint32_t seed = 1;
        for (const Shape& s : shapes) {
            SCOPED_TRACE(s.c);
            prepared += check_prepared<float>(algo, s, seed++);
            prepared += check_prepared<double>(algo, s, seed++);
        }
    }
    // Winograd (both), IM2WIN, IM2COL_GEMM, IMPLICIT_GEMM, POINTWISE and DEPTHWISE prepare on
    // these shapes today; fewer means a solver stopped preparing (or this test stopped looking).
    EXPECT_GE(prepared, 7 * 2);
}

TEST(Plan, NothingToPrepareSucceedsWithZeroBytes) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 4, 6, 6), y(CONVCORE_DATA_FLOAT, 1, 4, 6, 6);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 4, 4, 3, 3);
    convcore::ConvDesc conv(1);
    std::vector<float> wv(144, 1.0f);
    size_t bytes = 7;
    convcore::Plan direct(h, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_FWD_ALGO_DIRECT);
    CC_ASSERT_OK(convcorePrepareConvolutionPlanFilters(direct, wv.data(), &bytes));
    EXPECT_EQ(bytes, 0u);
    convcore::Plan backward(h, CONVCORE_PASS_BACKWARD_DATA, x, w, conv, y, CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3);
    bytes = 7;
    CC_ASSERT_OK(convcorePrepareConvolutionPlanFilters(backward, wv.data(), &bytes));
    EXPECT_EQ(bytes, 0u);
    EXPECT_EQ(convcorePrepareConvolutionPlanFilters(direct, nullptr, &bytes), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "w is NULL");
    EXPECT_EQ(convcorePrepareConvolutionPlanFilters(nullptr, wv.data(), &bytes), CONVCORE_STATUS_BAD_PARAM);
    // 512 -> 512 channels at 7x7: Winograd makes U a slice at a time (filter-blocked), in the cache.
    convcore::TensorDesc bx(CONVCORE_DATA_FLOAT, 1, 512, 7, 7), by(CONVCORE_DATA_FLOAT, 1, 512, 7, 7);
    convcore::FilterDesc bw(CONVCORE_DATA_FLOAT, 512, 512, 3, 3);
    convcore::Plan blocked(h, CONVCORE_PASS_FORWARD, bx, bw, conv, by, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    std::vector<float> big(size_t(512) * 512 * 9, 1.0f);
    bytes = 7;
    CC_ASSERT_OK(convcorePrepareConvolutionPlanFilters(blocked, big.data(), &bytes));
    EXPECT_EQ(bytes, 0u);
}

TEST(Plan, CppWrapperOwnsThePlan) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_DOUBLE, 1, 2, 6, 6), y(CONVCORE_DATA_DOUBLE, 1, 3, 6, 6);
    convcore::FilterDesc w(CONVCORE_DATA_DOUBLE, 3, 2, 3, 3);
    convcore::ConvDesc conv(1);
    convcore::Plan plan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_FWD_ALGO_IM2COL_GEMM);
    EXPECT_EQ(plan.algorithm(), CONVCORE_FWD_ALGO_IM2COL_GEMM);
    convcore::Plan moved = std::move(plan);
    EXPECT_EQ(static_cast<convcoreConvolutionPlan_t>(plan), nullptr);
    std::mt19937 rng(3);
    const std::vector<double> xv = random_vector(72, rng), wv = random_vector(54, rng);
    std::vector<double> yv(108), ws(moved.workspace_size() / sizeof(double) + 1);
    const double one = 1.0, zero = 0.0;
    moved.execute(&one, xv.data(), wv.data(), &zero, yv.data(), ws.data(), ws.size() * sizeof(double));
    EXPECT_LT(relative_error(yv, reference_conv(Shape{1, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, xv, wv)),
              1e-13);
    try {
        moved.execute(&one, xv.data(), wv.data(), &zero, nullptr);
        FAIL() << "a NULL y must throw";
    } catch (const convcore::Exception& e) {
        EXPECT_EQ(e.status(), CONVCORE_STATUS_BAD_PARAM);
        EXPECT_NE(std::string(e.what()).find("y is NULL"), std::string::npos) << e.what();
    }
    EXPECT_THROW(convcore::Plan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, 99), convcore::Exception);
}

// ---- the handle's plan cache ----------------------------------------------------------------

convcorePlanCacheInfo_t cache_info(convcoreHandle_t h) {
    convcorePlanCacheInfo_t info{};
    EXPECT_EQ(convcoreGetPlanCacheInfo(h, &info), CONVCORE_STATUS_SUCCESS);
    return info;
}

int64_t news() {
#if CONVCORE_TEST_COUNTS_NEW
    return g_news.load();
#else
    return 0;
#endif
}

// One problem in a layout: NCHW (KCRS filters) or NHWC (KRSC filters), float32.
struct LayoutProblem {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    LayoutProblem(const Shape& s, convcoreTensorFormat_t f)
        : x(f, CONVCORE_DATA_FLOAT, s.n, s.c, s.h, s.w), y(f, CONVCORE_DATA_FLOAT, s.n, s.k, s.out_h(), s.out_w()),
          w(f, CONVCORE_DATA_FLOAT, s.k, s.c / s.groups, s.r, s.s) {
        conv.set(s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.dil_h, s.dil_w, CONVCORE_CROSS_CORRELATION);
        conv.set_groups(s.groups);
    }
};

// Every algorithm of every pass that runs the problem, in both layouts, through the cache: after
// the first call, 20 more make no plan, prepare no filters, allocate no workspace and call no
// operator new, and give the first call's bits. The forward pass also with kept filters (a
// version, and checked bytes) and with the epilogue.
TEST(PlanCache, RepeatedCallsOfEveryAlgorithmAllocateNothing) {
    const Shape shapes[] = {
        {2, 8, 10, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // 3x3 stride 1: every family applies
        {1, 8, 9, 9, 16, 1, 1, 0, 0, 1, 1, 1, 1, 1, false},   // 1x1
        {1, 8, 9, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, false},    // depthwise
    };
    convcore::Handle h;
    std::mt19937 rng(11);
    int checked = 0;
    for (const Shape& s : shapes)
        for (convcoreTensorFormat_t f : {CONVCORE_TENSOR_NCHW, CONVCORE_TENSOR_NHWC}) {
            LayoutProblem p(s, f);
            const size_t x_count = size_t(s.n * s.c * s.h * s.w), y_count = size_t(s.n * s.k * s.out_h() * s.out_w());
            const size_t w_count = size_t(s.k * (s.c / s.groups) * s.r * s.s);
            const auto x64 = random_vector(x_count, rng), w64 = random_vector(w_count, rng),
                       y64 = random_vector(y_count, rng), b64 = random_vector(size_t(s.k), rng);
            const std::vector<float> x(x64.begin(), x64.end()), w(w64.begin(), w64.end()), dy(y64.begin(), y64.end()),
                bias(b64.begin(), b64.end());
            for (int pass = 0; pass < 3; ++pass)
                for (int algo = 0; algo < algo_count(convcoreConvolutionPass_t(pass)); ++algo)
                    for (int variant = 0; variant < (pass == 0 ? 4 : 1); ++variant) {
                        // variant 0: plain; 1: filters kept by version; 2: kept, checked; 3: epilogue
                        SCOPED_TRACE("format " + std::to_string(int(f)) + " pass " + std::to_string(pass) + " algo " +
                                     std::to_string(algo) + " variant " + std::to_string(variant) + " k " +
                                     std::to_string(s.k));
                        p.conv.set_filter_protocol(variant == 1 || variant == 2 ? CONVCORE_FILTERS_PREPARED
                                                                                 : CONVCORE_FILTERS_PER_CALL);
                        convcoreConvolutionArgs_t args{};
                        args.in0 = pass == 1 ? dy.data() : x.data();
                        args.in1 = pass == 2 ? dy.data() : w.data();
                        const size_t out_count = pass == 0 ? y_count : pass == 1 ? x_count : w_count;
                        std::vector<float> first(out_count), again(out_count);
                        args.out = first.data();
                        args.filterVersion = variant == 1 ? 7 : 0;
                        if (variant == 3) {
                            args.bias = bias.data();
                            args.activation = CONVCORE_ACTIVATION_RELU;
                        }
                        const auto pass_t = convcoreConvolutionPass_t(pass);
                        const convcoreStatus_t st = convcoreConvolutionExecute(h, pass_t, p.x, p.w, p.conv, p.y, algo,
                                                                               &args, nullptr);
                        if (st == CONVCORE_STATUS_NOT_SUPPORTED) continue;
                        ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
                        args.out = again.data();
                        const convcorePlanCacheInfo_t before = cache_info(h);
                        const int64_t news_before = news();
                        convcoreStatus_t status = CONVCORE_STATUS_SUCCESS;
                        for (int i = 0; i < 20 && status == CONVCORE_STATUS_SUCCESS; ++i)
                            status = convcoreConvolutionExecute(h, pass_t, p.x, p.w, p.conv, p.y, algo, &args, nullptr);
                        const int64_t news_after = news();
                        const convcorePlanCacheInfo_t after = cache_info(h);
                        ASSERT_EQ(status, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
                        EXPECT_EQ(after.hits - before.hits, 20);
                        EXPECT_EQ(after.misses, before.misses);
                        EXPECT_EQ(after.filterPreparations, before.filterPreparations);
                        EXPECT_EQ(after.workspaceAllocations, before.workspaceAllocations);
                        EXPECT_EQ(news_after, news_before) << "operator new called in a cached call";
                        EXPECT_EQ(first, again);
                        ++checked;
                    }
        }
    EXPECT_GE(checked, 60);
}

// The cached call against the float64 reference, the plan's call, and the descriptor-style call
// sharing its cache.
TEST(PlanCache, CachedCallsMatchTheReference) {
    const Shape s{2, 6, 11, 10, 4, 3, 3, 1, 1, 2, 1, 1, 2, 2, false};  // stride, dilation, groups
    convcore::Handle h;
    LayoutProblem p(s, CONVCORE_TENSOR_NCHW);
    std::mt19937 rng(5);
    const size_t x_count = size_t(s.n * s.c * s.h * s.w), y_count = size_t(s.n * s.k * s.out_h() * s.out_w());
    const size_t w_count = size_t(s.k * (s.c / s.groups) * s.r * s.s);
    const auto x64 = rounded<float>(random_vector(x_count, rng)), w64 = rounded<float>(random_vector(w_count, rng)),
               y64 = rounded<float>(random_vector(y_count, rng));
    const std::vector<float> x(x64.begin(), x64.end()), w(w64.begin(), w64.end()), dy(y64.begin(), y64.end());
    const std::vector<double> expected[3] = {reference_conv(s, x64, w64), reference_bwd_data(s, w64, y64),
                                             reference_bwd_filter(s, x64, y64)};
    for (int pass = 0; pass < 3; ++pass)
        for (int algo = 0; algo < algo_count(convcoreConvolutionPass_t(pass)); ++algo) {
            const size_t out_count = pass == 0 ? y_count : pass == 1 ? x_count : w_count;
            std::vector<float> out(out_count);
            convcoreConvolutionArgs_t args{};
            args.in0 = pass == 1 ? dy.data() : x.data();
            args.in1 = pass == 2 ? dy.data() : w.data();
            args.out = out.data();
            int ran = -1;
            const convcoreStatus_t st =
                convcoreConvolutionExecute(h, convcoreConvolutionPass_t(pass), p.x, p.w, p.conv, p.y, algo, &args, &ran);
            if (st == CONVCORE_STATUS_NOT_SUPPORTED) continue;
            ASSERT_EQ(st, CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
            EXPECT_EQ(ran, algo);
            const std::vector<double> got(out.begin(), out.end());
            EXPECT_LE(relative_error(got, expected[pass]), declared_bound(convcoreConvolutionPass_t(pass), algo, false))
                << "pass " << pass << " algo " << algo;
        }
    // The selection modes choose once per problem (MEASURED timing on the call's own buffers, in
    // every pass: exactly sized here, so that ASan sees a buffer read in another's place), then hit.
    for (int pass = 0; pass < 3; ++pass)
        for (int mode : {CONVCORE_PLAN_SELECT_HEURISTIC, CONVCORE_PLAN_SELECT_MEASURED}) {
            SCOPED_TRACE("pass " + std::to_string(pass) + " mode " + std::to_string(mode));
            std::vector<float> out(pass == 0 ? y_count : pass == 1 ? x_count : w_count);
            convcoreConvolutionArgs_t args{};
            args.in0 = pass == 1 ? dy.data() : x.data();
            args.in1 = pass == 2 ? dy.data() : w.data();
            args.out = out.data();
            const auto pass_t = convcoreConvolutionPass_t(pass);
            int ran = -1;
            ASSERT_EQ(convcoreConvolutionExecute(h, pass_t, p.x, p.w, p.conv, p.y, mode, &args, &ran),
                      CONVCORE_STATUS_SUCCESS)
                << convcoreGetLastErrorString();
            EXPECT_GE(ran, 0);
            const convcorePlanCacheInfo_t before = cache_info(h);
            int again = -1;
            ASSERT_EQ(convcoreConvolutionExecute(h, pass_t, p.x, p.w, p.conv, p.y, mode, &args, &again),
                      CONVCORE_STATUS_SUCCESS);
            EXPECT_EQ(again, ran);
            EXPECT_EQ(cache_info(h).hits, before.hits + 1);
            EXPECT_LE(relative_error(std::vector<double>(out.begin(), out.end()), expected[pass]),
                      declared_bound(pass_t, ran, false));
        }
    // The descriptor-style call runs through the same cache: the second one hits.
    std::vector<float> out(y_count);
    const float one = 1.0f, zero = 0.0f;
    const int64_t hits = cache_info(h).hits;
    for (int i = 0; i < 2; ++i)
        ASSERT_EQ(convcoreConvolutionForward(h, &one, p.x, x.data(), p.w, w.data(), p.conv, CONVCORE_FWD_ALGO_DIRECT,
                                             nullptr, 0, &zero, p.y, out.data()),
                  CONVCORE_STATUS_SUCCESS);
    EXPECT_GE(cache_info(h).hits, hits + 1);
}

// Kept filters: per pointer (two layers of one shape share the plan and keep theirs), prepared
// again when the version or, checked, the bytes change; the results always those of the filters.
TEST(PlanCache, KeptFiltersFollowTheFiltersTheyWereMadeFrom) {
    const Shape s{1, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    convcore::Handle h;
    LayoutProblem p(s, CONVCORE_TENSOR_NCHW);
    p.conv.set_filter_protocol(CONVCORE_FILTERS_PREPARED);
    std::mt19937 rng(9);
    const auto x64 = rounded<float>(random_vector(800, rng));
    std::vector<double> wa64 = rounded<float>(random_vector(576, rng)), wb64 = rounded<float>(random_vector(576, rng));
    const std::vector<float> x(x64.begin(), x64.end());
    std::vector<float> wa(wa64.begin(), wa64.end()), wb(wb64.begin(), wb64.end()), y(800);
    const int algo = CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3;
    const double bound = declared_bound(CONVCORE_PASS_FORWARD, algo, false);
    auto run = [&](const std::vector<float>& w, int64_t version) {
        convcoreConvolutionArgs_t args{};
        args.in0 = x.data();
        args.in1 = w.data();
        args.out = y.data();
        args.filterVersion = version;
        EXPECT_EQ(convcoreConvolutionExecute(h, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y, algo, &args, nullptr),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        const std::vector<double> w64(w.begin(), w.end());
        return relative_error(std::vector<double>(y.begin(), y.end()), reference_conv(s, x64, w64));
    };
    const int64_t start = cache_info(h).filterPreparations;
    auto prepared = [&] { return cache_info(h).filterPreparations - start; };
    for (int i = 0; i < 3; ++i) {  // two layers in turn: each keeps its own
        EXPECT_LE(run(wa, 1), bound);
        EXPECT_LE(run(wb, 1), bound);
    }
    EXPECT_EQ(prepared(), 2);
    EXPECT_EQ(cache_info(h).plans, 1u);
    EXPECT_GT(cache_info(h).preparedFilterBytes, 0u);
    for (float& v : wa) v = -v;  // new contents, new version: prepared again
    EXPECT_LE(run(wa, 2), bound);
    EXPECT_EQ(prepared(), 3);
    for (int i = 0; i < 2; ++i) {  // checked: prepared once, and again after any change
        EXPECT_LE(run(wb, CONVCORE_FILTER_VERSION_CHECKED), bound);
    }
    EXPECT_EQ(prepared(), 4);
    wb[17] += 1.0f;
    EXPECT_LE(run(wb, CONVCORE_FILTER_VERSION_CHECKED), bound);
    EXPECT_EQ(prepared(), 5);
    // A negative version is refused, naming it.
    convcoreConvolutionArgs_t args{};
    args.in0 = x.data();
    args.in1 = wa.data();
    args.out = y.data();
    args.filterVersion = -3;
    EXPECT_EQ(convcoreConvolutionExecute(h, CONVCORE_PASS_FORWARD, p.x, p.w, p.conv, p.y, algo, &args, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("filterVersion"), std::string::npos);
    // A limit on the prepared bytes drops the least recently used filters; results stay right.
    ASSERT_EQ(convcoreSetPreparedFilterLimit(h, 1), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(cache_info(h).preparedFilterBytes, 0u);
    EXPECT_LE(run(wa, 2), bound);
    EXPECT_LE(run(wb, 1), bound);
    EXPECT_EQ(cache_info(h).preparedFilterBytes, 0u);
}

// At most the capacity of plans, the least recently used dropped first; 0 keeps none; the epilogue
// and a beta are refused together; clearing empties it.
TEST(PlanCache, IsBoundedAndLeastRecentlyUsedGoesFirst) {
    convcore::Handle h;
    ASSERT_EQ(convcoreSetPlanCacheCapacity(h, 2), CONVCORE_STATUS_SUCCESS);
    std::vector<float> x(64, 1.0f), w(9, 1.0f), y(64);
    auto run = [&](int64_t size) {
        convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, 1, size, size), yd(CONVCORE_DATA_FLOAT, 1, 1, size, size);
        convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 1, 1, 3, 3);
        convcore::ConvDesc conv(1);
        convcoreConvolutionArgs_t args{};
        args.in0 = x.data();
        args.in1 = w.data();
        args.out = y.data();
        return convcoreConvolutionExecute(h, CONVCORE_PASS_FORWARD, xd, wd, conv, yd, CONVCORE_FWD_ALGO_DIRECT, &args,
                                          nullptr);
    };
    for (int64_t size : {4, 5, 4, 6, 4}) ASSERT_EQ(run(size), CONVCORE_STATUS_SUCCESS);
    convcorePlanCacheInfo_t info = cache_info(h);
    EXPECT_EQ(info.capacity, 2u);
    EXPECT_EQ(info.plans, 2u);
    EXPECT_EQ(info.misses, 3);  // 4, 5, 6; 4 stayed the most recently used
    EXPECT_EQ(info.hits, 2);
    ASSERT_EQ(run(5), CONVCORE_STATUS_SUCCESS);  // dropped when 6 came
    EXPECT_EQ(cache_info(h).misses, 4);
    ASSERT_EQ(convcoreClearPlanCache(h), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(cache_info(h).plans, 0u);
    ASSERT_EQ(convcoreSetPlanCacheCapacity(h, 0), CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(run(4), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(cache_info(h).plans, 0u);
    // beta with the epilogue, and a NULL args or descriptor, are named.
    convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, 1, 4, 4), yd(CONVCORE_DATA_FLOAT, 1, 1, 4, 4);
    convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 1, 1, 3, 3);
    convcore::ConvDesc conv(1);
    const float half = 0.5f;
    convcoreConvolutionArgs_t args{};
    args.in0 = x.data();
    args.in1 = w.data();
    args.out = y.data();
    args.beta = &half;
    args.activation = CONVCORE_ACTIVATION_RELU;
    EXPECT_EQ(convcoreConvolutionExecute(h, CONVCORE_PASS_FORWARD, xd, wd, conv, yd, 0, &args, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("beta"), std::string::npos);
    EXPECT_EQ(convcoreConvolutionExecute(h, CONVCORE_PASS_FORWARD, xd, wd, conv, yd, 0, nullptr, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "args is NULL");
    EXPECT_EQ(convcoreConvolutionExecute(h, CONVCORE_PASS_FORWARD, xd, nullptr, conv, yd, 0, &args, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "wDesc is NULL");
}

}  // namespace
