// Find (cuDNN's Find / FindEx) and Select for the three passes, inside the core: on one
// validated problem (core/problem.hpp), Find times every algorithm that may run it, best first,
// through the find-db (core/find_db.hpp) so that each (problem, algorithm) is timed once per
// machine; Select keeps one decision per problem in one bounded cache. The candidates and their
// workspaces come from the pass's Get ranking (core/selection.hpp; CONVCORE_DISABLE_ALGOS,
// applied there, removes algorithms here too); deterministic-only and the workspace limit are
// applied before anything is timed. Runs are the core's own plans (core/plan.hpp), staging of
// strided tensors included, so Find times exactly what a caller gets, on any device. Forward
// algorithms that prepare filters are timed both ways a caller runs them: per call and with
// prepared filters. The C entry points at the end turn descriptors into the problem once and
// wrap these; nothing here calls a public entry point.
#include <strings.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "convcore/convcore.h"
#include "core/algo_filter.hpp"
#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/depth_decomposition.hpp"
#include "core/descriptors.hpp"
#include "core/device.hpp"
#include "core/find_db.hpp"
#include "core/plan.hpp"
#include "core/plan_cache.hpp"
#include "core/select.hpp"
#include "core/selection.hpp"
#include "core/timed_rounds.hpp"
#include "core/timing.hpp"

using namespace convcore;
using namespace convcore::api;

