// 3-D convolutions as 2-D convolutions over depth ranges (core/depth_decomposition.hpp has the
// math). Everything runs through the 2-D plans of core/plan.hpp: the same checks, staging and
// solvers as a 2-D call, on either device.
#include "core/depth_decomposition.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/error.hpp"
#include "core/device.hpp"

namespace convcore {
namespace depth {

std::vector<Tap> reached_taps(int64_t d_in, int64_t d_out, int64_t pad, int64_t stride, int64_t dil, int64_t taps,
                              bool flip) {
    std::vector<Tap> out;
    for (int64_t t = 0; t < taps; ++t) {
        const int64_t offset = t * dil - pad;  // the input depth of output depth 0
        // the first od with od * stride + offset >= 0, and one past the last with it < d_in
        const int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
        const int64_t last = d_in - 1 - offset;
        const int64_t hi = last < 0 ? 0 : std::min(d_out, last / stride + 1);
        if (lo < hi) out.push_back(Tap{t, flip ? taps - 1 - t : t, lo, hi - lo, lo * stride + offset});
    }
    return out;
}

ConvProblem DepthProblem::plane(int64_t count) const {
    convcoreTensorStruct x = x2, y = y2;
    x.dims[0] = count;
    y.dims[0] = count;
    return make_problem(device, &x, &w2, &conv2, has_y ? &y : nullptr);
}

namespace {

std::string shape5(const int64_t d[5]) {
    std::string s = std::to_string(d[0]);
    for (int i = 1; i < 5; ++i) {
        s += 'x';
        s += std::to_string(d[i]);
    }
    return s;
}

}  // namespace

DepthProblem make_depth_problem(convcoreDeviceType_t device, const convcoreTensorStruct* x,
                                const convcoreFilterStruct* w, const convcoreConvolutionStruct* conv,
                                const convcoreTensorStruct* y) {
    int64_t out[4], d_out = 1;
    output_dims(x, w, conv, out, &d_out);  // set, dimension counts agree, non-empty output
    DepthProblem p;
    p.device = device;
    p.n = x->dims[0];
    p.d_in = x->d;
    p.d_out = d_out;
    p.taps = w->t;
    p.pad = conv->pad_d;
    p.stride = conv->stride_d;
    p.dil = conv->dil_d;
    p.x_n_stride = x->strides[0];
    p.x_d_stride = x->d_stride;
    p.w_t_stride = w->t_stride;
    const size_t elem = x->dtype == CONVCORE_DATA_DOUBLE ? 8 : 4;
    const int64_t xd[5] = {x->dims[0], x->dims[1], x->d, x->dims[2], x->dims[3]};
    const int64_t xs[5] = {x->strides[0], x->strides[1], x->d_stride, x->strides[2], x->strides[3]};
    std::copy(xd, xd + 5, p.x_dims);
    std::copy(xs, xs + 5, p.x_strides);
    const int64_t wd[4] = {w->k, w->c_per_group, w->r, w->s};
    std::copy(wd, wd + 4, p.w_dims);
    std::copy(w->strides, w->strides + 4, p.w_strides);
    p.x_bytes = tensor_extent_bytes(x, elem);
    p.w_bytes = filter_extent_bytes(w, elem);
    const int64_t yd[5] = {out[0], out[1], d_out, out[2], out[3]};
    std::copy(yd, yd + 5, p.y_dims);
    if (y) {  // y's checks in 3-D terms (the 2-D problems then repeat them on one depth range)
        if (!y->set) throw_bad_param("yDesc was created but never set (call convcoreSetTensorNdDescriptor)");
        if (y->dtype != x->dtype)
            throw_bad_param(std::string("y: data type ") + api::dtype_name(y->dtype) + " does not match x: " +
                            api::dtype_name(x->dtype));
        if (y->nb_dims != 5)
            throw_bad_param("y: " + dims_of("tensor", y->nb_dims) + " does not match x: " + dims_of("tensor", 5));
        const int64_t given[5] = {y->dims[0], y->dims[1], y->d, y->dims[2], y->dims[3]};
        if (!std::equal(given, given + 5, yd))
            throw_bad_param("y: shape " + shape5(given) + " does not match the output shape " + shape5(yd) +
                            " (use convcoreGetConvolutionNdForwardOutputDim)");
        const int64_t ys[5] = {y->strides[0], y->strides[1], y->d_stride, y->strides[2], y->strides[3]};
        std::copy(ys, ys + 5, p.y_strides);
        p.y_bytes = tensor_extent_bytes(y, elem);
        p.has_y = true;
    } else {  // a query without y: packed N x K x D' x P x Q
        const int64_t plane = out[2] * out[3];
        const int64_t ys[5] = {out[1] * d_out * plane, d_out * plane, plane, out[3], 1};
        std::copy(ys, ys + 5, p.y_strides);
        p.y_bytes = api::checked_mul(api::checked_mul(out[0], ys[0], "the output's size"), int64_t(elem),
                                     "the output's size");
    }
    p.y_n_stride = p.y_strides[0];
    p.y_d_stride = p.y_strides[2];

    // The 2-D descriptors of one image's depth range: x2's batch steps stride_d input depths, y2's
    // one output depth; w2 is one depth tap of w (a strided K x C/g x R x S view).
    p.x2 = *x;
    p.x2.nb_dims = 4;
    p.x2.d = 1;
    p.x2.d_stride = 0;
    p.x2.strides[0] = api::checked_mul(p.stride, x->d_stride, "x's depth step");
    p.w2 = *w;
    p.w2.nb_dims = 4;
    p.w2.t = 1;
    p.w2.t_stride = 0;
    p.conv2 = *conv;
    p.conv2.spatial_dims = 2;
    p.conv2.pad_d = 0;
    p.conv2.stride_d = 1;
    p.conv2.dil_d = 1;
    // A 3-D plan transforms each tap's filter slice per call (it prepares nothing): selection
    // judges the 2-D problem by its per-call times whatever the descriptor's filter protocol.
    p.conv2.prepared_filters = false;
    if (y) {
        p.y2 = *y;
        p.y2.nb_dims = 4;
        p.y2.d = 1;
        p.y2.d_stride = 0;
        p.y2.strides[0] = y->d_stride;
    }
    p.reached = reached_taps(p.d_in, p.d_out, p.pad, p.stride, p.dil, p.taps, conv->mode == CONVCORE_CONVOLUTION);
    for (const Tap& t : p.reached) p.largest_count = std::max(p.largest_count, t.count);
    p.representative();  // the 2-D checks (data types, groups) once, on the problem queries see
    return p;
}

const convcoreConvolutionPlanStruct& DepthPlan::plan_for(int64_t count) const {
    for (const auto& entry : plans)
        if (entry.first == count) return entry.second;
    throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "3-D plan: no 2-D plan for a batch of " + std::to_string(count));
}

convcoreConvolutionPlanStruct make_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                        const DepthProblem& prob, int algo) {
    convcoreConvolutionPlanStruct plan = api::make_plan(handle, pass, prob.representative(), algo);
    auto depth = std::make_shared<DepthPlan>();
    depth->prob = prob;
    if (cpu::native_3d::plan(prob, plan.prob, pass, algo, *depth)) {  // the CPU's native 3-D forms
        plan.depth = std::move(depth);
        return plan;
    }
    for (const Tap& t : prob.reached) {
        const bool known = std::any_of(depth->plans.begin(), depth->plans.end(),
                                       [&](const auto& entry) { return entry.first == t.count; });
        if (known) continue;
        depth->plans.emplace_back(t.count, api::make_plan(handle, pass, prob.plane(t.count), algo));
        depth->workspace = std::max(depth->workspace, depth->plans.back().second.workspace_bytes());
    }
    plan.depth = std::move(depth);
    return plan;
}

