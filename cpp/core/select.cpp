#include "core/select.hpp"

#include <algorithm>

#include "core/algo_filter.hpp"

namespace convcore {
namespace {

// Rough cost model (lower is better), from the first CPU measurements on a 2-core AVX-512
// machine (batch 1, fp32): IMPLICIT_GEMM ran 1.2-1.8x IM2COL_GEMM's GFLOP/s on 3x3, 7x7 and
// 1x1 layers, except with few output positions per image (512->512 at 7x7: 0.85x), where
// the BLAS GEMM's blocking wins. DIRECT is the reference, last. Measured heuristics replace
// this in issue 6.
double heuristic_cost(convcoreConvolutionFwdAlgo_t algo, const ConvProblem& p) {
    const bool few_positions = p.p * p.q < 64 && p.k_per_group() >= 256;
    switch (algo) {
        case CONVCORE_FWD_ALGO_IMPLICIT_GEMM: return few_positions ? 2.0 : 1.0;
        case CONVCORE_FWD_ALGO_IM2COL_GEMM: return few_positions ? 1.0 : 2.0;
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
        if (s && !disabled_by_env(algo) && s->why_not(packed).empty())
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
