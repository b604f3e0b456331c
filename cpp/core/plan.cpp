// Convolution plans (core/plan.hpp, convcore.h "plans"): creation validates the descriptors and
// binds the solver once; execution checks only the pointers, stages tensors in another layout
// than the solver runs through the workspace (solvers see packed ones) and runs the solver.
#include "core/plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/depth_decomposition.hpp"
#include "core/descriptors.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/selection.hpp"

using namespace convcore;
using namespace convcore::api;

size_t convcoreConvolutionPlanStruct::workspace_bytes() const {
    if (depth) return depth->workspace;
    return align_up(solver_bytes) + align_up(first_bytes) + align_up(second_bytes) + filter_bytes;
}

namespace convcore {
namespace api {
PassNames names_of(convcoreConvolutionPass_t pass) {
    switch (pass) {
        case CONVCORE_PASS_BACKWARD_DATA:
            return {"dy", "w", "dx", "convcoreGetConvolutionBackwardDataWorkspaceSize"};
        case CONVCORE_PASS_BACKWARD_FILTER:
            return {"x", "dy", "dw", "convcoreGetConvolutionBackwardFilterWorkspaceSize"};
        default:
            return {"x", "w", "y", "convcoreGetConvolutionForwardWorkspaceSize"};
    }
}
}  // namespace api
}  // namespace convcore

namespace {

const char* plan_algo_name(const convcoreConvolutionPlanStruct& plan) { return convcore::algo_name(plan.pass, plan.algo); }

Strided4d view(int64_t n, int64_t c, int64_t h, int64_t w, const int64_t strides[4]) {
    Strided4d v{{n, c, h, w}, {0, 0, 0, 0}};
    std::copy(strides, strides + 4, v.strides);
    return v;
}
Strided4d x_view(const ConvProblem& p) { return view(p.n, p.c, p.h, p.w, p.x_strides); }
Strided4d y_view(const ConvProblem& p) { return view(p.n, p.k, p.p, p.q, p.y_strides); }
Strided4d w_view(const ConvProblem& p) { return view(p.k, p.c_per_group(), p.r, p.s, p.w_strides); }

}  // namespace

namespace convcore {
namespace api {

int64_t x_extent(const ConvProblem& p) {
    const int64_t dims[4] = {p.n, p.c, p.h, p.w};
    return extent_bytes(dims, p.x_strides, p.elem_size());
}
int64_t w_extent(const ConvProblem& p) {
    const int64_t dims[4] = {p.k, p.c_per_group(), p.r, p.s};
    return extent_bytes(dims, p.w_strides, p.elem_size());
}
int64_t y_extent(const ConvProblem& p) {
    const int64_t dims[4] = {p.n, p.k, p.p, p.q};
    return extent_bytes(dims, p.y_strides, p.elem_size());
}

ConvProblem pass_problem(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
                         convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc,
                         convcoreTensorDescriptor_t yDesc, depth::DepthProblem* depth) {
    switch (enum_int(pass)) {
        case CONVCORE_PASS_FORWARD:
            return forward_problem(handle, xDesc, wDesc, convDesc, yDesc, depth);
        case CONVCORE_PASS_BACKWARD_DATA:
            return backward_problem(handle, xDesc, wDesc, convDesc, yDesc, true, depth);
        case CONVCORE_PASS_BACKWARD_FILTER:
            return backward_problem(handle, xDesc, wDesc, convDesc, yDesc, false, depth);
        default:
            throw_bad_param("pass " + std::to_string(enum_int(pass)) + " is not a convcoreConvolutionPass_t");
    }
}

convcoreConvolutionPlanStruct make_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        const ConvProblem& problem, int algo) {
    convcoreConvolutionPlanStruct plan;
    plan.handle = handle;
    plan.pass = pass;
    plan.algo = algo;
    plan.prob = problem;
    const ConvProblem& prob = plan.prob;
    if (enum_int(pass) < CONVCORE_PASS_FORWARD || enum_int(pass) > CONVCORE_PASS_BACKWARD_FILTER)
        throw_bad_param("pass " + std::to_string(enum_int(pass)) + " is not a convcoreConvolutionPass_t");
    plan.solver = &solver_for(pass, prob, algo);
    plan.run_prob = run_problem(prob, plan.solver->runs_nhwc);
    plan.solver_bytes = plan.solver->workspace_bytes(plan.run_prob);
    staged_bytes(prob, plan.run_prob, pass, &plan.first_bytes, &plan.second_bytes, &plan.filter_bytes);
    return plan;
}

convcoreConvolutionPlanStruct make_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                        convcoreConvolutionDescriptor_t convDesc,
                                        convcoreTensorDescriptor_t yDesc, int algo) {
    if (depth::is_3d(xDesc)) {
        depth::DepthProblem prob;
        pass_problem(handle, pass, xDesc, wDesc, convDesc, yDesc, &prob);
        return depth::make_plan(handle, pass, prob, algo);
    }
    return make_plan(handle, pass, pass_problem(handle, pass, xDesc, wDesc, convDesc, yDesc), algo);
}

