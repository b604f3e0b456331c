// Find (cuDNN's Find / FindEx): times every algorithm that may run a problem, best first,
// through the find-db (core/find_db.hpp) so that each (problem, algorithm) is timed once per
// machine. Selection filters (CONVCORE_DISABLE_ALGOS via rank_algorithms, deterministic-only,
// the workspace limit) are applied before anything is timed. The runs go through the public
// convcoreConvolutionForward, so Find times exactly what a caller gets, staging included, on
// any device.
#include <algorithm>
#include <atomic>
#include <memory>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "convcore/convcore.h"
#include "core/api_util.hpp"
#include "core/descriptors.hpp"
#include "core/find_db.hpp"
#include "core/select.hpp"
#include "core/timing.hpp"

using namespace convcore;
using namespace convcore::api;

namespace {

constexpr int kTimedRuns = 3;  // after one warm-up run; Find reports their median

std::atomic<int64_t> g_timed_runs{0};
std::atomic<int64_t> g_db_hits{0};

// A buffer from convcoreMalloc on the handle's device, freed on scope exit.
struct DeviceMemory {
    convcoreHandle_t handle;
    void* ptr = nullptr;
    DeviceMemory(convcoreHandle_t h, size_t bytes) : handle(h) {
        if (convcoreMalloc(h, &ptr, bytes) != CONVCORE_STATUS_SUCCESS)
            throw Error(CONVCORE_STATUS_ALLOC_FAILED, last_error);
    }
    ~DeviceMemory() {
        if (ptr) convcoreFree(handle, ptr);
    }
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// Uniform [-1, 1) values in a buffer on the handle's device (Find's own x and w: random, not
// zeros, so that no algorithm meets a special case such as denormals or all-zero blocks).
void fill_random(convcoreHandle_t h, void* dst, int64_t elems, size_t elem, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<char> host(size_t(elems) * elem);
    for (int64_t i = 0; i < elems; ++i) {
        const double v = dist(gen);
        if (elem == 8)
            reinterpret_cast<double*>(host.data())[i] = v;
        else
            reinterpret_cast<float*>(host.data())[i] = float(v);
    }
    if (convcoreMemcpyToDevice(h, dst, host.data(), host.size()) != CONVCORE_STATUS_SUCCESS)
        throw Error(CONVCORE_STATUS_EXECUTION_FAILED, last_error);
}

struct FwdArgs {
    convcoreHandle_t handle;
    convcoreTensorDescriptor_t xDesc;
    convcoreFilterDescriptor_t wDesc;
    convcoreConvolutionDescriptor_t convDesc;
    convcoreTensorDescriptor_t yDesc;
};

// The caller's buffers (FindEx) or null pointers, for Find to allocate its own.
struct FwdBuffers {
    const void* x = nullptr;
    const void* w = nullptr;
    void* y = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    bool callers = false;
};

// Median of a few timed runs after a warm-up run. Throws convcore::Error on failure.
double time_algorithm(const FwdArgs& a, const ConvProblem& prob, convcoreConvolutionFwdAlgo_t algo,
                      const FwdBuffers& buf, size_t workspace_bytes) {
    const double one = 1.0, zero = 0.0;
    const float one_f = 1.0f, zero_f = 0.0f;
    const bool f64 = prob.dtype == CONVCORE_DATA_DOUBLE;
    const void* alpha = f64 ? static_cast<const void*>(&one) : &one_f;
    const void* beta = f64 ? static_cast<const void*>(&zero) : &zero_f;
    const auto run = [&] {
        const convcoreStatus_t st =
            convcoreConvolutionForward(a.handle, alpha, a.xDesc, buf.x, a.wDesc, buf.w, a.convDesc, algo,
                                       buf.workspace, workspace_bytes, beta, a.yDesc, buf.y);
        if (st != CONVCORE_STATUS_SUCCESS) throw Error(st, last_error);
    };
    time_run_ms(*a.handle, run);  // warm-up: plans, caches, first-touch of the workspace
    std::vector<double> times;
    for (int i = 0; i < kTimedRuns; ++i) times.push_back(time_run_ms(*a.handle, run));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

std::vector<convcoreConvolutionFwdAlgoPerf_t> find_forward(const FwdArgs& a, FwdBuffers buf) {
    require(a.handle, "handle");
    const convcoreContext& ctx = *a.handle;
    const ConvProblem prob = make_problem(ctx.device, a.xDesc, a.wDesc, a.convDesc, a.yDesc);
    const size_t limit = buf.callers ? buf.workspace_bytes : ctx.find_workspace_limit;

    // Which algorithms may be timed: applicable and not disabled (rank_algorithms, the one
    // place that applies CONVCORE_DISABLE_ALGOS), deterministic if asked, within the limit.
    std::vector<convcoreConvolutionFwdAlgoPerf_t> perf;
    std::vector<bool> eligible;
    for (const RankedAlgo& r : rank_algorithms(prob)) {
        convcoreConvolutionFwdAlgoPerf_t p{};
        p.algo = r.algo;
        p.time = -1.0f;
        p.status = CONVCORE_STATUS_NOT_SUPPORTED;
        p.determinism = r.solver && !r.solver->deterministic ? CONVCORE_NON_DETERMINISTIC
                                                             : CONVCORE_DETERMINISTIC;
        bool ok = false;
        if (r.solver && !(ctx.deterministic_only && !r.solver->deterministic)) {
            if (convcoreGetConvolutionForwardWorkspaceSize(a.handle, a.xDesc, a.wDesc, a.convDesc,
                                                           a.yDesc, r.algo, &p.memory) !=
                CONVCORE_STATUS_SUCCESS)
                throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                            std::string("workspace query of an applicable algorithm failed: ") + last_error);
            if (p.memory > limit)
                p.status = CONVCORE_STATUS_ALLOC_FAILED;
            else
                ok = true;
        }
        perf.push_back(p);
        eligible.push_back(ok);
    }

    // The find-db first; then time what it does not know yet.
    const std::string key = find_db::make_key(ctx, "fwd", prob);
    const auto missing_from = [&](const find_db::Records& known) {
        std::vector<size_t> missing;
        for (size_t i = 0; i < perf.size(); ++i)
            if (eligible[i] && !known.count(convcoreGetFwdAlgoName(perf[i].algo))) missing.push_back(i);
        return missing;
    };
    find_db::Records known = find_db::lookup(key, false);
    std::vector<size_t> missing = missing_from(known);
    if (!missing.empty()) {
        known = find_db::lookup(key, true);
        missing = missing_from(known);
    }
    if (missing.empty()) {
        ++g_db_hits;
    } else {
        // Find's own buffers, allocated only when something is timed.
        std::unique_ptr<DeviceMemory> x_mem, w_mem, y_mem;
        if (!buf.callers) {
            const size_t elem = prob.elem_size();
            const int64_t x_bytes = extent_bytes(a.xDesc->dims, a.xDesc->strides, elem);
            const int64_t y_bytes = extent_bytes(a.yDesc->dims, a.yDesc->strides, elem);
            x_mem = std::make_unique<DeviceMemory>(a.handle, size_t(x_bytes));
            w_mem = std::make_unique<DeviceMemory>(a.handle, size_t(prob.w_elems()) * elem);
            y_mem = std::make_unique<DeviceMemory>(a.handle, size_t(y_bytes));
            fill_random(a.handle, x_mem->ptr, x_bytes / int64_t(elem), elem, 1);
            fill_random(a.handle, w_mem->ptr, prob.w_elems(), elem, 2);
            buf.x = x_mem->ptr;
            buf.w = w_mem->ptr;
            buf.y = y_mem->ptr;
        }
        find_db::Records measured;
        for (size_t i : missing) {
            const auto algo = perf[i].algo;
            find_db::Record rec;
            try {
                std::unique_ptr<DeviceMemory> ws;
                FwdBuffers run_buf = buf;
                if (!buf.callers && perf[i].memory > 0) {
                    ws = std::make_unique<DeviceMemory>(a.handle, perf[i].memory);
                    run_buf.workspace = ws->ptr;
                }
                rec.time_ms = time_algorithm(a, prob, algo, run_buf,
                                             buf.callers ? buf.workspace_bytes : perf[i].memory);
                ++g_timed_runs;
            } catch (const Error& e) {
                if (e.status() == CONVCORE_STATUS_BAD_PARAM) throw;  // the caller's buffers
                rec.status = e.status();
                rec.time_ms = -1.0;
            } catch (const std::bad_alloc&) {
                rec.status = CONVCORE_STATUS_ALLOC_FAILED;
                rec.time_ms = -1.0;
            }
            known[convcoreGetFwdAlgoName(algo)] = rec;
            // A failed allocation depends on the moment, not on the problem: not kept.
            if (rec.status != CONVCORE_STATUS_ALLOC_FAILED) measured[convcoreGetFwdAlgoName(algo)] = rec;
        }
        if (!measured.empty()) find_db::store(key, measured);
    }

    for (size_t i = 0; i < perf.size(); ++i) {
        if (!eligible[i]) continue;
        const find_db::Record& rec = known.at(convcoreGetFwdAlgoName(perf[i].algo));
        perf[i].status = rec.status;
        perf[i].time = rec.status == CONVCORE_STATUS_SUCCESS ? float(rec.time_ms) : -1.0f;
    }
    // Fastest first; the rest (failures) after, in enum order.
    std::stable_sort(perf.begin(), perf.end(), [](const auto& l, const auto& r) {
        const bool lok = l.status == CONVCORE_STATUS_SUCCESS, rok = r.status == CONVCORE_STATUS_SUCCESS;
        if (lok != rok) return lok;
        if (lok) return l.time < r.time;
        return l.algo < r.algo;
    });
    return perf;
}

template <typename Perf>
void copy_results(const std::vector<Perf>& perf, int requested, int* returned, Perf* out) {
    const int count = std::min<int>(requested, int(perf.size()));
    std::copy(perf.begin(), perf.begin() + count, out);
    *returned = count;
}

void check_counts(int requested, int* returned, const void* perf) {
    require(returned, "returnedAlgoCount");
    require(perf, "perfResults");
    *returned = 0;
    if (requested < 1)
        throw_bad_param("requestedAlgoCount=" + std::to_string(requested) + " must be >= 1");
}

}  // namespace

extern "C" {

convcoreStatus_t convcoreSetFindWorkspaceLimit(convcoreHandle_t handle, size_t bytes) {
    return guard([&] {
        require(handle, "handle");
        handle->find_workspace_limit = bytes;
    });
}

convcoreStatus_t convcoreSetDeterministicOnly(convcoreHandle_t handle, int deterministicOnly) {
    return guard([&] {
        require(handle, "handle");
        handle->deterministic_only = deterministicOnly != 0;
    });
}

convcoreStatus_t convcoreFindConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc, int requestedAlgoCount,
    int* returnedAlgoCount, convcoreConvolutionFwdAlgoPerf_t* perfResults) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        require(yDesc, "yDesc");
        const auto perf = find_forward({handle, xDesc, wDesc, convDesc, yDesc}, FwdBuffers{});
        copy_results(perf, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionForwardAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionFwdAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        require(yDesc, "yDesc");
        require(x, "x");
        require(w, "w");
        require(y, "y");
        if (workspaceSizeInBytes > 0 && !workspace)
            throw_bad_param("workspace is NULL but workspaceSizeInBytes=" +
                            std::to_string(workspaceSizeInBytes));
        FwdBuffers buf;
        buf.callers = true;
        buf.x = x;
        buf.w = w;
        buf.y = y;
        buf.workspace = workspace;
        buf.workspace_bytes = workspace ? workspaceSizeInBytes : 0;
        const auto perf = find_forward({handle, xDesc, wDesc, convDesc, yDesc}, buf);
        copy_results(perf, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreGetFindStats(int64_t* timedRuns, int64_t* dbHits) {
    return guard([&] {
        if (timedRuns) *timedRuns = g_timed_runs.load();
        if (dbHits) *dbHits = g_db_hits.load();
    });
}

convcoreStatus_t convcoreClearFindCache(void) {
    return guard([] { find_db::clear_cache(); });
}

}  // extern "C"
