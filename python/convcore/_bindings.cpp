// _convcore: thin pybind11 bindings over the public C API (convcore/convcore.h only).
//
// What lives here: DLPack import (DLPackTensor), per-thread handles, descriptor RAII, the
// per-Convolution workspace, and status -> Python exception translation. Argument parsing,
// output allocation and the user-facing API are in Python (convcore/_api.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/cache_line_round_trip.h"
#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "dlpack.hpp"
#include "fingerprint.hpp"

namespace py = pybind11;

namespace {

// ---- errors ---------------------------------------------------------------------------------

// A failed C call (or a failed check here), carried to Python as convcore.<X>Error.
struct StatusError : std::exception {
    convcoreStatus_t status;
    std::string message;
    StatusError(convcoreStatus_t s, std::string m) : status(s), message(std::move(m)) {}
    const char* what() const noexcept override { return message.c_str(); }
};

[[noreturn]] void bad_param(const std::string& message) {
    throw StatusError(CONVCORE_STATUS_BAD_PARAM, message);
}
[[noreturn]] void not_supported(const std::string& message) {
    throw StatusError(CONVCORE_STATUS_NOT_SUPPORTED, message);
}

// Throws StatusError for a failed status; `context` (e.g. "x: ") is put before the C reason.
void check(convcoreStatus_t status, const std::string& context = "") {
    if (status == CONVCORE_STATUS_SUCCESS) return;
    std::string reason = convcoreGetLastErrorString();
    throw StatusError(status, context + reason);
}

// Python exception classes per status, set once by convcore/_errors.py. Leaked on purpose:
// they live as long as the interpreter.
PyObject* g_error_classes[6] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

void set_error_classes(const py::dict& classes) {
    for (auto item : classes) {
        const int status = item.first.cast<int>();
        if (status < 0 || status > 5) throw py::value_error("status out of range");
        PyObject* cls = item.second.ptr();
        Py_INCREF(cls);
        Py_XDECREF(g_error_classes[status]);
        g_error_classes[status] = cls;
    }
}

// ---- small helpers --------------------------------------------------------------------------

std::string shape_str(const std::vector<int64_t>& shape) {
    std::ostringstream o;
    o << "(";
    for (size_t i = 0; i < shape.size(); ++i) o << (i ? ", " : "") << shape[i];
    o << (shape.size() == 1 ? ",)" : ")");
    return o.str();
}

std::string algo_name_lower(int algo) {
    const char* name = convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(algo));
    std::string s = name ? name : ("algo " + std::to_string(algo));
    for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

// check() for a call that runs or sizes one algorithm: its failures other than bad arguments
// (NOT_SUPPORTED, execution errors) are prefixed with "algo=<name>: ".
void check_algo_call(convcoreStatus_t status, int algo) {
    check(status, status == CONVCORE_STATUS_BAD_PARAM ? "" : "algo=" + algo_name_lower(algo) + ": ");
}

convcoreDataType_t data_type_of(const std::string& dtype) {
    if (dtype == "float32") return CONVCORE_DATA_FLOAT;
    if (dtype == "float64") return CONVCORE_DATA_DOUBLE;
    bad_param("dtype: " + dtype + " is not supported; convcore supports float32 and float64");
}

// "float32", "int64", "bfloat16", "complex64", "bool", ... for a DLPack dtype.
std::string dtype_name(DLDataType t) {
    std::string base;
    switch (t.code) {
        case kDLInt: base = "int"; break;
        case kDLUInt: base = "uint"; break;
        case kDLFloat: base = "float"; break;
        case kDLBfloat: base = "bfloat"; break;
        case kDLComplex: base = "complex"; break;
        case kDLBool: return t.lanes == 1 ? "bool" : "bool x" + std::to_string(t.lanes);
        case kDLOpaqueHandle: return "opaque handle";
        default: base = "dlpack type code " + std::to_string(int(t.code)) + " bits "; break;
    }
    std::string name = base + std::to_string(int(t.bits));
    if (t.lanes != 1) name += " x" + std::to_string(int(t.lanes));
    return name;
}

// ---- DLPack import --------------------------------------------------------------------------

// A tensor taken from a DLPack capsule. Owns the producer's managed tensor (keeps its memory
// alive) and calls its deleter when destroyed.
class DLPackTensor {
   public:
    explicit DLPackTensor(py::capsule capsule) {
        PyObject* cap = capsule.ptr();
        const char* name = PyCapsule_GetName(cap);
        if (!name) throw py::error_already_set();
        const std::string n = name;
        if (n == "dltensor_versioned") {
            auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, name));
            if (!m) throw py::error_already_set();
            if (m->version.major != DLPACK_MAJOR_VERSION) {
                // Our struct layout may not match; only the deleter is safe to call. Leave the
                // capsule unrenamed so the producer's capsule destructor frees it.
                throw py::buffer_error("DLPack version " + std::to_string(m->version.major) + "." +
                                       std::to_string(m->version.minor) +
                                       " is not supported (convcore reads DLPack 1.x)");
            }
            if (PyCapsule_SetName(cap, "used_dltensor_versioned") != 0) throw py::error_already_set();
            versioned_ = m;
            tensor_ = &m->dl_tensor;
            read_only_ = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        } else if (n == "dltensor") {
            auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, name));
            if (!m) throw py::error_already_set();
            if (PyCapsule_SetName(cap, "used_dltensor") != 0) throw py::error_already_set();
            legacy_ = m;
            tensor_ = &m->dl_tensor;
        } else {
            throw py::value_error("not a DLPack capsule (its name is '" + n +
                                  "'; expected 'dltensor' or 'dltensor_versioned'; a capsule "
                                  "named 'used_...' was already consumed)");
        }
    }
    DLPackTensor(const DLPackTensor&) = delete;
    DLPackTensor& operator=(const DLPackTensor&) = delete;
    ~DLPackTensor() {
        if (versioned_ && versioned_->deleter) versioned_->deleter(versioned_);
        if (legacy_ && legacy_->deleter) legacy_->deleter(legacy_);
    }

    int ndim() const { return tensor_->ndim; }
    std::vector<int64_t> shape() const {
        return std::vector<int64_t>(tensor_->shape, tensor_->shape + tensor_->ndim);
    }
    // Element strides; computed (row-major) when the producer left them NULL.
    std::vector<int64_t> strides() const {
        const int nd = tensor_->ndim;
        std::vector<int64_t> st(nd);
        if (tensor_->strides) {
            std::copy(tensor_->strides, tensor_->strides + nd, st.begin());
        } else {
            int64_t s = 1;
            for (int i = nd - 1; i >= 0; --i) {
                st[i] = s;
                s *= tensor_->shape[i];
            }
        }
        return st;
    }
    std::string dtype() const { return dtype_name(tensor_->dtype); }
    bool is_float(int bits) const {
        const DLDataType t = tensor_->dtype;
        return t.code == kDLFloat && t.bits == bits && t.lanes == 1;
    }
    int device_type() const { return int(tensor_->device.device_type); }
    int device_id() const { return tensor_->device.device_id; }
    void* data() const { return static_cast<char*>(tensor_->data) + tensor_->byte_offset; }
    uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(data()); }
    bool read_only() const { return read_only_; }
    // The bytes [first, end) that the elements span, for positive strides (empty for an empty tensor).
    std::pair<uintptr_t, uintptr_t> byte_span() const {
        int64_t last = 0, packed_stride = 1;
        for (int i = tensor_->ndim - 1; i >= 0; --i) {
            const int64_t n = tensor_->shape[i];
            if (n == 0) return {0, 0};
            last += (n - 1) * (tensor_->strides ? tensor_->strides[i] : packed_stride);
            packed_stride *= n;
        }
        const uintptr_t first = data_ptr();
        return {first, first + uintptr_t(last + 1) * uintptr_t(tensor_->dtype.bits / 8)};
    }
    bool overlaps(const DLPackTensor& other) const {
        const auto a = byte_span(), b = other.byte_span();
        return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
    }
    // Appends what a plan depends on: dtype, device, shape and strides (not the data).
    void append_layout(std::vector<int64_t>& key) const {
        const DLDataType t = tensor_->dtype;
        key.push_back(int64_t(t.code) << 32 | int64_t(t.bits) << 16 | t.lanes);
        key.push_back(int64_t(tensor_->device.device_type) << 32 | uint32_t(tensor_->device.device_id));
        key.push_back(tensor_->ndim);
        int64_t packed_stride = 1;
        for (int i = tensor_->ndim - 1; i >= 0; --i) {
            key.push_back(tensor_->shape[i]);
            key.push_back(tensor_->strides ? tensor_->strides[i] : packed_stride);
            packed_stride *= tensor_->shape[i];
        }
    }
    bool versioned() const { return versioned_ != nullptr; }
    // True when every axis longer than 1 has a positive stride (what the C API accepts).
    bool has_positive_strides() const {
        const auto sh = shape(), st = strides();
        for (size_t i = 0; i < sh.size(); ++i)
            if (sh[i] > 1 && st[i] <= 0) return false;
        return true;
    }
    // Packed row-major (strides of length-1 axes do not matter).
    bool is_packed() const {
        const auto sh = shape(), st = strides();
        int64_t expect = 1;
        for (int i = int(sh.size()) - 1; i >= 0; --i) {
            if (sh[i] > 1 && st[i] != expect) return false;
            expect *= sh[i];
        }
        return true;
    }
    // No two index tuples address the same element (needed for an output).
    bool has_distinct_elements() const {
        const auto sh = shape(), st = strides();
        std::vector<std::pair<int64_t, int64_t>> axes;  // (stride, length) of axes longer than 1
        for (size_t i = 0; i < sh.size(); ++i) {
            if (sh[i] == 0) return true;
            if (sh[i] > 1) axes.push_back({st[i], sh[i]});
        }
        std::sort(axes.begin(), axes.end());
        int64_t span = 1;  // elements covered by the inner axes
        for (const auto& a : axes) {
            if (a.first < span) return false;
            span = a.first * a.second;
        }
        return true;
    }
    // Strides for the C API: length-1 axes get stride 1 (any positive value is valid there).
    std::vector<int64_t> strides_for_c() const {
        auto sh = shape(), st = strides();
        for (size_t i = 0; i < sh.size(); ++i)
            if (sh[i] <= 1 && st[i] <= 0) st[i] = 1;
        return st;
    }

   private:
    DLManagedTensorVersioned* versioned_ = nullptr;
    DLManagedTensor* legacy_ = nullptr;
    DLTensor* tensor_ = nullptr;
    bool read_only_ = false;
};