const Solver& solver_for(convcoreConvolutionPass_t pass, const ConvProblem& prob, int algo) {
    static const char* const kEnums[] = {"convcoreConvolutionFwdAlgo_t", "convcoreConvolutionBwdDataAlgo_t",
                                         "convcoreConvolutionBwdFilterAlgo_t"};
    static const char* const kPasses[] = {"forward", "backward data", "backward filter"};
    const char* name = algo_name(pass, algo);
    if (!name) throw_bad_param("algo " + std::to_string(algo) + " is not a " + kEnums[enum_int(pass)]);
    const bool forward = pass == CONVCORE_PASS_FORWARD;
    const Solver* s = find_solver(pass, algo, prob.device);
    if (!s)
        throw_not_supported(std::string(name) + (forward ? "" : std::string(" ") + kPasses[enum_int(pass)]) +
                            " is not implemented on " + (prob.device == CONVCORE_DEVICE_CPU ? "the CPU" : "CUDA") +
                            " in this build");
    const std::string why = s->why_not(run_problem(prob, s->runs_nhwc));  // the problem it would run
    if (!why.empty())  // every reason names the algorithm once (and a backward one its pass)
        throw_not_supported(why.find(name) != std::string::npos ? why
                            : forward ? std::string(name) + ": " + why
                                      : std::string(name) + " (" + kPasses[enum_int(pass)] + "): " + why);
    return *s;
}

bool prepares_filters(const convcoreConvolutionPlanStruct& plan) {
    // A 3-D plan runs one filter slice per depth tap: it prepares nothing (each call transforms),
    // unless its Winograd runs natively (core/depth_decomposition.hpp).
    if (plan.depth) return plan.depth->native_m > 0 && plan.pass == CONVCORE_PASS_FORWARD;
    const Solver* solver = plan.pass == CONVCORE_PASS_FORWARD ? plan.solver : nullptr;
    return solver && solver->prepare_filter && solver->prepared_filter_bytes &&
           plan.handle->device == CONVCORE_DEVICE_CPU && solver->prepared_filter_bytes(plan.run_prob) > 0;
}

namespace {

// The native 3-D Winograd's U (packed K x C x T x 3 x 3 w: the plan took no other layout), per
// tap or nested.
void prepare_native_3d(convcoreConvolutionPlanStruct& plan, const void* w, size_t* preparedBytes) {
    check_aligned(w, plan.prob.elem_size(), "w");
    const depth::DepthPlan& depth = *plan.depth;
    const size_t bytes = depth.prepared_bytes;
    void* storage = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!storage) throw Error(CONVCORE_STATUS_ALLOC_FAILED, "could not allocate " + std::to_string(bytes) +
                                                                " bytes for the prepared filters");
    std::shared_ptr<void> prepared(storage, std::free);
    cpu::native_3d::prepare(depth, *plan.handle, w, prepared.get());
    plan.prepared = std::move(prepared);
    plan.prepared_bytes = bytes;
    plan.prepared_for = w;
    if (preparedBytes) *preparedBytes = bytes;
}

}  // namespace

