// The handle's plan cache, prepared filters and workspace (core/plan_cache.hpp; convcore.h, "the
// handle's plan cache"), and convcoreConvolutionExecute, the call that runs through them.
#include "core/plan_cache.hpp"

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>

#include "core/api_util.hpp"
#include "core/depth_decomposition.hpp"
#include "core/descriptors.hpp"
#include "core/fingerprint.hpp"
#include "core/selection.hpp"

namespace convcore {
namespace {

constexpr size_t kDefaultCapacity = 1024;  // oneDNN's primitive cache holds 1024 too
// Filter pointers kept per plan: more layers of one shape than this, each with its own weights,
// prepare again in turn (the least recently used pointer's filters are dropped first).
constexpr size_t kMaxFilterSets = 256;
// Bytes of prepared filters a handle keeps (CONVCORE_PREPARED_FILTER_BYTES): filters of weights
// that are gone stay until they are the least recently used beyond this.
constexpr size_t kDefaultPreparedLimit = size_t(2) << 30;

std::atomic<uint64_t> g_plan_generation{0};

size_t size_from_environment(const char* name, size_t fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    return end && *end == '\0' ? size_t(n) : fallback;
}

}  // namespace

void bump_plan_generation() { g_plan_generation.fetch_add(1, std::memory_order_relaxed); }

// ---- workspace ----

WorkspacePool::~WorkspacePool() {
    for (const Buffer& b : free_) api::device_free(ctx_, b.ptr);
}

WorkspacePool::Lease WorkspacePool::lend(size_t bytes) {
    if (bytes == 0) return Lease(nullptr, Buffer{});
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest free buffer that is large enough; else the largest is replaced.
    size_t best = free_.size(), largest = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].bytes >= bytes && (best == free_.size() || free_[i].bytes < free_[best].bytes)) best = i;
        if (largest == free_.size() || free_[i].bytes > free_[largest].bytes) largest = i;
    }
    Buffer b;
    if (best != free_.size()) {
        b = free_[best];
        free_.erase(free_.begin() + std::ptrdiff_t(best));
    } else {
        if (largest != free_.size()) {
            api::device_free(ctx_, free_[largest].ptr);
            free_bytes_ -= free_[largest].bytes;
            free_.erase(free_.begin() + std::ptrdiff_t(largest));
        }
        b.bytes = api::align_up(bytes);
        b.ptr = api::device_alloc(ctx_, b.bytes);
        allocations_.fetch_add(1, std::memory_order_relaxed);
        free_bytes_ += b.bytes;
        free_.reserve(free_.size() + 1);  // room to give it back without allocating
    }
    free_bytes_ -= b.bytes;
    lent_bytes_ += b.bytes;
    return Lease(this, b);
}

void WorkspacePool::give_back(Buffer b) {
    std::lock_guard<std::mutex> lock(mutex_);
    lent_bytes_ -= b.bytes;
    free_bytes_ += b.bytes;
    free_.push_back(b);
}

size_t WorkspacePool::total_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lent_bytes_ + free_bytes_;
}

// ---- plans ----

PlanCache::PlanCache()
    : plans_(size_from_environment("CONVCORE_PLAN_CACHE_CAPACITY", kDefaultCapacity)),
      prepared_limit_(size_from_environment("CONVCORE_PREPARED_FILTER_BYTES", kDefaultPreparedLimit)),
      generation_(g_plan_generation.load(std::memory_order_relaxed)) {}

void PlanCache::set_prepared_limit(size_t bytes) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        prepared_limit_ = bytes;
    }
    trim_prepared();
}

void PlanCache::trim_prepared() {
    std::lock_guard<std::mutex> lock(mutex_);
    while (prepared_total_.load() > prepared_limit_) {
        CachedPlan* oldest_plan = nullptr;
        uint64_t oldest = UINT64_MAX;
        plans_.for_each([&](const std::shared_ptr<CachedPlan>& plan) {
            std::lock_guard<std::mutex> filters_lock(plan->mutex);
            if (!plan->filters.empty() && plan->filters.back().last_use < oldest) {
                oldest = plan->filters.back().last_use;
                oldest_plan = plan.get();
            }
        });
        if (!oldest_plan) return;  // the rest is held by plans no longer cached, dropped with them
        std::lock_guard<std::mutex> filters_lock(oldest_plan->mutex);
        if (!oldest_plan->filters.empty()) oldest_plan->erase(std::prev(oldest_plan->filters.end()));
    }
}