// ---- handles: one per thread and device -----------------------------------------------------

struct ThreadHandles {
    convcoreHandle_t cpu = nullptr;
    std::map<int, convcoreHandle_t> cuda;  // device index -> handle
    ~ThreadHandles() {
        if (cpu) convcoreDestroy(cpu);
        for (auto& kv : cuda) convcoreDestroy(kv.second);
    }
};
thread_local ThreadHandles t_handles;

convcoreHandle_t cpu_handle() {
    if (!t_handles.cpu) check(convcoreCreate(&t_handles.cpu), "creating a CPU handle: ");
    return t_handles.cpu;
}

convcoreHandle_t cuda_handle(int index) {
    auto it = t_handles.cuda.find(index);
    if (it != t_handles.cuda.end()) return it->second;
    convcoreHandle_t h = nullptr;
    check(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, index),
          "creating a handle for cuda:" + std::to_string(index) + ": ");
    t_handles.cuda[index] = h;
    return h;
}

convcoreHandle_t handle_for(int device_type, int device_index) {
    if (device_type == CONVCORE_DEVICE_CPU) return cpu_handle();
    if (device_type == CONVCORE_DEVICE_CUDA) return cuda_handle(device_index);
    bad_param("device: unknown device type " + std::to_string(device_type));
}

// ---- descriptors ----------------------------------------------------------------------------

// The convolution parameters of a convcore.ConvDesc, validated in Python.
struct ConvParams {
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, groups = 1;
    int mode = CONVCORE_CROSS_CORRELATION;
};

// Runs calls of the C++ wrapper (convcore/convcore.hpp): its convcore::Exception becomes the
// bindings' StatusError, `context` (the user's argument, e.g. "x: ") before the library's reason.
template <typename F>
void wrapped(const std::string& context, F call) {
    try {
        call();
    } catch (const convcore::Exception& e) {
        throw StatusError(e.status(), context + convcoreGetLastErrorString());
    }
}

// The four descriptors of one problem (convcore.hpp's RAII classes), set from the user's tensors
// with their argument names in the errors.
struct Descriptors {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;

    void set_conv(const ConvParams& p) {
        wrapped("", [&] {
            conv.set(p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w, convcoreConvolutionMode_t(p.mode));
        });
        wrapped("groups: ", [&] { conv.set_groups(p.groups); });
    }
    // x (and w) from shapes; x strides when given (else packed).
    void set_x(const std::vector<int64_t>& s, convcoreDataType_t t, const std::vector<int64_t>* strides = nullptr) {
        wrapped("x: ", [&] {
            if (strides)
                x.set_strided(t, {s[0], s[1], s[2], s[3]}, {(*strides)[0], (*strides)[1], (*strides)[2], (*strides)[3]});
            else
                x.set(t, s[0], s[1], s[2], s[3]);
        });
    }
    void set_w(const std::vector<int64_t>& s, convcoreDataType_t t) {
        wrapped("w: ", [&] { w.set(t, s[0], s[1], s[2], s[3]); });
    }
    // w with its strides (KCRS, KRSC or any positive ones: the library packs it when needed).
    void set_w(const DLPackTensor& t, convcoreDataType_t dtype, const char* name) {
        const auto s = t.shape(), st = t.strides_for_c();
        wrapped(std::string(name) + ": ",
                [&] { w.set_strided(dtype, {s[0], s[1], s[2], s[3]}, {st[0], st[1], st[2], st[3]}); });
    }
    // The output shape; sets y (packed unless strides are given).
    std::vector<int64_t> set_y(convcoreDataType_t t, const std::vector<int64_t>* strides = nullptr) {
        std::array<int64_t, 4> o{};
        wrapped("", [&] { o = conv.output_dims(x, w); });
        wrapped("out: ", [&] {
            if (strides)
                y.set_strided(t, o, {(*strides)[0], (*strides)[1], (*strides)[2], (*strides)[3]});
            else
                y.set(t, o[0], o[1], o[2], o[3]);
        });
        return std::vector<int64_t>(o.begin(), o.end());
    }
};

void require_4d(const std::vector<int64_t>& shape, const char* name, const char* layout) {
    if (shape.size() != 4)
        bad_param(std::string(name) + ": expected a 4-D " + layout + " array, got shape " +
                  shape_str(shape));
}

// Descriptors for a problem given by shapes (packed tensors).
void set_from_shapes(Descriptors& d, const std::vector<int64_t>& x_shape,
                     const std::vector<int64_t>& w_shape, const ConvParams& p,
                     convcoreDataType_t t) {
    require_4d(x_shape, "x", "NCHW");
    require_4d(w_shape, "w", "K x C/groups x R x S");
    d.set_conv(p);
    d.set_x(x_shape, t);
    d.set_w(w_shape, t);
    d.set_y(t);
}

// ---- the shape-level queries ----------------------------------------------------------------

std::vector<int64_t> output_shape(const std::vector<int64_t>& x_shape,
                                  const std::vector<int64_t>& w_shape, const ConvParams& p) {
    Descriptors d;
    require_4d(x_shape, "x", "NCHW");
    require_4d(w_shape, "w", "K x C/groups x R x S");
    d.set_conv(p);
    d.set_x(x_shape, CONVCORE_DATA_FLOAT);
    d.set_w(w_shape, CONVCORE_DATA_FLOAT);
    return d.set_y(CONVCORE_DATA_FLOAT);
}

// One row of the heuristic ranking.
struct AlgoPerf {
    int algo;
    bool supported;
    size_t workspace;
    bool deterministic;
};

std::vector<AlgoPerf> rank(convcoreHandle_t h, const Descriptors& d) {
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int count = 0;
    check(convcoreGetConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT,
                                                 &count, perf));
    std::vector<AlgoPerf> out;
    for (int i = 0; i < count; ++i)
        out.push_back({int(perf[i].algo), perf[i].status == CONVCORE_STATUS_SUCCESS, perf[i].memory,
                       perf[i].determinism == CONVCORE_DETERMINISTIC});
    return out;
}

std::vector<AlgoPerf> rank_algos(const std::vector<int64_t>& x_shape,
                                 const std::vector<int64_t>& w_shape, const ConvParams& p,
                                 int device_type, int device_index, const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    return rank(handle_for(device_type, device_index), d);
}

size_t workspace_size(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
                      const ConvParams& p, int algo, int device_type, int device_index,
                      const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    size_t bytes = 0;
    check_algo_call(convcoreGetConvolutionForwardWorkspaceSize(handle_for(device_type, device_index),
                                                               d.x, d.w, d.conv, d.y,
                                                               convcoreConvolutionFwdAlgo_t(algo), &bytes),
                    algo);
    return bytes;
}

// ---- plans and workspace of one Convolution ------------------------------------------------

// filter_version values (convcore.Convolution.forward): -1, w is transformed at every call;
// >= 0, the caller's number for w's contents (the plan keeps w's transformed filters while w's
// pointer and that number stay the same: the caller vouches for them); kFiltersChecked, the plan
// keeps them while w's pointer and the fingerprint of w's bytes stay the same, computed at every
// call (convcore.torch's default: right however the weights were changed, for one read of w).
constexpr int64_t kFiltersPerCall = -1;
constexpr int64_t kFiltersChecked = -2;

// Bumped by clear_find_cache: plans chosen by "auto" or "find" before it are made again.
std::atomic<uint64_t> g_plan_generation{0};

// One convcore plan (convcore.h, "plans"; convcore.hpp's RAII class) and what it keeps between
// calls.
struct CachedPlan {
    explicit CachedPlan(convcore::Plan&& p) : plan(std::move(p)) {}
    convcore::Plan plan;
    int algo = 0;          // the pass's algorithm the plan runs
    size_t workspace = 0;  // its exact workspace size
    // The filters prepared in the plan: their pointer, the caller's version of their contents
    // (or kFiltersChecked) and, when checked, the fingerprint of the bytes they were made from.
    const void* prepared_for = nullptr;
    int64_t prepared_version = -1;
    uint64_t prepared_fingerprint = 0;
    // Whether the plan's algorithm keeps prepared filters (known after the first preparation):
    // a plan that keeps none reads w at every call, so its filters can never be stale.
    enum { kUnknown, kKeeps, kKeepsNone } keeps_filters = kUnknown;
};

// What identifies a problem: the pass, the requested algorithm, the convolution parameters and
// each tensor's dtype, device, shape and strides. Equal keys mean equal descriptors, so a call
// whose key is cached was validated when its plan was made.
using PlanKey = std::vector<int64_t>;
struct PlanKeyHash {
    size_t operator()(const PlanKey& key) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
        for (int64_t v : key) h = (h ^ uint64_t(v)) * 1099511628211ull;
        return size_t(h);
    }
};

// Host workspace, one per thread, shared by all the calls the thread makes; grows to the largest
// request and is kept (a network's layers reuse it).
class HostWorkspace {
   public:
    HostWorkspace() = default;
    HostWorkspace(const HostWorkspace&) = delete;
    HostWorkspace& operator=(const HostWorkspace&) = delete;
    ~HostWorkspace() { std::free(ptr_); }
    void* reserve(size_t bytes) {
        if (bytes == 0) return nullptr;
        if (bytes > size_) {
            std::free(ptr_);
            ptr_ = nullptr;
            size_ = 0;
            const size_t rounded = (bytes + 63) / 64 * 64;
            ptr_ = std::aligned_alloc(64, rounded);
            if (!ptr_)
                throw StatusError(CONVCORE_STATUS_ALLOC_FAILED,
                                  "could not allocate a workspace of " + std::to_string(bytes) +
                                      " bytes");
            size_ = rounded;
        }
        return ptr_;
    }

