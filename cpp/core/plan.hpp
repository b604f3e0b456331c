// Convolution plans (convcore.h, "plans"): one pass on fixed descriptors, validated and bound to
// one solver once, then run with only the data pointers. The descriptor-style entry points
// (convcoreConvolutionForward, ...BackwardData, ...BackwardFilter) build a plan on the stack and
// execute it, so every pass has one set of run-time checks and one staging path.
#pragma once
#include <cstddef>
#include <memory>

#include "convcore/convcore.h"
#include "core/problem.hpp"
#include "core/solver.hpp"

namespace convcore {
namespace depth {
struct DepthProblem;  // core/depth_decomposition.hpp
struct DepthPlan;
}  // namespace depth
}  // namespace convcore

struct convcoreConvolutionPlanStruct {
    convcoreHandle_t handle = nullptr;
    convcoreConvolutionPass_t pass = CONVCORE_PASS_FORWARD;
    convcore::ConvProblem prob;  // the descriptors' problem, with the caller's strides
    convcore::ConvProblem run_prob;  // the problem the solver runs (run_problem: packed tensors)
    int algo = 0;                // the pass's algorithm enum value
    const convcore::Solver* solver = nullptr;  // the algorithm's solver for pass, on the handle's device
    // Workspace layout: [solver's own][first staged tensor][second staged tensor][staged filter].
    // The staged tensors are copies, in run_prob's layout, of those in another: forward x and y,
    // backward data dy and dx, backward filter x and dy; the staged filter is a packed KCRS copy
    // of w (or dw) in any other layout.
    size_t solver_bytes = 0, first_bytes = 0, second_bytes = 0, filter_bytes = 0;
    size_t workspace_bytes() const;
    // The filters at prepared_for, transformed by the solver (convcorePrepareConvolutionPlanFilters):
    // executions with in1 == prepared_for use them instead of transforming w again.
    std::shared_ptr<void> prepared;
    size_t prepared_bytes = 0;
    const void* prepared_for = nullptr;
    // A 3-D plan (core/depth_decomposition.hpp): the 2-D plans of its depth ranges. prob, run_prob,
    // solver and the byte counts above are then its representative 2-D plan's (the largest batch);
    // execute runs the decomposition, workspace_bytes() is the largest 2-D plan's.
    std::shared_ptr<const convcore::depth::DepthPlan> depth;
};

namespace convcore {
namespace api {

// The pass's names for the pointers of convcoreExecuteConvolutionPlan (in0, in1, out) and its
// workspace query, for the errors of an execution.
struct PassNames {
    const char *in0, *in1, *out, *query;
};
PassNames names_of(convcoreConvolutionPass_t pass);

// The pass's forward problem from a plan's descriptors (x, w, y; dx, w, dy; x, dw, dy), validated
// once. Throws BAD_PARAM for bad descriptors or an unknown pass. For 3-D descriptors it is the
// representative 2-D problem (depth::DepthProblem::representative: what queries, Get, Find and
// Select answer for), and *depth, when not null, receives the 3-D problem.
ConvProblem pass_problem(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
                         convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc,
                         convcoreTensorDescriptor_t yDesc, depth::DepthProblem* depth = nullptr);

// A plan for `algo` (the pass's enum value) on a validated problem (pass_problem). Throws
// convcore::Error: BAD_PARAM for an algo out of range, NOT_SUPPORTED with the solver's reason.
convcoreConvolutionPlanStruct make_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        const ConvProblem& prob, int algo);
// The same from descriptors: pass_problem, then make_plan (depth::make_plan for 3-D ones).
convcoreConvolutionPlanStruct make_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                        convcoreConvolutionDescriptor_t convDesc,
                                        convcoreTensorDescriptor_t yDesc, int algo);

// Whether the plan's solver prepares filters for its problem on its device
// (convcorePrepareConvolutionPlanFilters keeps something): only then do prepared filters change
// its time.
bool prepares_filters(const convcoreConvolutionPlanStruct& plan);
// convcorePrepareConvolutionPlanFilters: prepares w for the plan (drops what it kept before).
// *prepared_bytes (may be null): the bytes kept, 0 when the solver has nothing to prepare.
void prepare_filters(convcoreConvolutionPlanStruct& plan, const void* w, size_t* prepared_bytes);

// Byte extents of the problem's x, w and y (their strides included).
int64_t x_extent(const ConvProblem& p);
int64_t w_extent(const ConvProblem& p);
int64_t y_extent(const ConvProblem& p);

// The bytes of the two staged tensors of a pass and of the staged filter (zero for one already in
// run_prob's layout), and a pass's whole workspace for a solver that needs solver_bytes.
void staged_bytes(const ConvProblem& prob, const ConvProblem& run_prob, convcoreConvolutionPass_t pass,
                  size_t* first, size_t* second, size_t* filter);
size_t workspace_with_staging(const ConvProblem& prob, const ConvProblem& run_prob, convcoreConvolutionPass_t pass,
                              size_t solver_bytes);

// Runs a plan: out = alpha * pass(in0, in1) + beta * out. Forward: (x, w) -> y; backward data:
// (dy, w) -> dx; backward filter: (x, dy) -> dw. Checks the pointers, the workspace, alignment
// and overlaps; stages strided tensors. fused: the epilogue handed to a forward solver that
// fuses it (fuses_epilogue(plan); beta must be 0), else null.
void execute(const convcoreConvolutionPlanStruct& plan, const void* alpha, const void* in0, const void* in1,
             const void* beta, void* out, void* workspace, size_t workspace_size, const Epilogue* fused = nullptr);

// Whether the forward plan's solver applies the epilogue itself: it says so for this problem
// and y is not staged (a staged y gets the epilogue after it is unstaged).
bool fuses_epilogue(const convcoreConvolutionPlanStruct& plan);

// y = act(alpha1 * conv(x, w) + alpha2 * z + bias) (convcoreExecuteConvolutionPlanBiasActivation):
// checks the epilogue's arguments, then either hands the epilogue to a solver that fuses it or
// runs the convolution and applies it in one pass over y. z (or null) is laid out as y, may be y.
void execute_bias_activation(const convcoreConvolutionPlanStruct& plan, const void* alpha1, const void* x,
                             const void* w, const void* alpha2, const void* z, const void* bias,
                             const convcoreActivationMode_t& activation, void* y, void* workspace,
                             size_t workspace_size);

// Defined with the entry points of their pass (core/api.cpp, core/api_backward.cpp).
// 3-D descriptors: as pass_problem.
ConvProblem forward_problem(convcoreHandle_t handle, convcoreTensorDescriptor_t x, convcoreFilterDescriptor_t w,
                            convcoreConvolutionDescriptor_t conv, convcoreTensorDescriptor_t y,
                            depth::DepthProblem* depth = nullptr);
// data: the problem of backward data (x is dx) or of backward filter (w is dw).
ConvProblem backward_problem(convcoreHandle_t handle, const convcoreTensorStruct* x, const convcoreFilterStruct* w,
                             convcoreConvolutionDescriptor_t conv, const convcoreTensorStruct* dy, bool data,
                             depth::DepthProblem* depth = nullptr);

// The solver of the pass's algorithm `algo` for the problem on its device. Throws BAD_PARAM for
// an algo that is not the pass's, NOT_SUPPORTED (naming the algorithm, and the pass when it is
// a backward one) when no solver is compiled in for the device or the solver cannot run it.
const Solver& solver_for(convcoreConvolutionPass_t pass, const ConvProblem& prob, int algo);

}  // namespace api
}  // namespace convcore