namespace {

// One image's N x C x D x H x W tensor as a 4-D view D x C x H x W (dims and strides in N, C, D,
// H, W order).
Strided4d image_view(const int64_t dims[5], const int64_t strides[5]) {
    return Strided4d{{dims[2], dims[1], dims[3], dims[4]}, {strides[2], strides[1], strides[3], strides[4]}};
}

template <typename T>
T* at(T* base, int64_t elements, size_t elem) {
    using Byte = std::conditional_t<std::is_const<T>::value, const char, char>;
    return reinterpret_cast<T*>(reinterpret_cast<Byte*>(base) + elements * int64_t(elem));
}

}  // namespace

void execute(const convcoreConvolutionPlanStruct& plan, const void* alpha, const void* in0, const void* in1,
             const void* beta, void* out, void* workspace, size_t workspace_size) {
    const DepthPlan& depth = *plan.depth;
    const DepthProblem& p = depth.prob;
    const api::PassNames names = api::names_of(plan.pass);
    api::require(alpha, "alpha");
    api::require(beta, "beta");
    api::require(in0, names.in0);
    api::require(in1, names.in1);
    api::require(out, names.out);
    if (depth.workspace > 0 && workspace_size < depth.workspace)
        throw_bad_param("workspace: " + std::to_string(workspace_size) + " bytes given, " +
                        algo_name(plan.pass, plan.algo) + " needs " + std::to_string(depth.workspace) +
                        " for this problem (" + names.query + ")");
    if (depth.workspace > 0 && !workspace)
        throw_bad_param("workspace is NULL but " + std::to_string(depth.workspace) + " bytes are needed");
    // The whole tensors' checks (each 2-D call checks its own views again).
    int64_t in0_bytes = p.x_bytes, in1_bytes = p.w_bytes, out_bytes = p.y_bytes;
    if (plan.pass == CONVCORE_PASS_BACKWARD_DATA) in0_bytes = p.y_bytes, out_bytes = p.x_bytes;
    if (plan.pass == CONVCORE_PASS_BACKWARD_FILTER) in1_bytes = p.y_bytes, out_bytes = p.w_bytes;
    if (plan.pass == CONVCORE_PASS_FORWARD && !api::has_distinct_elements(p.y_dims, p.y_strides, 5))
        throw_bad_param("y: its strides make elements overlap (an output needs distinct elements)");
    if (plan.pass == CONVCORE_PASS_BACKWARD_DATA && !api::has_distinct_elements(p.x_dims, p.x_strides, 5))
        throw_bad_param("dx: its strides make elements overlap (an output needs distinct elements)");
    if (api::ranges_overlap(out, out_bytes, in0, in0_bytes))
        throw_bad_param(std::string(names.out) + " overlaps " + names.in0 + ": the output must be a separate buffer");
    if (api::ranges_overlap(out, out_bytes, in1, in1_bytes))
        throw_bad_param(std::string(names.out) + " overlaps " + names.in1 + ": the output must be a separate buffer");

    const size_t elem = plan.prob.elem_size();
    const bool f64 = elem == 8;
    const double one_d = 1.0;
    const float one_f = 1.0f;
    const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
    const double beta_value = f64 ? *static_cast<const double*>(beta) : double(*static_cast<const float*>(beta));
    const Context& ctx = *plan.handle;
    const auto run = [&](const Tap& tap, const void* a, const void* b, void* o, const void* beta_call) {
        api::execute(depth.plan_for(tap.count), alpha, a, b, beta_call, o, workspace, workspace_size);
    };

    if (depth.native()) {  // y = alpha * conv3d(x, w) + beta * y in one call
        api::check_aligned(in0, elem, names.in0);
        api::check_aligned(in1, elem, names.in1);
        api::check_aligned(out, elem, names.out);
        const double alpha_value = f64 ? *static_cast<const double*>(alpha) : double(*static_cast<const float*>(alpha));
        const void* U = plan.prepared_for == in1 ? plan.prepared.get() : nullptr;
        cpu::native_3d::run(depth, plan.pass, ctx, in0, in1, U, out, alpha_value, beta_value, workspace);
        return;
    }
    switch (plan.pass) {
        case CONVCORE_PASS_FORWARD: {
            // y[n, :, od_lo ..] += conv2d(x[n, :, id_lo, id_lo + stride ..], w[:, :, filter_t])
            const auto covers = [&](const Tap& t) { return t.od_lo == 0 && t.count == p.d_out; };
            const auto first = std::find_if(p.reached.begin(), p.reached.end(), covers);
            for (int64_t n = 0; n < p.n; ++n) {
                void* y_n = at(out, n * p.y_n_stride, elem);
                if (first == p.reached.end()) api::scale_strided(ctx, elem, y_n, image_view(p.y_dims, p.y_strides), beta_value);
                const auto forward = [&](const Tap& t, const void* beta_call) {
                    run(t, at(in0, n * p.x_n_stride + t.id_lo * p.x_d_stride, elem), at(in1, t.filter_t * p.w_t_stride, elem),
                        at(y_n, t.od_lo * p.y_d_stride, elem), beta_call);
                };
                if (first != p.reached.end()) forward(*first, beta);
                for (auto t = p.reached.begin(); t != p.reached.end(); ++t)
                    if (t != first) forward(*t, one);
            }
            break;
        }
        case CONVCORE_PASS_BACKWARD_DATA: {
            // dx[n, :, id_lo, id_lo + stride ..] += conv2d_backward_data(dy[n, :, od_lo ..], w[:, :, filter_t])
            const auto covers = [&](const Tap& t) { return t.id_lo == 0 && t.count == p.d_in; };
            const auto first = std::find_if(p.reached.begin(), p.reached.end(), covers);
            for (int64_t n = 0; n < p.n; ++n) {
                void* dx_n = at(out, n * p.x_n_stride, elem);
                if (first == p.reached.end()) api::scale_strided(ctx, elem, dx_n, image_view(p.x_dims, p.x_strides), beta_value);
                const auto backward = [&](const Tap& t, const void* beta_call) {
                    run(t, at(in0, n * p.y_n_stride + t.od_lo * p.y_d_stride, elem), at(in1, t.filter_t * p.w_t_stride, elem),
                        at(dx_n, t.id_lo * p.x_d_stride, elem), beta_call);
                };
                if (first != p.reached.end()) backward(*first, beta);
                for (auto t = p.reached.begin(); t != p.reached.end(); ++t)
                    if (t != first) backward(*t, one);
            }
            break;
        }
        case CONVCORE_PASS_BACKWARD_FILTER: {
            // dw[:, :, filter_t] = alpha * sum over n of conv2d_backward_filter(x[n, ...], dy[n, ...]) + beta * dw[...]
            for (int64_t t = 0; t < p.taps; ++t) {
                const auto tap = std::find_if(p.reached.begin(), p.reached.end(), [&](const Tap& r) { return r.t == t; });
                if (tap == p.reached.end()) {  // only padding: dw[:, :, filter_t] = beta * dw[:, :, filter_t]
                    const int64_t filter_t = plan.prob.flip ? p.taps - 1 - t : t;
                    Strided4d view{{p.w_dims[0], p.w_dims[1], p.w_dims[2], p.w_dims[3]},
                                   {p.w_strides[0], p.w_strides[1], p.w_strides[2], p.w_strides[3]}};
                    api::scale_strided(ctx, elem, at(out, filter_t * p.w_t_stride, elem), view, beta_value);
                    continue;
                }
                void* dw_t = at(out, tap->filter_t * p.w_t_stride, elem);
                for (int64_t n = 0; n < p.n; ++n)
                    run(*tap, at(in0, n * p.x_n_stride + tap->id_lo * p.x_d_stride, elem),
                        at(in1, n * p.y_n_stride + tap->od_lo * p.y_d_stride, elem), dw_t, n == 0 ? beta : one);
            }
            break;
        }
    }
}

void apply_epilogue(const convcoreConvolutionPlanStruct& plan, void* y, const Epilogue& e) {
    const DepthProblem& p = plan.depth->prob;
    const size_t elem = plan.prob.elem_size();
    for (int64_t n = 0; n < p.n; ++n) {
        Epilogue image = e;
        if (e.z) image.z = at(e.z, n * p.y_n_stride, elem);
        api::apply_epilogue(*plan.handle, elem, at(y, n * p.y_n_stride, elem), image_view(p.y_dims, p.y_strides),
                            image);
    }
}

}  // namespace depth
}  // namespace convcore
