// A solver is one algorithm of one pass on one device (MIOpen's model): can it run a problem
// (and if not, why), how much workspace it needs, and the run itself. core/registry.cpp
// registers them all, from convcore/algorithms.def.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "core/problem.hpp"

namespace convcore {

// The fused epilogue of convcoreConvolutionBiasActivationForward, applied to the
// convolution's result v = alpha * conv(x, w):  y = act(v + alpha2 * z + bias).
// bias: K values of y's dtype, or null; z: y's shape and layout (packed as y is), or null; it
// may be y itself. A solver whose fuses_epilogue says true applies it in its own stores (see
// common/epilogue.hpp); for the others the core runs them with beta = 0 and applies it after.
struct Epilogue {
    const void* bias = nullptr;
    const void* z = nullptr;
    double alpha2 = 0;
    convcoreActivationMode_t activation = CONVCORE_ACTIVATION_IDENTITY;
    bool none() const { return !bias && !z && activation == CONVCORE_ACTIVATION_IDENTITY; }
};

// What a solver's run receives. The core has already validated the problem and made x and y
// packed: NCHW, or NHWC (prob.nhwc) when the caller's tensors are NHWC and the solver runs that
// problem natively (runs_nhwc); w is always packed KCRS. Solvers only see packed tensors.
struct ConvArgs {
    const ConvProblem& prob;
    const Context& ctx;
    const void* x;  // N x C x H x W
    const void* w;  // K x C/groups x R x S
    void* y;        // N x K x P x Q: y = alpha * conv(x, w) + beta * y (beta == 0: never read)
    double alpha, beta;
    void* workspace;  // workspace_bytes(prob) bytes, or null when that is 0
    // The filters already transformed by the solver's prepare_filter (a plan's prepared
    // filters for this w), or null: then the run transforms w itself.
    const void* prepared_filter = nullptr;
    // Only for solvers whose fuses_epilogue says true (with beta == 0); none() otherwise.
    Epilogue epilogue = {};
};

// ---- backward passes ----------------------------------------------------------------------
// The same model for training's two other passes. The problem is still the forward one
// (x: N x C x H x W, w: K x C/groups x R x S, y: N x K x P x Q); dx has x's shape, dw w's, dy
// y's. As in the forward pass, the core has made every tensor packed before the run (NHWC
// activations when prob.nhwc).
// An algorithm's backward code sits next to its forward code: cpu/<algo>_backward.cpp.

struct BwdDataArgs {
    const ConvProblem& prob;
    const Context& ctx;
    const void* w;   // K x C/groups x R x S
    const void* dy;  // N x K x P x Q
    void* dx;        // N x C x H x W: dx = alpha * grad_x + beta * dx (beta == 0: never read)
    double alpha, beta;
    void* workspace;  // workspace_bytes(prob) bytes, or null when that is 0
};

struct BwdFilterArgs {
    const ConvProblem& prob;
    const Context& ctx;
    const void* x;   // N x C x H x W
    const void* dy;  // N x K x P x Q
    void* dw;        // K x C/groups x R x S: dw = alpha * grad_w + beta * dw (beta == 0: never read)
    double alpha, beta;
    void* workspace;
};

// What a solver was written for, on a problem it runs (Solver::made_for). Selection reads it
// from the registry instead of naming algorithms:
//   No    a general solver: ranked and timed as the model (or the pass's rules) ranks it;
//   Yes   made for problems of this kind (POINTWISE: 1x1 filters; Winograd: 3x3 stride 1 and
//         its 1-D forms; the FFT family: large filters; ...): "auto" times it beside the
//         ranking's first CONVCORE_SELECT_CANDIDATES whatever its rank, and where the model has
//         no cost for it Get places it right after the first choice;
//   Only  as Yes, and Get ranks it first: no general solver is meant for these problems
//         (DEPTHWISE: one channel per group leaves a GEMM nothing to block).
enum class MadeFor { No, Yes, Only };

namespace made_for {
inline MadeFor yes(const ConvProblem&) { return MadeFor::Yes; }
// The forward pass's general lowerings (IM2COL_GEMM, IMPLICIT_GEMM, IM2WIN) run any problem, and
// which of them is fastest depends on the machine (its caches, its vector width) more than a
// model fitted on one machine kind can say (bench/results/cpu-2026-12-07-issue61b.md: the misses
// of auto on two suites it never saw were IM2WIN, ranked out): auto times all three.
inline MadeFor general(const ConvProblem&) { return MadeFor::Yes; }
inline MadeFor only(const ConvProblem&) { return MadeFor::Only; }
// At least 25 taps (5x5, 7x7, 11x11, 1x25): a GEMM's work per output grows with R*S, an FFT's
// does not (docs/algorithms.md, the FFT family).
inline MadeFor large_filters(const ConvProblem& p) { return p.r * p.s >= 25 ? MadeFor::Yes : MadeFor::No; }
// Grouped but not depthwise: each group's GEMM is narrow (C/g by K/g), which per-group BLAS
// calls run far from peak and a tiled GEMM over all groups does not.
inline MadeFor grouped(const ConvProblem& p) {
    return p.groups > 1 && p.groups < p.c ? MadeFor::Yes : MadeFor::No;
}
}  // namespace made_for

// One solver: one algorithm of one pass (one line of convcore/algorithms.def) on one device. Every
// solver fills the fields it has, by name (designated initializers); a capability left out is
// null, i.e. not supported. Determinism and error bounds are the .def line's (AlgorithmInfo).
struct Solver {
    int algo;  // the line's enum value, in its pass's enum (CONVCORE_FWD_ALGO_*, ...)
    convcoreDeviceType_t device;
    // "" when the solver can run the problem; otherwise the reason, in the user's terms. It sees
    // the problem its run would get (run_problem): NHWC (prob.nhwc) where the caller's tensors
    // are NHWC and runs_nhwc takes them, else packed NCHW.
    std::string (*why_not)(const ConvProblem& prob);
    // Exact workspace bytes for an applicable problem.
    size_t (*workspace_bytes)(const ConvProblem& prob);
    // The run of its pass (exactly one is set; it says the pass). Throws convcore::Error.
    void (*forward)(const ConvArgs& args) = nullptr;
    void (*backward_data)(const BwdDataArgs& args) = nullptr;
    void (*backward_filter)(const BwdFilterArgs& args) = nullptr;
    // True when the run takes this problem (given packed NCHW) with its activations in NHWC as
    // they are; null: NCHW only. See run_problem.
    bool (*runs_nhwc)(const ConvProblem& prob) = nullptr;
    // Forward solvers that transform the filters (a plan prepares them once, for inference):
    // the bytes of the transformed filters (0: nothing to prepare for this problem), and the
    // transform of w into `out` (64-byte aligned), as the run would make it.
    size_t (*prepared_filter_bytes)(const ConvProblem& prob) = nullptr;
    void (*prepare_filter)(const ConvProblem& prob, const Context& ctx, const void* w, void* out) = nullptr;
    // Forward solvers: true when the run applies ConvArgs::epilogue itself (in its stores,
    // while the outputs are in registers); null or false: the core applies it after the run.
    bool (*fuses_epilogue)(const ConvProblem& prob) = nullptr;
    // What the solver was written for (MadeFor), asked with the problem its run gets
    // (run_problem), of problems it runs only; null: MadeFor::No everywhere.
    MadeFor (*made_for)(const ConvProblem& prob) = nullptr;

