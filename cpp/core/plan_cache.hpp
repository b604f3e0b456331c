// The handle's plan cache, the filters it prepares and its workspace (convcore.h, "the handle's
// plan cache"): what a caller used to keep between calls, kept by the core for every caller (the
// C API, the Python bindings, convcore.torch). oneDNN's primitive cache is the model: a bounded
// LRU map from the validated problem to the object that runs it.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "convcore/convcore.h"
#include "core/context.hpp"
#include "core/error.hpp"
#include "core/lru_map.hpp"
#include "core/plan.hpp"

namespace convcore {

// A cached plan's key: the values of its four descriptors, the pass, the requested algo (or
// selection mode) and the handle's selection settings. Fixed size, so a lookup allocates nothing.
struct PlanKey {
    std::array<int64_t, 64> values{};
    int size = 0;
    void add(int64_t v) {
        if (size == int(values.size())) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "a plan key past 64 values");
        values[size_t(size++)] = v;
    }
    bool operator==(const PlanKey& o) const {
        if (size != o.size) return false;
        for (int i = 0; i < size; ++i)
            if (values[size_t(i)] != o.values[size_t(i)]) return false;
        return true;
    }
};
struct PlanKeyHash {
    size_t operator()(const PlanKey& key) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
        for (int i = 0; i < key.size; ++i) h = (h ^ uint64_t(key.values[size_t(i)])) * 1099511628211ull;
        return size_t(h);
    }
};

// One cached plan. With the prepared-filters protocol, the filters it transformed are kept per
// filter pointer: each as a copy of the plan holding them (plan.hpp's `prepared`), so that layers
// of one shape with their own weights share the plan, and an execution holds the copy it runs
// while another thread prepares new filters.
struct CachedPlan {
    CachedPlan(convcoreConvolutionPlanStruct&& p, bool keeps, std::atomic<size_t>* prepared_total)
        : plan(std::move(p)), keeps_filters(keeps), prepared_total_(prepared_total) {}
    ~CachedPlan() {
        for (const Filters& f : filters) prepared_total_->fetch_sub(f.plan->prepared_bytes);
    }
    CachedPlan(const CachedPlan&) = delete;
    CachedPlan& operator=(const CachedPlan&) = delete;

    const convcoreConvolutionPlanStruct plan;  // nothing prepared
    const bool keeps_filters;                  // forward, CONVCORE_FILTERS_PREPARED, prepares_filters(plan)
    struct Filters {
        std::shared_ptr<const convcoreConvolutionPlanStruct> plan;  // prepared for plan->prepared_for
        int64_t version = 0;                                        // the caller's, or 0: checked
        uint64_t fingerprint = 0;                                   // of the bytes, when checked
        uint64_t last_use = 0;                                      // the cache's clock
    };
    std::mutex mutex;             // orders the filters' list
    std::list<Filters> filters;   // one per pointer, most recently used first
    // Call with mutex held: keeps f first / drops one (the handle's count of prepared bytes follows).
    void push_front(Filters f) {
        prepared_total_->fetch_add(f.plan->prepared_bytes);
        filters.push_front(std::move(f));
    }
    void erase(std::list<Filters>::iterator it) {
        prepared_total_->fetch_sub(it->plan->prepared_bytes);
        filters.erase(it);
    }

   private:
    std::atomic<size_t>* prepared_total_;
};

// The handle's workspace: buffers lent to one execution at a time, each kept for the next. One
// thread calling finds the same buffer every time; threads calling at once get one each. A
// request larger than every free buffer replaces the largest (on CUDA, cudaFree orders it after
// the work queued on the device).
class WorkspacePool {
   public:
    explicit WorkspacePool(const convcoreContext& ctx) : ctx_(ctx) {}
    ~WorkspacePool();
    WorkspacePool(const WorkspacePool&) = delete;
    WorkspacePool& operator=(const WorkspacePool&) = delete;

