// Find (cuDNN's Find / FindEx) for the three passes: times every algorithm that may run a
// problem, best first, through the find-db (core/find_db.hpp) so that each (problem,
// algorithm) is timed once per machine. The candidates and their workspaces come from the
// pass's Get ranking (so CONVCORE_DISABLE_ALGOS, applied there, removes algorithms here too);
// deterministic-only and the workspace limit are applied before anything is timed. Runs go
// through the public run call of the pass, so Find times exactly what a caller gets, staging
// of strided tensors included, on any device.
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "convcore/convcore.h"
#include "core/api_util.hpp"
#include "core/descriptors.hpp"
#include "core/find_db.hpp"
#include "core/timing.hpp"

using namespace convcore;
using namespace convcore::api;

namespace {

constexpr int kTimedRounds = 5;  // after one warm-up run each; Find reports the median

std::atomic<int64_t> g_timed_runs{0};
std::atomic<int64_t> g_db_hits{0};

// One algorithm's row, the same fields for every pass.
struct Result {
    int algo = 0;
    convcoreStatus_t status = CONVCORE_STATUS_NOT_SUPPORTED;
    float time = -1.0f;
    size_t memory = 0;
    convcoreDeterminism_t determinism = CONVCORE_DETERMINISTIC;
};

// What Find needs to know of a pass.
struct Pass {
    convcoreHandle_t handle = nullptr;
    const char* direction = "";               // the find-db's "fwd", "bwd_data", "bwd_filter"
    const char* (*name)(int algo) = nullptr;  // "DIRECT", ...
    ConvProblem prob;               // the forward problem, validated
    std::vector<Result> ranking;    // the pass's Get ranking: applicability, memory, determinism
    // Runs `algo` with out = 1 * op(in0, in1) + 0 * out.
    std::function<convcoreStatus_t(int algo, const void* in0, const void* in1, void* out,
                                   void* workspace, size_t bytes)>
        run;
    int64_t bytes[3] = {0, 0, 0};  // extents of in0, in1 and out, for Find's own buffers
};

// The buffers to time on: the caller's where given, Find's own (random inputs) where NULL.
// callers_workspace: the caller's workspace (FindEx) bounds every algorithm; else Find
// allocates each algorithm's own, up to the handle's limit.
struct Buffers {
    const void* in0 = nullptr;
    const void* in1 = nullptr;
    void* out = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    bool callers_workspace = false;
};

constexpr size_t kAllCandidates = SIZE_MAX;

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

// Uniform [-1, 1) values on the handle's device (Find's own inputs: random, not zeros, so that
// no algorithm meets a special case such as denormals or all-zero blocks).
std::unique_ptr<DeviceMemory> random_buffer(convcoreHandle_t h, int64_t bytes, size_t elem, uint32_t seed) {
    auto mem = std::make_unique<DeviceMemory>(h, size_t(bytes));
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<char> host(static_cast<size_t>(bytes));
    for (int64_t i = 0; i < bytes / int64_t(elem); ++i) {
        const double v = dist(gen);
        if (elem == 8)
            reinterpret_cast<double*>(host.data())[i] = v;
        else
            reinterpret_cast<float*>(host.data())[i] = float(v);
    }
    if (convcoreMemcpyToDevice(h, mem->ptr, host.data(), host.size()) != CONVCORE_STATUS_SUCCESS)
        throw Error(CONVCORE_STATUS_EXECUTION_FAILED, last_error);
    return mem;
}

// Times `algos` interleaved: a warm-up run of each, then kTimedRounds rounds that each run
// every algorithm still standing once, the starting one rotating, so that a slow stretch of a
// shared machine falls on all of them alike; an algorithm's time is the median of its rounds.
// `memory[i]` is algos[i]'s workspace; without the caller's workspace one buffer of the
// largest is allocated (an algorithm whose workspace cannot be had is ALLOC_FAILED). A run that
// fails gives its status; BAD_PARAM (the caller's buffers are wrong) is thrown.
std::vector<find_db::Record> time_interleaved(const Pass& pass, const std::vector<int>& algos,
                                              const std::vector<size_t>& memory, const Buffers& buf) {
    const size_t n = algos.size();
    std::vector<find_db::Record> recs(n);
    std::vector<bool> alive(n, true);
    const auto fail = [&](size_t i, convcoreStatus_t status) {
        alive[i] = false;
        recs[i].status = status;
        recs[i].time_ms = -1.0;
    };

    std::unique_ptr<DeviceMemory> own_workspace;
    void* workspace = buf.workspace;
    size_t bytes = buf.workspace_bytes;
    if (!buf.callers_workspace) {
        for (;;) {
            size_t need = 0;
            for (size_t i = 0; i < n; ++i)
                if (alive[i]) need = std::max(need, memory[i]);
            if (need == 0) break;
            try {
                own_workspace = std::make_unique<DeviceMemory>(pass.handle, need);
                bytes = need;
                break;
            } catch (const Error& e) {
                if (e.status() != CONVCORE_STATUS_ALLOC_FAILED) throw;
            } catch (const std::bad_alloc&) {
            }
            for (size_t i = 0; i < n; ++i)
                if (alive[i] && memory[i] == need) fail(i, CONVCORE_STATUS_ALLOC_FAILED);
        }
        workspace = own_workspace ? own_workspace->ptr : nullptr;
        if (!own_workspace) bytes = 0;
    }

    std::vector<std::vector<double>> times(n);
    const auto attempt = [&](size_t i, bool timed) {
        try {
            const double ms = time_run_ms(*pass.handle, [&] {
                const convcoreStatus_t st = pass.run(algos[i], buf.in0, buf.in1, buf.out, workspace, bytes);
                if (st != CONVCORE_STATUS_SUCCESS) throw Error(st, last_error);
            });
            if (timed) times[i].push_back(ms);
        } catch (const Error& e) {
            if (e.status() == CONVCORE_STATUS_BAD_PARAM) throw;
            fail(i, e.status());
        } catch (const std::bad_alloc&) {
            fail(i, CONVCORE_STATUS_ALLOC_FAILED);
        }
    };
    for (size_t i = 0; i < n; ++i)  // warm-up: plans, caches, first touch of the workspace
        if (alive[i]) attempt(i, false);
    for (int round = 0; round < kTimedRounds; ++round)
        for (size_t j = 0; j < n; ++j) {
            const size_t i = (size_t(round) + j) % n;
            if (alive[i]) attempt(i, true);
        }
    for (size_t i = 0; i < n; ++i) {
        if (!alive[i]) continue;
        std::sort(times[i].begin(), times[i].end());
        recs[i].time_ms = times[i][times[i].size() / 2];
        ++g_timed_runs;
    }
    return recs;
}

// Every algorithm of the pass: those that ran, fastest first, then the others in enum order.
// Only the first `candidates` eligible algorithms of the Get ranking are timed, and those the
// find-db already knows; the rest keep status SUCCESS with time -1 (listed after those timed).
std::vector<Result> find(const Pass& pass, Buffers buf, size_t candidates = kAllCandidates) {
    const convcoreContext& ctx = *pass.handle;
    const size_t limit = buf.callers_workspace ? buf.workspace_bytes : ctx.find_workspace_limit;

    std::vector<Result> perf = pass.ranking;
    std::vector<bool> eligible(perf.size(), false);
    for (size_t i = 0; i < perf.size(); ++i) {
        Result& r = perf[i];
        r.time = -1.0f;
        if (r.status != CONVCORE_STATUS_SUCCESS) continue;  // cannot run it, or disabled
        if (ctx.deterministic_only && r.determinism == CONVCORE_NON_DETERMINISTIC) {
            r.status = CONVCORE_STATUS_NOT_SUPPORTED;
            r.memory = 0;
        } else if (r.memory > limit) {
            r.status = CONVCORE_STATUS_ALLOC_FAILED;  // memory: what it would need
        } else {
            eligible[i] = true;
        }
    }

    // The find-db first (the in-process cache, then the file); time only what it lacks.
    const std::string key = find_db::make_key(ctx, pass.direction, pass.prob);
    const auto missing_from = [&](const find_db::Records& known) {
        std::vector<size_t> missing;
        for (size_t i = 0; i < perf.size(); ++i)
            if (eligible[i] && !known.count(pass.name(perf[i].algo))) missing.push_back(i);
        return missing;
    };
    find_db::Records known = find_db::lookup(key, false);
    if (candidates != kAllCandidates) {
        size_t ranked = 0;  // eligible algorithms seen, in the Get ranking's order
        for (size_t i = 0; i < perf.size(); ++i) {
            if (!eligible[i]) continue;
            if (ranked++ >= candidates && !known.count(pass.name(perf[i].algo))) eligible[i] = false;
        }
    }
    std::vector<size_t> missing = missing_from(known);
    if (!missing.empty()) {
        known = find_db::lookup(key, true);  // another process may have timed them
        missing = missing_from(known);
    }
    if (missing.empty()) {
        ++g_db_hits;
    } else {
        std::unique_ptr<DeviceMemory> own[3];  // Find's own buffers, only when something is timed
        const size_t elem = pass.prob.elem_size();
        if (!buf.in0) {
            own[0] = random_buffer(pass.handle, pass.bytes[0], elem, 1);
            buf.in0 = own[0]->ptr;
        }
        if (!buf.in1) {
            own[1] = random_buffer(pass.handle, pass.bytes[1], elem, 2);
            buf.in1 = own[1]->ptr;
        }
        if (!buf.out) {
            own[2] = std::make_unique<DeviceMemory>(pass.handle, size_t(pass.bytes[2]));
            buf.out = own[2]->ptr;
        }
        std::vector<int> algos;
        std::vector<size_t> memory;
        for (size_t i : missing) {
            algos.push_back(perf[i].algo);
            memory.push_back(perf[i].memory);
        }
        const std::vector<find_db::Record> recs = time_interleaved(pass, algos, memory, buf);
        find_db::Records measured;
        for (size_t m = 0; m < missing.size(); ++m) {
            const char* name = pass.name(algos[m]);
            known[name] = recs[m];
            // A failed allocation depends on the moment, not on the problem: not kept.
            if (recs[m].status != CONVCORE_STATUS_ALLOC_FAILED) measured[name] = recs[m];
        }
        if (!measured.empty()) find_db::store(key, measured);
    }

    for (size_t i = 0; i < perf.size(); ++i) {
        if (!eligible[i]) continue;
        const find_db::Record& rec = known.at(pass.name(perf[i].algo));
        perf[i].status = rec.status;
        perf[i].time = rec.status == CONVCORE_STATUS_SUCCESS ? float(rec.time_ms) : -1.0f;
    }
    // Timed successes by time, then untimed candidates in the Get ranking's order (stable),
    // then failures in enum order.
    const auto group = [](const Result& r) { return r.status != CONVCORE_STATUS_SUCCESS ? 2 : r.time < 0 ? 1 : 0; };
    std::stable_sort(perf.begin(), perf.end(), [&](const Result& l, const Result& r) {
        if (group(l) != group(r)) return group(l) < group(r);
        if (group(l) == 0) return l.time < r.time;
        return group(l) == 2 && l.algo < r.algo;
    });
    return perf;
}

// ---- Select: one decision per problem, cached in the process ----

ConvProblem problem_of(convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                       convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc) {
    require(handle, "handle");
    require(xDesc, "xDesc");
    require(wDesc, "wDesc");
    require(convDesc, "convDesc");
    require(yDesc, "yDesc");
    return make_problem(handle->device, xDesc, wDesc, convDesc, yDesc);
}

// What a decision depends on: the problem as the run call sees it (strides included), the
// device and its threads, the handle's Find settings, the mode and CONVCORE_DISABLE_ALGOS.
struct DecisionKey {
    std::vector<int64_t> fields;
    std::string disabled;
    bool operator==(const DecisionKey& o) const { return fields == o.fields && disabled == o.disabled; }
};

struct DecisionKeyHash {
    size_t operator()(const DecisionKey& k) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
        for (int64_t v : k.fields) h = (h ^ uint64_t(v)) * 1099511628211ull;
        return size_t(h ^ std::hash<std::string>()(k.disabled));
    }
};