void prepare_filters(convcoreConvolutionPlanStruct& plan, const void* w, size_t* preparedBytes) {
    require(w, "w");
    if (preparedBytes) *preparedBytes = 0;
    plan.prepared.reset();
    plan.prepared_bytes = 0;
    plan.prepared_for = nullptr;
    const Solver* solver = plan.solver;
    if (plan.depth && plan.depth->native_m > 0 && plan.pass == CONVCORE_PASS_FORWARD)
        return prepare_native_3d(plan, w, preparedBytes);
    if (plan.depth || !solver->prepare_filter || plan.handle->device != CONVCORE_DEVICE_CPU) return;
    check_aligned(w, plan.prob.elem_size(), "w");
    const ConvProblem& run = plan.run_prob;
    const size_t bytes = solver->prepared_filter_bytes(run);
    if (bytes == 0) return;
    // A filter in another layout than packed KCRS is packed first, as an execution would.
    std::unique_ptr<void, decltype(&std::free)> staged(nullptr, std::free);
    if (plan.filter_bytes) {
        staged.reset(std::aligned_alloc(64, (plan.filter_bytes + 63) / 64 * 64));
        if (!staged) throw Error(CONVCORE_STATUS_ALLOC_FAILED, "could not allocate " +
                                                              std::to_string(plan.filter_bytes) +
                                                              " bytes to pack the filters");
        copy_strided(*plan.handle, plan.prob.elem_size(), w, w_view(plan.prob), staged.get(), w_view(run));
    }
    void* storage = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!storage) throw Error(CONVCORE_STATUS_ALLOC_FAILED, "could not allocate " + std::to_string(bytes) +
                                                                " bytes for the prepared filters");
    std::shared_ptr<void> prepared(storage, std::free);
    solver->prepare_filter(run, *plan.handle, staged ? staged.get() : w, prepared.get());
    plan.prepared = std::move(prepared);
    plan.prepared_bytes = bytes;
    plan.prepared_for = w;
    if (preparedBytes) *preparedBytes = bytes;
}

void staged_bytes(const ConvProblem& prob, const ConvProblem& run_prob, convcoreConvolutionPass_t pass,
                  size_t* first, size_t* second, size_t* filter) {
    const size_t elem = prob.elem_size();
    const auto bytes_unless_same = [&](const Strided4d& given, const Strided4d& run) {
        return same_layout(given.dims, given.strides, run.strides) ? size_t(0)
                                                                   : size_t(given.dims[0] * given.dims[1] * given.dims[2] * given.dims[3]) * elem;
    };
    const size_t x_bytes = bytes_unless_same(x_view(prob), x_view(run_prob));
    const size_t y_bytes = bytes_unless_same(y_view(prob), y_view(run_prob));
    *first = pass == CONVCORE_PASS_BACKWARD_DATA ? y_bytes : x_bytes;
    *second = pass == CONVCORE_PASS_BACKWARD_DATA ? x_bytes : y_bytes;
    *filter = bytes_unless_same(w_view(prob), w_view(run_prob));
}

size_t workspace_with_staging(const ConvProblem& prob, const ConvProblem& run_prob, convcoreConvolutionPass_t pass,
                              size_t solver_bytes) {
    convcoreConvolutionPlanStruct plan;
    plan.solver_bytes = solver_bytes;
    staged_bytes(prob, run_prob, pass, &plan.first_bytes, &plan.second_bytes, &plan.filter_bytes);
    return plan.workspace_bytes();
}

