// The C API of the backward passes (convcore.h, "backward passes"): backward data, backward
// filter, the bias gradient, their workspace queries, heuristic rankings and algorithm names.
// Same discipline as the forward entry points in core/api.cpp: argument checks naming the
// argument (BAD_PARAM), NOT_SUPPORTED with the algorithm's reason, strided tensors staged
// through the workspace so that solvers only see packed ones, beta == 0 never reads the output.
#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>
#include <vector>

#include "common/epilogue.hpp"
#include "convcore/convcore.h"
#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/depth_decomposition.hpp"
#include "core/descriptors.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/plan_cache.hpp"
#include "core/select_backward.hpp"
#include "core/selection.hpp"
#include "core/solver.hpp"

using namespace convcore;
using namespace convcore::api;

namespace {

// make_problem's reasons speak of the forward pass's x, w and y; say dx, dw, dy instead
// where the caller passed gradients. Renames whole identifiers only ("x", "xDesc", ...).
std::string rename_args(const std::string& reason, bool x_is_dx, bool w_is_dw) {
    std::string out;
    size_t i = 0;
    auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    while (i < reason.size()) {
        if (!ident(reason[i])) {
            out += reason[i++];
            continue;
        }
        size_t j = i;
        while (j < reason.size() && ident(reason[j])) ++j;
        const std::string tok = reason.substr(i, j - i);
        const bool is_x = tok == "x" || tok == "xDesc", is_w = tok == "w" || tok == "wDesc";
        const bool is_y = tok == "y" || tok == "yDesc";
        if (is_y || (is_x && x_is_dx) || (is_w && w_is_dw))
            out += "d" + tok;
        else
            out += tok;
        i = j;
    }
    return out;
}

}  // namespace

namespace convcore {
namespace api {

// The forward problem of a backward call, validated (reasons in the backward's names).
ConvProblem backward_problem(convcoreHandle_t handle, const convcoreTensorStruct* x,
                             const convcoreFilterStruct* w, convcoreConvolutionDescriptor_t conv,
                             const convcoreTensorStruct* dy, bool data, depth::DepthProblem* depth) {
    require(handle, "handle");
    if (!dy) throw_bad_param("dyDesc is NULL");
    try {
        if (depth::is_3d(x)) {
            depth::DepthProblem prob = depth::make_depth_problem(handle->device, x, w, conv, dy);
            ConvProblem representative = prob.representative();
            if (depth) *depth = std::move(prob);
            return representative;
        }
        return make_problem(handle->device, x, w, conv, dy);
    } catch (const Error& e) {
        throw Error(e.status(), rename_args(e.what(), data, !data));
    }
}

}  // namespace api
}  // namespace convcore

namespace {

size_t data_workspace(const ConvProblem& prob, const Solver& s) {
    const ConvProblem run = run_problem(prob, s.runs_nhwc);
    return workspace_with_staging(prob, run, CONVCORE_PASS_BACKWARD_DATA, s.workspace_bytes(run));
}

size_t filter_workspace(const ConvProblem& prob, const Solver& s) {
    const ConvProblem run = run_problem(prob, s.runs_nhwc);
    return workspace_with_staging(prob, run, CONVCORE_PASS_BACKWARD_FILTER, s.workspace_bytes(run));
}

}  // namespace

namespace convcore {

std::vector<Ranked> bwd_data_ranking(const ConvProblem& prob) {
    return ranked_rows(rank_bwd_data_algorithms(prob), prob,
                       [](const ConvProblem& p, const auto& solver) { return data_workspace(p, solver); });
}

std::vector<Ranked> bwd_filter_ranking(const ConvProblem& prob) {
    return ranked_rows(rank_bwd_filter_algorithms(prob), prob,
                       [](const ConvProblem& p, const auto& solver) { return filter_workspace(p, solver); });
}

}  // namespace convcore