struct DecisionCache {
    std::mutex mutex;
    std::unordered_map<DecisionKey, int, DecisionKeyHash> algo;
};

DecisionCache& decisions() {
    static DecisionCache* cache = new DecisionCache;  // never destroyed: used at exit by other statics
    return *cache;
}

DecisionKey decision_key(const convcoreContext& ctx, const ConvProblem& p, int direction,
                         convcoreSelectMode_t mode) {
    DecisionKey key;
    key.fields = {direction, int64_t(mode), int64_t(p.device), ctx.device_index, ctx.threads(),
                  int64_t(p.dtype), p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.groups, p.pad_h, p.pad_w,
                  p.stride_h, p.stride_w, p.dil_h, p.dil_w, int64_t(p.flip),
                  int64_t(ctx.deterministic_only), int64_t(std::min<size_t>(ctx.find_workspace_limit, INT64_MAX))};
    key.fields.insert(key.fields.end(), p.x_strides, p.x_strides + 4);
    key.fields.insert(key.fields.end(), p.y_strides, p.y_strides + 4);
    const char* env = std::getenv("CONVCORE_DISABLE_ALGOS");
    key.disabled = env ? env : "";
    return key;
}

// `mode` as the int the caller passed (an out-of-range enum value is not loaded as the enum).
convcoreSelectMode_t effective_mode(int mode) {
    if (mode != CONVCORE_SELECT_HEURISTIC && mode != CONVCORE_SELECT_MEASURED && mode != CONVCORE_SELECT_FIND)
        throw_bad_param("mode=" + std::to_string(mode) +
                        " is not a convcoreSelectMode_t (HEURISTIC, MEASURED or FIND)");
    const char* env = std::getenv("CONVCORE_AUTO");
    if (mode == CONVCORE_SELECT_MEASURED && env && strcasecmp(env, "heuristic") == 0)
        return CONVCORE_SELECT_HEURISTIC;
    return convcoreSelectMode_t(mode);
}