void execute(const convcoreConvolutionPlanStruct& plan, const void* alpha, const void* in0, const void* in1,
             const void* beta, void* out, void* workspace, size_t workspace_size, const Epilogue* fused) {
    if (plan.depth) {
        if (fused) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "a 3-D plan does not fuse the epilogue");
        return depth::execute(plan, alpha, in0, in1, beta, out, workspace, workspace_size);
    }
    const ConvProblem& prob = plan.prob;
    const PassNames names = names_of(plan.pass);
    require(alpha, "alpha");
    require(beta, "beta");
    require(in0, names.in0);
    require(in1, names.in1);
    require(out, names.out);
    const size_t total = plan.workspace_bytes();
    if (total > 0 && workspace_size < total)
        throw_bad_param("workspace: " + std::to_string(workspace_size) + " bytes given, " + plan_algo_name(plan) +
                        " needs " + std::to_string(total) + " for this problem (" + names.query + ")");
    if (total > 0 && !workspace)
        throw_bad_param("workspace is NULL but " + std::to_string(total) + " bytes are needed");
    const size_t elem = prob.elem_size();
    check_aligned(in0, elem, names.in0);
    check_aligned(in1, elem, names.in1);
    check_aligned(out, elem, names.out);
    if (total > 0) check_aligned(workspace, elem, "workspace");

    // The byte extents of the pass's tensors, and the output's distinct elements.
    const int64_t filter_extent = w_extent(prob);
    int64_t in0_extent = x_extent(prob), in1_extent = filter_extent, out_extent = y_extent(prob);
    if (plan.pass == CONVCORE_PASS_BACKWARD_DATA) {
        in0_extent = y_extent(prob);
        out_extent = x_extent(prob);
    } else if (plan.pass == CONVCORE_PASS_BACKWARD_FILTER) {
        in1_extent = y_extent(prob);
        out_extent = filter_extent;
    }
    if (plan.pass == CONVCORE_PASS_FORWARD) {
        const int64_t dims[4] = {prob.n, prob.k, prob.p, prob.q};
        if (!has_distinct_elements(dims, prob.y_strides))
            throw_bad_param("y: its strides make elements overlap (an output needs distinct elements)");
    } else if (plan.pass == CONVCORE_PASS_BACKWARD_DATA) {
        const int64_t dims[4] = {prob.n, prob.c, prob.h, prob.w};
        if (!has_distinct_elements(dims, prob.x_strides))
            throw_bad_param("dx: its strides make elements overlap (an output needs distinct elements)");
    } else {
        const int64_t dims[4] = {prob.k, prob.c_per_group(), prob.r, prob.s};
        if (!has_distinct_elements(dims, prob.w_strides))
            throw_bad_param("dw: its strides make elements overlap (an output needs distinct elements)");
    }
    if (ranges_overlap(out, out_extent, in0, in0_extent))
        throw_bad_param(std::string(names.out) + " overlaps " + names.in0 + ": the output must be a separate buffer");
    if (ranges_overlap(out, out_extent, in1, in1_extent))
        throw_bad_param(std::string(names.out) + " overlaps " + names.in1 + ": the output must be a separate buffer");

    double a, b;
    if (prob.dtype == CONVCORE_DATA_DOUBLE) {
        a = *static_cast<const double*>(alpha);
        b = *static_cast<const double*>(beta);
    } else {
        a = *static_cast<const float*>(alpha);
        b = *static_cast<const float*>(beta);
    }

    const Context& ctx = *plan.handle;
    char* first = static_cast<char*>(workspace) + align_up(plan.solver_bytes);
    char* second = first + align_up(plan.first_bytes);
    char* staged_filter = second + align_up(plan.second_bytes);
    void* solver_ws = plan.solver_bytes ? workspace : nullptr;
    const ConvProblem& run = plan.run_prob;
    switch (plan.pass) {
        case CONVCORE_PASS_FORWARD: {
            const void* x = in0;
            if (plan.first_bytes) {
                copy_strided(ctx, elem, in0, x_view(prob), first, x_view(run));
                x = first;
            }
            // y in another layout: the solver writes a packed result, blended into y afterwards.
            void* y = plan.second_bytes ? static_cast<void*>(second) : out;
            const void* prepared = in1 == plan.prepared_for ? plan.prepared.get() : nullptr;
            const void* w = in1;
            if (plan.filter_bytes && !prepared) {  // prepared filters are transformed already
                copy_strided(ctx, elem, in1, w_view(prob), staged_filter, w_view(run));
                w = staged_filter;
            }
            ConvArgs args{run, ctx, x, w, y, plan.second_bytes ? 1.0 : a, plan.second_bytes ? 0.0 : b, solver_ws,
                          prepared};
            if (fused) args.epilogue = *fused;
            plan.solver->run(args);
            if (plan.second_bytes) blend_strided(ctx, elem, second, y_view(run), out, y_view(prob), a, b);
            break;
        }
        case CONVCORE_PASS_BACKWARD_DATA: {
            const void* dy = in0;
            if (plan.first_bytes) {
                copy_strided(ctx, elem, in0, y_view(prob), first, y_view(run));
                dy = first;
            }
            void* dx = plan.second_bytes ? static_cast<void*>(second) : out;
            const void* w = in1;
            if (plan.filter_bytes) {
                copy_strided(ctx, elem, in1, w_view(prob), staged_filter, w_view(run));
                w = staged_filter;
            }
            plan.solver->run(BwdDataArgs{run, ctx, w, dy, dx, plan.second_bytes ? 1.0 : a,
                                       plan.second_bytes ? 0.0 : b, solver_ws});
            if (plan.second_bytes) blend_strided(ctx, elem, second, x_view(run), out, x_view(prob), a, b);
            break;
        }
        case CONVCORE_PASS_BACKWARD_FILTER: {
            const void* x = in0;
            const void* dy = in1;
            if (plan.first_bytes) {
                copy_strided(ctx, elem, in0, x_view(prob), first, x_view(run));
                x = first;
            }
            if (plan.second_bytes) {
                copy_strided(ctx, elem, in1, y_view(prob), second, y_view(run));
                dy = second;
            }
            // dw in another layout than packed KCRS: computed packed, then blended into dw.
            void* dw = plan.filter_bytes ? static_cast<void*>(staged_filter) : out;
            plan.solver->run(BwdFilterArgs{run, ctx, x, dy, dw, plan.filter_bytes ? 1.0 : a,
                                           plan.filter_bytes ? 0.0 : b, solver_ws});
            if (plan.filter_bytes) blend_strided(ctx, elem, staged_filter, w_view(run), out, w_view(prob), a, b);
            break;
        }
    }
}