namespace {

std::string shape_string(const int64_t d[4]) {
    return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + "x" + std::to_string(d[3]);
}

// A tensor argument of convcoreActivationBackwardBias: set, 4-D dims as dy's, dy's data type,
// aligned; its view.
Strided4d activation_view(const convcoreTensorStruct* desc, const void* data, const char* name,
                          const convcoreTensorStruct* dy) {
    const std::string n(name);
    if (!desc) throw_bad_param(n + "Desc is NULL");
    if (!desc->set) throw_bad_param(n + "Desc was created but never set (call convcoreSetTensor4dDescriptor)");
    require(data, name);
    if (desc->dtype != dy->dtype)
        throw_bad_param(n + ": data type " + dtype_name(desc->dtype) + " does not match dy: " + dtype_name(dy->dtype));
    for (int i = 0; i < 4; ++i)
        if (desc->dims[i] != dy->dims[i])
            throw_bad_param(n + ": shape " + shape_string(desc->dims) + " does not match dy: " + shape_string(dy->dims));
    if (desc->nb_dims != dy->nb_dims || desc->d != dy->d)
        throw_bad_param(n + ": " + dims_of("tensor", desc->nb_dims) + " of depth " + std::to_string(desc->d) +
                        " does not match dy: " + dims_of("tensor", dy->nb_dims) + " of depth " + std::to_string(dy->d));
    check_aligned(data, dy->dtype == CONVCORE_DATA_DOUBLE ? 8 : 4, name);
    Strided4d v;
    std::copy(desc->dims, desc->dims + 4, v.dims);
    std::copy(desc->strides, desc->strides + 4, v.strides);
    return v;
}

// db's checks (convcoreConvolutionBackwardBias, convcoreActivationBackwardBias): set, 1 x K x 1 x 1
// with K from dy, dy's data type, apart from `inputs` (pointer, bytes).
void check_bias_gradient(const convcoreTensorStruct* db_desc, const void* db, const convcoreTensorStruct* dy,
                         std::initializer_list<std::tuple<const char*, const void*, int64_t>> inputs) {
    if (!db_desc) throw_bad_param("dbDesc is NULL");
    if (!db_desc->set) throw_bad_param("dbDesc was created but never set (call convcoreSetTensor4dDescriptor)");
    if (db_desc->dtype != dy->dtype)
        throw_bad_param(std::string("db: data type ") + dtype_name(db_desc->dtype) + " does not match dy: " +
                        dtype_name(dy->dtype));
    const int64_t* d = db_desc->dims;
    const int64_t k = dy->dims[1];
    if (d[0] != 1 || d[1] != k || d[2] != 1 || d[3] != 1)
        throw_bad_param("db: shape " + shape_string(d) + " must be 1x" + std::to_string(k) +
                        "x1x1 (1 x K x 1 x 1, K from dy)");
    require(db, "db");
    const size_t elem = dy->dtype == CONVCORE_DATA_DOUBLE ? 8 : 4;
    for (const auto& [name, ptr, bytes] : inputs)
        if (ptr && ranges_overlap(db, extent_bytes(db_desc->dims, db_desc->strides, elem), ptr, bytes))
            throw_bad_param(std::string("db overlaps ") + name + ": the output must be a separate buffer");
}

double scalar(const void* p, convcoreDataType_t t) {
    return t == CONVCORE_DATA_DOUBLE ? *static_cast<const double*>(p) : double(*static_cast<const float*>(p));
}

// convcoreActivationBackwardBias (mode already checked); convcoreConvolutionBackwardBias is it
// with IDENTITY, no dv and db required.
void run_activation_backward(convcoreHandle_t handle, convcoreActivationMode_t mode, const convcoreTensorStruct* yDesc,
                             const void* y, const convcoreTensorStruct* vDesc, const void* v,
                             const convcoreTensorStruct* dyDesc, const void* dy, const convcoreTensorStruct* dvDesc,
                             void* dv, const void* alpha, const void* beta, const convcoreTensorStruct* dbDesc, void* db,
                             bool bias_required) {
    require(handle, "handle");
    if (!dyDesc) throw_bad_param("dyDesc is NULL");
    if (!dyDesc->set) throw_bad_param("dyDesc was created but never set (call convcoreSetTensor4dDescriptor)");
    ActivationBackward a{};
    a.act = mode;
    a.dy = dy;
    a.dy_view = activation_view(dyDesc, dy, "dy", dyDesc);
    const size_t elem = dyDesc->dtype == CONVCORE_DATA_DOUBLE ? 8 : 4;
    auto bytes = [&](const convcoreTensorStruct* d) { return tensor_extent_bytes(d, elem); };
    if (mode == CONVCORE_ACTIVATION_RELU || mode == CONVCORE_ACTIVATION_RELU6) {
        a.y_view = activation_view(yDesc, y, "y", dyDesc);
        a.y = y;
    }
    if (epilogue::reads_preactivation(mode)) {
        a.v_view = activation_view(vDesc, v, "v", dyDesc);
        a.v = v;
    }
    if (dvDesc || dv) {
        a.dv_view = activation_view(dvDesc, dv, "dv", dyDesc);
        a.dv = dv;
        const int64_t dv_dims[5] = {dvDesc->dims[0], dvDesc->dims[1], dvDesc->dims[2], dvDesc->dims[3], dvDesc->d};
        const int64_t dv_strides[5] = {dvDesc->strides[0], dvDesc->strides[1], dvDesc->strides[2], dvDesc->strides[3],
                                       dvDesc->d_stride};
        if (!has_distinct_elements(dv_dims, dv_strides, 5))
            throw_bad_param("dv: its strides overlap (two indices address one element)");
        const bool in_place = dv == dy && std::equal(a.dv_view.strides, a.dv_view.strides + 4, a.dy_view.strides) &&
                              (dyDesc->d == 1 || dvDesc->d_stride == dyDesc->d_stride);
        if (!in_place && ranges_overlap(dv, bytes(dvDesc), dy, bytes(dyDesc)))
            throw_bad_param("dv overlaps dy: pass dy itself (same pointer and strides) to work in place, "
                            "or a separate buffer");
        if (a.y && ranges_overlap(dv, bytes(dvDesc), y, bytes(yDesc)))
            throw_bad_param("dv overlaps y: the output must be a separate buffer");
        if (a.v && ranges_overlap(dv, bytes(dvDesc), v, bytes(vDesc)))
            throw_bad_param("dv overlaps v: the output must be a separate buffer");
    }
    if (bias_required || dbDesc || db) {
        check_bias_gradient(dbDesc, db, dyDesc,
                            {{"dy", dy, bytes(dyDesc)},
                             {"y", a.y, a.y ? bytes(yDesc) : 0},
                             {"v", a.v, a.v ? bytes(vDesc) : 0},
                             {"dv", a.dv, a.dv ? bytes(dvDesc) : 0}});
        require(alpha, "alpha");
        require(beta, "beta");
        a.db = db;
        a.db_stride = dbDesc->strides[1];
        a.alpha = scalar(alpha, dyDesc->dtype);
        a.beta = scalar(beta, dyDesc->dtype);
    }
    if (!a.dv && !a.db) return;  // nothing asked
    // A 3-D dy (N x C x D x H x W): one 4-D pass per depth slice (the views above are depth 0's),
    // the bias gradient accumulated over them (beta for the first, 1 after).
    for (int64_t depth = 0; depth < dyDesc->d; ++depth) {
        ActivationBackward slice = a;
        const auto shift = [&](const void* p, const convcoreTensorStruct* desc) {
            return p ? static_cast<const void*>(static_cast<const char*>(p) + depth * desc->d_stride * int64_t(elem))
                     : nullptr;
        };
        slice.dy = shift(a.dy, dyDesc);
        if (a.y) slice.y = shift(a.y, yDesc);
        if (a.v) slice.v = shift(a.v, vDesc);
        if (a.dv) slice.dv = const_cast<void*>(shift(a.dv, dvDesc));
        if (depth > 0) slice.beta = 1.0;
        if (handle->device == CONVCORE_DEVICE_CUDA) {
#ifdef CONVCORE_WITH_CUDA
            cuda::activation_backward_bias(*handle, elem, slice);
            continue;
#else
            throw_not_supported("convcore was built without CUDA support");
#endif
        }
        cpu::activation_backward_bias(*handle, elem, slice);
    }
}

}  // namespace