// The algorithm to run: the cached decision, else the mode's choice (see convcore.h, Select).
// `prob` is the pass's forward problem (validated); make_pass builds the Pass, whose Get
// ranking costs microseconds, only when nothing is cached.
int select(convcoreHandle_t handle, const ConvProblem& prob, int direction, int requested_mode,
           const std::function<Pass()>& make_pass, const Buffers& buf) {
    const convcoreSelectMode_t mode = effective_mode(requested_mode);
    const DecisionKey key = decision_key(*handle, prob, direction, mode);
    DecisionCache& cache = decisions();
    {
        std::lock_guard<std::mutex> lock(cache.mutex);
        const auto it = cache.algo.find(key);
        if (it != cache.algo.end()) return it->second;
    }
    const Pass pass = make_pass();
    int chosen = -1;
    if (mode == CONVCORE_SELECT_HEURISTIC) {
        for (const Result& r : pass.ranking) {
            if (r.status == CONVCORE_STATUS_SUCCESS && !(pass.handle->deterministic_only &&
                                                         r.determinism == CONVCORE_NON_DETERMINISTIC)) {
                chosen = r.algo;
                break;
            }
        }
    } else {
        const size_t candidates = mode == CONVCORE_SELECT_FIND ? kAllCandidates : CONVCORE_SELECT_CANDIDATES;
        const std::vector<Result> results = find(pass, buf, candidates);
        if (!results.empty() && results[0].status == CONVCORE_STATUS_SUCCESS && results[0].time >= 0)
            chosen = results[0].algo;
    }
    if (chosen < 0)
        throw Error(CONVCORE_STATUS_NOT_SUPPORTED,
                    std::string("no convcore algorithm can run this problem on this device (") +
                        pass.direction + ", " + find_db::problem_string(pass.prob) + ")");
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.algo[key] = chosen;
    return chosen;
}