bool fuses_epilogue(const convcoreConvolutionPlanStruct& plan) {
    // A staged y is written packed and then blended into the caller's layout: the epilogue
    // (whose z is in the caller's layout) then runs after the blend.
    // A 3-D plan sums several 2-D calls: the epilogue comes after the last (depth::apply_epilogue).
    return !plan.depth && plan.solver->fuses_epilogue && !plan.second_bytes &&
           plan.solver->fuses_epilogue(plan.run_prob);
}

void execute_bias_activation(const convcoreConvolutionPlanStruct& plan, const void* alpha1, const void* x,
                             const void* w, const void* alpha2, const void* z, const void* bias,
                             const convcoreActivationMode_t& activation, void* y, void* workspace,
                             size_t workspace_size) {
    if (plan.pass != CONVCORE_PASS_FORWARD)
        throw_bad_param("plan: the fused epilogue applies to forward plans (CONVCORE_PASS_FORWARD), this plan's "
                        "pass is " + std::to_string(int(plan.pass)));
    check_activation(activation, "activationMode");
    const int act = enum_int(activation);
    require(alpha1, "alpha1");
    require(x, "x");
    require(w, "w");
    require(y, "y");
    if (z) require(alpha2, "alpha2 (z is given)");
    const ConvProblem& prob = plan.prob;
    const size_t elem = prob.elem_size();
    const int64_t y_bytes = plan.depth ? plan.depth->prob.y_bytes : y_extent(prob);
    const int64_t x_bytes = plan.depth ? plan.depth->prob.x_bytes : x_extent(prob);
    const int64_t w_bytes = plan.depth ? plan.depth->prob.w_bytes : w_extent(prob);
    if (z) {
        check_aligned(z, elem, "z");
        if (ranges_overlap(z, y_bytes, x, x_bytes))
            throw_bad_param("z overlaps x: the residual must not share memory with the convolution's input");
        if (ranges_overlap(z, y_bytes, w, w_bytes))
            throw_bad_param("z overlaps w: the residual must not share memory with the filters");
        if (z != y && ranges_overlap(z, y_bytes, y, y_bytes))
            throw_bad_param("z overlaps y without being y: pass z == y to add the residual in place, or a "
                            "separate buffer");
    }
    if (bias) {
        check_aligned(bias, elem, "bias");
        if (ranges_overlap(bias, int64_t(prob.k) * int64_t(elem), y, y_bytes))
            throw_bad_param("bias overlaps y: the bias must be a separate buffer");
    }
    Epilogue e;
    e.bias = bias;
    e.z = z;
    e.alpha2 = 0;
    if (z) e.alpha2 = prob.dtype == CONVCORE_DATA_DOUBLE ? *static_cast<const double*>(alpha2)
                                                         : double(*static_cast<const float*>(alpha2));
    e.activation = convcoreActivationMode_t(act);
    const double zero_d = 0.0;
    const float zero_f = 0.0f;
    const void* zero = prob.dtype == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&zero_d) : &zero_f;
    if (e.none()) return execute(plan, alpha1, x, w, zero, y, workspace, workspace_size);
    if (fuses_epilogue(plan)) return execute(plan, alpha1, x, w, zero, y, workspace, workspace_size, &e);
    // The core applies it after the convolution, which must not overwrite z before it is read:
    // with z == y the convolution blends it itself (beta = alpha2), and the pass after adds the
    // bias and activates.
    const void* beta = zero;
    if (z == y) {
        beta = alpha2;
        e.z = nullptr;
    }
    execute(plan, alpha1, x, w, beta, y, workspace, workspace_size);
    if (plan.depth) return depth::apply_epilogue(plan, y, e);
    apply_epilogue(*plan.handle, elem, y, y_view(prob), e);
}

}  // namespace api
}  // namespace convcore