extern "C" {

// ---- names ----
const char* convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t algo) {
    const AlgorithmInfo* info = algorithm_info(CONVCORE_PASS_BACKWARD_DATA, enum_int(algo));
    return info ? info->name : nullptr;
}

const char* convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t algo) {
    const AlgorithmInfo* info = algorithm_info(CONVCORE_PASS_BACKWARD_FILTER, enum_int(algo));
    return info ? info->name : nullptr;
}

convcoreStatus_t convcoreGetBwdDataAlgoByName(const char* name, convcoreConvolutionBwdDataAlgo_t* algo) {
    return guard([&] {
        require(name, "name");
        require(algo, "algo");
        *algo = convcoreConvolutionBwdDataAlgo_t(algorithm_by_name(CONVCORE_PASS_BACKWARD_DATA, name));
    });
}

convcoreStatus_t convcoreGetBwdFilterAlgoByName(const char* name,
                                                convcoreConvolutionBwdFilterAlgo_t* algo) {
    return guard([&] {
        require(name, "name");
        require(algo, "algo");
        *algo = convcoreConvolutionBwdFilterAlgo_t(algorithm_by_name(CONVCORE_PASS_BACKWARD_FILTER, name));
    });
}

// ---- workspace queries ----
convcoreStatus_t convcoreGetConvolutionBackwardDataWorkspaceSize(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc,
    convcoreConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
    return guard([&] {
        require(sizeInBytes, "sizeInBytes");
        *sizeInBytes = 0;
        if (depth::is_3d(dxDesc)) {  // the largest of its 2-D problems' workspaces
            *sizeInBytes = make_plan(handle, CONVCORE_PASS_BACKWARD_DATA, dxDesc, wDesc, convDesc, dyDesc,
                                     enum_int(algo)).workspace_bytes();
            return;
        }
        const ConvProblem prob = backward_problem(handle, dxDesc, wDesc, convDesc, dyDesc, true);
        *sizeInBytes = data_workspace(prob, solver_for(CONVCORE_PASS_BACKWARD_DATA, prob, enum_int(algo)));
    });
}