// The pass's Get ranking (which also validates the descriptors, with the pass's names).
template <typename Perf, typename Get>
std::vector<Result> ranking(int count, Get get) {
    std::vector<Perf> perf(count);
    int returned = 0;
    const convcoreStatus_t st = get(count, &returned, perf.data());
    if (st != CONVCORE_STATUS_SUCCESS) throw Error(st, last_error);
    std::vector<Result> out;
    for (int i = 0; i < returned; ++i)
        out.push_back({int(perf[i].algo), perf[i].status, -1.0f, perf[i].memory, perf[i].determinism});
    return out;
}

template <typename Perf>
void copy_results(const std::vector<Result>& results, int requested, int* returned, Perf* out) {
    const int count = std::min<int>(requested, int(results.size()));
    for (int i = 0; i < count; ++i) {
        out[i] = Perf{};
        out[i].algo = decltype(out[i].algo)(results[i].algo);
        out[i].status = results[i].status;
        out[i].time = results[i].time;
        out[i].memory = results[i].memory;
        out[i].determinism = results[i].determinism;
    }
    *returned = count;
}

void check_counts(int requested, int* returned, const void* perf) {
    require(returned, "returnedAlgoCount");
    require(perf, "perfResults");
    *returned = 0;
    if (requested < 1)
        throw_bad_param("requestedAlgoCount=" + std::to_string(requested) + " must be >= 1");
}

