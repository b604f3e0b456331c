// Backward passes by reduction to a forward solver: see core/backward_via_forward.hpp.
#include "core/backward_via_forward.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/permute_planes.hpp"
#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/error.hpp"

namespace convcore {
namespace via_forward {
namespace {

std::string dims2(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// The forward solver of `fwd` on the problem's device, or the reason there is none.
const Solver* forward_solver(const ConvProblem& prob, convcoreConvolutionFwdAlgo_t fwd,
                             std::string* why) {
    const Solver* s = find_solver(fwd, prob.device);
    if (!s)
        *why = std::string(algo_name(CONVCORE_PASS_FORWARD, int(fwd))) + " has no forward solver on " +
               (prob.device == CONVCORE_DEVICE_CPU ? "the CPU" : "CUDA") + " in this build";
    return s;
}

std::string needs_unit_stride(const ConvProblem& p, const char* pass) {
    if (p.unit_stride()) return "";
    return std::string("the ") + pass + " pass by reduction to the forward solver needs stride 1, got stride " +
           dims2(p.stride_h, p.stride_w) + " (DIRECT, IM2COL_GEMM and IMPLICIT_GEMM run every stride)";
}

// The forward solver's reason, said as the reduction's.
std::string forward_reason(const std::string& why, const char* pass) {
    return std::string("the ") + pass + " pass runs as a forward convolution that the forward solver refuses: " +
           why;
}

size_t bytes(int64_t elems, const ConvProblem& p) { return size_t(elems) * p.elem_size(); }

// The data movements, as on CUDA (common/permute_planes.hpp: one definition of each
// transpose for both devices): whole planes copied on the CPU.
template <typename T>
void permute_planes(const PlanePermutation& pm, const T* src, T* dst, int threads) {
    const int64_t planes = pm.dst_dims[0] * pm.dst_dims[1] * pm.dst_dims[2];
    if (pm.plane == 0) return;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t q = 0; q < planes; ++q) {
        const T* from = src + permuted_source(pm, q * pm.plane);
        std::copy(from, from + pm.plane, dst + q * pm.plane);
    }
}

template <typename T>
void store_dw(const ConvProblem& p, const T* yt, T* dw, T alpha, T beta, int threads) {
    const int64_t cg = p.c_per_group();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < p.w_elems(); ++i)
        blend_store(dw + i, yt[reduced_filter_source(p.k, cg, p.r, p.s, p.flip, i)], alpha, beta);
}

// The CPU movers (Movers in the header), dispatched on the dtype.
#define CONVCORE_BY_DTYPE(p, call_double, call_float) \
    do {                                                \
        if ((p).dtype == CONVCORE_DATA_DOUBLE)          \
            call_double;                                \
        else                                            \
            call_float;                                 \
    } while (0)

void cpu_permute(const Context& ctx, const ConvProblem& p, const PlanePermutation& pm, const void* src,
                 void* dst) {
    CONVCORE_BY_DTYPE(p,
        permute_planes(pm, static_cast<const double*>(src), static_cast<double*>(dst), ctx.threads()),
        permute_planes(pm, static_cast<const float*>(src), static_cast<float*>(dst), ctx.threads()));
}
void cpu_filter_t(const Context& ctx, const ConvProblem& p, const void* w, void* wt) {
    cpu_permute(ctx, p, filter_transpose(p.groups, p.k_per_group(), p.c_per_group(), p.r * p.s), w, wt);
}
void cpu_x_t(const Context& ctx, const ConvProblem& p, const void* x, void* xt) {
    cpu_permute(ctx, p, input_transpose(p.n, p.groups, p.c_per_group(), p.h * p.w), x, xt);
}
void cpu_dy_t(const Context& ctx, const ConvProblem& p, const void* dy, void* dyt) {
    cpu_permute(ctx, p, swap_outer_axes(p.n, p.k, p.p * p.q), dy, dyt);
}
void cpu_store_dw(const Context& ctx, const ConvProblem& p, const void* yt, void* dw, double alpha,
                  double beta) {
    CONVCORE_BY_DTYPE(p,
        store_dw(p, static_cast<const double*>(yt), static_cast<double*>(dw), alpha, beta, ctx.threads()),
        store_dw(p, static_cast<const float*>(yt), static_cast<float*>(dw), float(alpha), float(beta),
                 ctx.threads()));
}
#undef CONVCORE_BY_DTYPE

const Movers kCpuMovers = {cpu_filter_t, cpu_x_t, cpu_dy_t, cpu_store_dw};

const Movers& movers_for(const ConvProblem& p) {
#ifdef CONVCORE_WITH_CUDA
    if (p.device == CONVCORE_DEVICE_CUDA) return cuda_movers();
#endif
    if (p.device != CONVCORE_DEVICE_CPU)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "backward via forward: no data movers for this device");
    return kCpuMovers;
}

}  // namespace