std::shared_ptr<CachedPlan> PlanCache::find(const PlanKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t generation = g_plan_generation.load(std::memory_order_relaxed);
    if (generation != generation_) {
        plans_.clear();
        generation_ = generation;
    }
    std::shared_ptr<CachedPlan>* found = plans_.find(key);
    ++(found ? hits_ : misses_);
    return found ? *found : nullptr;
}

std::shared_ptr<CachedPlan> PlanCache::insert(const PlanKey& key, std::shared_ptr<CachedPlan> plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.insert(key, std::move(plan));  // another thread's, if it made one first
}

void PlanCache::set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    plans_.set_capacity(capacity);
}

void PlanCache::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    plans_.clear();
}

void PlanCache::info(convcorePlanCacheInfo_t* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    out->capacity = plans_.capacity();
    out->plans = plans_.size();
    out->hits = hits_;
    out->misses = misses_;
    out->filterPreparations = filter_preparations_.load(std::memory_order_relaxed);
    out->preparedFilterBytes = prepared_total_.load();
}

void init_handle_caches(convcoreContext& ctx) { ctx.caches = std::make_shared<HandleCaches>(ctx); }

namespace api {
namespace {

bool is_zero(convcoreDataType_t dtype, const void* scalar) {
    return dtype == CONVCORE_DATA_DOUBLE ? *static_cast<const double*>(scalar) == 0.0
                                         : *static_cast<const float*>(scalar) == 0.0f;
}

void add_tensor(PlanKey& key, const convcoreTensorStruct* t) {
    key.add(t->set);
    key.add(t->nb_dims);
    key.add(t->dtype);
    for (int i = 0; i < 4; ++i) key.add(t->dims[i]);
    for (int i = 0; i < 4; ++i) key.add(t->strides[i]);
    key.add(t->d);
    key.add(t->d_stride);
}

// Equal keys mean equal descriptors (every field of each), pass, algo and selection settings.
PlanKey key_of(const convcoreContext& ctx, convcoreConvolutionPass_t pass, const convcoreTensorStruct* x,
               const convcoreFilterStruct* w, const convcoreConvolutionStruct* c, const convcoreTensorStruct* y,
               int algo) {
    PlanKey key;
    key.add(int64_t(pass));
    key.add(algo);
    key.add(ctx.deterministic_only);
    key.add(int64_t(ctx.find_workspace_limit));
    add_tensor(key, x);
    add_tensor(key, y);
    key.add(w->set);
    key.add(w->nb_dims);
    key.add(w->format);
    key.add(w->dtype);
    key.add(w->k);
    key.add(w->c_per_group);
    key.add(w->r);
    key.add(w->s);
    for (int i = 0; i < 4; ++i) key.add(w->strides[i]);
    key.add(w->t);
    key.add(w->t_stride);
    key.add(c->spatial_dims);
    for (int64_t v : {c->pad_h, c->pad_w, c->stride_h, c->stride_w, c->dil_h, c->dil_w, c->pad_d, c->stride_d,
                      c->dil_d, c->groups})
        key.add(v);
    key.add(c->mode);
    key.add(c->prepared_filters);
    return key;
}

// A new plan for the descriptors: validated, chosen (algo < 0: timing on the call's buffers where
// the mode times) and made, as convcoreCreateConvolutionPlan makes it.
convcoreConvolutionPlanStruct new_plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                       convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                       convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc,
                                       int algo, const convcoreConvolutionArgs_t& args) {
    depth::DepthProblem depth_prob;
    const ConvProblem prob = pass_problem(handle, pass, xDesc, wDesc, convDesc, yDesc, &depth_prob);
    const bool is_3d = depth::is_3d(xDesc);
    if (algo < 0) {
        // Select's buffers are in its own order (backward data: w, dy, dx), the call's in the
        // plans' (dy, w, dx).
        const bool data = pass == CONVCORE_PASS_BACKWARD_DATA;
        TimingBuffers buffers;
        buffers.in0 = data ? args.in1 : args.in0;
        buffers.in1 = data ? args.in0 : args.in1;
        // out is scratch only when the call does not read it.
        const bool reads_out = (args.beta && !is_zero(prob.dtype, args.beta)) || (args.z && args.z == args.out);
        if (args.in0 && args.in1 && args.out && !reads_out) buffers.out = args.out;
        if (!buffers.in0 || !buffers.in1 || !buffers.out) buffers = TimingBuffers{};
        algo = select_algorithm(handle, pass, prob, plan_select_mode_of(algo), buffers, is_3d ? &depth_prob : nullptr);
    }
    return is_3d ? depth::make_plan(handle, pass, depth_prob, algo) : make_plan(handle, pass, prob, algo);
}

// The filters' bytes a plan reads (its w, with any gaps between strides).
size_t filter_bytes(const convcoreConvolutionPlanStruct& plan) {
    return size_t(plan.depth ? plan.depth->prob.w_bytes : w_extent(plan.prob));
}

// The plan to run for in1: the cached plan's copy holding filters prepared from in1's current
// contents (preparing them now when the version, the fingerprint or the pointer is new).
std::shared_ptr<const convcoreConvolutionPlanStruct> plan_with_filters(CachedPlan& cached, PlanCache& cache,
                                                                        const void* w, int64_t version) {
    if (version < 0)
        throw_bad_param("args->filterVersion: " + std::to_string(version) +
                        " is negative (0: checked, > 0: the caller's version of the filters)");
    require(w, names_of(CONVCORE_PASS_FORWARD).in1);
    check_aligned(w, cached.plan.prob.elem_size(), "w");
    const uint64_t fingerprint = version == CONVCORE_FILTER_VERSION_CHECKED ? convcore::fingerprint(w, filter_bytes(cached.plan)) : 0;
    {
        std::lock_guard<std::mutex> lock(cached.mutex);
        for (auto it = cached.filters.begin(); it != cached.filters.end(); ++it) {
            if (it->plan->prepared_for != w) continue;
            if (it->version == version && it->fingerprint == fingerprint) {
                if (it != cached.filters.begin()) cached.filters.splice(cached.filters.begin(), cached.filters, it);
                cached.filters.front().last_use = cache.tick();
                return cached.filters.front().plan;
            }
            cached.erase(it);  // stale: made from other contents
            break;
        }
    }
    // Prepared outside the lock (other pointers' executions go on); a copy of the plan holds them.
    auto prepared = std::make_shared<convcoreConvolutionPlanStruct>(cached.plan);
    size_t bytes = 0;
    prepare_filters(*prepared, w, &bytes);
    if (bytes) cache.count_preparation();
    {
        std::lock_guard<std::mutex> lock(cached.mutex);
        for (auto it = cached.filters.begin(); it != cached.filters.end(); ++it)
            if (it->plan->prepared_for == w) {
                cached.erase(it);  // another thread prepared it meanwhile: ours is as new
                break;
            }
        cached.push_front(CachedPlan::Filters{prepared, version, fingerprint, cache.tick()});
        while (cached.filters.size() > kMaxFilterSets) cached.erase(std::prev(cached.filters.end()));
    }
    cache.trim_prepared();
    return prepared;
}

}  // namespace