// FindEx's buffers: inputs and output given; the workspace may be NULL only when its size is 0.
Buffers callers_buffers(const void* in0, const char* in0_name, const void* in1, const char* in1_name,
                        void* out, const char* out_name, void* workspace, size_t bytes) {
    require(in0, in0_name);
    require(in1, in1_name);
    require(out, out_name);
    if (bytes > 0 && !workspace)
        throw_bad_param("workspace is NULL but workspaceSizeInBytes=" + std::to_string(bytes));
    Buffers buf;
    buf.callers_workspace = true;
    buf.in0 = in0;
    buf.in1 = in1;
    buf.out = out;
    buf.workspace = workspace;
    buf.workspace_bytes = bytes;
    return buf;
}

int64_t extent(const convcoreTensorStruct* t, size_t elem) { return extent_bytes(t->dims, t->strides, elem); }
int64_t filter_extent(const ConvProblem& p) {
    const int64_t dims[4] = {p.k, p.c_per_group(), p.r, p.s};
    return extent_bytes(dims, p.w_strides, p.elem_size());
}

// alpha = 1 and beta = 0 in the problem's type.
struct Scalars {
    double one = 1.0, zero = 0.0;
    float one_f = 1.0f, zero_f = 0.0f;
    bool f64;
    explicit Scalars(const ConvProblem& p) : f64(p.dtype == CONVCORE_DATA_DOUBLE) {}
    const void* alpha() const { return f64 ? static_cast<const void*>(&one) : &one_f; }
    const void* beta() const { return f64 ? static_cast<const void*>(&zero) : &zero_f; }
};

// A forward plan and the filters it prepared (their pointer).
struct PreparedPlan {
    std::shared_ptr<convcoreConvolutionPlanStruct> plan;
    const void* prepared_for = nullptr;
};

Pass forward_pass(convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                  convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc) {
    require(handle, "handle");
    require(yDesc, "yDesc");
    Pass pass;
    pass.handle = handle;
    pass.direction = "fwd";
    pass.name = [](int a) { return convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(a)); };
    pass.ranking = ranking<convcoreConvolutionFwdAlgoPerf_t>(CONVCORE_FWD_ALGO_COUNT, [&](int n, int* r, auto* p) {
        return convcoreGetConvolutionForwardAlgorithm(handle, xDesc, wDesc, convDesc, yDesc, n, r, p);
    });
    pass.prob = make_problem(handle->device, xDesc, wDesc, convDesc, yDesc);
    const size_t elem = pass.prob.elem_size();
    pass.bytes[0] = extent(xDesc, elem);
    pass.bytes[1] = filter_extent(pass.prob);
    pass.bytes[2] = extent(yDesc, elem);
    auto scalars = std::make_shared<Scalars>(pass.prob);
    // Each algorithm runs as a plan whose filters are prepared (transformed once, outside the
    // timed runs): the steady state of inference, where a network's weights do not change.
    auto plans = std::make_shared<std::map<int, PreparedPlan>>();
    pass.run = [=](int algo, const void* x, const void* w, void* y, void* ws, size_t bytes) {
        PreparedPlan& p = (*plans)[algo];
        if (!p.plan) {
            convcoreConvolutionPlan_t plan = nullptr;
            const convcoreStatus_t st = convcoreCreateConvolutionPlan(handle, CONVCORE_PASS_FORWARD, xDesc, wDesc,
                                                                      convDesc, yDesc, algo, &plan);
            if (st != CONVCORE_STATUS_SUCCESS) return st;
            p.plan.reset(plan, convcoreDestroyConvolutionPlan);
        }
        if (p.prepared_for != w) {
            const convcoreStatus_t st = convcorePrepareConvolutionPlanFilters(p.plan.get(), w, nullptr);
            if (st != CONVCORE_STATUS_SUCCESS) return st;
            p.prepared_for = w;
        }
        return convcoreExecuteConvolutionPlan(p.plan.get(), scalars->alpha(), x, w, scalars->beta(), y, ws, bytes);
    };
    return pass;
}

