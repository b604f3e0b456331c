#include "core/select_backward.hpp"

#include <algorithm>

#include "core/algo_filter.hpp"

namespace convcore {
namespace {

// Rough cost models (lower is better); see docs/algorithms.md "Backward passes". "auto" times
// the first CONVCORE_SELECT_CANDIDATES of the order, so the order only has to put the likely
// fastest among them. Channels-last callers: the solvers that run NHWC natively come before those
// that would convert dy and dx (or x) to NCHW and back.
// Grouped, not depthwise: each group's GEMMs are narrow (C/g by K/g), so IM2COL_GEMM's per-group
// BLAS calls run far from peak, while IMPLICIT_GEMM and the FFT family (whose transforms and
// per-frequency products both scale with the channels) lose little to groups.
bool grouped(const ConvProblem& p) { return p.groups > 1 && p.groups < p.c; }

double data_cost(convcoreConvolutionBwdDataAlgo_t algo, const ConvProblem& p) {
    const bool nhwc = p.activations_nhwc();
    switch (algo) {
        case CONVCORE_BWD_DATA_ALGO_DEPTHWISE:
        case CONVCORE_BWD_DATA_ALGO_POINTWISE: return 0.0;  // made for the layers they apply to
        // 3x3 stride 1: 4x or 2.25x fewer multiplies; F(2x2,3x3) wastes less on small maps, but
        // its transforms (per output, 4x F(4x4,3x3)'s) weigh more where groups thin the GEMMs
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_4X4_3X3: return 0.5;
        case CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3: return grouped(p) ? 0.8 : 0.7;
        case CONVCORE_BWD_DATA_ALGO_IMPLICIT_GEMM: return grouped(p) ? 0.6 : 1.0;
        case CONVCORE_BWD_DATA_ALGO_FFT: return grouped(p) ? 0.7 : 5.0;
        // NCHW: col2im after one GEMM per group (NHWC: in place for 1x1)
        case CONVCORE_BWD_DATA_ALGO_IM2COL_GEMM: return grouped(p) ? 2.0 : nhwc ? 0.9 : 0.8;
        case CONVCORE_BWD_DATA_ALGO_DIRECT: return 10.0;
        default: return 5.0;
    }
}

double filter_cost(convcoreConvolutionBwdFilterAlgo_t algo, const ConvProblem& p) {
    const bool nhwc = p.activations_nhwc();
    switch (algo) {
        case CONVCORE_BWD_FILTER_ALGO_DEPTHWISE:
        case CONVCORE_BWD_FILTER_ALGO_POINTWISE: return 0.0;  // made for the layers they apply to
        // PolyHankel's dw is the forward correlation of x by dy: its "filter" is the whole P x Q
        // map of dy, a size the FFT suits; first where groups thin the GEMMs, else after them
        case CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL: return grouped(p) ? 0.5 : 4.0;
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