    struct Buffer {
        void* ptr = nullptr;
        size_t bytes = 0;
    };
    class Lease {
       public:
        Lease(WorkspacePool* pool, Buffer b) : pool_(pool), buffer_(b) {}
        Lease(Lease&& o) noexcept : pool_(o.pool_), buffer_(o.buffer_) { o.pool_ = nullptr; }
        Lease(const Lease&) = delete;
        ~Lease() {
            if (pool_) pool_->give_back(buffer_);
        }
        void* ptr() const { return buffer_.ptr; }
        size_t bytes() const { return buffer_.bytes; }

       private:
        WorkspacePool* pool_;
        Buffer buffer_;
    };
    // At least `bytes` (nothing for 0), until the lease ends.
    Lease lend(size_t bytes);
    size_t total_bytes() const;
    int64_t allocations() const { return allocations_.load(std::memory_order_relaxed); }

   private:
    void give_back(Buffer b);
    const convcoreContext& ctx_;
    mutable std::mutex mutex_;
    std::vector<Buffer> free_;  // buffers not lent now (reserved: giving back allocates nothing)
    size_t lent_bytes_ = 0, free_bytes_ = 0;
    std::atomic<int64_t> allocations_{0};
};

class PlanCache {
   public:
    PlanCache();
    // The plan for this key, most recently used now; null when absent.
    std::shared_ptr<CachedPlan> find(const PlanKey& key);
    // Keeps `plan` for `key` (replacing one made meanwhile by another thread), dropping the least
    // recently used beyond the capacity. Returns the plan kept for the key.
    std::shared_ptr<CachedPlan> insert(const PlanKey& key, std::shared_ptr<CachedPlan> plan);
    void set_capacity(size_t capacity);
    void set_prepared_limit(size_t bytes);
    void clear();
    void info(convcorePlanCacheInfo_t* out) const;
    void count_preparation() { filter_preparations_.fetch_add(1, std::memory_order_relaxed); }
    uint64_t tick() { return clock_.fetch_add(1, std::memory_order_relaxed) + 1; }
    std::atomic<size_t>* prepared_total() { return &prepared_total_; }
    // Beyond the limit of prepared bytes, drops the least recently used filters of any plan
    // (their layers prepare them again when they next run). Call with no plan's mutex held.
    void trim_prepared();

   private:
    mutable std::mutex mutex_;
    LruMap<PlanKey, std::shared_ptr<CachedPlan>, PlanKeyHash> plans_;
    size_t prepared_limit_;
    uint64_t generation_;  // of the decisions it was filled from (bump_plan_generation)
    int64_t hits_ = 0, misses_ = 0;
    std::atomic<int64_t> filter_preparations_{0};
    std::atomic<uint64_t> clock_{0};
    std::atomic<size_t> prepared_total_{0};
};

// convcoreClearFindCache: plans chosen by measuring or finding before it are made again.
void bump_plan_generation();

// What the handle keeps: made with it (create_handle), released with it.
struct HandleCaches {
    explicit HandleCaches(const convcoreContext& ctx) : workspace(ctx) {}
    PlanCache plans;
    WorkspacePool workspace;
};
void init_handle_caches(convcoreContext& ctx);

namespace api {

// One pass through the handle's plan cache with the operands of convcoreConvolutionArgs_t
// (convcoreConvolutionExecute). descriptor_style: a descriptor-style call's rules (cuDNN's):
// algo names an algorithm, a NULL workspace is no workspace, and no filters are kept.
// Returns the algorithm that ran.
int execute_cached(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
                   convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc,
                   convcoreTensorDescriptor_t yDesc, int algo, const convcoreConvolutionArgs_t& args,
                   bool descriptor_style = false);

// The operands of a descriptor-style call (convcoreConvolutionForward, ...BackwardData,
// ...BackwardFilter): alpha and beta required, as cuDNN's.
convcoreConvolutionArgs_t descriptor_args(const void* alpha, const void* beta, const void* in0, const void* in1,
                                          void* out, void* workspace, size_t workspace_bytes);

}  // namespace api
}  // namespace convcore
