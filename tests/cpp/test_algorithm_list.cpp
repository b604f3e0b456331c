// The one list of algorithms (cpp/include/convcore/algorithms.def) through the public API: every enum value
// of every pass is declared, with its name, devices, bounds and determinism; the solvers agree
// with it; bad arguments are named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"

namespace {

struct Pass {
    convcoreConvolutionPass_t pass;
    int count;
    const char* (*name)(int);
};

const Pass kPasses[] = {
    {CONVCORE_PASS_FORWARD, CONVCORE_FWD_ALGO_COUNT,
     [](int a) { return convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(a)); }},
    {CONVCORE_PASS_BACKWARD_DATA, CONVCORE_BWD_DATA_ALGO_COUNT,
     [](int a) { return convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(a)); }},
    {CONVCORE_PASS_BACKWARD_FILTER, CONVCORE_BWD_FILTER_ALGO_COUNT,
     [](int a) { return convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(a)); }},
};

TEST(AlgorithmList, EveryAlgorithmIsDeclared) {
    for (const Pass& p : kPasses) {
        for (int a = 0; a < p.count; ++a) {
            SCOPED_TRACE("pass " + std::to_string(int(p.pass)) + " algo " + std::to_string(a));
            convcoreAlgorithmInfo_t info{};
            ASSERT_EQ(convcoreGetAlgorithmInfo(p.pass, a, &info), CONVCORE_STATUS_SUCCESS);
            ASSERT_NE(info.name, nullptr);
            EXPECT_STREQ(info.name, p.name(a));
            EXPECT_TRUE(info.onCpu) << "every algorithm runs on the CPU";
            EXPECT_GT(info.errorBoundDouble, 0.0);
            EXPECT_LT(info.errorBoundDouble, info.errorBoundFloat);
            EXPECT_LE(info.errorBoundFloat, 1e-3);
        }
    }
}

TEST(AlgorithmList, BadArgumentsAreNamed) {
    convcoreAlgorithmInfo_t info{};
    EXPECT_EQ(convcoreGetAlgorithmInfo(CONVCORE_PASS_FORWARD, CONVCORE_FWD_ALGO_COUNT, &info),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("algo " + std::to_string(CONVCORE_FWD_ALGO_COUNT)), std::string::npos);
    EXPECT_EQ(convcoreGetAlgorithmInfo(CONVCORE_PASS_BACKWARD_DATA, -1, &info), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreGetAlgorithmInfo(convcoreConvolutionPass_t(3), 0, &info), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("pass 3"), std::string::npos);
    EXPECT_EQ(convcoreGetAlgorithmInfo(CONVCORE_PASS_FORWARD, 0, nullptr), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_STREQ(convcoreGetLastErrorString(), "info is NULL");
    convcoreConvolutionFwdAlgo_t fwd{};
    EXPECT_EQ(convcoreGetFwdAlgoByName("winograd_4x4_3x3", &fwd), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(fwd, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    EXPECT_EQ(convcoreGetFwdAlgoByName("no_such", &fwd), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("CYCLIC_MINIMAL"), std::string::npos);
}

// The registry checks each pass's solvers before their first use (core/registry.cpp: the run
// of its pass only, the required functions, only its pass's capabilities, no duplicates) and
// answers INTERNAL_ERROR naming a malformed one; the three rankings reach every solver. Each
// ranking lists every algorithm once, with the determinism algorithms.def declares for it.
TEST(AlgorithmList, SolversAreWellFormed) {
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 4, 8, 8), y(CONVCORE_DATA_FLOAT, 1, 4, 8, 8);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 4, 4, 3, 3);
    convcore::ConvDesc conv(1);
    auto check = [](convcoreConvolutionPass_t pass, int count, auto rows, int n) {
        std::vector<int> seen(count, 0);
        for (int i = 0; i < n; ++i) {
            ASSERT_GE(rows[i].algo, 0);
            ASSERT_LT(rows[i].algo, count);
            ++seen[rows[i].algo];
            convcoreAlgorithmInfo_t info{};
            ASSERT_EQ(convcoreGetAlgorithmInfo(pass, rows[i].algo, &info), CONVCORE_STATUS_SUCCESS);
            EXPECT_EQ(rows[i].determinism, info.determinism) << info.name;
        }
        for (int a = 0; a < count; ++a) EXPECT_EQ(seen[a], 1) << "algo " << a;
    };
    convcoreConvolutionFwdAlgoPerf_t fwd[CONVCORE_FWD_ALGO_COUNT];
    int n = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(h, x, w, conv, y, CONVCORE_FWD_ALGO_COUNT, &n, fwd),
              CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    check(CONVCORE_PASS_FORWARD, CONVCORE_FWD_ALGO_COUNT, fwd, n);
    convcoreConvolutionBwdDataAlgoPerf_t data[CONVCORE_BWD_DATA_ALGO_COUNT];
    ASSERT_EQ(convcoreGetConvolutionBackwardDataAlgorithm(h, w, y, conv, x, CONVCORE_BWD_DATA_ALGO_COUNT, &n, data),
              CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    check(CONVCORE_PASS_BACKWARD_DATA, CONVCORE_BWD_DATA_ALGO_COUNT, data, n);
    convcoreConvolutionBwdFilterAlgoPerf_t filter[CONVCORE_BWD_FILTER_ALGO_COUNT];
    ASSERT_EQ(convcoreGetConvolutionBackwardFilterAlgorithm(h, x, y, conv, w, CONVCORE_BWD_FILTER_ALGO_COUNT, &n,
                                                            filter),
              CONVCORE_STATUS_SUCCESS) << convcoreGetLastErrorString();
    check(CONVCORE_PASS_BACKWARD_FILTER, CONVCORE_BWD_FILTER_ALGO_COUNT, filter, n);
}

}  // namespace
