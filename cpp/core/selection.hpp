// Selection, inside the core: Get's rankings, Find (timed, through the find-db) and Select (one
// cached decision per problem), all on one validated problem (core/problem.hpp). The C entry
// points (core/find.cpp, core/api*.cpp, core/plan.cpp) turn their descriptors into that problem
// once and call these; nothing here calls a public entry point.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "convcore/convcore.h"
#include "core/problem.hpp"
#include "core/solver.hpp"

namespace convcore {
namespace depth {
struct DepthProblem;  // core/depth_decomposition.hpp
}

// The one internal encoding of how an algorithm is chosen. The public encodings
// (convcoreSelectMode_t, and the CONVCORE_PLAN_SELECT_* values of a plan's algo) are mapped to
// it where they enter the core, by the two functions below.
enum class SelectMode { Heuristic, Measured, Find };

// A convcoreSelectMode_t value as the caller passed it; BAD_PARAM for any other int.
SelectMode select_mode_of(int mode);
// A plan's algo < 0 (CONVCORE_PLAN_SELECT_HEURISTIC, _MEASURED or _FIND); BAD_PARAM for others.
SelectMode plan_select_mode_of(int algo);

// One algorithm of a pass's Get ranking: the applicable ones first (status SUCCESS, best
// first, with their workspace with staging), then the others (NOT_SUPPORTED) in enum order.
// CONVCORE_DISABLE_ALGOS applies (a disabled algorithm is NOT_SUPPORTED).
struct Ranked {
    int algo = 0;
    convcoreStatus_t status = CONVCORE_STATUS_NOT_SUPPORTED;
    size_t memory = 0;
    convcoreDeterminism_t determinism = CONVCORE_DETERMINISTIC;
    // What the solver was made for (Solver::made_for): "auto" times a made-for algorithm
    // whatever its rank.
    MadeFor made_for = MadeFor::No;
};
// The Ranked rows of a ranking's rows (rank_algorithms and its backward kinds: algo and solver,
// null where the algorithm cannot run), each with `workspace(prob, solver)`.
template <typename Row, typename Workspace>
std::vector<Ranked> ranked_rows(const std::vector<Row>& rows, const ConvProblem& prob, Workspace workspace) {
    std::vector<Ranked> ranked;
    for (const Row& r : rows) {
        Ranked out;
        out.algo = r.algo;
        out.status = r.solver ? CONVCORE_STATUS_SUCCESS : CONVCORE_STATUS_NOT_SUPPORTED;
        out.determinism = r.solver && !r.solver->deterministic() ? CONVCORE_NON_DETERMINISTIC : CONVCORE_DETERMINISTIC;
        out.memory = r.solver ? workspace(prob, *r.solver) : 0;
        out.made_for = r.solver ? r.solver->made_for_problem(run_problem(prob, r.solver->runs_nhwc)) : MadeFor::No;
        ranked.push_back(out);
    }
    return ranked;
}
// `prob` is the pass's forward problem (x is dx in backward data, w is dw in backward filter).
std::vector<Ranked> ranking(convcoreConvolutionPass_t pass, const ConvProblem& prob);
// The Get ranking of a pass from its descriptors in plan order (x, w, y; dx, w, dy; x, dw, dy).
// A 3-D problem is ranked on its representative 2-D problem, each algorithm that can run it
// with its 3-D plan's workspace (or that plan's status: the native 3-D Winograd and the
// decomposition need other workspaces than the 2-D problem).
std::vector<Ranked> descriptor_ranking(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                       convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                       convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc);
// The same per pass (core/api.cpp, core/api_backward.cpp).
std::vector<Ranked> forward_ranking(const ConvProblem& prob);
std::vector<Ranked> bwd_data_ranking(const ConvProblem& prob);
std::vector<Ranked> bwd_filter_ranking(const ConvProblem& prob);

// The buffers Find and Select time on: the caller's where given, their own (random inputs) where
// null. callers_workspace: the caller's workspace (FindEx) bounds every algorithm; else each
// algorithm gets its own, up to the handle's Find workspace limit.
struct TimingBuffers {
    const void* in0 = nullptr;  // forward x, backward data w, backward filter x
    const void* in1 = nullptr;  // forward w, backward data dy, backward filter dy
    void* out = nullptr;        // forward y, backward data dx, backward filter dw
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    bool callers_workspace = false;
};

// One row of Find: both times in ms (-1 when not timed). time_per_call: the filters transformed
// by every run (convcoreConvolutionForward, a plan without prepared filters); time_prepared:
// with the filters prepared once (convcorePrepareConvolutionPlanFilters). The two are the same
// number for an algorithm with nothing to prepare, and for the backward passes.
struct FindResult {
    int algo = 0;
    convcoreStatus_t status = CONVCORE_STATUS_NOT_SUPPORTED;
    float time_per_call = -1.0f;
    float time_prepared = -1.0f;
    size_t memory = 0;
    convcoreDeterminism_t determinism = CONVCORE_DETERMINISTIC;
    // The time the problem's caller sees (ConvProblem::prepared_filters).
    float time(bool prepared_filters) const { return prepared_filters ? time_prepared : time_per_call; }
};

// Every algorithm of the pass: those that ran, fastest first by the time of the problem's filter
// protocol (ConvProblem::prepared_filters), then the others in enum order (convcore.h, Find).
// A 3-D problem passes its DepthProblem as `depth` and its representative 2-D problem as `prob`:
// it is ranked on prob, and timed, sized, stored in the find-db and cached as itself.
std::vector<FindResult> find_algorithms(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        const ConvProblem& prob, const TimingBuffers& buf,
                                        const depth::DepthProblem* depth = nullptr);

// The algorithm to run (convcore.h, Select): the cached decision, else the mode's choice.
int select_algorithm(convcoreHandle_t handle, convcoreConvolutionPass_t pass, const ConvProblem& prob,
                     SelectMode mode, const TimingBuffers& buf, const depth::DepthProblem* depth = nullptr);

// The decision cache of select_algorithm: least recently used decisions are dropped beyond
// kDecisionCacheCapacity entries.
constexpr size_t kDecisionCacheCapacity = 4096;
size_t decision_cache_entries();
void clear_decisions();

}  // namespace convcore
