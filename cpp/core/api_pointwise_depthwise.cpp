// The C API of the fused 1x1 -> depthwise pair (convcore.h; the CPU pass: core/device.hpp): its
// plan validates the descriptors into the two convolutions' problems once, keeps the prepared
// filters, and runs the CPU pass.
#include <memory>
#include <string>

#include "core/api_util.hpp"
#include "core/context.hpp"
#include "core/descriptors.hpp"
#include "core/plan.hpp"
#include "core/device.hpp"

using namespace convcore;
using namespace convcore::api;

struct convcorePointwiseDepthwisePlanStruct {
    convcoreHandle_t handle = nullptr;
    ConvProblem pw, dw;  // the 1x1 and the depthwise problem, packed NHWC
    std::shared_ptr<void> prepared;
    const void* prepared_pw = nullptr;  // the filters `prepared` was made from
    const void* prepared_dw = nullptr;
};

namespace {

std::shared_ptr<void> prepared_filters(const convcorePointwiseDepthwisePlanStruct& plan, const void* w_pw,
                                       const void* w_dw) {
    std::shared_ptr<void> out(::operator new(cpu::pointwise_depthwise::prepared_bytes(plan.pw, plan.dw),
                                             std::align_val_t(64)),
                              [](void* p) { ::operator delete(p, std::align_val_t(64)); });
    cpu::pointwise_depthwise::prepare(plan.pw, plan.dw, w_pw, w_dw, out.get());
    return out;
}

Epilogue epilogue_of(const void* bias, convcoreActivationMode_t act) {
    Epilogue e;
    e.bias = bias;
    e.activation = convcoreActivationMode_t(enum_int(act));
    return e;
}

}  // namespace