Pass bwd_data_pass(convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
                   convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc) {
    require(handle, "handle");
    Pass pass;
    pass.handle = handle;
    pass.direction = "bwd_data";
    pass.name = [](int a) { return convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(a)); };
    pass.ranking = ranking<convcoreConvolutionBwdDataAlgoPerf_t>(
        CONVCORE_BWD_DATA_ALGO_COUNT, [&](int n, int* r, auto* p) {
            return convcoreGetConvolutionBackwardDataAlgorithm(handle, wDesc, dyDesc, convDesc, dxDesc, n, r, p);
        });
    pass.prob = make_problem(handle->device, dxDesc, wDesc, convDesc, dyDesc);
    const size_t elem = pass.prob.elem_size();
    pass.bytes[0] = filter_extent(pass.prob);
    pass.bytes[1] = extent(dyDesc, elem);
    pass.bytes[2] = extent(dxDesc, elem);
    auto scalars = std::make_shared<Scalars>(pass.prob);
    pass.run = [=](int algo, const void* w, const void* dy, void* dx, void* ws, size_t bytes) {
        return convcoreConvolutionBackwardData(handle, scalars->alpha(), wDesc, w, dyDesc, dy, convDesc,
                                               convcoreConvolutionBwdDataAlgo_t(algo), ws, bytes,
                                               scalars->beta(), dxDesc, dx);
    };
    return pass;
}