   private:
    void* ptr_ = nullptr;
    size_t size_ = 0;
};
thread_local HostWorkspace t_workspace;

// The plans of one Convolution in one thread (convcore.Convolution keeps one per thread): a call
// whose problem was seen before runs its plan with only the data pointers, without building
// descriptors, validating or choosing again. At most kMaxPlans problems are kept, the least
// recently used dropped first (the decisions themselves stay in the core's decision cache).
// The mutex orders preparing a plan's filters and running it, should two
// threads share one (each CUDA plan runs on the handle of the thread that made it).
class PlanCache {
   public:
    static constexpr size_t kMaxPlans = 64;
    PlanCache() = default;
    PlanCache(const PlanCache&) = delete;
    PlanCache& operator=(const PlanCache&) = delete;

    std::mutex& mutex() { return mutex_; }

    // Call with the GIL held (it orders the map's users). A hit becomes the most recently used.
    std::shared_ptr<CachedPlan> find(const PlanKey& key) {
        const uint64_t generation = g_plan_generation.load(std::memory_order_relaxed);
        if (generation != generation_) {
            index_.clear();
            order_.clear();
            generation_ = generation;
        }
        auto it = index_.find(key);
        if (it == index_.end()) return nullptr;
        if (it->second != order_.begin()) order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
    }
    // Beyond kMaxPlans problems, the least recently used plan is dropped.
    void insert(PlanKey key, std::shared_ptr<CachedPlan> plan) {
        if (index_.count(key)) return;
        order_.emplace_front(key, std::move(plan));
        index_.emplace(std::move(key), order_.begin());
        if (index_.size() > kMaxPlans) {
            index_.erase(order_.back().first);
            order_.pop_back();
        }
    }
    size_t plan_count() const { return index_.size(); }
    // How many times filters were prepared (transformed and kept) in this cache's plans.
    void count_preparation() { ++preparations_; }
    int64_t preparations() const { return preparations_; }

   private:
    using Entry = std::pair<PlanKey, std::shared_ptr<CachedPlan>>;
    std::mutex mutex_;
    int64_t preparations_ = 0;
    std::list<Entry> order_;  // most recently used first
    std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> index_;
    uint64_t generation_ = 0;
};

// Device workspace for one CUDA call, freed on scope exit.
struct DeviceBuffer {
    convcoreHandle_t handle;
    void* ptr = nullptr;
    DeviceBuffer(convcoreHandle_t h, size_t bytes) : handle(h) {
        check(convcoreMalloc(h, &ptr, bytes), "workspace: ");
    }
    ~DeviceBuffer() {
        if (ptr) convcoreFree(handle, ptr);
    }
};

// ---- forward --------------------------------------------------------------------------------

// Dtype, ndim and device checks of x and w, with the user's argument names. Returns the dtype.
std::string check_inputs(const DLPackTensor& x, const DLPackTensor& w) {
    const char* supported = "; convcore supports float32 and float64";
    require_4d(x.shape(), "x", "NCHW");
    require_4d(w.shape(), "w", "K x C/groups x R x S");
    if (!x.is_float(32) && !x.is_float(64))
        bad_param("x: dtype " + x.dtype() + " is not supported" + supported);
    if (!w.is_float(32) && !w.is_float(64))
        bad_param("w: dtype " + w.dtype() + " is not supported" + supported);
    if (x.dtype() != w.dtype())
        bad_param("w: dtype " + w.dtype() + " does not match x: dtype " + x.dtype() +
                  " (x and w must have the same dtype)");
    if (x.device_type() != w.device_type() || x.device_id() != w.device_id())
        bad_param("x and w are on different devices (x: device type " +
                  std::to_string(x.device_type()) + " index " + std::to_string(x.device_id()) +
                  ", w: device type " + std::to_string(w.device_type()) + " index " +
                  std::to_string(w.device_id()) + ")");
    if (x.device_type() != kDLCPU && x.device_type() != kDLCUDA)
        not_supported("x: DLPack device type " + std::to_string(x.device_type()) +
                      " is not supported (convcore runs on kDLCPU and kDLCUDA memory)");
    return x.dtype();
}

// The checks of a forward call's x, w and out (y), and their descriptors. Returns the dtype.
convcoreDataType_t set_forward_descriptors(Descriptors& d, const DLPackTensor& x, const DLPackTensor& w,
                                           const DLPackTensor& y, const ConvParams& p) {
    const std::string dtype = check_inputs(x, w);
    const convcoreDataType_t t = data_type_of(dtype);
    require_4d(y.shape(), "out", "NCHW");
    if (y.dtype() != dtype)
        bad_param("out: dtype " + y.dtype() + " does not match x: dtype " + dtype);
    if (y.device_type() != x.device_type() || y.device_id() != x.device_id())
        bad_param("out is not on the device of x");
    if (y.read_only()) bad_param("out: the array is read-only");
    if (!x.has_positive_strides()) bad_param("x: strides must be positive");
    if (!w.has_positive_strides()) bad_param("w: strides must be positive");
    if (!y.has_positive_strides() || !y.has_distinct_elements())
        bad_param("out: strides must be positive and must not make elements overlap");

    d.set_conv(p);
    const auto x_strides = x.strides_for_c(), y_strides = y.strides_for_c();
    d.set_x(x.shape(), t, &x_strides);
    d.set_w(w, t, "w");
    std::vector<int64_t> expect(4);
    check(convcoreGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &expect[0], &expect[1],
                                                   &expect[2], &expect[3]));
    if (y.shape() != expect)
        bad_param("out: expected shape " + shape_str(expect) + " (the output of this convolution), got " +
                  shape_str(y.shape()));
    d.set_y(t, &y_strides);
    return t;
}

// algo= values that choose, in the C API's one encoding of them (convcore.h, plans): "auto" is
// CONVCORE_PLAN_SELECT_MEASURED, "find" CONVCORE_PLAN_SELECT_FIND; >= 0 names an algorithm.
constexpr int kAlgoAuto = CONVCORE_PLAN_SELECT_MEASURED;
constexpr int kAlgoFind = CONVCORE_PLAN_SELECT_FIND;

// The Select mode of "auto" and "find".
convcoreSelectMode_t select_mode(int algo) {
    return algo == kAlgoFind ? CONVCORE_SELECT_FIND : CONVCORE_SELECT_MEASURED;
}

// Runs a Select call with the GIL released (it may time algorithms on first use).
template <typename F>
void run_select(int algo, F call) {
    convcoreStatus_t status;
    {
        py::gil_scoped_release release;
        status = call(select_mode(algo));
    }
    check(status, algo == kAlgoFind ? "algo=find: " : "");
}

// ---- backward passes ------------------------------------------------------------------------
// Directions as the Python API names them: 0 forward, 1 backward data, 2 backward filter.
enum Direction { FORWARD = 0, BACKWARD_DATA = 1, BACKWARD_FILTER = 2 };

std::string bwd_algo_name_lower(int direction, int algo) {
    const char* name = direction == BACKWARD_DATA
                           ? convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(algo))
                           : convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(algo));
    std::string s = name ? name : ("algo " + std::to_string(algo));
    for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

// check() for a backward call: failures other than bad arguments are prefixed with "algo=<name>: ".
void check_bwd(convcoreStatus_t status, int direction, int algo) {
    if (status == CONVCORE_STATUS_SUCCESS) return;
    std::string reason = convcoreGetLastErrorString();
    const std::string context =
        status == CONVCORE_STATUS_BAD_PARAM || algo < 0 ? "" : "algo=" + bwd_algo_name_lower(direction, algo) + ": ";
    throw StatusError(status, context + reason);
}

// Dtype, ndim and device checks of two inputs, with the user's argument names. Returns the dtype.
std::string check_pair(const DLPackTensor& a, const char* a_name, const DLPackTensor& b,
                       const char* b_name) {
    const char* supported = "; convcore supports float32 and float64";
    const std::string an = a_name, bn = b_name;
    for (const auto* t : {&a, &b}) {
        const std::string& name = t == &a ? an : bn;
        if (t->ndim() != 4)
            bad_param(name + ": expected a 4-D array, got shape " + shape_str(t->shape()));
        if (!t->is_float(32) && !t->is_float(64))
            bad_param(name + ": dtype " + t->dtype() + " is not supported" + supported);
    }
    if (a.dtype() != b.dtype())
        bad_param(bn + ": dtype " + b.dtype() + " does not match " + an + ": dtype " + a.dtype() +
                  " (" + an + " and " + bn + " must have the same dtype)");
    if (a.device_type() != b.device_type() || a.device_id() != b.device_id())
        bad_param(an + " and " + bn + " are on different devices");
    if (a.device_type() != kDLCPU && a.device_type() != kDLCUDA)
        not_supported(an + ": DLPack device type " + std::to_string(a.device_type()) +
                      " is not supported (convcore runs on kDLCPU and kDLCUDA memory)");
    return a.dtype();
}

// The checks every output gets: 4-D (or `ndim`), dtype, device, writable, distinct elements.
void check_output(const DLPackTensor& out, const DLPackTensor& like, const std::string& dtype,
                  const char* like_name, int ndim = 4) {
    if (out.ndim() != ndim)
        bad_param("out: expected a " + std::to_string(ndim) + "-D array, got shape " + shape_str(out.shape()));
    if (out.dtype() != dtype)
        bad_param("out: dtype " + out.dtype() + " does not match " + like_name + ": dtype " + dtype);
    if (out.device_type() != like.device_type() || out.device_id() != like.device_id())
        bad_param(std::string("out is not on the device of ") + like_name);
    if (out.read_only()) bad_param("out: the array is read-only");
    if (!out.has_positive_strides() || !out.has_distinct_elements())
        bad_param("out: strides must be positive and must not make elements overlap");
}

void set_tensor(convcoreTensorDescriptor_t desc, const std::vector<int64_t>& s,
                const std::vector<int64_t>& st, convcoreDataType_t t, const std::string& context) {
    check(convcoreSetTensor4dDescriptorEx(desc, t, s[0], s[1], s[2], s[3], st[0], st[1], st[2], st[3]),
          context);
}

