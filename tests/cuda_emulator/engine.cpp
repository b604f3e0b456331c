// The emulated device's execution engine: launch validation, blocks on worker threads, GPU
// threads as fibers, barriers and per-block shared memory. See include/cuda_emulator/engine.hpp.
#include "cuda_emulator/engine.hpp"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "internal.hpp"

#if defined(CUDA_EMULATOR_TSAN)
#include <sanitizer/tsan_interface.h>
extern "C" {  // the ThreadSanitizer runtime's annotations (dynamic_annotations)
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif

namespace cuda_emulator {

namespace builtin {
thread_local uint3 thread_idx{0, 0, 0};
thread_local uint3 block_idx{0, 0, 0};
thread_local dim3 block_dim{1, 1, 1};
thread_local dim3 grid_dim{1, 1, 1};
}  // namespace builtin

void fail(const char* format, ...) {
    char message[2048];
    va_list args;
    va_start(args, format);
    std::vsnprintf(message, sizeof message, format, args);
    va_end(args);
    std::fprintf(stderr, "cuda_emulator: %s\n", message);
    std::fflush(stderr);
    std::abort();
}

namespace {

constexpr size_t kFiberStackBytes = 128 * 1024;  // per GPU thread; kernels do not recurse
// ThreadSanitizer tells apart at most 255 threads and fibers alive at once (its thread slots; with
// more, it resets its history and misses races), so GPU threads i and i + 96 of a block share one
// TSan fiber: TSan sees them as one thread (a race between just those two is missed, and the
// call stacks in its reports may mix theirs).
constexpr size_t kTsanFibersPerWorker = 96;
constexpr size_t kGuardBytes = 4096;             // below each stack: an overflow faults
constexpr size_t kSharedRedzoneBytes = 64;       // around each __shared__ variable (ASan)
constexpr size_t kSharedArenaBytes = 2 * kMaxSharedBytesPerBlock;
constexpr uint64_t kMaxEmulatedBlocks = uint64_t(1) << 24;

// AddressSanitizer must be told about every switch between stacks (sanitizer/common_interface_defs.h).
void asan_start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#if defined(CUDA_EMULATOR_ASAN)
    __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
    (void)fake_stack_save, (void)bottom, (void)size;
#endif
}
void asan_finish_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#if defined(CUDA_EMULATOR_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
    (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

// ThreadSanitizer: every GPU thread is a TSan fiber, and the switches between a worker and its
// fibers order nothing, except that a fiber starts after what its worker did before. What orders
// two GPU threads is what orders them on a GPU:
// - __syncthreads(): each thread releases its history into the barrier's token, and acquires
//   the token when the barrier opens;
// - the end of a block: each thread releases into the worker's block-end token, which the worker
//   acquires before it resets shared memory and starts the next block.
// So a missing __syncthreads, or two blocks of a grid that touch one element without order
// (blocks on different workers), is reported as a data race. The engine's own bookkeeping that
// the fibers of a block share (fiber states, barrier counts, the __shared__ table, threadIdx) is
// ordered by the switches TSan is told to ignore, so it is hidden from TSan (HiddenFromTsan).
// Tells TSan which fiber runs next. A macro, not a function: TSan's shadow call stack belongs to
// the running fiber, so a function around the switch would return on the other fiber's stack.
#if defined(CUDA_EMULATOR_TSAN)
#define TSAN_SWITCH_TO_FIBER(fiber, synchronize) \
    __tsan_switch_to_fiber((fiber), (synchronize) ? 0 : __tsan_switch_to_fiber_no_sync)
#else
#define TSAN_SWITCH_TO_FIBER(fiber, synchronize) ((void)(fiber), (void)(synchronize))
#endif
void tsan_release(void* token) {
#if defined(CUDA_EMULATOR_TSAN)
    __tsan_release(token);
#else
    (void)token;
#endif
}
void tsan_acquire(void* token) {
#if defined(CUDA_EMULATOR_TSAN)
    __tsan_acquire(token);
#else
    (void)token;
#endif
}
struct HiddenFromTsan {
    HiddenFromTsan() {
#if defined(CUDA_EMULATOR_TSAN)
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
    }
    ~HiddenFromTsan() {
#if defined(CUDA_EMULATOR_TSAN)
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
    }
    HiddenFromTsan(const HiddenFromTsan&) = delete;
    HiddenFromTsan& operator=(const HiddenFromTsan&) = delete;
};

void* map_pages(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("mmap of %zu bytes failed", bytes);
    return p;
}

// One emulated GPU thread.
struct Fiber {
    enum class State { Runnable, AtBarrier, Exited };
    ucontext_t context{};
    unsigned char* stack = nullptr;  // kFiberStackBytes, above a guard page
    uint3 index{0, 0, 0};
    State state = State::Exited;
    uint64_t barriers = 0;  // __syncthreads calls so far in this block
    void* asan_fake_stack = nullptr;
    void* tsan_fiber = nullptr;
};

struct SharedVariable {
    const void* site;
    size_t offset;
};

// One running launch, shared by the workers.
struct GridRun {
    const LaunchConfig* config;
    void (*thread_body)(const void*);
    const void* closure;
    std::vector<uint32_t> block_order;  // a shuffled permutation of the linear block indices
    std::atomic<size_t> next{0};
    uint64_t seed;
};

// One worker thread's state, kept between launches (fiber stacks are reused).
struct Worker {
    std::vector<std::unique_ptr<Fiber>> fibers;
    ucontext_t scheduler{};
    const void* scheduler_stack_bottom = nullptr;
    size_t scheduler_stack_size = 0;
    void* scheduler_fake_stack = nullptr;
    unsigned char* shared_arena = nullptr;  // kSharedArenaBytes, 0xFF when no block runs
    std::vector<SharedVariable> shared_variables;
    size_t shared_bytes = 0;  // the running block's static shared memory, as a GPU counts it
    size_t shared_end = 0;    // end of the last variable in the arena
    GridRun* run = nullptr;
    std::mt19937_64 rng;
    void* tsan_worker = nullptr;    // the worker thread's own TSan context
    char tsan_barrier_tokens[2]{};  // barrier n's token is [n % 2] (see TSAN_SWITCH_TO_FIBER)
    char tsan_block_end_token = 0;
};

Worker g_workers[kWorkerThreads];
thread_local Worker* tl_worker = nullptr;  // on a worker thread, during a launch
thread_local Fiber* tl_fiber = nullptr;    // on a worker thread, while a GPU thread runs

std::mutex g_seed_mutex;
std::mt19937_64& launch_rng() {
    // CUDA_EMULATOR_SEED fixes the block orders of a run (with 2 workers, which worker takes a
    // block still varies).
    static std::mt19937_64 rng = [] {
        const char* s = std::getenv("CUDA_EMULATOR_SEED");
        return std::mt19937_64(s ? std::strtoull(s, nullptr, 10) : std::random_device{}());
    }();
    return rng;
}

void ensure_fibers(Worker& w, size_t count) {
    while (w.fibers.size() < count) {
        Fiber& f = *w.fibers.emplace_back(std::make_unique<Fiber>());
        auto* base = static_cast<unsigned char*>(map_pages(kGuardBytes + kFiberStackBytes));
        if (mprotect(base, kGuardBytes, PROT_NONE) != 0) fail("mprotect of a fiber stack's guard page failed");
        f.stack = base + kGuardBytes;
        if (getcontext(&f.context) != 0) fail("getcontext failed");
#if defined(CUDA_EMULATOR_TSAN)
        const size_t index = w.fibers.size() - 1;
        if (index < kTsanFibersPerWorker) {
            f.tsan_fiber = __tsan_create_fiber(0);
            __tsan_set_fiber_name(f.tsan_fiber, "emulated GPU thread");
        } else {
            f.tsan_fiber = w.fibers[index % kTsanFibersPerWorker]->tsan_fiber;
        }
#endif
    }
    if (!w.shared_arena) {
        w.shared_arena = static_cast<unsigned char*>(map_pages(kSharedArenaBytes));
        std::memset(w.shared_arena, 0xFF, kSharedArenaBytes);
        ASAN_POISON_MEMORY_REGION(w.shared_arena, kSharedArenaBytes);
    }
}

// Not instrumented: it never returns (its GPU thread ends with a switch to the worker), so a
// TSan function-entry record would stay on the fiber's shadow stack, one more per block.
#if defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
__attribute__((disable_sanitizer_instrumentation))
#endif
#endif
void fiber_entry() {
    Worker& w = *tl_worker;
    Fiber& f = *tl_fiber;
    asan_finish_switch(nullptr, &w.scheduler_stack_bottom, &w.scheduler_stack_size);
    try {
        w.run->thread_body(w.run->closure);
    } catch (...) {
        fail("kernel '%s' threw a C++ exception", w.run->config->kernel_name);
    }
    {
        HiddenFromTsan hidden;
        f.state = Fiber::State::Exited;
    }
    tsan_release(&w.tsan_block_end_token);
    asan_start_switch(nullptr, w.scheduler_stack_bottom, w.scheduler_stack_size);  // this fiber ends
    TSAN_SWITCH_TO_FIBER(w.tsan_worker, false);
    swapcontext(&f.context, &w.scheduler);
    fail("an exited GPU thread was resumed");
}

void resume(Worker& w, Fiber& f) {
    {
        HiddenFromTsan hidden;
        tl_fiber = &f;
        builtin::thread_idx = f.index;
    }
    asan_start_switch(&w.scheduler_fake_stack, f.stack, kFiberStackBytes);
    TSAN_SWITCH_TO_FIBER(f.tsan_fiber, true);
    if (swapcontext(&w.scheduler, &f.context) != 0) fail("swapcontext failed");
    asan_finish_switch(w.scheduler_fake_stack, nullptr, nullptr);
    HiddenFromTsan hidden;
    tl_fiber = nullptr;
}

[[noreturn]] void report_divergent_barrier(const Worker& w, size_t threads) {
    const LaunchConfig& c = *w.run->config;
    const Fiber* exited = nullptr;
    const Fiber* waiting = nullptr;
    for (size_t i = 0; i < threads; ++i) {
        const Fiber* f = w.fibers[i].get();
        if (f->state == Fiber::State::Exited && !exited) exited = f;
        if (f->state == Fiber::State::AtBarrier && !waiting) waiting = f;
    }
    const uint3 b = builtin::block_idx;
    fail("divergent barrier in kernel '%s' (grid (%u,%u,%u), block (%u,%u,%u)): in block (%u,%u,%u), thread "
         "(%u,%u,%u) exited after %llu __syncthreads() while thread (%u,%u,%u) waits at __syncthreads() "
         "number %llu",
         c.kernel_name, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, b.x, b.y, b.z,
         exited->index.x, exited->index.y, exited->index.z, static_cast<unsigned long long>(exited->barriers),
         waiting->index.x, waiting->index.y, waiting->index.z,
         static_cast<unsigned long long>(waiting->barriers));
}

bool runnable(const Fiber& f) {
    HiddenFromTsan hidden;
    return f.state == Fiber::State::Runnable;
}

// Runs every GPU thread of one block: phase after phase, each thread runs up to its next
// barrier (or its end); a phase in which some threads end and others wait is divergent.
void run_block(Worker& w, uint32_t linear_block) {
    const LaunchConfig& c = *w.run->config;
    const dim3 g = c.grid, b = c.block;
    builtin::block_idx = uint3{linear_block % g.x, linear_block / g.x % g.y, linear_block / (g.x * g.y)};
    const size_t threads = size_t(b.x) * b.y * b.z;
    for (size_t i = 0; i < threads; ++i) {
        Fiber& f = *w.fibers[i];
        f.index = uint3{unsigned(i % b.x), unsigned(i / b.x % b.y), unsigned(i / (size_t(b.x) * b.y))};
        f.state = Fiber::State::Runnable;
        f.barriers = 0;
        f.asan_fake_stack = nullptr;
        ASAN_UNPOISON_MEMORY_REGION(f.stack, kFiberStackBytes);  // left over from the last fiber there
        f.context.uc_stack.ss_sp = f.stack;
        f.context.uc_stack.ss_size = kFiberStackBytes;
        f.context.uc_link = nullptr;
        makecontext(&f.context, fiber_entry, 0);
    }
    // Threads of a phase run in ascending or descending order, so that a missing barrier shows
    // whichever direction the data flows.
    const bool descending = w.rng() & 1;
    for (;;) {
        for (size_t j = 0; j < threads; ++j) {
            Fiber& f = *w.fibers[descending ? threads - 1 - j : j];
            if (runnable(f)) resume(w, f);
        }
        HiddenFromTsan hidden;
        size_t exited = 0;
        for (size_t i = 0; i < threads; ++i) exited += w.fibers[i]->state == Fiber::State::Exited;
        if (exited == threads) break;
        if (exited > 0) report_divergent_barrier(w, threads);
        for (size_t i = 0; i < threads; ++i) w.fibers[i]->state = Fiber::State::Runnable;
    }
    tsan_acquire(&w.tsan_block_end_token);
    // The next block on this worker starts with fresh (0xFF, poisoned) shared memory.
    ASAN_UNPOISON_MEMORY_REGION(w.shared_arena, w.shared_end);
    std::memset(w.shared_arena, 0xFF, w.shared_end);
    ASAN_POISON_MEMORY_REGION(w.shared_arena, w.shared_end);
    w.shared_variables.clear();
    w.shared_bytes = 0;
    w.shared_end = 0;
}

void worker_main(Worker& w, GridRun& run) {
    tl_worker = &w;
    w.run = &run;
#if defined(CUDA_EMULATOR_TSAN)
    w.tsan_worker = __tsan_get_current_fiber();
#endif
    builtin::grid_dim = run.config->grid;
    builtin::block_dim = run.config->block;
    for (size_t k; (k = run.next.fetch_add(1)) < run.block_order.size();) run_block(w, run.block_order[k]);
    w.run = nullptr;
    tl_worker = nullptr;
}

}  // namespace

namespace detail {

bool in_device_code() { return tl_fiber != nullptr; }

void require_host(const char* what) {
    if (in_device_code()) fail("%s called from device code (inside a kernel)", what);
}

bool validate_launch(const LaunchConfig& c) {
    require_host("a kernel launch (dynamic parallelism is not emulated)");
    if (!is_live_stream(c.stream)) {
        record_error(cudaErrorInvalidResourceHandle);
        return false;
    }
    const unsigned block[3] = {c.block.x, c.block.y, c.block.z};
    const unsigned grid[3] = {c.grid.x, c.grid.y, c.grid.z};
    for (int d = 0; d < 3; ++d) {
        if (block[d] == 0 || block[d] > kMaxBlockDim[d] || grid[d] == 0 || grid[d] > kMaxGridDim[d]) {
            record_error(cudaErrorInvalidConfiguration);
            return false;
        }
    }
    if (uint64_t(c.block.x) * c.block.y * c.block.z > kMaxThreadsPerBlock) {
        record_error(cudaErrorInvalidConfiguration);
        return false;
    }
    if (c.dynamic_shared_bytes > kMaxSharedBytesPerBlock) {
        record_error(cudaErrorInvalidValue);
        return false;
    }
    if (c.dynamic_shared_bytes > 0)
        fail("kernel '%s': dynamic shared memory (extern __shared__, %zu bytes) is not emulated", c.kernel_name,
             c.dynamic_shared_bytes);
    return true;
}

void check_pointer_argument(const LaunchConfig& c, size_t index, const void* p) {
    if (p == nullptr || find_allocation(p, nullptr)) return;
    fail("kernel '%s': argument %zu is the pointer %p, which is neither null nor inside a live device "
         "allocation (a host pointer or freed memory: the kernel would fault on a GPU)",
         c.kernel_name, index + 1, p);
}

void run_grid(const LaunchConfig& c, void (*thread_body)(const void*), const void* closure) {
    const uint64_t blocks = uint64_t(c.grid.x) * c.grid.y * c.grid.z;
    if (blocks > kMaxEmulatedBlocks)
        fail("kernel '%s': a grid of %llu blocks is more than the emulator runs (%llu)", c.kernel_name,
             static_cast<unsigned long long>(blocks), static_cast<unsigned long long>(kMaxEmulatedBlocks));
    DeviceMemoryAccess access;  // one launch at a time; device memory is open to the kernel
    GridRun run;
    run.config = &c;
    run.thread_body = thread_body;
    run.closure = closure;
    run.block_order.resize(blocks);
    std::iota(run.block_order.begin(), run.block_order.end(), 0u);
    {
        std::lock_guard<std::mutex> lock(g_seed_mutex);
        std::shuffle(run.block_order.begin(), run.block_order.end(), launch_rng());
        run.seed = launch_rng()();
    }
    const size_t threads_per_block = size_t(c.block.x) * c.block.y * c.block.z;
    const int workers = int(std::min<uint64_t>(kWorkerThreads, blocks));
    std::vector<std::thread> threads;
    for (int i = 0; i < workers; ++i) {
        Worker& w = g_workers[i];
        ensure_fibers(w, threads_per_block);
        w.rng.seed(run.seed + uint64_t(i));
        threads.emplace_back(worker_main, std::ref(w), std::ref(run));
    }
    for (std::thread& t : threads) t.join();
}

void* block_shared(const void* site, size_t size, size_t alignment) {
    HiddenFromTsan hidden;  // the table is shared by the block's fibers, which run one at a time
    Worker* w = tl_worker;
    if (!w || !tl_fiber) fail("a __shared__ variable was declared outside a kernel");
    for (const SharedVariable& v : w->shared_variables)
        if (v.site == site) return w->shared_arena + v.offset;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail("__shared__ alignment %zu is not a power of 2", alignment);
    const LaunchConfig& c = *w->run->config;
    const size_t gpu_bytes = (w->shared_bytes + alignment - 1) / alignment * alignment + size;
    if (gpu_bytes + c.dynamic_shared_bytes > kMaxSharedBytesPerBlock)
        fail("kernel '%s': %zu bytes of static __shared__ memory, more than the %zu a block may have", c.kernel_name,
             gpu_bytes, kMaxSharedBytesPerBlock);
    const size_t arena_alignment = std::max<size_t>(alignment, 16);
    const size_t offset = (w->shared_end + kSharedRedzoneBytes + arena_alignment - 1) / arena_alignment * arena_alignment;
    if (offset + size + kSharedRedzoneBytes > kSharedArenaBytes)
        fail("kernel '%s': too many __shared__ variables for the emulator's shared memory arena", c.kernel_name);
    ASAN_UNPOISON_MEMORY_REGION(w->shared_arena + offset, size);
    w->shared_variables.push_back(SharedVariable{site, offset});
    w->shared_bytes = gpu_bytes;
    w->shared_end = offset + size;
    return w->shared_arena + offset;
}

}  // namespace detail
}  // namespace cuda_emulator

void __syncthreads() {
    using namespace cuda_emulator;
    Fiber* f = tl_fiber;
    if (!f) fail("__syncthreads() called outside a kernel");
    Worker& w = *tl_worker;
    uint64_t barrier = 0;
    {
        HiddenFromTsan hidden;
        f->state = Fiber::State::AtBarrier;
        barrier = ++f->barriers;
    }
    char* token = &w.tsan_barrier_tokens[barrier % 2];
    tsan_release(token);
    asan_start_switch(&f->asan_fake_stack, w.scheduler_stack_bottom, w.scheduler_stack_size);
    TSAN_SWITCH_TO_FIBER(w.tsan_worker, false);
    if (swapcontext(&f->context, &w.scheduler) != 0) fail("swapcontext failed");
    asan_finish_switch(f->asan_fake_stack, nullptr, nullptr);
    tsan_acquire(token);
}