namespace {

std::atomic<int64_t> g_timed_runs{0};
std::atomic<int64_t> g_db_hits{0};

// A field of a caller's choice (convcoreStoreChoiceTimes): non-empty, on one line, no tab.
void check_choice_field(const char* text, const char* name) {
    require(text, name);
    const std::string s(text);
    if (s.empty()) throw_bad_param(std::string(name) + ": must not be empty");
    if (s.find_first_of("\t\n\r") != std::string::npos)
        throw_bad_param(std::string(name) + ": must not hold a tab or a line break, got \"" + s + "\"");
}

// The find-db key of a caller's choice: as Find's, with the caller's direction and problem.
std::string choice_key(convcoreHandle_t handle, const char* direction, const char* problem) {
    require(handle, "handle");
    check_choice_field(direction, "direction");
    check_choice_field(problem, "problem");
    for (const char* own : {"fwd", "bwd_data", "bwd_filter"})
        if (std::strcmp(direction, own) == 0)
            throw_bad_param(std::string("direction: \"") + own + "\" is Find's own; name the choice otherwise");
    return find_db::make_key(*handle, direction, problem);
}

const char* direction_of(convcoreConvolutionPass_t pass) {
    switch (pass) {
        case CONVCORE_PASS_BACKWARD_DATA: return "bwd_data";
        case CONVCORE_PASS_BACKWARD_FILTER: return "bwd_filter";
        default: return "fwd";
    }
}

// A buffer on the handle's device, freed on scope exit.
struct DeviceMemory {
    const Context& ctx;
    void* ptr = nullptr;
    DeviceMemory(const Context& c, size_t bytes) : ctx(c) { ptr = device_alloc(ctx, bytes); }
    ~DeviceMemory() { device_free(ctx, ptr); }
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// Uniform [-1, 1) values on the handle's device (Find's own inputs: random, not zeros, so that
// no algorithm meets a special case such as denormals or all-zero blocks).
std::unique_ptr<DeviceMemory> random_buffer(const Context& ctx, int64_t bytes, size_t elem, uint32_t seed) {
    auto mem = std::make_unique<DeviceMemory>(ctx, size_t(bytes));
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
    copy_to_device(ctx, mem->ptr, host.data(), host.size());
    return mem;
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

// The pass's Get ranking; a 3-D problem's (depth) with its 3-D plans' workspaces.
std::vector<Ranked> pass_ranking(convcoreHandle_t handle, convcoreConvolutionPass_t kind, const ConvProblem& prob,
                                 const depth::DepthProblem* depth) {
    std::vector<Ranked> rows = ranking(kind, prob);
    if (!depth) return rows;
    for (Ranked& r : rows) {
        if (r.status != CONVCORE_STATUS_SUCCESS) continue;
        try {
            r.memory = depth::make_plan(handle, kind, *depth, r.algo).workspace_bytes();
        } catch (const Error& e) {
            r.status = e.status();
            r.memory = 0;
        }
    }
    return rows;
}

// What Find needs to know of a pass, on one problem: its Get ranking and its plans. A 3-D
// problem (depth) is ranked on its representative 2-D problem `prob` but timed, sized and keyed
// as itself: its own plans (the decomposition, or the native 3-D Winograd), their workspaces,
// and a find-db key with its depth axis.
class Pass {
public:
    Pass(convcoreHandle_t handle, convcoreConvolutionPass_t kind, const ConvProblem& prob,
         const depth::DepthProblem* depth = nullptr)
        : handle_(handle), kind_(kind), prob_(prob), scalars_(prob), ranking_(pass_ranking(handle, kind, prob, depth)) {
        int64_t x = x_extent(prob), w = w_extent(prob), y = y_extent(prob);
        if (depth) {
            depth_ = std::make_unique<depth::DepthProblem>(*depth);
            x = depth->x_bytes, w = depth->w_bytes, y = depth->y_bytes;
        }
        // Extents of in0, in1 and out, for Find's own buffers.
        if (kind == CONVCORE_PASS_FORWARD) bytes_[0] = x, bytes_[1] = w, bytes_[2] = y;
        if (kind == CONVCORE_PASS_BACKWARD_DATA) bytes_[0] = w, bytes_[1] = y, bytes_[2] = x;
        if (kind == CONVCORE_PASS_BACKWARD_FILTER) bytes_[0] = x, bytes_[1] = y, bytes_[2] = w;
    }
    convcoreHandle_t handle() const { return handle_; }
    convcoreConvolutionPass_t kind() const { return kind_; }
    const char* direction() const { return direction_of(kind_); }
    const char* name(int algo) const { return algo_name(kind_, algo); }
    const ConvProblem& prob() const { return prob_; }
    // Whether algo is DIRECT, the reference loops (accumulating in double), there to check the
    // others: "auto" does not time it beside another algorithm that runs the problem. On a
    // network's layer it takes seconds where the others take milliseconds (mc3_18's stride-2
    // layers, whose backward passes have three algorithms, made its first training step 36 s).
    bool reference(int algo) const {
        static_assert(CONVCORE_FWD_ALGO_DIRECT == 0 && CONVCORE_BWD_DATA_ALGO_DIRECT == 0 &&
                          CONVCORE_BWD_FILTER_ALGO_DIRECT == 0,
                      "DIRECT is algorithm 0 of every pass");
        return algo == 0;
    }
    const std::vector<Ranked>& ranking_rows() const { return ranking_; }
    int64_t bytes(int i) const { return bytes_[i]; }
    // The find-db key: the 2-D problem's, and a 3-D problem's depth axis and strides.
    std::string db_key() const {
        std::string key = find_db::make_key(*handle_, direction(), prob_);
        if (!depth_) return key;
        const depth::DepthProblem& d = *depth_;
        return key + "_3d" + std::to_string(d.n) + "x" + std::to_string(d.d_in) + "o" + std::to_string(d.d_out) +
               "t" + std::to_string(d.taps) + "p" + std::to_string(d.pad) + "s" + std::to_string(d.stride) + "l" +
               std::to_string(d.dil) + "_xs" + std::to_string(d.x_n_stride) + "." + std::to_string(d.x_d_stride) +
               "_ys" + std::to_string(d.y_n_stride) + "." + std::to_string(d.y_d_stride) + "_wt" +
               std::to_string(d.w_t_stride);
    }

    // Whether prepared filters change algo's run (then it is timed both ways).
    bool prepares(int algo) {
        if (kind_ != CONVCORE_PASS_FORWARD) return false;
        try {
            return prepares_filters(plan(algo, false));
        } catch (const Error&) {
            return false;  // its run says why
        }
    }

    // out = 1 * op(in0, in1) + 0 * out with algo: as a plan without prepared filters, or (forward
    // only) as a plan whose filters in1 are prepared once, outside the timed runs. Throws Error.
    void run(int algo, bool prepared, const void* in0, const void* in1, void* out, void* ws, size_t bytes) {
        // Find's buffers follow the API's argument order (backward data: w, dy, dx); a backward
        // data plan executes (dy, w) (convcore.h, plans).
        if (kind_ == CONVCORE_PASS_BACKWARD_DATA) std::swap(in0, in1);
        convcoreConvolutionPlanStruct& p = plan(algo, prepared);
        if (prepared && p.prepared_for != in1) prepare_filters(p, in1, nullptr);
        execute(p, scalars_.alpha(), in0, in1, scalars_.beta(), out, ws, bytes);
    }

    // Before a timed run on the CPU: the weights, and algo's prepared filters, out of the caches,
    // as a layer of a network finds them (its input was just written by the layer before; its
    // weights were last read a whole pass ago). Timed with warm weights instead, an algorithm
    // whose transformed filters are larger than w (Winograd's U: 16/9 or 4x) or read in another
    // order wins rankings that it loses in the network. CONVCORE_FIND_WEIGHTS=warm keeps them.
    void evict_weights(int algo, bool prepared, const void* in0, const void* in1) {
        if (handle_->device != CONVCORE_DEVICE_CPU || warm_weights()) return;
        if (kind_ == CONVCORE_PASS_FORWARD) cpu::evict_from_caches(in1, size_t(bytes_[1]));
        if (kind_ == CONVCORE_PASS_BACKWARD_DATA) cpu::evict_from_caches(in0, size_t(bytes_[0]));
        if (prepared) {
            const convcoreConvolutionPlanStruct& p = plan(algo, true);
            if (p.prepared) cpu::evict_from_caches(p.prepared.get(), p.prepared_bytes);
        }
    }

private:
    static bool warm_weights() {
        const char* env = std::getenv("CONVCORE_FIND_WEIGHTS");
        return env && strcasecmp(env, "warm") == 0;
    }
    convcoreConvolutionPlanStruct& plan(int algo, bool prepared) {
        auto& slot = plans_[{algo, prepared}];
        if (!slot)
            slot = std::make_unique<convcoreConvolutionPlanStruct>(
                depth_ ? depth::make_plan(handle_, kind_, *depth_, algo) : make_plan(handle_, kind_, prob_, algo));
        return *slot;
    }

    convcoreHandle_t handle_;
    convcoreConvolutionPass_t kind_;
    ConvProblem prob_;
    std::unique_ptr<depth::DepthProblem> depth_;
    Scalars scalars_;
    std::vector<Ranked> ranking_;
    int64_t bytes_[3] = {0, 0, 0};
    std::map<std::pair<int, bool>, std::unique_ptr<convcoreConvolutionPlanStruct>> plans_;
};

constexpr size_t kAllCandidates = SIZE_MAX;

// Times `algos` interleaved: a warm-up run of each contender (an algorithm, or an algorithm with
// prepared filters when it prepares any), then up to kMaxRounds rounds that each run every
// contender still open once (core/timed_rounds.hpp: from kSettleRounds on, those whose place in
// the rankings is settled stop), the starting one rotating, so that a slow stretch of a shared
// machine falls on all of them alike; a contender's time is the median of its runs. `memory[i]` is
// algos[i]'s workspace; without the caller's workspace one buffer of the largest is allocated
// (an algorithm whose workspace cannot be had is ALLOC_FAILED). A run that fails gives its
// status to its algorithm; BAD_PARAM (the caller's buffers are wrong) is thrown.
std::vector<find_db::Record> time_interleaved(Pass& pass, const std::vector<int>& algos,
                                              const std::vector<size_t>& memory, const TimingBuffers& buf) {
    const size_t n = algos.size();
    std::vector<find_db::Record> recs(n);
    std::vector<bool> alive(n, true);
    const auto fail = [&](size_t i, convcoreStatus_t status) {
        alive[i] = false;
        recs[i].status = status;
        recs[i].time_ms = recs[i].time_prepared_ms = -1.0;
    };
    const Context& ctx = *pass.handle();

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
                own_workspace = std::make_unique<DeviceMemory>(ctx, need);
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

    struct Contender {
        size_t index;   // into algos
        bool prepared;  // with prepared filters
        timed_rounds::Timed timed;
    };
    using timed_rounds::kPerCall;
    using timed_rounds::kPrepared;
    std::vector<Contender> contenders;
    for (size_t i = 0; i < n; ++i) {
        if (!alive[i]) continue;
        // An algorithm that prepares nothing has its per-call time in both rankings.
        const bool prepares = pass.prepares(algos[i]);
        contenders.push_back({i, false, {prepares ? kPerCall : kPerCall | kPrepared, true, {}}});
        if (prepares) contenders.push_back({i, true, {kPrepared, true, {}}});
    }
    const size_t m = contenders.size();
    const auto attempt = [&](Contender& c, bool timed) {
        try {
            if (timed) pass.evict_weights(algos[c.index], c.prepared, buf.in0, buf.in1);
            const double ms = time_run_ms(ctx, [&] {
                pass.run(algos[c.index], c.prepared, buf.in0, buf.in1, buf.out, workspace, bytes);
            });
            if (timed) c.timed.times.push_back(ms);
        } catch (const Error& e) {
            if (e.status() == CONVCORE_STATUS_BAD_PARAM) throw;
            fail(c.index, e.status());
        } catch (const std::bad_alloc&) {
            fail(c.index, CONVCORE_STATUS_ALLOC_FAILED);
        }
    };
    for (Contender& c : contenders)  // warm-up: plans, prepared filters, caches, first touch of the workspace
        if (alive[c.index]) attempt(c, false);
    std::vector<bool> open(m, true);
    for (int round = 0; round < timed_rounds::kMaxRounds; ++round) {
        for (size_t j = 0; j < m; ++j) {
            const size_t k = (size_t(round) + j) % m;
            if (alive[contenders[k].index] && open[k]) attempt(contenders[k], true);
        }
        if (round + 1 < timed_rounds::kSettleRounds) continue;
        std::vector<timed_rounds::Timed> timed;
        for (Contender& c : contenders) {
            c.timed.alive = alive[c.index];
            timed.push_back(c.timed);
        }
        const std::vector<bool> now = timed_rounds::open_places(timed);
        bool any = false;
        for (size_t j = 0; j < m; ++j) {
            open[j] = open[j] && now[j];
            any = any || (open[j] && alive[contenders[j].index]);
        }
        if (!any) break;
    }
    using timed_rounds::median;
    for (Contender& c : contenders) {
        if (!alive[c.index]) continue;
        find_db::Record& rec = recs[c.index];
        rec.status = CONVCORE_STATUS_SUCCESS;
        if (c.prepared) {
            rec.time_prepared_ms = median(c.timed.times);
        } else {
            rec.time_ms = median(c.timed.times);
            if (rec.time_prepared_ms < 0) rec.time_prepared_ms = rec.time_ms;  // nothing to prepare (yet)
            ++g_timed_runs;
        }
    }
    return recs;
}

// Every algorithm of the pass: those that ran, fastest first by the time of the problem's filter
// protocol, then the others in enum order. Only the first `candidates` eligible algorithms of the
// Get ranking are timed, those the find-db already knows, and those made for the problem
// (Solver::made_for: the registry's knowledge, so that a model fitted on other problems cannot
// rank a specialised solver out); the rest keep status SUCCESS with times -1 (listed after those
// timed).
std::vector<FindResult> find(Pass& pass, TimingBuffers buf, size_t candidates = kAllCandidates) {
    const Context& ctx = *pass.handle();
    const size_t limit = buf.callers_workspace ? buf.workspace_bytes : ctx.find_workspace_limit;

    std::vector<FindResult> perf;
    std::vector<bool> made_for;
    for (const Ranked& r : pass.ranking_rows()) {
        made_for.push_back(r.made_for != MadeFor::No);
        FindResult f;
        f.algo = r.algo;
        f.status = r.status;
        f.memory = r.memory;
        f.determinism = r.determinism;
        perf.push_back(f);
    }
    std::vector<bool> eligible(perf.size(), false);
    for (size_t i = 0; i < perf.size(); ++i) {
        FindResult& r = perf[i];
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
    const std::string key = pass.db_key();
    const auto missing_from = [&](const find_db::Records& known) {
        std::vector<size_t> missing;
        for (size_t i = 0; i < perf.size(); ++i)
            if (eligible[i] && !known.count(pass.name(perf[i].algo))) missing.push_back(i);
        return missing;
    };
    find_db::Records known = find_db::lookup(key, false);
    if (candidates != kAllCandidates) {
        bool others = false;  // an eligible algorithm other than the reference
        for (size_t i = 0; i < perf.size(); ++i) others = others || (eligible[i] && !pass.reference(perf[i].algo));
        size_t ranked = 0;  // eligible algorithms seen, in the Get ranking's order
        for (size_t i = 0; i < perf.size(); ++i) {
            if (!eligible[i]) continue;
            const bool in_db = known.count(pass.name(perf[i].algo)) > 0;
            if (others && pass.reference(perf[i].algo) && !in_db)
                eligible[i] = false;  // (takes no candidate's place)
            else if (ranked++ >= candidates && !in_db && !made_for[i])
                eligible[i] = false;
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
        const size_t elem = pass.prob().elem_size();
        if (!buf.in0) {
            own[0] = random_buffer(ctx, pass.bytes(0), elem, 1);
            buf.in0 = own[0]->ptr;
        }
        if (!buf.in1) {
            own[1] = random_buffer(ctx, pass.bytes(1), elem, 2);
            buf.in1 = own[1]->ptr;
        }
        if (!buf.out) {
            own[2] = std::make_unique<DeviceMemory>(ctx, size_t(pass.bytes(2)));
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
        const bool ok = rec.status == CONVCORE_STATUS_SUCCESS;
        perf[i].time_per_call = ok ? float(rec.time_ms) : -1.0f;
        // The backward passes have one time, whatever a record says.
        perf[i].time_prepared = !ok ? -1.0f
                                : pass.kind() == CONVCORE_PASS_FORWARD ? float(rec.time_prepared_ms)
                                                                       : float(rec.time_ms);
    }
    // Timed successes by the time of the problem's protocol, then untimed candidates in the Get
    // ranking's order (stable), then failures in enum order.
    const bool prepared = pass.kind() == CONVCORE_PASS_FORWARD && pass.prob().prepared_filters;
    const auto group = [&](const FindResult& r) {
        return r.status != CONVCORE_STATUS_SUCCESS ? 2 : r.time(prepared) < 0 ? 1 : 0;
    };
    std::stable_sort(perf.begin(), perf.end(), [&](const FindResult& l, const FindResult& r) {
        if (group(l) != group(r)) return group(l) < group(r);
        if (group(l) == 0) return l.time(prepared) < r.time(prepared);
        return group(l) == 2 && l.algo < r.algo;
    });
    return perf;
}

// ---- Select: one decision per problem, in one bounded cache ----

// The algorithms CONVCORE_DISABLE_ALGOS disables, one bit per algorithm of each pass, parsed
// again only when the variable's text changes (tests and users may change it between calls).
uint64_t disabled_mask(convcoreConvolutionPass_t pass) {
    const char* env = std::getenv("CONVCORE_DISABLE_ALGOS");
    if (!env || !*env) return 0;
    struct Parsed {
        std::string text;
        uint64_t mask[3] = {0, 0, 0};
    };
    thread_local Parsed parsed;
    if (parsed.text != env) {
        for (int p = 0; p < 3; ++p) {
            parsed.mask[p] = 0;
            const auto kind = convcoreConvolutionPass_t(p);
            for (int a = 0; a < algorithm_count(kind) && a < 64; ++a)
                if (disabled_by_env(algo_name(kind, a))) parsed.mask[p] |= uint64_t(1) << a;
        }
        parsed.text = env;
    }
    return parsed.mask[int(pass)];
}

// What a decision depends on, as one key: the pass and the problem as the run sees it (sizes,
// strides of x, w and y, data type, mode; a 3-D problem's depth axis and strides), the filter
// protocol (forward), the device and its threads, the handle's Find settings, the select mode and
// the disabled algorithms.
struct DecisionKey {
    static constexpr int kFields = 49;
    std::array<int64_t, kFields> f{};
    bool operator==(const DecisionKey& o) const { return f == o.f; }
};

struct DecisionKeyHash {
    size_t operator()(const DecisionKey& k) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
        for (int64_t v : k.f) h = (h ^ uint64_t(v)) * 1099511628211ull;
        return size_t(h);
    }
};

DecisionKey decision_key(const Context& ctx, const ConvProblem& p, convcoreConvolutionPass_t pass, SelectMode mode,
                         const depth::DepthProblem* depth) {
    DecisionKey key;
    const bool prepared = pass == CONVCORE_PASS_FORWARD && p.prepared_filters;
    const auto d = [depth](int64_t depth::DepthProblem::*field) { return depth ? depth->*field : 0; };  // 2-D: 0
    using D = depth::DepthProblem;
    const int64_t fields[] = {
        int64_t(pass), int64_t(mode), int64_t(prepared), int64_t(p.device), ctx.device_index, ctx.threads(),
        int64_t(p.dtype), p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.groups, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
        p.dil_h, p.dil_w, int64_t(p.flip), int64_t(ctx.deterministic_only),
        int64_t(std::min<size_t>(ctx.find_workspace_limit, INT64_MAX)), int64_t(disabled_mask(pass)),
        p.x_strides[0], p.x_strides[1], p.x_strides[2], p.x_strides[3], p.y_strides[0], p.y_strides[1],
        p.y_strides[2], p.y_strides[3], p.w_strides[0], p.w_strides[1], p.w_strides[2], p.w_strides[3],
        d(&D::n), d(&D::d_in), d(&D::d_out), d(&D::taps), d(&D::pad), d(&D::stride), d(&D::dil),
        d(&D::x_n_stride), d(&D::x_d_stride), d(&D::y_n_stride), d(&D::y_d_stride), d(&D::w_t_stride)};
    static_assert(sizeof(fields) / sizeof(fields[0]) == DecisionKey::kFields, "every field of the key");
    std::copy(std::begin(fields), std::end(fields), key.f.begin());
    return key;
}

// The one decision cache: least recently used first out beyond kDecisionCacheCapacity.
class DecisionCache {
public:
    bool get(const DecisionKey& key, int* algo) {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = index_.find(key);
        if (it == index_.end()) return false;
        order_.splice(order_.begin(), order_, it->second);  // most recently used
        *algo = it->second->second;
        return true;
    }
    void put(const DecisionKey& key, int algo) {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = index_.find(key);
        if (it != index_.end()) {
            it->second->second = algo;
            order_.splice(order_.begin(), order_, it->second);
            return;
        }
        order_.emplace_front(key, algo);
        index_[key] = order_.begin();
        while (index_.size() > kDecisionCacheCapacity) {
            index_.erase(order_.back().first);
            order_.pop_back();
        }
    }
    size_t size() {
        std::lock_guard<std::mutex> lock(mutex_);
        return index_.size();
    }
    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        index_.clear();
        order_.clear();
    }

private:
    std::mutex mutex_;
    std::list<std::pair<DecisionKey, int>> order_;  // most recently used first
    std::unordered_map<DecisionKey, std::list<std::pair<DecisionKey, int>>::iterator, DecisionKeyHash> index_;
};

DecisionCache& decisions() {
    static DecisionCache* cache = new DecisionCache;  // never destroyed: used at exit by other statics
    return *cache;
}

// CONVCORE_AUTO=heuristic turns MEASURED into HEURISTIC.
SelectMode effective_mode(SelectMode mode) {
    if (mode != SelectMode::Measured) return mode;
    const char* env = std::getenv("CONVCORE_AUTO");
    return env && strcasecmp(env, "heuristic") == 0 ? SelectMode::Heuristic : mode;
}

}  // namespace

namespace convcore {

SelectMode select_mode_of(int mode) {
    switch (mode) {
        case CONVCORE_SELECT_HEURISTIC: return SelectMode::Heuristic;
        case CONVCORE_SELECT_MEASURED: return SelectMode::Measured;
        case CONVCORE_SELECT_FIND: return SelectMode::Find;
    }
    throw_bad_param("mode=" + std::to_string(mode) + " is not a convcoreSelectMode_t (HEURISTIC, MEASURED or FIND)");
}

SelectMode plan_select_mode_of(int algo) {
    switch (algo) {
        case CONVCORE_PLAN_SELECT_HEURISTIC: return SelectMode::Heuristic;
        case CONVCORE_PLAN_SELECT_MEASURED: return SelectMode::Measured;
        case CONVCORE_PLAN_SELECT_FIND: return SelectMode::Find;
    }
    throw_bad_param("algo " + std::to_string(algo) + " is neither an algorithm nor a CONVCORE_PLAN_SELECT_* value");
}

std::vector<Ranked> ranking(convcoreConvolutionPass_t pass, const ConvProblem& prob) {
    switch (pass) {
        case CONVCORE_PASS_BACKWARD_DATA: return bwd_data_ranking(prob);
        case CONVCORE_PASS_BACKWARD_FILTER: return bwd_filter_ranking(prob);
        default: return forward_ranking(prob);
    }
}

std::vector<FindResult> find_algorithms(convcoreHandle_t handle, convcoreConvolutionPass_t kind,
                                        const ConvProblem& prob, const TimingBuffers& buf,
                                        const depth::DepthProblem* depth) {
    require(handle, "handle");
    Pass pass(handle, kind, prob, depth);
    return find(pass, buf);
}

int select_algorithm(convcoreHandle_t handle, convcoreConvolutionPass_t kind, const ConvProblem& prob,
                     SelectMode requested, const TimingBuffers& buf, const depth::DepthProblem* depth) {
    require(handle, "handle");
    const SelectMode mode = effective_mode(requested);
    const DecisionKey key = decision_key(*handle, prob, kind, mode, depth);
    DecisionCache& cache = decisions();
    int chosen = -1;
    if (cache.get(key, &chosen)) return chosen;
    Pass pass(handle, kind, prob, depth);  // its Get ranking costs microseconds: only when nothing is cached
    if (mode == SelectMode::Heuristic) {
        for (const Ranked& r : pass.ranking_rows()) {
            if (r.status == CONVCORE_STATUS_SUCCESS &&
                !(handle->deterministic_only && r.determinism == CONVCORE_NON_DETERMINISTIC)) {
                chosen = r.algo;
                break;
            }
        }
    } else {
        const size_t candidates = mode == SelectMode::Find ? kAllCandidates : CONVCORE_SELECT_CANDIDATES;
        const bool prepared = kind == CONVCORE_PASS_FORWARD && prob.prepared_filters;
        const std::vector<FindResult> results = find(pass, buf, candidates);
        if (!results.empty() && results[0].status == CONVCORE_STATUS_SUCCESS && results[0].time(prepared) >= 0)
            chosen = results[0].algo;
    }
    if (chosen < 0)
        throw Error(CONVCORE_STATUS_NOT_SUPPORTED,
                    std::string("no convcore algorithm can run this problem on this device (") + pass.direction() +
                        ", " + find_db::problem_string(prob) + ")");
    cache.put(key, chosen);
    return chosen;
}

size_t decision_cache_entries() { return decisions().size(); }

void clear_decisions() { decisions().clear(); }

}  // namespace convcore

namespace {

template <typename Perf>
void copy_results(const std::vector<FindResult>& results, bool prepared, int requested, int* returned, Perf* out) {
    const int count = std::min<int>(requested, int(results.size()));
    for (int i = 0; i < count; ++i) {
        out[i] = Perf{};
        out[i].algo = decltype(out[i].algo)(results[i].algo);
        out[i].status = results[i].status;
        out[i].time = results[i].time(prepared);
        out[i].memory = results[i].memory;
        out[i].determinism = results[i].determinism;
        if constexpr (std::is_same<Perf, convcoreConvolutionFwdAlgoPerf_t>::value) {
            out[i].timePerCall = results[i].time_per_call;
            out[i].timePrepared = results[i].time_prepared;
        }
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
TimingBuffers callers_buffers(const void* in0, const char* in0_name, const void* in1, const char* in1_name,
                              void* out, const char* out_name, void* workspace, size_t bytes) {
    require(in0, in0_name);
    require(in1, in1_name);
    require(out, out_name);
    if (bytes > 0 && !workspace)
        throw_bad_param("workspace is NULL but workspaceSizeInBytes=" + std::to_string(bytes));
    TimingBuffers buf;
    buf.callers_workspace = true;
    buf.in0 = in0;
    buf.in1 = in1;
    buf.out = out;
    buf.workspace = workspace;
    buf.workspace_bytes = bytes;
    return buf;
}

// Select's buffers: any may be null (Select then times on its own).
TimingBuffers select_buffers(const void* in0, const void* in1, void* out) {
    TimingBuffers buf;
    buf.in0 = in0;
    buf.in1 = in1;
    buf.out = out;
    return buf;
}

// The problems of the entry points, from their descriptors (validated once per call).
// The problem Find and Select search: a 2-D problem, or a 3-D one (depth) with its
// representative 2-D problem (core/depth_decomposition.hpp).
struct Searched {
    ConvProblem prob;
    std::unique_ptr<depth::DepthProblem> depth_problem;
    const depth::DepthProblem* depth() const { return depth_problem.get(); }
};

// From a pass's descriptors in plan order (x, w, y; dx, w, dy; x, dw, dy).
Searched searched(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
                  convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc,
                  convcoreTensorDescriptor_t yDesc) {
    require(handle, "handle");
    Searched s;
    depth::DepthProblem depth;
    s.prob = pass_problem(handle, pass, xDesc, wDesc, convDesc, yDesc, &depth);
    if (depth::is_3d(xDesc)) s.depth_problem = std::make_unique<depth::DepthProblem>(std::move(depth));
    return s;
}
Searched fwd_problem(convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                     convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc) {
    require(handle, "handle");
    require(yDesc, "yDesc");  // Find and Select write y (Get takes no y: descriptor_ranking)
    return searched(handle, CONVCORE_PASS_FORWARD, xDesc, wDesc, convDesc, yDesc);
}
Searched data_problem(convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
                      convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc) {
    return searched(handle, CONVCORE_PASS_BACKWARD_DATA, dxDesc, wDesc, convDesc, dyDesc);
}
Searched filter_problem(convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
                        convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc) {
    return searched(handle, CONVCORE_PASS_BACKWARD_FILTER, xDesc, dwDesc, convDesc, dyDesc);
}

}  // namespace

std::vector<Ranked> convcore::descriptor_ranking(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                                 convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                                 convcoreConvolutionDescriptor_t convDesc,
                                                 convcoreTensorDescriptor_t yDesc) {
    const Searched s = searched(handle, pass, xDesc, wDesc, convDesc, yDesc);
    return pass_ranking(handle, pass, s.prob, s.depth());
}

namespace {

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
        const Searched s = fwd_problem(handle, xDesc, wDesc, convDesc, yDesc);
        const auto results = find_algorithms(handle, CONVCORE_PASS_FORWARD, s.prob, TimingBuffers{}, s.depth());
        copy_results(results, s.prob.prepared_filters, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionForwardAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionFwdAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const TimingBuffers buf = callers_buffers(x, "x", w, "w", y, "y", workspace, workspaceSizeInBytes);
        const Searched s = fwd_problem(handle, xDesc, wDesc, convDesc, yDesc);
        const auto results = find_algorithms(handle, CONVCORE_PASS_FORWARD, s.prob, buf, s.depth());
        copy_results(results, s.prob.prepared_filters, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc, int requestedAlgoCount,
    int* returnedAlgoCount, convcoreConvolutionBwdDataAlgoPerf_t* perfResults) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const Searched s = data_problem(handle, wDesc, dyDesc, convDesc, dxDesc);
        const auto results = find_algorithms(handle, CONVCORE_PASS_BACKWARD_DATA, s.prob, TimingBuffers{}, s.depth());
        copy_results(results, false, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardDataAlgorithmEx(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t dxDesc, void* dx, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionBwdDataAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const TimingBuffers buf = callers_buffers(w, "w", dy, "dy", dx, "dx", workspace, workspaceSizeInBytes);
        const Searched s = data_problem(handle, wDesc, dyDesc, convDesc, dxDesc);
        const auto results = find_algorithms(handle, CONVCORE_PASS_BACKWARD_DATA, s.prob, buf, s.depth());
        copy_results(results, false, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc, int requestedAlgoCount,
    int* returnedAlgoCount, convcoreConvolutionBwdFilterAlgoPerf_t* perfResults) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const Searched s = filter_problem(handle, xDesc, dyDesc, convDesc, dwDesc);
        const auto results = find_algorithms(handle, CONVCORE_PASS_BACKWARD_FILTER, s.prob, TimingBuffers{}, s.depth());
        copy_results(results, false, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreFindConvolutionBackwardFilterAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreFilterDescriptor_t dwDesc, void* dw, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionBwdFilterAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes) {
    return guard([&] {
        check_counts(requestedAlgoCount, returnedAlgoCount, perfResults);
        const TimingBuffers buf = callers_buffers(x, "x", dy, "dy", dw, "dw", workspace, workspaceSizeInBytes);
        const Searched s = filter_problem(handle, xDesc, dyDesc, convDesc, dwDesc);
        const auto results = find_algorithms(handle, CONVCORE_PASS_BACKWARD_FILTER, s.prob, buf, s.depth());
        copy_results(results, false, requestedAlgoCount, returnedAlgoCount, perfResults);
    });
}

convcoreStatus_t convcoreSelectConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, convcoreSelectMode_t mode, convcoreConvolutionFwdAlgo_t* algo) {
    return guard([&] {
        require(algo, "algo");
        const SelectMode m = select_mode_of(enum_int(mode));
        const Searched s = fwd_problem(handle, xDesc, wDesc, convDesc, yDesc);
        *algo = convcoreConvolutionFwdAlgo_t(
            select_algorithm(handle, CONVCORE_PASS_FORWARD, s.prob, m, select_buffers(x, w, y), s.depth()));
    });
}

convcoreStatus_t convcoreSelectConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t dxDesc, void* dx, convcoreSelectMode_t mode, convcoreConvolutionBwdDataAlgo_t* algo) {
    return guard([&] {
        require(algo, "algo");
        const SelectMode m = select_mode_of(enum_int(mode));
        const Searched s = data_problem(handle, wDesc, dyDesc, convDesc, dxDesc);
        *algo = convcoreConvolutionBwdDataAlgo_t(
            select_algorithm(handle, CONVCORE_PASS_BACKWARD_DATA, s.prob, m, select_buffers(w, dy, dx), s.depth()));
    });
}

convcoreStatus_t convcoreSelectConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreFilterDescriptor_t dwDesc, void* dw, convcoreSelectMode_t mode, convcoreConvolutionBwdFilterAlgo_t* algo) {
    return guard([&] {
        require(algo, "algo");
        const SelectMode m = select_mode_of(enum_int(mode));
        const Searched s = filter_problem(handle, xDesc, dyDesc, convDesc, dwDesc);
        *algo = convcoreConvolutionBwdFilterAlgo_t(
            select_algorithm(handle, CONVCORE_PASS_BACKWARD_FILTER, s.prob, m, select_buffers(x, dy, dw), s.depth()));
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
        clear_decisions();
        bump_plan_generation();
    });
}

convcoreStatus_t convcoreGetSelectCacheSize(size_t* entries) {
    return guard([&] {
        require(entries, "entries");
        *entries = decision_cache_entries();
    });
}

convcoreStatus_t convcoreStoreChoiceTimes(convcoreHandle_t handle, const char* direction, const char* problem,
                                          int count, const char* const* options, const float* timesMs) {
    return guard([&] {
        const std::string key = choice_key(handle, direction, problem);
        if (count < 1) throw_bad_param("count: expected at least 1 option, got " + std::to_string(count));
        require(options, "options");
        require(timesMs, "timesMs");
        find_db::Records records;
        for (int i = 0; i < count; ++i) {
            const std::string name = "options[" + std::to_string(i) + "]";
            check_choice_field(options[i], name.c_str());
            if (!std::isfinite(timesMs[i]) || timesMs[i] < 0)
                throw_bad_param("timesMs[" + std::to_string(i) + "]: expected a finite time >= 0 ms, got " +
                                std::to_string(timesMs[i]));
            find_db::Record& rec = records[options[i]];
            rec.status = CONVCORE_STATUS_SUCCESS;
            rec.time_ms = rec.time_prepared_ms = timesMs[i];
        }
        find_db::store(key, records);
    });
}

convcoreStatus_t convcoreGetFastestChoice(convcoreHandle_t handle, const char* direction, const char* problem,
                                          char* option, size_t capacity) {
    return guard([&] {
        const std::string key = choice_key(handle, direction, problem);
        require(option, "option");
        if (capacity < 1) throw_bad_param("capacity: expected at least 1 byte, got 0");
        std::string fastest;
        double best = 0;
        for (const auto& kv : find_db::lookup(key, false))
            if (kv.second.status == CONVCORE_STATUS_SUCCESS && (fastest.empty() || kv.second.time_ms < best))
                fastest = kv.first, best = kv.second.time_ms;
        if (fastest.size() >= capacity)
            throw_bad_param("capacity: " + std::to_string(capacity) + " bytes do not hold the option \"" + fastest +
                            "\" and its terminating NUL");
        std::memcpy(option, fastest.c_str(), fastest.size() + 1);
    });
}

}  // extern "C"