convcoreHandle_t handle_on(const DLPackTensor& like, uintptr_t stream) {
    const bool on_cuda = like.device_type() == kDLCUDA;
    convcoreHandle_t h = on_cuda ? cuda_handle(like.device_id()) : cpu_handle();
    if (on_cuda) check(convcoreSetStream(h, reinterpret_cast<void*>(stream)), "stream: ");
    return h;
}

// dy's expected shape (the forward output for x's shape and w) against dy's shape.
void check_dy_shape(const Descriptors& d, const DLPackTensor& dy, const std::vector<int64_t>& x_shape) {
    std::vector<int64_t> expect(4);
    check(convcoreGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &expect[0], &expect[1],
                                                   &expect[2], &expect[3]));
    if (dy.shape() != expect)
        bad_param("dy: expected shape " + shape_str(expect) +
                  " (the output of this convolution for an input of shape " + shape_str(x_shape) +
                  "), got " + shape_str(dy.shape()));
}

// Runs `call(workspace, bytes)` with the GIL released: a device buffer on CUDA, the thread's
// host workspace on the CPU.
template <typename F>
convcoreStatus_t with_workspace(convcoreHandle_t h, bool on_cuda, size_t bytes, F call) {
    py::gil_scoped_release release;
    if (on_cuda) {
        DeviceBuffer ws(h, bytes);
        return call(ws.ptr, bytes);
    }
    return call(t_workspace.reserve(bytes), bytes);
}

// Data must be aligned to its element size (the C API's rule), checked here to name the argument.
void check_aligned(const DLPackTensor& t, const char* name) {
    const uintptr_t elem = uintptr_t(t.is_float(64) ? 8 : 4);
    if (t.data_ptr() % elem != 0)
        bad_param(std::string(name) + " is not aligned to its " + std::to_string(elem) + "-byte elements (address " +
                  std::to_string(t.data_ptr()) + ")");
}

// Runs one pass through the cache's plan for this problem: out = alpha * pass(in0, in1) + beta * out
// (convcoreExecuteConvolutionPlan's operands). On the first call of a problem, `describe(d, h)`
// validates the tensors (naming the user's arguments), fills the descriptors and returns the
// algorithm (running Select with the data for "auto" and "find"); the plan is made then.
// `check_status(status, algo)` turns a failed status into the pass's exception. With
// filter_version >= 0, in1 holds filters whose contents that number identifies: the plan
// prepares them (convcorePrepareConvolutionPlanFilters) once per pointer and version; with
// kFiltersChecked, once per pointer and fingerprint of their bytes.
// Returns the algorithm that ran.
// The fused epilogue of a forward call: out = act(alpha * conv(x, w) + alpha2 * residual + bias).
struct ForwardEpilogue {
    const DLPackTensor* bias = nullptr;
    const DLPackTensor* residual = nullptr;
    double alpha2 = 1.0;
    int activation = CONVCORE_ACTIVATION_IDENTITY;
    bool any() const { return bias || residual || activation != CONVCORE_ACTIVATION_IDENTITY; }
};

// The buffers of one execution of a cached plan.
struct PlanOperands {
    const void* in0;
    const void* in1;
    std::pair<uintptr_t, uintptr_t> in1_span;  // the bytes of in1 (the filters' fingerprint)
    void* out;
    bool fused = false;  // the forward pass with its epilogue: bias, activation, residual
    double alpha2 = 0.0;
    const void* residual = nullptr;
    const void* bias = nullptr;
    int activation = CONVCORE_ACTIVATION_IDENTITY;
};

// out = alpha * pass(in0, in1) + beta * out (or the forward pass with its epilogue) through a
// cached plan, with the GIL released. First the filters: with filter_version >= 0 the plan
// prepares in1 (convcorePrepareConvolutionPlanFilters) once per pointer and version; with
// kFiltersChecked once per pointer and fingerprint of in1's bytes (skipped for a plan whose
// algorithm keeps no filters).
convcoreStatus_t execute_plan(CachedPlan& plan, PlanCache& cache, convcoreHandle_t h, bool on_cuda, bool is_double,
                              const PlanOperands& op, double alpha, double beta, int64_t filter_version) {
    const float alpha_f = float(alpha), beta_f = float(beta), alpha2_f = float(op.alpha2);
    const void* alpha_p = is_double ? static_cast<const void*>(&alpha) : &alpha_f;
    const void* beta_p = is_double ? static_cast<const void*>(&beta) : &beta_f;
    const void* alpha2_p = is_double ? static_cast<const void*>(&op.alpha2) : &alpha2_f;
    auto execute = [&](void* ws) {
        if (op.fused)
            return convcoreExecuteConvolutionPlanBiasActivation(plan.plan, alpha_p, op.in0, op.in1, alpha2_p,
                                                                op.residual, op.bias,
                                                                convcoreActivationMode_t(op.activation), op.out, ws,
                                                                plan.workspace);
        return convcoreExecuteConvolutionPlan(plan.plan, alpha_p, op.in0, op.in1, beta_p, op.out, ws, plan.workspace);
    };
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(cache.mutex());
    bool prepare = false;
    uint64_t fingerprint = 0;
    if (filter_version >= 0) {
        prepare = plan.prepared_for != op.in1 || plan.prepared_version != filter_version;
    } else if (filter_version == kFiltersChecked && plan.keeps_filters != CachedPlan::kKeepsNone) {
        fingerprint = convcore_py::fingerprint(reinterpret_cast<const void*>(op.in1_span.first),
                                               op.in1_span.second - op.in1_span.first);
        prepare = plan.prepared_for != op.in1 || plan.prepared_version != filter_version ||
                  plan.prepared_fingerprint != fingerprint;
    }
    if (prepare) {
        size_t prepared_bytes = 0;
        const convcoreStatus_t status = convcorePrepareConvolutionPlanFilters(plan.plan, op.in1, &prepared_bytes);
        plan.prepared_for = status == CONVCORE_STATUS_SUCCESS ? op.in1 : nullptr;
        plan.prepared_version = filter_version;
        plan.prepared_fingerprint = fingerprint;
        if (status != CONVCORE_STATUS_SUCCESS) return status;
        plan.keeps_filters = prepared_bytes ? CachedPlan::kKeeps : CachedPlan::kKeepsNone;
        if (prepared_bytes) cache.count_preparation();
    }
    if (on_cuda) {
        DeviceBuffer ws(h, plan.workspace);  // freed before the GIL is taken back
        return execute(ws.ptr);
    }
    return execute(t_workspace.reserve(plan.workspace));
}

template <typename Describe, typename CheckStatus>
int run_plan(convcoreConvolutionPass_t pass, const DLPackTensor& in0, const char* in0_name,
             const DLPackTensor& in1, const char* in1_name, const DLPackTensor& out, const ConvParams& p,
             int algo, double alpha, double beta, PlanCache& cache, uintptr_t stream,
             int64_t filter_version, Describe describe, CheckStatus check_status,
             const ForwardEpilogue* epilogue = nullptr) {
    if (out.read_only()) bad_param("out: the array is read-only");
    // What a plan cannot know ahead: where the buffers are (before Select, which may time on out).
    check_aligned(in0, in0_name);
    check_aligned(in1, in1_name);
    check_aligned(out, "out");
    if (out.overlaps(in0)) bad_param(std::string("out overlaps ") + in0_name + ": the output must be a separate buffer");
    if (out.overlaps(in1)) bad_param(std::string("out overlaps ") + in1_name + ": the output must be a separate buffer");
    // A plan either keeps prepared filters or never does: a per-call caller must not run filters
    // another call prepared from the same pointer (the plan would use them: convcore.h, plans).
    const int64_t keeps_prepared = filter_version == kFiltersPerCall ? 0 : 1;
    PlanKey key{int64_t(pass), algo, keeps_prepared, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                p.groups, p.mode};
    for (const DLPackTensor* t : {&in0, &in1, &out}) t->append_layout(key);
    if (epilogue && epilogue->any())  // the layouts of its operands (checked once, by describe)
        for (const DLPackTensor* t : {epilogue->bias, epilogue->residual}) t ? t->append_layout(key) : key.push_back(-1);
    const bool on_cuda = in0.device_type() == kDLCUDA;
    convcoreHandle_t h = handle_on(in0, stream);
    std::shared_ptr<CachedPlan> plan = cache.find(key);
    if (!plan) {
        Descriptors d;
        const int chosen = describe(d, h);
        try {
            plan = std::make_shared<CachedPlan>(convcore::Plan(h, pass, d.x, d.w, d.conv, d.y, chosen));
        } catch (const convcore::Exception& e) {
            check_status(e.status(), chosen);  // the pass's exception, naming the algorithm
        }
        plan->algo = chosen;
        wrapped("", [&] { plan->workspace = plan->plan.workspace_size(); });
        cache.insert(std::move(key), plan);
    }
    const bool fused = epilogue && epilogue->any();
    PlanOperands ops{in0.data(), in1.data(), in1.byte_span(), out.data()};
    if (fused) {
        ops.fused = true;
        ops.alpha2 = epilogue->alpha2;
        ops.residual = epilogue->residual ? epilogue->residual->data() : nullptr;
        ops.bias = epilogue->bias ? epilogue->bias->data() : nullptr;
        ops.activation = epilogue->activation;
    }
    const convcoreStatus_t status = execute_plan(*plan, cache, h, on_cuda, in0.is_float(64), ops, alpha, beta,
                                                 filter_version);
    check_status(status, plan->algo);
    return plan->algo;
}