// ---- backward data ----------------------------------------------------------------------------

ConvProblem data_problem(const ConvProblem& p) {
    ConvProblem f;
    f.device = p.device;
    f.dtype = p.dtype;
    f.n = p.n;
    f.c = p.k;
    f.h = p.p;
    f.w = p.q;
    f.k = p.c;
    f.r = p.r;
    f.s = p.s;
    f.groups = p.groups;
    f.pad_h = p.dil_h * (p.r - 1) - p.pad_h;
    f.pad_w = p.dil_w * (p.s - 1) - p.pad_w;
    f.stride_h = f.stride_w = 1;
    f.dil_h = p.dil_h;
    f.dil_w = p.dil_w;
    f.flip = !p.flip;
    f.p = conv_output_size(f.h, f.pad_h, f.r, 1, f.dil_h);  // = H
    f.q = conv_output_size(f.w, f.pad_w, f.s, 1, f.dil_w);  // = W
    return f.packed();
}

// The problem the forward solver runs: NHWC when the backward pass runs NHWC (dy is the forward
// problem's input and dx its output, both in the caller's layout).
ConvProblem data_run_problem(const ConvProblem& p) {
    ConvProblem f = data_problem(p);
    if (p.nhwc) {
        packed_nhwc_strides(f.n, f.c, f.h, f.w, f.x_strides);
        packed_nhwc_strides(f.n, f.k, f.p, f.q, f.y_strides);
        f.nhwc = true;
    }
    return f;
}

bool data_runs_nhwc(const ConvProblem& p, convcoreConvolutionFwdAlgo_t fwd) {
    const Solver* s = find_solver(fwd, p.device);
    return s && s->runs_nhwc && s->runs_nhwc(data_problem(p));
}

MadeFor data_made_for(const ConvProblem& p, convcoreConvolutionFwdAlgo_t fwd) {
    const Solver* s = find_solver(fwd, p.device);
    return s ? s->made_for_problem(data_problem(p)) : MadeFor::No;
}

std::string data_why_not(const ConvProblem& p, convcoreConvolutionFwdAlgo_t fwd) {
    std::string why = needs_unit_stride(p, "backward-data");
    if (!why.empty()) return why;
    if (p.pad_h > p.dil_h * (p.r - 1) || p.pad_w > p.dil_w * (p.s - 1))
        return "the backward-data pass by reduction to the forward solver needs padding <= "
               "dilation*(filter size - 1) (dy is padded by the difference), got padding " +
               dims2(p.pad_h, p.pad_w) + " with a " + dims2(p.r, p.s) + " filter, dilation " +
               dims2(p.dil_h, p.dil_w);
    const Solver* s = forward_solver(p, fwd, &why);
    if (!s) return why;
    const ConvProblem f = data_problem(p);
    if (f.p != p.h || f.q != p.w)
        return "internal: the backward-data reduction's output " + dims2(f.p, f.q) +
               " is not the input size " + dims2(p.h, p.w);
    why = s->why_not(f);
    return why.empty() ? "" : forward_reason(why, "backward-data");
}

size_t data_workspace_bytes(const ConvProblem& p, convcoreConvolutionFwdAlgo_t fwd) {
    const ConvProblem f = data_run_problem(p);
    return api::align_up(bytes(p.w_elems(), p)) + find_solver(fwd, p.device)->workspace_bytes(f);
}

