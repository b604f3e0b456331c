#include "core/select.hpp"

#include <algorithm>

namespace convcore {
namespace {

// Rough cost model (lower is better). A placeholder ordering until measured heuristics land
// (issue 6): BLAS-backed im2col wins when the GEMM is big enough to amortise the im2col copy;
// implicit GEMM wins for thin GEMMs (few channels per group, depthwise); DIRECT is last.
double heuristic_cost(convcoreConvolutionFwdAlgo_t algo, const ConvProblem& p) {
    const double gemm_k = double(p.c_per_group()) * double(p.r) * double(p.s);
    const double gemm_m = double(p.k_per_group());
    switch (algo) {
        case CONVCORE_FWD_ALGO_IM2COL_GEMM: return (gemm_k >= 32 && gemm_m >= 16) ? 1.0 : 3.0;
        case CONVCORE_FWD_ALGO_IMPLICIT_GEMM: return 2.0;
        case CONVCORE_FWD_ALGO_DIRECT: return 10.0;
        default: return 5.0;
    }
}

}  // namespace

std::vector<RankedAlgo> rank_algorithms(const ConvProblem& prob) {
    const ConvProblem packed = prob.packed();
    std::vector<RankedAlgo> ok, not_ok;
    for (int i = 0; i < CONVCORE_FWD_ALGO_COUNT; ++i) {
        const auto algo = convcoreConvolutionFwdAlgo_t(i);
        const Solver* s = find_solver(algo, prob.device);
        if (s && s->why_not(packed).empty())
            ok.push_back({algo, s});
        else
            not_ok.push_back({algo, nullptr});
    }
    std::stable_sort(ok.begin(), ok.end(), [&](const RankedAlgo& a, const RankedAlgo& b) {
        return heuristic_cost(a.algo, prob) < heuristic_cost(b.algo, prob);
    });
    ok.insert(ok.end(), not_ok.begin(), not_ok.end());
    return ok;
}

}  // namespace convcore