// y = alpha * conv(x, w) + beta * y with algorithm `algo` (-1: "auto", -2: "find"; both
// through convcoreSelectConvolutionForwardAlgorithm). `stream` is the CUDA stream to run on
// (ignored on the CPU); filter_version as in run_plan. Returns the algorithm used.
// The checks of the epilogue's operands that their layouts decide (shape, dtype, device,
// strides), with the Python argument names: made once per plan (run_plan's key holds the
// operands' layouts).
void check_epilogue_layout(const ForwardEpilogue& e, const DLPackTensor& x, const DLPackTensor& y) {
    const auto same_device = [&](const DLPackTensor& t) {
        return t.device_type() == x.device_type() && t.device_id() == x.device_id();
    };
    if (e.bias) {
        const DLPackTensor& b = *e.bias;
        const int64_t k = y.shape()[1];
        if (b.shape() != std::vector<int64_t>{k})
            bad_param("bias: expected shape (" + std::to_string(k) + ",) (one value per output channel), got " +
                      shape_str(b.shape()));
        if (b.dtype() != x.dtype()) bad_param("bias: dtype " + b.dtype() + " does not match x: dtype " + x.dtype());
        if (!same_device(b)) bad_param("bias is not on the device of x");
        if (k > 1 && b.strides()[0] != 1) bad_param("bias: must be contiguous");
    }
    if (e.residual) {
        const DLPackTensor& z = *e.residual;
        if (z.shape() != y.shape())
            bad_param("residual: expected shape " + shape_str(y.shape()) + " (the output's), got " + shape_str(z.shape()));
        if (z.dtype() != x.dtype())
            bad_param("residual: dtype " + z.dtype() + " does not match x: dtype " + x.dtype());
        if (!same_device(z)) bad_param("residual is not on the device of x");
        const auto zs = z.strides(), ys = y.strides(), dims = y.shape();
        for (size_t i = 0; i < dims.size(); ++i)
            if (dims[i] > 1 && zs[i] != ys[i])
                bad_param("residual: strides " + shape_str(zs) + " differ from out's " + shape_str(ys) +
                          " (it must be laid out as out)");
    }
}

// The checks of every call with an epilogue: its scalars and where its operands lie.
void check_epilogue_call(const ForwardEpilogue& e, const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y,
                         double beta) {
    if (e.activation < CONVCORE_ACTIVATION_IDENTITY || e.activation > CONVCORE_ACTIVATION_SILU)
        bad_param("activation: unknown activation code " + std::to_string(e.activation));
    if (e.any() && beta != 0.0)
        bad_param("beta: the epilogue (bias, activation, residual) computes out without reading it; pass "
                  "residual=out, alpha2=beta to add it");
    if (e.bias) {
        check_aligned(*e.bias, "bias");
        if (e.bias->overlaps(y)) bad_param("bias overlaps out: the output must be a separate buffer");
    }
    if (e.residual) {
        const DLPackTensor& z = *e.residual;
        check_aligned(z, "residual");
        if (z.overlaps(x)) bad_param("residual overlaps x: it must not share memory with the input");
        if (z.overlaps(w)) bad_param("residual overlaps w: it must not share memory with the filters");
        if (z.data() != y.data() && z.overlaps(y))
            bad_param("residual overlaps out without being out: pass residual=out to add it in place, or a separate "
                      "buffer");
    }
}

int forward(const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y, const ConvParams& p,
            int algo, double alpha, double beta, PlanCache& cache, uintptr_t stream, int64_t filter_version,
            const DLPackTensor* bias, int activation, const DLPackTensor* residual, double alpha2) {
    const ForwardEpilogue epilogue{bias, residual, alpha2, activation};
    check_epilogue_call(epilogue, x, w, y, beta);
    auto describe = [&](Descriptors& d, convcoreHandle_t h) {
        set_forward_descriptors(d, x, w, y, p);
        check_epilogue_layout(epilogue, x, y);
        // Select for the way this call runs: filters kept between calls (a filter_version or
        // "check"), or transformed at every call.
        if (filter_version != kFiltersPerCall)
            check(convcoreSetConvolutionFilterProtocol(d.conv, CONVCORE_FILTERS_PREPARED));
        if (algo >= 0) return algo;
        // Timing may overwrite y: it is given as scratch only when its contents are not blended
        // and it is not the residual.
        void* scratch = beta == 0.0 && !(residual && residual->overlaps(y)) ? y.data() : nullptr;
        convcoreConvolutionFwdAlgo_t chosen{};
        run_select(algo, [&](convcoreSelectMode_t mode) {
            return convcoreSelectConvolutionForwardAlgorithm(h, d.x, x.data(), d.w, w.data(), d.conv, d.y,
                                                             scratch, mode, &chosen);
        });
        return int(chosen);
    };
    return run_plan(CONVCORE_PASS_FORWARD, x, "x", w, "w", y, p, algo, alpha, beta, cache, stream,
                    filter_version, describe, check_algo_call, &epilogue);
}

// convcore.torch's inference and training forward, kept short: forward() on DLPack capsules
// (torch.utils.dlpack.to_dlpack's), without making a Python DLPackTensor of each. bias and residual
// are capsules or None.
int forward_capsules(py::capsule x, py::capsule w, py::capsule y, const py::object& bias, const ConvParams& p,
                     int algo, PlanCache& cache, int64_t filter_version, int activation,
                     const py::object& residual) {
    const DLPackTensor xt(x), wt(w), yt(y);
    std::optional<DLPackTensor> bt, zt;
    if (!bias.is_none()) bt.emplace(bias.cast<py::capsule>());
    if (!residual.is_none()) zt.emplace(residual.cast<py::capsule>());
    return forward(xt, wt, yt, p, algo, 1.0, 0.0, cache, 0, filter_version, bt ? &*bt : nullptr, activation,
                   zt ? &*zt : nullptr, 1.0);
}

// The fused 1x1 -> depthwise pair (convcoreCreatePointwiseDepthwisePlan) for convcore.torch's
// inference: a plan per input shape and data type, its filters prepared again whenever the
// caller's filter_version (a number that changes with the filters' contents) or their addresses
// change. Callers from several threads take turns (the plan and its prepared filters are shared).
class PointwiseDepthwise {
   public:
    explicit PointwiseDepthwise(const ConvParams& dw) : dw_(dw) {}
    ~PointwiseDepthwise() {
        if (plan_) convcoreDestroyPointwiseDepthwisePlan(plan_);
    }
    PointwiseDepthwise(const PointwiseDepthwise&) = delete;
    PointwiseDepthwise& operator=(const PointwiseDepthwise&) = delete;

    // y = the pair of x: CPU tensors as DLPack capsules, x and y packed NHWC, the filters packed
    // K x C x R x S, the biases K values or None. StatusError (NotSupportedError, BadParamError)
    // when the library refuses them.
    void forward(py::capsule x, py::capsule y, py::capsule w_pw, const py::object& b_pw, int act_pw,
                 py::capsule w_dw, const py::object& b_dw, int act_dw, int64_t filter_version) {
        const DLPackTensor xt(x), yt(y), wpt(w_pw), wdt(w_dw);
        std::optional<DLPackTensor> bpt, bdt;
        if (!b_pw.is_none()) bpt.emplace(b_pw.cast<py::capsule>());
        if (!b_dw.is_none()) bdt.emplace(b_dw.cast<py::capsule>());
        for (const DLPackTensor* t : {&xt, &yt, &wpt, &wdt, bpt ? &*bpt : &xt, bdt ? &*bdt : &xt})
            if (t->device_type() != kDLCPU || t->ndim() < 1) not_supported("the fused 1x1 -> depthwise pair takes CPU tensors");
        if (xt.ndim() != 4 || yt.ndim() != 4 || wpt.ndim() != 4 || wdt.ndim() != 4)
            bad_param("the fused 1x1 -> depthwise pair takes 4-D x, y and filters");
        const bool f64 = xt.is_float(64);
        if (!f64 && !xt.is_float(32)) not_supported("the fused 1x1 -> depthwise pair runs float32 and float64 only");
        for (const DLPackTensor* t : {&yt, &wpt, &wdt, bpt ? &*bpt : &xt, bdt ? &*bdt : &xt})
            if (!t->is_float(f64 ? 64 : 32)) bad_param("the fused 1x1 -> depthwise pair: every tensor must have x's dtype");
        if (!wpt.is_packed() || !wdt.is_packed() || (bpt && !bpt->is_packed()) || (bdt && !bdt->is_packed()))
            bad_param("the fused 1x1 -> depthwise pair takes contiguous filters and biases");
        std::vector<int64_t> key = {f64};
        xt.append_layout(key);
        yt.append_layout(key);
        const auto ws = wpt.shape(), ds = wdt.shape();
        key.insert(key.end(), ws.begin(), ws.end());
        key.insert(key.end(), ds.begin(), ds.end());
        const convcoreDataType_t dtype = f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!plan_ || key != key_) {
            if (plan_) convcoreDestroyPointwiseDepthwisePlan(plan_);
            plan_ = nullptr;
            prepared_version_ = kFiltersPerCall;
            convcore::TensorDesc xd, yd;
            convcore::FilterDesc wpd, wdd;
            convcore::ConvDesc conv;
            const auto xs = xt.shape(), xst = xt.strides_for_c(), ys = yt.shape(), yst = yt.strides_for_c();
            wrapped("x: ", [&] { xd.set_strided(dtype, {xs[0], xs[1], xs[2], xs[3]}, {xst[0], xst[1], xst[2], xst[3]}); });
            wrapped("y: ", [&] { yd.set_strided(dtype, {ys[0], ys[1], ys[2], ys[3]}, {yst[0], yst[1], yst[2], yst[3]}); });
            wrapped("w_pw: ", [&] { wpd.set(dtype, ws[0], ws[1], ws[2], ws[3]); });
            wrapped("w_dw: ", [&] { wdd.set(dtype, ds[0], ds[1], ds[2], ds[3]); });
            wrapped("", [&] {
                conv.set(dw_.pad_h, dw_.pad_w, dw_.stride_h, dw_.stride_w, dw_.dil_h, dw_.dil_w,
                         convcoreConvolutionMode_t(dw_.mode));
                conv.set_groups(dw_.groups);
            });
            check(convcoreCreatePointwiseDepthwisePlan(cpu_handle(), xd, wpd, wdd, conv, yd, &plan_));
            key_ = key;
        }
        if (filter_version == kFiltersPerCall || filter_version != prepared_version_ ||
            wpt.data() != prepared_pw_ || wdt.data() != prepared_dw_) {
            prepared_version_ = kFiltersPerCall;
            if (filter_version != kFiltersPerCall) {
                check(convcorePreparePointwiseDepthwisePlanFilters(plan_, wpt.data(), wdt.data()));
                prepared_version_ = filter_version;
                prepared_pw_ = wpt.data(), prepared_dw_ = wdt.data();
            }
        }
        check(convcoreExecutePointwiseDepthwisePlan(plan_, xt.data(), wpt.data(), bpt ? bpt->data() : nullptr,
                                                    convcoreActivationMode_t(act_pw), wdt.data(),
                                                    bdt ? bdt->data() : nullptr, convcoreActivationMode_t(act_dw),
                                                    yt.data()));
    }

   private:
    ConvParams dw_;
    std::mutex mutex_;
    convcorePointwiseDepthwisePlan_t plan_ = nullptr;
    std::vector<int64_t> key_;
    int64_t prepared_version_ = kFiltersPerCall;
    const void* prepared_pw_ = nullptr;
    const void* prepared_dw_ = nullptr;
};

