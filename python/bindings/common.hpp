// The pieces every binding file shares: status -> Python exception, the DLPack import
// (DLPackTensor), per-thread handles and host workspace, descriptors, the argument checks with
// the user's names, and the Select and workspace helpers. One job per file beside it:
// buffers.cpp (DLPack tensors, fingerprints), plans.cpp (the plans of forward and backward
// calls, the fused pair), selection.cpp (shape queries, rankings, Find, the bench's probe),
// module.cpp (the module: exception translation, constants, library information).
#pragma once
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
#include "core/fingerprint.hpp"

namespace py = pybind11;

namespace convcore_py {

// ---- errors ---------------------------------------------------------------------------------

// A failed C call (or a failed check here), carried to Python as convcore.<X>Error.
struct StatusError : std::exception {
    convcoreStatus_t status;
    std::string message;
    StatusError(convcoreStatus_t s, std::string m) : status(s), message(std::move(m)) {}
    const char* what() const noexcept override { return message.c_str(); }
};

[[noreturn]] inline void bad_param(const std::string& message) {
    throw StatusError(CONVCORE_STATUS_BAD_PARAM, message);
}
[[noreturn]] inline void not_supported(const std::string& message) {
    throw StatusError(CONVCORE_STATUS_NOT_SUPPORTED, message);
}

// Throws StatusError for a failed status; `context` (e.g. "x: ") is put before the C reason.
inline void check(convcoreStatus_t status, const std::string& context = "") {
    if (status == CONVCORE_STATUS_SUCCESS) return;
    std::string reason = convcoreGetLastErrorString();
    throw StatusError(status, context + reason);
}

// Python exception classes per status, set once by convcore/_errors.py. Leaked on purpose:
// they live as long as the interpreter.
inline PyObject* g_error_classes[6] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

inline void set_error_classes(const py::dict& classes) {
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

inline std::string shape_str(const std::vector<int64_t>& shape) {
    std::ostringstream o;
    o << "(";
    for (size_t i = 0; i < shape.size(); ++i) o << (i ? ", " : "") << shape[i];
    o << (shape.size() == 1 ? ",)" : ")");
    return o.str();
}

inline std::string algo_name_lower(int algo) {
    const char* name = convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(algo));
    std::string s = name ? name : ("algo " + std::to_string(algo));
    for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

// check() for a call that runs or sizes one algorithm: its failures other than bad arguments
// (NOT_SUPPORTED, execution errors) are prefixed with "algo=<name>: ".
inline void check_algo_call(convcoreStatus_t status, int algo) {
    check(status, status == CONVCORE_STATUS_BAD_PARAM ? "" : "algo=" + algo_name_lower(algo) + ": ");
}

inline convcoreDataType_t data_type_of(const std::string& dtype) {
    if (dtype == "float32") return CONVCORE_DATA_FLOAT;
    if (dtype == "float64") return CONVCORE_DATA_DOUBLE;
    bad_param("dtype: " + dtype + " is not supported; convcore supports float32 and float64");
}

// "float32", "int64", "bfloat16", "complex64", "bool", ... for a DLPack dtype.
inline std::string dtype_name(DLDataType t) {
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
inline thread_local ThreadHandles t_handles;

inline convcoreHandle_t cpu_handle() {
    if (!t_handles.cpu) check(convcoreCreate(&t_handles.cpu), "creating a CPU handle: ");
    return t_handles.cpu;
}

inline convcoreHandle_t cuda_handle(int index) {
    auto it = t_handles.cuda.find(index);
    if (it != t_handles.cuda.end()) return it->second;
    convcoreHandle_t h = nullptr;
    check(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, index),
          "creating a handle for cuda:" + std::to_string(index) + ": ");
    t_handles.cuda[index] = h;
    return h;
}

inline convcoreHandle_t handle_for(int device_type, int device_index) {
    if (device_type == CONVCORE_DEVICE_CPU) return cpu_handle();
    if (device_type == CONVCORE_DEVICE_CUDA) return cuda_handle(device_index);
    bad_param("device: unknown device type " + std::to_string(device_type));
}

// ---- descriptors ----------------------------------------------------------------------------

// The convolution parameters of a convcore.ConvDesc, validated in Python.
struct ConvParams {
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, groups = 1;
    int mode = CONVCORE_CROSS_CORRELATION;
    int64_t pad_d = 0, stride_d = 1, dil_d = 1;  // the depth axis of a 3-D call (forward_3d)
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

inline void require_4d(const std::vector<int64_t>& shape, const char* name, const char* layout) {
    if (shape.size() != 4)
        bad_param(std::string(name) + ": expected a 4-D " + layout + " array, got shape " +
                  shape_str(shape));
}

// Descriptors for a problem given by shapes (packed tensors).
inline void set_from_shapes(Descriptors& d, const std::vector<int64_t>& x_shape,
                     const std::vector<int64_t>& w_shape, const ConvParams& p,
                     convcoreDataType_t t) {
    require_4d(x_shape, "x", "NCHW");
    require_4d(w_shape, "w", "K x C/groups x R x S");
    d.set_conv(p);
    d.set_x(x_shape, t);
    d.set_w(w_shape, t);
    d.set_y(t);
}


// ---- filter versions and workspace -----------------------------------------------------------

// filter_version values (convcore.Convolution.forward): -1, w is transformed at every call;
// >= 0, the caller's number for w's contents (the core keeps w's transformed filters while w's
// pointer and that number stay the same: the caller vouches for them); kFiltersChecked, the core
// keeps them while w's pointer and the fingerprint of w's bytes stay the same, computed at every
// call (convcore.torch's default: right however the weights were changed, for one read of w).
constexpr int64_t kFiltersPerCall = -1;
constexpr int64_t kFiltersChecked = -2;

// Bumped by clear_find_cache: plans chosen by "auto" or "find" before it are made again.
inline std::atomic<uint64_t> g_plan_generation{0};


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
inline thread_local HostWorkspace t_workspace;


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

// Dtype and device checks of x and w of any rank, with the user's argument names (x_name: the
// first input's, e.g. "dy"). Returns the dtype.
inline std::string check_input_types(const DLPackTensor& x, const DLPackTensor& w, const std::string& x_name = "x") {
    const char* supported = "; convcore supports float32 and float64";
    const std::string& xn = x_name;
    if (!x.is_float(32) && !x.is_float(64))
        bad_param(xn + ": dtype " + x.dtype() + " is not supported" + supported);
    if (!w.is_float(32) && !w.is_float(64))
        bad_param("w: dtype " + w.dtype() + " is not supported" + supported);
    if (x.dtype() != w.dtype())
        bad_param("w: dtype " + w.dtype() + " does not match " + xn + ": dtype " + x.dtype() + " (" + xn +
                  " and w must have the same dtype)");
    if (x.device_type() != w.device_type() || x.device_id() != w.device_id())
        bad_param(xn + " and w are on different devices (" + xn + ": device type " +
                  std::to_string(x.device_type()) + " index " + std::to_string(x.device_id()) +
                  ", w: device type " + std::to_string(w.device_type()) + " index " +
                  std::to_string(w.device_id()) + ")");
    if (x.device_type() != kDLCPU && x.device_type() != kDLCUDA)
        not_supported(xn + ": DLPack device type " + std::to_string(x.device_type()) +
                      " is not supported (convcore runs on kDLCPU and kDLCUDA memory)");
    return x.dtype();
}

// The checks of a 2-D call's x and w (check_input_types and their rank). Returns the dtype.
inline std::string check_inputs(const DLPackTensor& x, const DLPackTensor& w) {
    require_4d(x.shape(), "x", "NCHW");
    require_4d(w.shape(), "w", "K x C/groups x R x S");
    return check_input_types(x, w);
}

// The checks of a forward call's x, w and out (y) of any rank but the ranks' (x_name: the first
// input's name: "dy" for a backward-data call, whose out is dx). Returns the dtype.
inline convcoreDataType_t check_forward_tensors(const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y,
                                                const std::string& x_name = "x") {
    const std::string dtype = check_input_types(x, w, x_name);
    if (y.dtype() != dtype)
        bad_param("out: dtype " + y.dtype() + " does not match " + x_name + ": dtype " + dtype);
    if (y.device_type() != x.device_type() || y.device_id() != x.device_id())
        bad_param("out is not on the device of " + x_name);
    if (y.read_only()) bad_param("out: the array is read-only");
    if (!x.has_positive_strides()) bad_param(x_name + ": strides must be positive");
    if (!w.has_positive_strides()) bad_param("w: strides must be positive");
    if (!y.has_positive_strides() || !y.has_distinct_elements())
        bad_param("out: strides must be positive and must not make elements overlap");
    return data_type_of(dtype);
}

// The checks of a 2-D forward call's x, w and out (y), and their descriptors. Returns the dtype.
inline convcoreDataType_t set_forward_descriptors(Descriptors& d, const DLPackTensor& x, const DLPackTensor& w,
                                           const DLPackTensor& y, const ConvParams& p) {
    require_4d(x.shape(), "x", "NCHW");
    require_4d(w.shape(), "w", "K x C/groups x R x S");
    require_4d(y.shape(), "out", "NCHW");
    const convcoreDataType_t t = check_forward_tensors(x, w, y);

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
inline convcoreSelectMode_t select_mode(int algo) {
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

inline std::string bwd_algo_name_lower(int direction, int algo) {
    const char* name = direction == BACKWARD_DATA
                           ? convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(algo))
                           : convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(algo));
    std::string s = name ? name : ("algo " + std::to_string(algo));
    for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

// check() for a backward call: failures other than bad arguments are prefixed with "algo=<name>: ".
inline void check_bwd(convcoreStatus_t status, int direction, int algo) {
    if (status == CONVCORE_STATUS_SUCCESS) return;
    std::string reason = convcoreGetLastErrorString();
    const std::string context =
        status == CONVCORE_STATUS_BAD_PARAM || algo < 0 ? "" : "algo=" + bwd_algo_name_lower(direction, algo) + ": ";
    throw StatusError(status, context + reason);
}

// Dtype, ndim and device checks of two inputs, with the user's argument names. Returns the dtype.
inline std::string check_pair(const DLPackTensor& a, const char* a_name, const DLPackTensor& b,
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
inline void check_output(const DLPackTensor& out, const DLPackTensor& like, const std::string& dtype,
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

inline void set_tensor(convcoreTensorDescriptor_t desc, const std::vector<int64_t>& s,
                const std::vector<int64_t>& st, convcoreDataType_t t, const std::string& context) {
    check(convcoreSetTensor4dDescriptorEx(desc, t, s[0], s[1], s[2], s[3], st[0], st[1], st[2], st[3]),
          context);
}

inline convcoreHandle_t handle_on(const DLPackTensor& like, uintptr_t stream) {
    const bool on_cuda = like.device_type() == kDLCUDA;
    convcoreHandle_t h = on_cuda ? cuda_handle(like.device_id()) : cpu_handle();
    if (on_cuda) check(convcoreSetStream(h, reinterpret_cast<void*>(stream)), "stream: ");
    return h;
}

// dy's expected shape (the forward output for x's shape and w) against dy's shape.
inline void check_dy_shape(const Descriptors& d, const DLPackTensor& dy, const std::vector<int64_t>& x_shape) {
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
inline void check_aligned(const DLPackTensor& t, const char* name) {
    const uintptr_t elem = uintptr_t(t.is_float(64) ? 8 : 4);
    if (t.data_ptr() % elem != 0)
        bad_param(std::string(name) + " is not aligned to its " + std::to_string(elem) + "-byte elements (address " +
                  std::to_string(t.data_ptr()) + ")");
}


}  // namespace convcore_py