void data_run(const BwdDataArgs& a, convcoreConvolutionFwdAlgo_t fwd) {
    const ConvProblem& p = a.prob;
    const ConvProblem f = data_run_problem(p);
    const Solver* s = find_solver(fwd, p.device);
    if (!s) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "backward data: no forward solver");
    char* ws = static_cast<char*>(a.workspace);
    void* wt = ws;
    movers_for(p).filter_t(a.ctx, p, a.w, wt);
    const size_t own = s->workspace_bytes(f);
    const ConvArgs args{f, a.ctx, a.dy, wt, a.dx, a.alpha, a.beta,
                        own ? ws + api::align_up(bytes(p.w_elems(), p)) : nullptr};
    s->run(args);
}

// ---- backward filter --------------------------------------------------------------------------

ConvProblem filter_problem(const ConvProblem& p) {
    ConvProblem f;
    f.device = p.device;
    f.dtype = p.dtype;
    f.n = p.c_per_group();
    f.c = p.groups * p.n;
    f.h = p.h;
    f.w = p.w;
    f.k = p.k;
    f.r = p.p;
    f.s = p.q;
    f.groups = p.groups;
    f.pad_h = p.pad_h;
    f.pad_w = p.pad_w;
    f.stride_h = p.dil_h;
    f.stride_w = p.dil_w;
    f.dil_h = f.dil_w = 1;
    f.flip = false;
    f.p = conv_output_size(f.h, f.pad_h, f.r, f.stride_h, 1);  // = R
    f.q = conv_output_size(f.w, f.pad_w, f.s, f.stride_w, 1);  // = S
    return f.packed();
}

namespace {
struct FilterLayout {
    size_t xt, dyt, yt;  // aligned byte sizes of x', dy', y'
    size_t total_transposes() const { return xt + dyt + yt; }
};
FilterLayout filter_layout(const ConvProblem& p) {
    return {api::align_up(bytes(p.x_elems(), p)), api::align_up(bytes(p.y_elems(), p)),
            api::align_up(bytes(p.w_elems(), p))};
}
}  // namespace

std::string filter_why_not(const ConvProblem& p, convcoreConvolutionFwdAlgo_t fwd) {
    std::string why = needs_unit_stride(p, "backward-filter");
    if (!why.empty()) return why;
    const Solver* s = forward_solver(p, fwd, &why);
    if (!s) return why;
    const ConvProblem f = filter_problem(p);
    if (f.p != p.r || f.q != p.s)
        return "internal: the backward-filter reduction's output " + dims2(f.p, f.q) +
               " is not the filter size " + dims2(p.r, p.s);
    why = s->why_not(f);
    return why.empty() ? "" : forward_reason(why, "backward-filter");
}

size_t filter_workspace_bytes(const ConvProblem& p, convcoreConvolutionFwdAlgo_t fwd) {
    return filter_layout(p).total_transposes() +
           find_solver(fwd, p.device)->workspace_bytes(filter_problem(p));
}

void filter_run(const BwdFilterArgs& a, convcoreConvolutionFwdAlgo_t fwd) {
    const ConvProblem f = filter_problem(a.prob);
    const Solver* s = find_solver(fwd, a.prob.device);
    if (!s) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "backward filter: no forward solver");
    const ConvProblem& p = a.prob;
    const Movers& m = movers_for(p);
    const FilterLayout lay = filter_layout(p);
    char* ws = static_cast<char*>(a.workspace);
    char* xt = ws;
    char* dyt = ws + lay.xt;
    char* yt = ws + lay.xt + lay.dyt;
    m.x_t(a.ctx, p, a.x, xt);
    m.dy_t(a.ctx, p, a.dy, dyt);
    const ConvArgs args{f, a.ctx, xt, dyt, yt, 1.0, 0.0,
                        s->workspace_bytes(f) ? ws + lay.total_transposes() : nullptr};
    s->run(args);
    m.store_dw(a.ctx, p, yt, a.dw, a.alpha, a.beta);
}

}  // namespace via_forward
}  // namespace convcore
