// Algorithm selection without running anything (cuDNN's Get).
#pragma once
#include <vector>

#include "core/problem.hpp"
#include "core/solver.hpp"

namespace convcore {

struct RankedAlgo {
    convcoreConvolutionFwdAlgo_t algo;
    const Solver* solver;  // null when the algorithm cannot run the problem on its device
};

// Every algorithm of the enum: the applicable ones first, best first, then the others in enum order.
std::vector<RankedAlgo> rank_algorithms(const ConvProblem& prob);

}  // namespace convcore