Pass bwd_filter_pass(convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
                     convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc) {
    require(handle, "handle");
    Pass pass;
    pass.handle = handle;
    pass.direction = "bwd_filter";
    pass.name = [](int a) { return convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(a)); };
    pass.ranking = ranking<convcoreConvolutionBwdFilterAlgoPerf_t>(
        CONVCORE_BWD_FILTER_ALGO_COUNT, [&](int n, int* r, auto* p) {
            return convcoreGetConvolutionBackwardFilterAlgorithm(handle, xDesc, dyDesc, convDesc, dwDesc, n, r, p);
        });
    pass.prob = make_problem(handle->device, xDesc, dwDesc, convDesc, dyDesc);
    const size_t elem = pass.prob.elem_size();
    pass.bytes[0] = extent(xDesc, elem);
    pass.bytes[1] = extent(dyDesc, elem);
    pass.bytes[2] = filter_extent(pass.prob);
    auto scalars = std::make_shared<Scalars>(pass.prob);
    pass.run = [=](int algo, const void* x, const void* dy, void* dw, void* ws, size_t bytes) {
        return convcoreConvolutionBackwardFilter(handle, scalars->alpha(), xDesc, x, dyDesc, dy, convDesc,
                                                 convcoreConvolutionBwdFilterAlgo_t(algo), ws, bytes,
                                                 scalars->beta(), dwDesc, dw);
    };
    return pass;
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
        const auto results = find(forward_pass(handle, xDesc, wDesc, convDesc, yDesc), Buffers{});
        copy_results(results, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionForwardAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionFwdAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const Buffers buf = callers_buffers(x, "x", w, "w", y, "y", workspace, workspaceSizeInBytes);
        const auto results = find(forward_pass(handle, xDesc, wDesc, convDesc, yDesc), buf);
        copy_results(results, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc, int requestedAlgoCount,
    int* returnedAlgoCount, convcoreConvolutionBwdDataAlgoPerf_t* perfResults) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const auto results = find(bwd_data_pass(handle, wDesc, dyDesc, convDesc, dxDesc), Buffers{});
        copy_results(results, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardDataAlgorithmEx(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t dxDesc, void* dx, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionBwdDataAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const Buffers buf = callers_buffers(w, "w", dy, "dy", dx, "dx", workspace, workspaceSizeInBytes);
        const auto results = find(bwd_data_pass(handle, wDesc, dyDesc, convDesc, dxDesc), buf);
        copy_results(results, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc, int requestedAlgoCount,
    int* returnedAlgoCount, convcoreConvolutionBwdFilterAlgoPerf_t* perfResults) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const auto results = find(bwd_filter_pass(handle, xDesc, dyDesc, convDesc, dwDesc), Buffers{});
        copy_results(results, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardFilterAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreFilterDescriptor_t dwDesc, void* dw, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionBwdFilterAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const Buffers buf = callers_buffers(x, "x", dy, "dy", dw, "dw", workspace, workspaceSizeInBytes);
        const auto results = find(bwd_filter_pass(handle, xDesc, dyDesc, convDesc, dwDesc), buf);
        copy_results(results, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreSelectConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, convcoreSelectMode_t mode, convcoreConvolutionFwdAlgo_t* algo) {
    return guard([&] {
        require(algo, "algo");
        Buffers buf;
        buf.in0 = x;
        buf.in1 = w;
        buf.out = y;
        const ConvProblem prob = problem_of(handle, xDesc, wDesc, convDesc, yDesc);
        *algo = convcoreConvolutionFwdAlgo_t(select(handle, prob, 0, enum_int(mode), [&] {
            return forward_pass(handle, xDesc, wDesc, convDesc, yDesc);
        }, buf));
    });
}

convcoreStatus_t convcoreSelectConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t dxDesc, void* dx, convcoreSelectMode_t mode, convcoreConvolutionBwdDataAlgo_t* algo) {
    return guard([&] {
        require(algo, "algo");
        Buffers buf;
        buf.in0 = w;
        buf.in1 = dy;
        buf.out = dx;
        const ConvProblem prob = problem_of(handle, dxDesc, wDesc, convDesc, dyDesc);
        *algo = convcoreConvolutionBwdDataAlgo_t(select(handle, prob, 1, enum_int(mode), [&] {
            return bwd_data_pass(handle, wDesc, dyDesc, convDesc, dxDesc);
        }, buf));
    });
}

convcoreStatus_t convcoreSelectConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreFilterDescriptor_t dwDesc, void* dw, convcoreSelectMode_t mode, convcoreConvolutionBwdFilterAlgo_t* algo) {
    return guard([&] {
        require(algo, "algo");
        Buffers buf;
        buf.in0 = x;
        buf.in1 = dy;
        buf.out = dw;
        const ConvProblem prob = problem_of(handle, xDesc, dwDesc, convDesc, dyDesc);
        *algo = convcoreConvolutionBwdFilterAlgo_t(select(handle, prob, 2, enum_int(mode), [&] {
            return bwd_filter_pass(handle, xDesc, dyDesc, convDesc, dwDesc);
        }, buf));
    });
}

convcoreStatus_t convcoreGetFindStats(int64_t* timedRuns, int64_t* dbHits) {
    return guard([&] {
        if (timedRuns) *timedRuns = g_timed_runs.load();
        if (dbHits) *dbHits = g_db_hits.load();
    });
}

convcoreStatus_t convcoreClearFindCache(void) {
    return guard([] {
        find_db::clear_cache();
        DecisionCache& cache = decisions();
        std::lock_guard<std::mutex> lock(cache.mutex);
        cache.algo.clear();
    });
}

}  // extern "C"