convcoreStatus_t convcoreGetConvolutionBackwardFilterWorkspaceSize(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc,
    convcoreConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes) {
    return guard([&] {
        require(sizeInBytes, "sizeInBytes");
        *sizeInBytes = 0;
        if (depth::is_3d(xDesc)) {  // the largest of its 2-D problems' workspaces
            *sizeInBytes = make_plan(handle, CONVCORE_PASS_BACKWARD_FILTER, xDesc, dwDesc, convDesc, dyDesc,
                                     enum_int(algo)).workspace_bytes();
            return;
        }
        const ConvProblem prob = backward_problem(handle, xDesc, dwDesc, convDesc, dyDesc, false);
        *sizeInBytes = filter_workspace(prob, solver_for(CONVCORE_PASS_BACKWARD_FILTER, prob, enum_int(algo)));
    });
}

// ---- heuristic rankings ----
convcoreStatus_t convcoreGetConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionBwdDataAlgoPerf_t* perfResults) {
    return guard([&] {
        require(returnedAlgoCount, "returnedAlgoCount");
        require(perfResults, "perfResults");
        *returnedAlgoCount = 0;
        if (requestedAlgoCount < 1)
            throw_bad_param("requestedAlgoCount=" + std::to_string(requestedAlgoCount) + " must be >= 1");
        const std::vector<Ranked> ranked =
            descriptor_ranking(handle, CONVCORE_PASS_BACKWARD_DATA, dxDesc, wDesc, convDesc, dyDesc);
        const int count = std::min<int>(requestedAlgoCount, int(ranked.size()));
        for (int i = 0; i < count; ++i) {
            convcoreConvolutionBwdDataAlgoPerf_t perf{};
            perf.algo = decltype(perf.algo)(ranked[i].algo);
            perf.status = ranked[i].status;
            perf.time = -1.0f;
            perf.memory = ranked[i].memory;
            perf.determinism = ranked[i].determinism;
            perfResults[i] = perf;
        }
        *returnedAlgoCount = count;
    });
}