// One fingerprint (fingerprint.hpp) of the bytes of several CPU tensors given as DLPack capsules,
// each dense (its elements fill one span of memory, in any order of dimensions). None when one is
// not: the caller then cannot tell a change and must not keep anything made from them.
py::object fingerprint_tensors(const py::list& capsules) {
    uint64_t h = convcore_py::mix64(capsules.size());
    for (const py::handle& c : capsules) {
        const DLPackTensor t(c.cast<py::capsule>());
        if (t.device_type() != kDLCPU) return py::none();
        const std::vector<int64_t> shape = t.shape(), strides = t.strides();
        int64_t span = 1, count = 1;  // the elements the strides reach, and the element count
        for (size_t i = 0; i < shape.size(); ++i) {
            if (strides[i] < 0) return py::none();
            span += (shape[i] - 1) * strides[i];
            count *= shape[i];
        }
        if (count > 0 && span != count) return py::none();  // gaps or overlaps
        const auto span_bytes = t.byte_span();
        h = convcore_py::mix64(h ^ convcore_py::fingerprint(t.data(), size_t(span_bytes.second - span_bytes.first)));
    }
    return py::int_(h);
}

// The common NumPy call, kept short: y = conv(x, w) of C-contiguous, aligned float arrays into a
// new array, through the plan an earlier call of the same problem made. The key is built as
// run_plan builds it from the arrays' DLPack export (dtype, device, shape and element strides of
// x, w and the packed output), so equal keys mean the same problem, validated when its plan was
// made. None when there is no such plan or the arrays are anything else: the general path then
// checks them, makes the plan or says what is wrong. Returns (y, algorithm that ran).
py::object forward_array(const py::handle& x_obj, const py::handle& w_obj, const ConvParams& p, int algo,
                         PlanCache& cache, int64_t filter_version) {
    if (!py::isinstance<py::array>(x_obj) || !py::isinstance<py::array>(w_obj)) return py::none();
    const auto x = py::reinterpret_borrow<py::array>(x_obj), w = py::reinterpret_borrow<py::array>(w_obj);
    constexpr int kPackedAligned = py::array::c_style | 0x0100;  // NPY_ARRAY_ALIGNED
    const py::dtype dtype = x.dtype();
    const py::ssize_t itemsize = dtype.itemsize();
    if (x.ndim() != 4 || w.ndim() != 4 || dtype.kind() != 'f' || (itemsize != 4 && itemsize != 8) ||
        dtype.byteorder() != '=' || (!dtype.is(w.dtype()) && !dtype.equal(w.dtype())) ||
        (x.flags() & kPackedAligned) != kPackedAligned || (w.flags() & kPackedAligned) != kPackedAligned)
        return py::none();
    const int64_t n = x.shape(0), k = w.shape(0);
    const int64_t out_h = (x.shape(2) + 2 * p.pad_h - p.dil_h * (w.shape(2) - 1) - 1) / p.stride_h + 1;
    const int64_t out_w = (x.shape(3) + 2 * p.pad_w - p.dil_w * (w.shape(3) - 1) - 1) / p.stride_w + 1;
    if (n < 1 || k < 1 || out_h < 1 || out_w < 1) return py::none();
    const int64_t keeps_prepared = filter_version == kFiltersPerCall ? 0 : 1;
    PlanKey key{int64_t(CONVCORE_PASS_FORWARD), algo, keeps_prepared, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                p.dil_h, p.dil_w, p.groups, p.mode};
    const int64_t dtype_code = int64_t(kDLFloat) << 32 | int64_t(itemsize * 8) << 16 | 1;
    const int64_t device_code = int64_t(kDLCPU) << 32;
    for (const py::array* a : {&x, &w}) {
        key.insert(key.end(), {dtype_code, device_code, 4});
        for (int i = 3; i >= 0; --i) key.insert(key.end(), {int64_t(a->shape(i)), int64_t(a->strides(i) / itemsize)});
    }
    const int64_t y_shape[4] = {n, k, out_h, out_w};
    key.insert(key.end(), {dtype_code, device_code, 4});
    for (int i = 3, stride = 1; i >= 0; stride *= int(y_shape[i]), --i) key.insert(key.end(), {y_shape[i], stride});
    std::shared_ptr<CachedPlan> plan = cache.find(key);
    if (!plan) return py::none();
    py::array y(dtype, std::vector<py::ssize_t>(y_shape, y_shape + 4));
    const auto* w_data = static_cast<const char*>(w.data());
    const PlanOperands ops{x.data(), w_data,
                           {uintptr_t(w_data), uintptr_t(w_data + w.nbytes())}, y.mutable_data()};
    check_algo_call(execute_plan(*plan, cache, cpu_handle(), false, itemsize == 8, ops, 1.0, 0.0, filter_version),
                    plan->algo);
    return py::make_tuple(std::move(y), plan->algo);
}

// dx = alpha * grad_x(w, dy) + beta * dx with backward-data algorithm `algo` (-1: "auto",
// -2: "find"). Returns the algorithm used.
int backward_data(const DLPackTensor& dy, const DLPackTensor& w, const DLPackTensor& dx,
                  const ConvParams& p, int algo, double alpha, double beta, PlanCache& cache,
                  uintptr_t stream) {
    auto describe = [&](Descriptors& d, convcoreHandle_t h) {
        const std::string dtype = check_pair(dy, "dy", w, "w");
        const convcoreDataType_t t = data_type_of(dtype);
        check_output(dx, dy, dtype, "dy");
        if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
        if (!w.has_positive_strides()) bad_param("w: strides must be positive");
        d.set_conv(p);
        set_tensor(d.x, dx.shape(), dx.strides_for_c(), t, "out: ");
        d.set_w(w, t, "w");
        check_dy_shape(d, dy, dx.shape());
        set_tensor(d.y, dy.shape(), dy.strides_for_c(), t, "dy: ");
        if (algo >= 0) return algo;
        void* scratch = beta == 0.0 ? dx.data() : nullptr;
        convcoreConvolutionBwdDataAlgo_t chosen{};
        run_select(algo, [&](convcoreSelectMode_t mode) {
            return convcoreSelectConvolutionBackwardDataAlgorithm(h, d.w, w.data(), d.y, dy.data(), d.conv, d.x,
                                                                  scratch, mode, &chosen);
        });
        return int(chosen);
    };
    return run_plan(CONVCORE_PASS_BACKWARD_DATA, dy, "dy", w, "w", dx, p, algo, alpha, beta, cache, stream, -1,
                    describe,
                    [](convcoreStatus_t status, int a) { check_bwd(status, BACKWARD_DATA, a); });
}

// dw = alpha * grad_w(x, dy) + beta * dw with backward-filter algorithm `algo` (-1: auto,
// -2: Find's).
int backward_filter(const DLPackTensor& x, const DLPackTensor& dy, const DLPackTensor& dw,
                    const ConvParams& p, int algo, double alpha, double beta, PlanCache& cache,
                    uintptr_t stream) {
    auto describe = [&](Descriptors& d, convcoreHandle_t h) {
        const std::string dtype = check_pair(x, "x", dy, "dy");
        const convcoreDataType_t t = data_type_of(dtype);
        check_output(dw, x, dtype, "x");
        if (!x.has_positive_strides()) bad_param("x: strides must be positive");
        if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
        d.set_conv(p);
        set_tensor(d.x, x.shape(), x.strides_for_c(), t, "x: ");
        d.set_w(dw, t, "out");
        check_dy_shape(d, dy, x.shape());
        set_tensor(d.y, dy.shape(), dy.strides_for_c(), t, "dy: ");
        if (algo >= 0) return algo;
        void* scratch = beta == 0.0 ? dw.data() : nullptr;
        convcoreConvolutionBwdFilterAlgo_t chosen{};
        run_select(algo, [&](convcoreSelectMode_t mode) {
            return convcoreSelectConvolutionBackwardFilterAlgorithm(h, d.x, x.data(), d.y, dy.data(), d.conv, d.w,
                                                                    scratch, mode, &chosen);
        });
        return int(chosen);
    };
    return run_plan(CONVCORE_PASS_BACKWARD_FILTER, x, "x", dy, "dy", dw, p, algo, alpha, beta, cache, stream, -1,
                    describe,
                    [](convcoreStatus_t status, int a) { check_bwd(status, BACKWARD_FILTER, a); });
}