extern "C" {

convcoreStatus_t convcoreCreatePointwiseDepthwisePlan(convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc,
                                                      convcoreFilterDescriptor_t wPwDesc,
                                                      convcoreFilterDescriptor_t wDwDesc,
                                                      convcoreConvolutionDescriptor_t dwConvDesc,
                                                      convcoreTensorDescriptor_t yDesc,
                                                      convcorePointwiseDepthwisePlan_t* plan) {
    return guard([&] {
        require(plan, "plan");
        *plan = nullptr;
        require(handle, "handle");
        require(xDesc, "xDesc");
        require(wPwDesc, "wPwDesc");
        require(wDwDesc, "wDwDesc");
        require(dwConvDesc, "dwConvDesc");
        require(yDesc, "yDesc");
        if (handle->device != CONVCORE_DEVICE_CPU)
            throw_not_supported("the fused 1x1 -> depthwise pair runs on CPU handles only");
        if (!xDesc->set) throw_bad_param("xDesc was created but never set");
        if (!wPwDesc->set) throw_bad_param("wPwDesc was created but never set");
        if (wPwDesc->r != 1 || wPwDesc->s != 1 || wPwDesc->c_per_group != xDesc->dims[1])
            throw_bad_param("wPwDesc: " + std::to_string(wPwDesc->k) + "x" + std::to_string(wPwDesc->c_per_group) + "x" +
                            std::to_string(wPwDesc->r) + "x" + std::to_string(wPwDesc->s) +
                            " must be K x C x 1 x 1 with x's C=" + std::to_string(xDesc->dims[1]));
        convcoreConvolutionStruct unit;  // stride 1, no padding, one group
        unit.spatial_dims = xDesc->nb_dims - 2;  // x's dimension count (make_problem checks they agree)
        auto made = std::make_unique<convcorePointwiseDepthwisePlanStruct>();
        made->handle = handle;
        ConvProblem pw = make_problem(CONVCORE_DEVICE_CPU, xDesc, wPwDesc, &unit, nullptr);
        // The 1x1's output as the depthwise convolution's input: packed NHWC.
        convcoreTensorStruct expanded;
        expanded.set = true;
        expanded.nb_dims = xDesc->nb_dims;
        expanded.dtype = pw.dtype;
        const int64_t dims[4] = {pw.n, pw.k, pw.p, pw.q};
        std::copy(dims, dims + 4, expanded.dims);
        packed_nhwc_strides(pw.n, pw.k, pw.p, pw.q, expanded.strides);
        ConvProblem dw = make_problem(CONVCORE_DEVICE_CPU, &expanded, wDwDesc, dwConvDesc, yDesc);
        const int64_t x_dims[4] = {pw.n, pw.c, pw.h, pw.w}, y_dims[4] = {dw.n, dw.k, dw.p, dw.q};
        if (!is_packed_nhwc(x_dims, pw.x_strides))
            throw_not_supported("the fused 1x1 -> depthwise pair needs x packed NHWC");
        if (!is_packed_nhwc(y_dims, dw.y_strides))
            throw_not_supported("the fused 1x1 -> depthwise pair needs y packed NHWC");
        if (!pw.w_packed() || !dw.w_packed())
            throw_not_supported("the fused 1x1 -> depthwise pair needs packed K x C x R x S filters");
        pw.nhwc = dw.nhwc = true;
        packed_nhwc_strides(pw.n, pw.k, pw.p, pw.q, pw.y_strides);
        const std::string why = cpu::pointwise_depthwise::why_not(pw, dw);
        if (!why.empty()) throw_not_supported(why);
        made->pw = pw;
        made->dw = dw;
        *plan = made.release();
    });
}

convcoreStatus_t convcoreDestroyPointwiseDepthwisePlan(convcorePointwiseDepthwisePlan_t plan) {
    return guard([&] { delete plan; });
}

convcoreStatus_t convcorePreparePointwiseDepthwisePlanFilters(convcorePointwiseDepthwisePlan_t plan,
                                                              const void* wPw, const void* wDw) {
    return guard([&] {
        require(plan, "plan");
        require(wPw, "wPw");
        require(wDw, "wDw");
        plan->prepared.reset();
        plan->prepared_pw = plan->prepared_dw = nullptr;
        plan->prepared = prepared_filters(*plan, wPw, wDw);
        plan->prepared_pw = wPw;
        plan->prepared_dw = wDw;
    });
}

convcoreStatus_t convcoreExecutePointwiseDepthwisePlan(convcorePointwiseDepthwisePlan_t plan, const void* x,
                                                       const void* wPw, const void* biasPw,
                                                       convcoreActivationMode_t actPw, const void* wDw,
                                                       const void* biasDw, convcoreActivationMode_t actDw, void* y) {
    return guard([&] {
        require(plan, "plan");
        require(x, "x");
        require(wPw, "wPw");
        require(wDw, "wDw");
        require(y, "y");
        check_activation(actPw, "actPw");
        check_activation(actDw, "actDw");
        const ConvProblem &pw = plan->pw, &dw = plan->dw;
        const size_t elem = pw.elem_size();
        const int64_t y_bytes = y_extent(dw), k_bytes = pw.k * int64_t(elem);
        const struct {
            const void* p;
            int64_t bytes;
            const char* name;
        } inputs[] = {{x, x_extent(pw), "x"}, {wPw, w_extent(pw), "wPw"}, {biasPw, k_bytes, "biasPw"},
                      {wDw, w_extent(dw), "wDw"}, {biasDw, k_bytes, "biasDw"}};
        check_aligned(y, elem, "y");
        for (const auto& in : inputs) {
            if (!in.p) continue;
            check_aligned(in.p, elem, in.name);
            if (ranges_overlap(y, y_bytes, in.p, in.bytes))
                throw_bad_param(std::string("y overlaps ") + in.name + ": the output must be a separate buffer");
        }
        std::shared_ptr<void> prepared = plan->prepared;
        if (!prepared || plan->prepared_pw != wPw || plan->prepared_dw != wDw)
            prepared = prepared_filters(*plan, wPw, wDw);  // per call, as an unprepared plan
        const int threads = plan->handle->threads();
        cpu::pointwise_depthwise::run(pw, dw, x, prepared.get(), epilogue_of(biasPw, actPw), epilogue_of(biasDw, actDw),
                                      y, threads);
    });
}

}  // extern "C"