convcoreStatus_t convcoreCreateConvolutionPlan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                               convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                               convcoreConvolutionDescriptor_t convDesc,
                                               convcoreTensorDescriptor_t yDesc, int algo,
                                               convcoreConvolutionPlan_t* plan) {
    return guard([&] {
        require(plan, "plan");
        *plan = nullptr;
        const int pass_value = enum_int(pass);
        if (pass_value < CONVCORE_PASS_FORWARD || pass_value > CONVCORE_PASS_BACKWARD_FILTER)
            throw_bad_param("pass " + std::to_string(pass_value) + " is not a convcoreConvolutionPass_t");
        // One validated problem; a CONVCORE_PLAN_SELECT_* value is mapped to the core's select
        // mode and chosen on it (Select's decision cache, on the library's own buffers).
        // A 3-D problem is ranked on its representative 2-D problem and timed as itself
        // (core/selection.hpp).
        depth::DepthProblem depth_prob;
        const ConvProblem prob = pass_problem(handle, pass, xDesc, wDesc, convDesc, yDesc, &depth_prob);
        const bool is_3d = depth::is_3d(xDesc);
        if (algo < 0)
            algo = select_algorithm(handle, pass, prob, plan_select_mode_of(algo), TimingBuffers{},
                                    is_3d ? &depth_prob : nullptr);
        auto made = std::make_unique<convcoreConvolutionPlanStruct>(
            is_3d ? depth::make_plan(handle, pass, depth_prob, algo) : make_plan(handle, pass, prob, algo));
        *plan = made.release();
    });
}

convcoreStatus_t convcoreDestroyConvolutionPlan(convcoreConvolutionPlan_t plan) {
    return guard([&] { delete plan; });
}

convcoreStatus_t convcoreGetConvolutionPlanAlgorithm(convcoreConvolutionPlan_t plan, int* algo) {
    return guard([&] {
        require(plan, "plan");
        require(algo, "algo");
        *algo = plan->algo;
    });
}

convcoreStatus_t convcoreGetConvolutionPlanWorkspaceSize(convcoreConvolutionPlan_t plan, size_t* sizeInBytes) {
    return guard([&] {
        require(plan, "plan");
        require(sizeInBytes, "sizeInBytes");
        *sizeInBytes = plan->workspace_bytes();
    });
}

convcoreStatus_t convcoreExecuteConvolutionPlan(convcoreConvolutionPlan_t plan, const void* alpha, const void* in0,
                                                const void* in1, const void* beta, void* out, void* workspace,
                                                size_t workspaceSizeInBytes) {
    return guard([&] {
        require(plan, "plan");
        execute(*plan, alpha, in0, in1, beta, out, workspace, workspaceSizeInBytes);
    });
}

convcoreStatus_t convcoreExecuteConvolutionPlanBiasActivation(convcoreConvolutionPlan_t plan, const void* alpha1,
                                                             const void* x, const void* w, const void* alpha2,
                                                             const void* z, const void* bias,
                                                             convcoreActivationMode_t activationMode, void* y,
                                                             void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        require(plan, "plan");
        execute_bias_activation(*plan, alpha1, x, w, alpha2, z, bias, activationMode, y, workspace,
                                workspaceSizeInBytes);
    });
}

convcoreStatus_t convcorePrepareConvolutionPlanFilters(convcoreConvolutionPlan_t plan, const void* w,
                                                       size_t* preparedBytes) {
    return guard([&] {
        require(plan, "plan");
        prepare_filters(*plan, w, preparedBytes);
    });
}