// db (K,) = alpha * sum of dy over n, p, q + beta * db.
void backward_bias(const DLPackTensor& dy, const DLPackTensor& db, double alpha, double beta,
                   uintptr_t stream) {
    const std::string dtype = check_pair(dy, "dy", dy, "dy");
    const convcoreDataType_t t = data_type_of(dtype);
    check_output(db, dy, dtype, "dy", 1);
    if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
    const int64_t k = dy.shape()[1];
    if (db.shape()[0] != k)
        bad_param("out: expected shape (" + std::to_string(k) + ",) (one value per channel of dy), got " +
                  shape_str(db.shape()));
    check_aligned(dy, "dy");
    check_aligned(db, "out");
    if (db.overlaps(dy)) bad_param("out overlaps dy: the output must be a separate buffer");
    Descriptors d;
    set_tensor(d.y, dy.shape(), dy.strides_for_c(), t, "dy: ");
    const int64_t st = db.strides_for_c()[0];
    check(convcoreSetTensor4dDescriptorEx(d.x, t, 1, k, 1, 1, k * st, st, 1, 1), "out: ");
    convcoreHandle_t h = handle_on(dy, stream);
    const float alpha_f = float(alpha), beta_f = float(beta);
    const void* alpha_p = t == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&alpha) : &alpha_f;
    const void* beta_p = t == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&beta) : &beta_f;
    convcoreStatus_t status;
    {
        py::gil_scoped_release release;
        status = convcoreConvolutionBackwardBias(h, alpha_p, d.y, dy.data(), beta_p, d.x, db.data());
    }
    check(status);
}

// convcore.torch's eager autograd, kept short: the backward passes on DLPack capsules (direction
// BACKWARD_DATA: a = dy, b = w, out = dx; BACKWARD_FILTER: a = x, b = dy, out = dw; alpha 1,
// beta 0), without making a Python DLPackTensor of each.
// With bias_out (BACKWARD_FILTER only), the bias gradient of dy too.
int backward_capsules(int direction, py::capsule a, py::capsule b, py::capsule out, const ConvParams& p, int algo,
                      PlanCache& cache, const py::object& bias_out) {
    const DLPackTensor at(a), bt(b), ot(out);
    if (direction == BACKWARD_DATA) return backward_data(at, bt, ot, p, algo, 1.0, 0.0, cache, 0);
    if (direction != BACKWARD_FILTER) bad_param("direction: expected 1 (backward data) or 2 (backward filter)");
    const int ran = backward_filter(at, bt, ot, p, algo, 1.0, 0.0, cache, 0);
    if (!bias_out.is_none()) backward_bias(bt, DLPackTensor(bias_out.cast<py::capsule>()), 1.0, 0.0, 0);
    return ran;
}

// Ranking and workspace size of a backward direction, for a problem given by shapes.
std::vector<AlgoPerf> rank_bwd_algos(const std::vector<int64_t>& x_shape,
                                     const std::vector<int64_t>& w_shape, const ConvParams& p,
                                     int direction, int device_type, int device_index,
                                     const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    convcoreHandle_t h = handle_for(device_type, device_index);
    std::vector<AlgoPerf> out;
    if (direction == BACKWARD_DATA) {
        convcoreConvolutionBwdDataAlgoPerf_t perf[CONVCORE_BWD_DATA_ALGO_COUNT];
        int count = 0;
        check(convcoreGetConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x,
                                                          CONVCORE_BWD_DATA_ALGO_COUNT, &count, perf));
        for (int i = 0; i < count; ++i)
            out.push_back({int(perf[i].algo), perf[i].status == CONVCORE_STATUS_SUCCESS, perf[i].memory,
                           perf[i].determinism == CONVCORE_DETERMINISTIC});
    } else {
        convcoreConvolutionBwdFilterAlgoPerf_t perf[CONVCORE_BWD_FILTER_ALGO_COUNT];
        int count = 0;
        check(convcoreGetConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w,
                                                            CONVCORE_BWD_FILTER_ALGO_COUNT, &count, perf));
        for (int i = 0; i < count; ++i)
            out.push_back({int(perf[i].algo), perf[i].status == CONVCORE_STATUS_SUCCESS, perf[i].memory,
                           perf[i].determinism == CONVCORE_DETERMINISTIC});
    }
    return out;
}

size_t workspace_size_bwd(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
                          const ConvParams& p, int algo, int direction, int device_type,
                          int device_index, const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    convcoreHandle_t h = handle_for(device_type, device_index);
    size_t bytes = 0;
    if (direction == BACKWARD_DATA)
        check_bwd(convcoreGetConvolutionBackwardDataWorkspaceSize(
                      h, d.w, d.y, d.conv, d.x, convcoreConvolutionBwdDataAlgo_t(algo), &bytes),
                  direction, algo);
    else
        check_bwd(convcoreGetConvolutionBackwardFilterWorkspaceSize(
                      h, d.x, d.y, d.conv, d.w, convcoreConvolutionBwdFilterAlgo_t(algo), &bytes),
                  direction, algo);
    return bytes;
}

std::vector<std::string> bwd_algo_names(int direction) {
    std::vector<std::string> names;
    if (direction == BACKWARD_DATA)
        for (int i = 0; i < CONVCORE_BWD_DATA_ALGO_COUNT; ++i)
            names.push_back(convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(i)));
    else if (direction == BACKWARD_FILTER)
        for (int i = 0; i < CONVCORE_BWD_FILTER_ALGO_COUNT; ++i)
            names.push_back(convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(i)));
    else
        bad_param("direction: expected 1 (backward data) or 2 (backward filter)");
    return names;
}

// ---- library information --------------------------------------------------------------------

int cuda_device_count() {
    int count = 0;
    check(convcoreGetCudaDeviceCount(&count));
    return count;
}

std::vector<std::string> algo_names() {
    std::vector<std::string> names;
    for (int i = 0; i < CONVCORE_FWD_ALGO_COUNT; ++i)
        names.push_back(convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(i)));
    return names;
}

int algo_by_name(const std::string& name) {
    convcoreConvolutionFwdAlgo_t algo;
    check(convcoreGetFwdAlgoByName(name.c_str(), &algo), "algo: ");
    return int(algo);
}

void set_num_threads(int n) { check(convcoreSetNumThreads(cpu_handle(), n), "threads: "); }

// A machine diagnostic for `convcore bench`: the round trip, in ns, of a cache line handed back
// and forth between OpenMP threads 0 and 1 (best of 3 runs of up to 20000 trips, each cut off
// after 20 ms); 0 where fewer than 2 CPUs or threads are available. On this project's VM it is
// ~53 ns while the two vCPUs share an L3 and ~330 ns while the host has split them across L3
// domains, which doubles the time of code whose threads hand data to each other.
double cache_line_round_trip_ns() {
    py::gil_scoped_release release;
    return convcore_cache_line_round_trip_ns(3, 20.0);
}

// ---- Find ------------------------------------------------------------------------------------

// Convolution.find: Find on the caller's x and w (out is scratch), with a workspace of the
// largest size that an algorithm within `workspace_limit` (-1: no limit) needs.
// [(algo, status, time_ms, workspace_bytes, deterministic)], fastest first, failures last.
py::list find(const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y, const ConvParams& p,
              int64_t workspace_limit, bool deterministic, uintptr_t stream, bool prepared) {
    Descriptors d;
    set_forward_descriptors(d, x, w, y, p);
    if (prepared) check(convcoreSetConvolutionFilterProtocol(d.conv, CONVCORE_FILTERS_PREPARED));
    const bool on_cuda = x.device_type() == kDLCUDA;
    convcoreHandle_t h = handle_on(x, stream);
    const size_t limit = workspace_limit < 0 ? SIZE_MAX : size_t(workspace_limit);
    size_t bytes = 0;
    for (const AlgoPerf& a : rank(h, d))
        if (a.supported && a.workspace <= limit) bytes = std::max(bytes, a.workspace);

    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int count = 0;
    check(convcoreSetDeterministicOnly(h, deterministic ? 1 : 0));
    const convcoreStatus_t status = with_workspace(h, on_cuda, bytes, [&](void* ws, size_t n) {
        return convcoreFindConvolutionForwardAlgorithmEx(h, d.x, x.data(), d.w, w.data(), d.conv, d.y,
                                                         y.data(), CONVCORE_FWD_ALGO_COUNT, &count, perf,
                                                         ws, n);
    });
    const std::string reason = convcoreGetLastErrorString();
    convcoreSetDeterministicOnly(h, 0);  // the handle is this thread's, shared with other calls
    if (status != CONVCORE_STATUS_SUCCESS) throw StatusError(status, "find: " + reason);
    py::list out;
    for (int i = 0; i < count; ++i)
        out.append(py::make_tuple(int(perf[i].algo), int(perf[i].status), double(perf[i].time),
                                  perf[i].memory, perf[i].determinism == CONVCORE_DETERMINISTIC,
                                  double(perf[i].timePerCall), double(perf[i].timePrepared)));
    return out;
}

py::tuple find_stats() {
    int64_t timed = 0, hits = 0;
    check(convcoreGetFindStats(&timed, &hits));
    return py::make_tuple(timed, hits);
}

}  // namespace

