#include "core/select_backward.hpp"

#include <algorithm>

#include "core/algo_filter.hpp"

namespace convcore {
namespace {

// Rough cost models (lower is better); see docs/algorithms.md "Backward passes". "auto" times
// the first CONVCORE_SELECT_CANDIDATES of the order, so the order only has to put the likely
// fastest among them. Channels-last callers: the solvers that run NHWC natively come before those
// that would convert dy and dx (or x) to NCHW and back.
double data_cost(convcoreConvolutionBwdDataAlgo_t algo, const ConvProblem& p) {
    const bool nhwc = p.activations_nhwc();
    switch (algo) {
        case CONVCORE_BWD_DATA_ALGO_DEPTHWISE:
        case CONVCORE_BWD_DATA_ALGO_POINTWISE: return 0.0;  // made for the layers they apply to
        // 3x3 stride 1: 4x or 2.25x fewer multiplies; F(2x2,3x3) wastes less on small maps
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3: return 0.5;
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3: return 0.7;
        case CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM: return 1.0;
        case CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM: return nhwc ? 0.9 : 2.0;
        case CONVCORE_BWD_DATA_ALGO_DIRECT: return 10.0;
        default: return 5.0;
    }
}

double filter_cost(convcoreConvolutionBwdFilterAlgo_t algo, const ConvProblem& p) {
    const bool nhwc = p.activations_nhwc();
    switch (algo) {
        case CONVCORE_BWD_FILTER_ALGO_DEPTHWISE:
        case CONVCORE_BWD_FILTER_ALGO_POINTWISE: return 0.0;  // made for the layers they apply to
        case CONVCORE_BWD_FILTER_ALGO_IMPLICIT_GEMM: return 1.0;
        case CONVCORE_BWD_FILTER_ALGO_IM2COL_GEMM: return nhwc ? 0.9 : 2.0;
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
