// Algorithm selection for the backward passes without running anything (cuDNN's Get), the
// twin of core/select.hpp.
#pragma once
#include <vector>

#include "core/problem.hpp"
#include "core/solver.hpp"

namespace convcore {

struct RankedBwdDataAlgo {
    convcoreConvolutionBwdDataAlgo_t algo;
    const Solver* solver;  // null when the algorithm cannot run the problem on its device
};
struct RankedBwdFilterAlgo {
    convcoreConvolutionBwdFilterAlgo_t algo;
    const Solver* solver;
};

// Every algorithm of the enum: the applicable ones first, best first, then the others in enum order.
std::vector<RankedBwdDataAlgo> rank_bwd_data_algorithms(const ConvProblem& prob);
std::vector<RankedBwdFilterAlgo> rank_bwd_filter_algorithms(const ConvProblem& prob);

}  // namespace convcore