PYBIND11_MODULE(_convcore, m) {
    m.doc() = "convcore C API bindings (internal; use the convcore package)";

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const StatusError& e) {
            const int s = int(e.status);
            PyObject* cls = (s >= 0 && s <= 5 && g_error_classes[s]) ? g_error_classes[s]
                                                                     : PyExc_RuntimeError;
            PyErr_SetString(cls, e.what());
        } catch (const convcore::Exception& e) {  // a wrapper call outside wrapped()
            const int s = int(e.status());
            PyObject* cls = (s >= 0 && s <= 5 && g_error_classes[s]) ? g_error_classes[s]
                                                                     : PyExc_RuntimeError;
            PyErr_SetString(cls, e.what());
        }
    });

    m.def("_set_error_classes", &set_error_classes,
          "Register the Python exception class per convcoreStatus_t value.");

    m.attr("STATUS_BAD_PARAM") = int(CONVCORE_STATUS_BAD_PARAM);
    m.attr("STATUS_NOT_SUPPORTED") = int(CONVCORE_STATUS_NOT_SUPPORTED);
    m.attr("STATUS_ALLOC_FAILED") = int(CONVCORE_STATUS_ALLOC_FAILED);
    m.attr("STATUS_EXECUTION_FAILED") = int(CONVCORE_STATUS_EXECUTION_FAILED);
    m.attr("STATUS_INTERNAL_ERROR") = int(CONVCORE_STATUS_INTERNAL_ERROR);
    m.attr("DEVICE_CPU") = int(CONVCORE_DEVICE_CPU);
    m.attr("DEVICE_CUDA") = int(CONVCORE_DEVICE_CUDA);
    m.attr("DLPACK_CPU") = int(kDLCPU);
    m.attr("DLPACK_CUDA") = int(kDLCUDA);
    m.attr("CROSS_CORRELATION") = int(CONVCORE_CROSS_CORRELATION);
    m.attr("CONVOLUTION") = int(CONVCORE_CONVOLUTION);

    m.def("version", [] {
        const size_t v = convcoreGetVersion();
        return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100);
    });
    m.def("build_info", [] { return std::string(convcoreGetBuildInfo()); });
    m.def("cuda_device_count", &cuda_device_count);
    m.def("algo_names", &algo_names, "Algorithm names in enum order (uppercase, as the C API).");
    m.def(
        "algorithm_info",
        [](int pass, int algo) {
            convcoreAlgorithmInfo_t info{};
            check(convcoreGetAlgorithmInfo(convcoreConvolutionPass_t(pass), algo, &info), "algo: ");
            return py::make_tuple(std::string(info.name), info.onCpu != 0, info.onCuda != 0,
                                  info.errorBoundFloat, info.errorBoundDouble,
                                  info.determinism == CONVCORE_DETERMINISTIC);
        },
        py::arg("pass"), py::arg("algo"),
        "(name, on_cpu, on_cuda, error_bound_float32, error_bound_float64, deterministic) of an algorithm.");
    m.def("algo_by_name", &algo_by_name, py::arg("name"));
    m.def("set_num_threads", &set_num_threads, py::arg("n"),
          "CPU threads for this Python thread's convcore calls (0: OpenMP's default).");
    m.def("cache_line_round_trip_ns", &cache_line_round_trip_ns,
          "Diagnostic for the bench: a cache line's round trip between two threads, in ns.");

    py::class_<DLPackTensor>(m, "DLPackTensor",
                             "A tensor imported from a DLPack capsule (zero copy; owns it).")
        .def(py::init<py::capsule>(), py::arg("capsule"))
        .def_property_readonly("ndim", &DLPackTensor::ndim)
        .def_property_readonly("shape", [](const DLPackTensor& t) { return py::tuple(py::cast(t.shape())); })
        .def_property_readonly("strides", [](const DLPackTensor& t) { return py::tuple(py::cast(t.strides())); })
        .def_property_readonly("dtype", &DLPackTensor::dtype)
        .def_property_readonly("device", [](const DLPackTensor& t) {
            return py::make_tuple(t.device_type(), t.device_id());
        })
        .def_property_readonly("data_ptr", &DLPackTensor::data_ptr)
        .def_property_readonly("read_only", &DLPackTensor::read_only)
        .def_property_readonly("versioned", &DLPackTensor::versioned)
        .def_property_readonly("is_packed", &DLPackTensor::is_packed)
        .def_property_readonly("has_positive_strides", &DLPackTensor::has_positive_strides);

    py::class_<ConvParams>(m, "ConvParams")
        .def(py::init([](int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w,
                         int64_t dil_h, int64_t dil_w, int64_t groups, int mode) {
                 return ConvParams{pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, mode};
             }),
             py::arg("pad_h"), py::arg("pad_w"), py::arg("stride_h"), py::arg("stride_w"),
             py::arg("dil_h"), py::arg("dil_w"), py::arg("groups"), py::arg("mode"));

    py::class_<PlanCache>(m, "PlanCache",
                          "The plans of one Convolution in one thread.")
        .def(py::init<>())
        .def_property_readonly("plan_count", &PlanCache::plan_count)
        .def_property_readonly("preparations", &PlanCache::preparations);

    m.def("output_shape", &output_shape, py::arg("x_shape"), py::arg("w_shape"), py::arg("params"));
    m.def("rank_algos",
          [](const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, const ConvParams& p,
             int device_type, int device_index, const std::string& dtype) {
              py::list out;
              for (const AlgoPerf& a : rank_algos(xs, ws, p, device_type, device_index, dtype))
                  out.append(py::make_tuple(a.algo, a.supported, a.workspace, a.deterministic));
              return out;
          },
          py::arg("x_shape"), py::arg("w_shape"), py::arg("params"), py::arg("device_type"),
          py::arg("device_index"), py::arg("dtype"),
          "The heuristic ranking: [(algo, supported, workspace_bytes, deterministic)], "
          "supported ones first, best first.");
    m.def("workspace_size", &workspace_size, py::arg("x_shape"), py::arg("w_shape"),
          py::arg("params"), py::arg("algo"), py::arg("device_type"), py::arg("device_index"),
          py::arg("dtype"));
    m.def("check_inputs", &check_inputs, py::arg("x"), py::arg("w"),
          "Checks ndim, dtype and device of x and w; returns the dtype name.");
    m.def("forward_capsules", &forward_capsules, py::arg("x"), py::arg("w"), py::arg("y"), py::arg("bias"),
          py::arg("params"), py::arg("algo"), py::arg("plans"), py::arg("filter_version"), py::arg("activation"),
          py::arg("residual") = py::none(),
          "forward() of CPU tensors given as DLPack capsules (alpha 1, beta 0).");
    py::class_<PointwiseDepthwise>(m, "PointwiseDepthwise",
                                   "The fused 1x1 -> depthwise pair of convcore.torch's inference.")
        .def(py::init<const ConvParams&>(), py::arg("depthwise_params"))
        .def("forward", &PointwiseDepthwise::forward, py::arg("x"), py::arg("y"), py::arg("w_pw"), py::arg("b_pw"),
             py::arg("act_pw"), py::arg("w_dw"), py::arg("b_dw"), py::arg("act_dw"), py::arg("filter_version"),
             "y = act_dw(dwconv(act_pw(conv1x1(x, w_pw) + b_pw), w_dw) + b_dw) of CPU tensors (DLPack capsules), "
             "x and y packed NHWC; the filters prepared again when filter_version changes (FILTERS_PER_CALL: every call).");
    m.def("fingerprint_tensors", &fingerprint_tensors, py::arg("capsules"),
          "One 64-bit fingerprint of the bytes of dense CPU tensors (DLPack capsules), or None.");
    m.def("forward_array", &forward_array, py::arg("x"), py::arg("w"), py::arg("params"), py::arg("algo"),
          py::arg("plans"), py::arg("filter_version"),
          "(y, algo) of a NumPy call whose plan exists, or None (the general path then runs).");
    m.def("forward", &forward, py::arg("x"), py::arg("w"), py::arg("y"), py::arg("params"),
          py::arg("algo"), py::arg("alpha"), py::arg("beta"), py::arg("plans"),
          py::arg("stream"), py::arg("filter_version") = -1, py::arg("bias") = nullptr,
          py::arg("activation") = 0, py::arg("residual") = nullptr, py::arg("alpha2") = 1.0,
          "The forward pass; with bias, activation or residual the fused epilogue "
          "(convcoreExecuteConvolutionPlanBiasActivation).");
    m.attr("ALGO_AUTO") = kAlgoAuto;
    m.attr("ALGO_FIND") = kAlgoFind;
    m.attr("FILTERS_PER_CALL") = kFiltersPerCall;
    m.attr("FILTERS_CHECKED") = kFiltersChecked;
    m.attr("SELECT_CANDIDATES") = CONVCORE_SELECT_CANDIDATES;
    m.def("find", &find, py::arg("x"), py::arg("w"), py::arg("y"), py::arg("params"),
          py::arg("workspace_limit"), py::arg("deterministic"), py::arg("stream"), py::arg("prepared") = false,
          "FindEx on x and w (y: scratch): [(algo, status, time_ms, workspace, deterministic, "
          "time_per_call_ms, time_prepared_ms)], fastest first for the protocol (prepared filters or per call).");
    m.def("find_stats", &find_stats, "(timed_runs, db_hits) of Find in this process.");
    m.def("clear_find_cache",
          [] {
              check(convcoreClearFindCache());
              ++g_plan_generation;
          },
          "Forget the in-process cache of find results (the find-db file is read again) and the "
          "plans made from them.");

    // ---- backward passes ----
    m.attr("BACKWARD_DATA") = int(BACKWARD_DATA);
    m.attr("BACKWARD_FILTER") = int(BACKWARD_FILTER);
    m.def("bwd_algo_names", &bwd_algo_names, py::arg("direction"),
          "Backward algorithm names of a direction (1: data, 2: filter) in enum order.");
    m.def("rank_bwd_algos",
          [](const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, const ConvParams& p,
             int direction, int device_type, int device_index, const std::string& dtype) {
              py::list out;
              for (const AlgoPerf& a : rank_bwd_algos(xs, ws, p, direction, device_type, device_index, dtype))
                  out.append(py::make_tuple(a.algo, a.supported, a.workspace, a.deterministic));
              return out;
          },
          py::arg("x_shape"), py::arg("w_shape"), py::arg("params"), py::arg("direction"),
          py::arg("device_type"), py::arg("device_index"), py::arg("dtype"));
    m.def("workspace_size_bwd", &workspace_size_bwd, py::arg("x_shape"), py::arg("w_shape"),
          py::arg("params"), py::arg("algo"), py::arg("direction"), py::arg("device_type"),
          py::arg("device_index"), py::arg("dtype"));
    m.def("backward_data", &backward_data, py::arg("dy"), py::arg("w"), py::arg("dx"),
          py::arg("params"), py::arg("algo"), py::arg("alpha"), py::arg("beta"),
          py::arg("plans"), py::arg("stream"));
    m.def("backward_filter", &backward_filter, py::arg("x"), py::arg("dy"), py::arg("dw"),
          py::arg("params"), py::arg("algo"), py::arg("alpha"), py::arg("beta"),
          py::arg("plans"), py::arg("stream"));
    m.def("backward_capsules", &backward_capsules, py::arg("direction"), py::arg("a"), py::arg("b"),
          py::arg("out"), py::arg("params"), py::arg("algo"), py::arg("plans"), py::arg("bias_out") = py::none());
    m.def("backward_bias", &backward_bias, py::arg("dy"), py::arg("db"), py::arg("alpha"),
          py::arg("beta"), py::arg("stream"));
}