convcoreConvolutionArgs_t descriptor_args(const void* alpha, const void* beta, const void* in0, const void* in1,
                                          void* out, void* workspace, size_t workspace_bytes) {
    require(alpha, "alpha");
    require(beta, "beta");
    convcoreConvolutionArgs_t args{};
    args.alpha = alpha;
    args.beta = beta;
    args.in0 = in0;
    args.in1 = in1;
    args.out = out;
    args.workspace = workspace;
    args.workspaceSizeInBytes = workspace_bytes;
    return args;
}

int execute_cached(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
                   convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc,
                   convcoreTensorDescriptor_t yDesc, int algo, const convcoreConvolutionArgs_t& args,
                   bool descriptor_style) {
    require(handle, "handle");
    const int pass_value = enum_int(pass);
    if (pass_value < CONVCORE_PASS_FORWARD || pass_value > CONVCORE_PASS_BACKWARD_FILTER)
        throw_bad_param("pass " + std::to_string(pass_value) + " is not a convcoreConvolutionPass_t");
    const char* const desc_names[4] = {pass == CONVCORE_PASS_BACKWARD_DATA ? "dxDesc" : "xDesc",
                                       pass == CONVCORE_PASS_BACKWARD_FILTER ? "dwDesc" : "wDesc", "convDesc",
                                       pass == CONVCORE_PASS_FORWARD ? "yDesc" : "dyDesc"};
    require(xDesc, desc_names[0]);
    require(wDesc, desc_names[1]);
    require(convDesc, desc_names[2]);
    require(yDesc, desc_names[3]);
    // A descriptor-style call names its algorithm: make_plan says what is wrong with any other.
    if (descriptor_style && algo < 0) make_plan(handle, pass, xDesc, wDesc, convDesc, yDesc, algo);
    PlanCache& cache = handle->caches->plans;
    const PlanKey key = key_of(*handle, pass, xDesc, wDesc, convDesc, yDesc, algo);
    std::shared_ptr<CachedPlan> cached = cache.find(key);
    if (!cached) {
        convcoreConvolutionPlanStruct made = new_plan(handle, pass, xDesc, wDesc, convDesc, yDesc, algo, args);
        const bool keeps = pass == CONVCORE_PASS_FORWARD && convDesc->prepared_filters && prepares_filters(made);
        cached = cache.insert(key, std::make_shared<CachedPlan>(std::move(made), keeps, cache.prepared_total()));
    }
    const bool epilogue = args.z || args.bias || enum_int(args.activation) != CONVCORE_ACTIVATION_IDENTITY;
    if (epilogue && pass != CONVCORE_PASS_FORWARD)
        throw_bad_param("args: z, bias and activation are the forward pass's epilogue; this is pass " +
                        std::to_string(pass_value));
    const ConvProblem& prob = cached->plan.prob;
    const bool is_double = prob.dtype == CONVCORE_DATA_DOUBLE;
    const double one_d = 1.0, zero_d = 0.0;
    const float one_f = 1.0f, zero_f = 0.0f;
    const void* alpha = args.alpha ? args.alpha : is_double ? static_cast<const void*>(&one_d) : &one_f;
    const void* beta = args.beta ? args.beta : is_double ? static_cast<const void*>(&zero_d) : &zero_f;
    if (epilogue && !is_zero(prob.dtype, beta))
        throw_bad_param("beta: the epilogue (z, bias, activation) computes y without reading it; pass z = y and "
                        "alpha2 to add y");

    std::shared_ptr<const convcoreConvolutionPlanStruct> with_filters;
    if (!descriptor_style && cached->keeps_filters) with_filters = plan_with_filters(*cached, cache, args.in1, args.filterVersion);
    const convcoreConvolutionPlanStruct& plan = with_filters ? *with_filters : cached->plan;

    const bool lends = !descriptor_style && !args.workspace;
    const WorkspacePool::Lease lease = lends ? handle->caches->workspace.lend(plan.workspace_bytes())
                                             : WorkspacePool::Lease(nullptr, WorkspacePool::Buffer{});
    void* workspace = lends ? lease.ptr() : args.workspace;
    const size_t workspace_bytes = lends ? lease.bytes() : args.workspaceSizeInBytes;
    if (epilogue)
        execute_bias_activation(plan, alpha, args.in0, args.in1, args.alpha2, args.z, args.bias, args.activation,
                                args.out, workspace, workspace_bytes);
    else
        execute(plan, alpha, args.in0, args.in1, beta, args.out, workspace, workspace_bytes);
    return plan.algo;
}

}  // namespace api
}  // namespace convcore

