#include "core/select_backward.hpp"

#include <algorithm>

#include "core/algo_filter.hpp"

namespace convcore {
namespace {

// Rough cost models (lower is better); see docs/algorithms.md "Backward passes".
double data_cost(convcoreConvolutionBwdDataAlgo_t algo, const ConvProblem& p) {
    switch (algo) {
        case CONVCORE_BWD_DATA_ALGO_DEPTHWISE: return 0.0;  // made for the layers it applies to
        case CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM: return 1.0;
        case CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM: return 2.0;
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3: return 3.0;
        case CONVCORE_BWD_DATA_ALGO_DIRECT: return 10.0;
        default: return 5.0;
    }
}

double filter_cost(convcoreConvolutionBwdFilterAlgo_t algo, const ConvProblem& p) {
    switch (algo) {
        case CONVCORE_BWD_FILTER_ALGO_DEPTHWISE: return 0.0;  // made for the layers it applies to
        case CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM: return 1.0;
        case CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM: return 2.0;
        case CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2: return 3.0;
        case CONVCORE_BWD_FILTER_ALGO_DIRECT: return 10.0;
        default: return 5.0;
    }
}

template <typename Ranked, typename Algo, int Count, typename Find, typename Cost>
std::vector<Ranked> rank(const ConvProblem& prob, Find find, Cost cost) {
    const ConvProblem packed = prob.packed();
    std::vector<Ranked> ok, not_ok;
    for (int i = 0; i < Count; ++i) {
        const auto algo = Algo(i);
        const auto* s = find(algo, prob.device);
        if (s && !disabled_by_env(algo) && s->why_not(packed).empty())
            ok.push_back({algo, s});
        else
            not_ok.push_back({algo, nullptr});
    }
    std::stable_sort(ok.begin(), ok.end(), [&](const Ranked& a, const Ranked& b) {
        return cost(a.algo, prob) < cost(b.algo, prob);
    });
    ok.insert(ok.end(), not_ok.begin(), not_ok.end());
    return ok;
}

}  // namespace

std::vector<RankedBwdDataAlgo> rank_bwd_data_algorithms(const ConvProblem& prob) {
    return rank<RankedBwdDataAlgo, convcoreConvolutionBwdDataAlgo_t, CONVCORE_BWD_DATA_ALGO_COUNT>(
        prob, find_bwd_data_solver, data_cost);
}

std::vector<RankedBwdFilterAlgo> rank_bwd_filter_algorithms(const ConvProblem& prob) {
    return rank<RankedBwdFilterAlgo, convcoreConvolutionBwdFilterAlgo_t,
                CONVCORE_BWD_FILTER_ALGO_COUNT>(prob, find_bwd_filter_solver, filter_cost);
}

}  // namespace convcore