    MadeFor made_for_problem(const ConvProblem& run_prob) const {
        return made_for ? made_for(run_prob) : MadeFor::No;
    }
    convcoreConvolutionPass_t pass() const {
        return forward ? CONVCORE_PASS_FORWARD : backward_data ? CONVCORE_PASS_BACKWARD_DATA
                                                               : CONVCORE_PASS_BACKWARD_FILTER;
    }
    // algorithms.def's determinism for this solver's line.
    bool deterministic() const;
    void run(const ConvArgs& args) const { forward(args); }
    void run(const BwdDataArgs& args) const { backward_data(args); }
    void run(const BwdFilterArgs& args) const { backward_filter(args); }
};

// Every solver compiled in, of one pass, for every device (core/registry.cpp, from algorithms.def).
const std::vector<const Solver*>& all_solvers(convcoreConvolutionPass_t pass);
// The solver of `algo` of `pass` on `device`, or null when none is compiled in.
const Solver* find_solver(convcoreConvolutionPass_t pass, int algo, convcoreDeviceType_t device);
inline const Solver* find_solver(convcoreConvolutionFwdAlgo_t algo, convcoreDeviceType_t device) {
    return find_solver(CONVCORE_PASS_FORWARD, algo, device);
}
inline const Solver* find_bwd_data_solver(convcoreConvolutionBwdDataAlgo_t algo, convcoreDeviceType_t device) {
    return find_solver(CONVCORE_PASS_BACKWARD_DATA, algo, device);
}
inline const Solver* find_bwd_filter_solver(convcoreConvolutionBwdFilterAlgo_t algo, convcoreDeviceType_t device) {
    return find_solver(CONVCORE_PASS_BACKWARD_FILTER, algo, device);
}

}  // namespace convcore