using namespace convcore;
using namespace convcore::api;

extern "C" {

convcoreStatus_t convcoreConvolutionExecute(convcoreHandle_t handle, convcoreConvolutionPass_t pass,
                                            convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
                                            convcoreConvolutionDescriptor_t convDesc,
                                            convcoreTensorDescriptor_t yDesc, int algo,
                                            const convcoreConvolutionArgs_t* args, int* algoRun) {
    return guard([&] {
        require(args, "args");
        const int ran = execute_cached(handle, pass, xDesc, wDesc, convDesc, yDesc, algo, *args);
        if (algoRun) *algoRun = ran;
    });
}

convcoreStatus_t convcoreSetPlanCacheCapacity(convcoreHandle_t handle, size_t capacity) {
    return guard([&] {
        require(handle, "handle");
        handle->caches->plans.set_capacity(capacity);
    });
}

convcoreStatus_t convcoreGetPlanCacheInfo(convcoreHandle_t handle, convcorePlanCacheInfo_t* info) {
    return guard([&] {
        require(handle, "handle");
        require(info, "info");
        handle->caches->plans.info(info);
        info->workspaceBytes = handle->caches->workspace.total_bytes();
        info->workspaceAllocations = handle->caches->workspace.allocations();
    });
}

convcoreStatus_t convcoreSetPreparedFilterLimit(convcoreHandle_t handle, size_t bytes) {
    return guard([&] {
        require(handle, "handle");
        handle->caches->plans.set_prepared_limit(bytes);
    });
}

convcoreStatus_t convcoreClearPlanCache(convcoreHandle_t handle) {
    return guard([&] {
        require(handle, "handle");
        handle->caches->plans.clear();
    });
}

}  // extern "C"
