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

// Whether "auto" (Select, measured) times `algo` on this forward problem besides the ranking's
// first CONVCORE_SELECT_CANDIDATES: IMPLICIT_GEMM where it runs an NHWC CPU problem through its
// NHWC GEMM. The model ranks by NCHW runs, and on NHWC problems with few input channels (a 3-D
// filter's depth taps stacked as channels, 3-channel stems) it ranked that GEMM out of the timed
// candidates where it ran 1.4-2.5x faster than the one chosen.
bool timed_beside_candidates(convcoreConvolutionFwdAlgo_t algo, const ConvProblem& prob);

}  // namespace convcore
