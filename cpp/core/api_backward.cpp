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
#include <vector>

#include "convcore/convcore.h"
#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/descriptors.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/select_backward.hpp"
#include "core/selection.hpp"
#include "core/solver.hpp"

using namespace convcore;
using namespace convcore::api;

#ifdef CONVCORE_WITH_CUDA
namespace convcore {
namespace cuda {
// cuda/direct_backward.cu
void backward_bias(const Context& ctx, convcoreDataType_t dtype, const void* dy, const int64_t dims[4],
                   const int64_t strides[4], void* db, int64_t db_stride, double alpha, double beta);
}  // namespace cuda
}  // namespace convcore
#endif

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
                             const convcoreTensorStruct* dy, bool data) {
    require(handle, "handle");
    if (!dy) throw_bad_param("dyDesc is NULL");
    try {
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

template <typename T>
void bias_t(const Context& ctx, const T* dy, const int64_t dims[4], const int64_t st[4], T* db,
            int64_t db_stride, T alpha, T beta) {
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
    for (int64_t k = 0; k < dims[1]; ++k) {
        double acc = 0.0;
        for (int64_t n = 0; n < dims[0]; ++n)
            for (int64_t p = 0; p < dims[2]; ++p) {
                const T* row = dy + n * st[0] + k * st[1] + p * st[2];
                for (int64_t q = 0; q < dims[3]; ++q) acc += double(row[q * st[3]]);
            }
        T* d = db + k * db_stride;
        *d = beta == T(0) ? alpha * T(acc) : alpha * T(acc) + beta * *d;
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
        const ConvProblem prob = backward_problem(handle, dxDesc, wDesc, convDesc, dyDesc, true);
        const std::vector<Ranked> ranked = bwd_data_ranking(prob);
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
        const ConvProblem prob = backward_problem(handle, xDesc, dwDesc, convDesc, dyDesc, false);
        const std::vector<Ranked> ranked = bwd_filter_ranking(prob);
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
        const convcoreConvolutionPlanStruct plan =
            make_plan(handle, CONVCORE_PASS_BACKWARD_DATA, dxDesc, wDesc, convDesc, dyDesc, enum_int(algo));
        execute(plan, alpha, dy, w, beta, dx, workspace, workSpaceSizeInBytes);
    });
}

// ---- backward filter ----
convcoreStatus_t convcoreConvolutionBackwardFilter(
    convcoreHandle_t handle, const void* alpha, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionBwdFilterAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* beta, convcoreFilterDescriptor_t dwDesc, void* dw) {
    return guard([&] {
        const convcoreConvolutionPlanStruct plan =
            make_plan(handle, CONVCORE_PASS_BACKWARD_FILTER, xDesc, dwDesc, convDesc, dyDesc, enum_int(algo));
        execute(plan, alpha, x, dy, beta, dw, workspace, workSpaceSizeInBytes);
    });
}

// ---- bias gradient ----
convcoreStatus_t convcoreConvolutionBackwardBias(convcoreHandle_t handle, const void* alpha,
                                                 convcoreTensorDescriptor_t dyDesc, const void* dy,
                                                 const void* beta, convcoreTensorDescriptor_t dbDesc,
                                                 void* db) {
    return guard([&] {
        require(handle, "handle");
        if (!dyDesc) throw_bad_param("dyDesc is NULL");
        if (!dyDesc->set)
            throw_bad_param("dyDesc was created but never set (call convcoreSetTensor4dDescriptor)");
        if (!dbDesc) throw_bad_param("dbDesc is NULL");
        if (!dbDesc->set)
            throw_bad_param("dbDesc was created but never set (call convcoreSetTensor4dDescriptor)");
        if (dbDesc->dtype != dyDesc->dtype)
            throw_bad_param(std::string("db: data type ") +
                            (dbDesc->dtype == CONVCORE_DATA_DOUBLE ? "float64" : "float32") +
                            " does not match dy: " +
                            (dyDesc->dtype == CONVCORE_DATA_DOUBLE ? "float64" : "float32"));
        const int64_t* d = dbDesc->dims;
        const int64_t k = dyDesc->dims[1];
        if (d[0] != 1 || d[1] != k || d[2] != 1 || d[3] != 1)
            throw_bad_param("db: shape " + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" +
                            std::to_string(d[2]) + "x" + std::to_string(d[3]) +
                            " must be 1x" + std::to_string(k) + "x1x1 (1 x K x 1 x 1, K from dy)");
        require(alpha, "alpha");
        require(beta, "beta");
        require(dy, "dy");
        require(db, "db");
        const size_t elem = dyDesc->dtype == CONVCORE_DATA_DOUBLE ? 8 : 4;
        if (ranges_overlap(db, extent_bytes(dbDesc->dims, dbDesc->strides, elem), dy,
                           extent_bytes(dyDesc->dims, dyDesc->strides, elem)))
            throw_bad_param("db overlaps dy: the output must be a separate buffer");
        if (handle->device == CONVCORE_DEVICE_CUDA) {
#ifdef CONVCORE_WITH_CUDA
            double a, b;
            if (dyDesc->dtype == CONVCORE_DATA_DOUBLE) {
                a = *static_cast<const double*>(alpha);
                b = *static_cast<const double*>(beta);
            } else {
                a = *static_cast<const float*>(alpha);
                b = *static_cast<const float*>(beta);
            }
            cuda::backward_bias(*handle, dyDesc->dtype, dy, dyDesc->dims, dyDesc->strides, db,
                                dbDesc->strides[1], a, b);
            return;
#else
            throw_not_supported("convcore was built without CUDA support");
#endif
        }
        if (dyDesc->dtype == CONVCORE_DATA_DOUBLE)
            bias_t(*handle, static_cast<const double*>(dy), dyDesc->dims, dyDesc->strides,
                   static_cast<double*>(db), dbDesc->strides[1], *static_cast<const double*>(alpha),
                   *static_cast<const double*>(beta));
        else
            bias_t(*handle, static_cast<const float*>(dy), dyDesc->dims, dyDesc->strides,
                   static_cast<float*>(db), dbDesc->strides[1], *static_cast<const float*>(alpha),
                   *static_cast<const float*>(beta));
    });
}

}  // extern "C"