convcoreStatus_t convcoreGetConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionBwdFilterAlgoPerf_t* perfResults) {
    return guard([&] {
        require(returnedAlgoCount, "returnedAlgoCount");
        require(perfResults, "perfResults");
        *returnedAlgoCount = 0;
        if (requestedAlgoCount < 1)
            throw_bad_param("requestedAlgoCount=" + std::to_string(requestedAlgoCount) + " must be >= 1");
        const std::vector<Ranked> ranked =
            descriptor_ranking(handle, CONVCORE_PASS_BACKWARD_FILTER, xDesc, dwDesc, convDesc, dyDesc);
        const int count = std::min<int>(requestedAlgoCount, int(ranked.size()));
        for (int i = 0; i < count; ++i) {
            convcoreConvolutionBwdFilterAlgoPerf_t perf{};
            perf.algo = decltype(perf.algo)(ranked[i].algo);
            perf.status = ranked[i].status;
            perf.time = -1.0f;
            perf.memory = ranked[i].memory;
            perf.determinism = ranked[i].determinism;
            perfResults[i] = perf;
        }
        *returnedAlgoCount = count;
    });
}

// ---- backward data ----
convcoreStatus_t convcoreConvolutionBackwardData(
    convcoreHandle_t handle, const void* alpha, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionBwdDataAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* beta, convcoreTensorDescriptor_t dxDesc, void* dx) {
    return guard([&] {
        execute_cached(handle, CONVCORE_PASS_BACKWARD_DATA, dxDesc, wDesc, convDesc, dyDesc, enum_int(algo),
                       descriptor_args(alpha, beta, dy, w, dx, workspace, workSpaceSizeInBytes), true);
    });
}

// ---- backward filter ----
convcoreStatus_t convcoreConvolutionBackwardFilter(
    convcoreHandle_t handle, const void* alpha, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionBwdFilterAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* beta, convcoreFilterDescriptor_t dwDesc, void* dw) {
    return guard([&] {
        execute_cached(handle, CONVCORE_PASS_BACKWARD_FILTER, xDesc, dwDesc, convDesc, dyDesc, enum_int(algo),
                       descriptor_args(alpha, beta, x, dy, dw, workspace, workSpaceSizeInBytes), true);
    });
}

// ---- bias gradient, and the epilogue's backward ----
convcoreStatus_t convcoreConvolutionBackwardBias(convcoreHandle_t handle, const void* alpha,
                                                 convcoreTensorDescriptor_t dyDesc, const void* dy,
                                                 const void* beta, convcoreTensorDescriptor_t dbDesc,
                                                 void* db) {
    return guard([&] {
        run_activation_backward(handle, CONVCORE_ACTIVATION_IDENTITY, nullptr, nullptr, nullptr, nullptr, dyDesc, dy,
                                nullptr, nullptr, alpha, beta, dbDesc, db, /*bias_required=*/true);
    });
}

convcoreStatus_t convcoreActivationBackwardBias(convcoreHandle_t handle, convcoreActivationMode_t mode,
                                                convcoreTensorDescriptor_t yDesc, const void* y,
                                                convcoreTensorDescriptor_t vDesc, const void* v,
                                                convcoreTensorDescriptor_t dyDesc, const void* dy,
                                                convcoreTensorDescriptor_t dvDesc, void* dv, const void* alpha,
                                                const void* beta, convcoreTensorDescriptor_t dbDesc, void* db) {
    return guard([&] {
        require(handle, "handle");
        check_activation(mode, "mode");  // read as an int: an invalid value is not loaded as the enum
        run_activation_backward(handle, mode, yDesc, y, vDesc, v, dyDesc, dy, dvDesc, dv, alpha, beta, dbDesc, db,
                                /*bias_required=*/false);
    });
}

}  // extern "C"
