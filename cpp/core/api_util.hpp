// Helpers shared by the C API's translation units (core/api.cpp: forward and descriptors;
// core/api_backward.cpp: backward passes): the error guard with its per-thread reason
// string, argument checks, and the strided staging copies. Internal: not installed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "convcore/convcore.h"
#include "core/device.hpp"
#include "core/error.hpp"

namespace convcore {
namespace api {

// The reason for the last failed call on this thread (convcoreGetLastErrorString), truncated to
// its capacity. A plain array, not a std::string: it has no destructor, so a call made by another
// thread-local destructor at thread exit (a binding destroying its per-thread handles) still
// finds it valid; a std::string destroyed before it was written to after its free.
inline constexpr size_t kLastErrorCapacity = 4096;
inline thread_local char last_error[kLastErrorCapacity] = "";

inline void set_last_error(const char* prefix, const char* reason) {
    std::snprintf(last_error, kLastErrorCapacity, "%s%s", prefix, reason);
}

// Runs an entry point's body: a thrown convcore::Error becomes its status code and reason.
template <typename F>
convcoreStatus_t guard(F&& body) {
    try {
        body();
        last_error[0] = '\0';
        return CONVCORE_STATUS_SUCCESS;
    } catch (const Error& e) {
        set_last_error("", e.what());
        return e.status();
    } catch (const std::bad_alloc&) {
        set_last_error("", "out of host memory");
        return CONVCORE_STATUS_ALLOC_FAILED;
    } catch (const std::exception& e) {
        set_last_error("internal error: ", e.what());
        return CONVCORE_STATUS_INTERNAL_ERROR;
    } catch (...) {
        set_last_error("internal error: ", "unknown exception");
        return CONVCORE_STATUS_INTERNAL_ERROR;
    }
}

// The int a C caller passed for an enum parameter. C lets a caller pass any int there, but in
// C++ an enum holding a value outside its enumerators' range is undefined (UBSan: "load of
// value 7, which is not a valid value for type ..."), even just to copy it: range checks read
// the bits, and the enum is only passed on once they have passed.
template <typename E>
inline int enum_int(const E& e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

// An activationMode argument: BAD_PARAM naming it unless it is a convcoreActivationMode_t.
inline void check_activation(const convcoreActivationMode_t& mode, const char* name) {
    const int act = enum_int(mode);
    if (act < CONVCORE_ACTIVATION_IDENTITY || act > CONVCORE_ACTIVATION_GELU_TANH)
        throw_bad_param(std::string(name) + " " + std::to_string(act) + " is not a convcoreActivationMode_t");
}

// A data type's name in reasons ("float32", "float64").
inline const char* dtype_name(convcoreDataType_t t) { return t == CONVCORE_DATA_DOUBLE ? "float64" : "float32"; }

template <typename T>
void require(T* p, const char* name) {
    if (!p) throw_bad_param(std::string(name) + " is NULL");
}

// a * b, or BAD_PARAM when it leaves int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) throw_bad_param(std::string(what) + " overflows 64 bits");
    return r;
}

// Bytes one past the last element of a strided tensor.
inline int64_t extent_bytes(const int64_t dims[4], const int64_t strides[4], size_t elem) {
    int64_t last = 0;
    for (int i = 0; i < 4; ++i)  // the sum overflows too, not only the products
        if (__builtin_add_overflow(last, checked_mul(dims[i] - 1, strides[i], "tensor extent"), &last))
            throw_bad_param("tensor extent overflows 64 bits");
    if (__builtin_add_overflow(last, 1, &last)) throw_bad_param("tensor extent overflows 64 bits");
    return checked_mul(last, int64_t(elem), "tensor extent");
}

constexpr size_t kAlign = 64;
inline size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Memory on the context's device (core/api.cpp; convcoreMalloc, convcoreFree and
// convcoreMemcpyToDevice are these with their argument checks). device_alloc throws
// ALLOC_FAILED; 0 bytes give nullptr.
void* device_alloc(const Context& ctx, size_t bytes);
void device_free(const Context& ctx, void* ptr);
void copy_to_device(const Context& ctx, void* dst, const void* src, size_t bytes);

inline void copy_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& sv,
                         void* dst, const Strided4d& dv) {
#ifdef CONVCORE_WITH_CUDA
    if (ctx.device == CONVCORE_DEVICE_CUDA) return cuda::copy_strided(ctx, elem, src, sv, dst, dv);
#endif
    cpu::copy_strided(ctx, elem, src, sv, dst, dv);
}

inline void blend_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& sv,
                          void* dst, const Strided4d& dv, double alpha, double beta) {
#ifdef CONVCORE_WITH_CUDA
    if (ctx.device == CONVCORE_DEVICE_CUDA)
        return cuda::blend_strided(ctx, elem, src, sv, dst, dv, alpha, beta);
#endif
    cpu::blend_strided(ctx, elem, src, sv, dst, dv, alpha, beta);
}

inline void scale_strided(const Context& ctx, size_t elem, void* dst, const Strided4d& view, double beta) {
#ifdef CONVCORE_WITH_CUDA
    if (ctx.device == CONVCORE_DEVICE_CUDA) return cuda::scale_strided(ctx, elem, dst, view, beta);
#endif
    cpu::scale_strided(ctx, elem, dst, view, beta);
}

inline void apply_epilogue(const Context& ctx, size_t elem, void* y, const Strided4d& yv, const Epilogue& e) {
#ifdef CONVCORE_WITH_CUDA
    if (ctx.device == CONVCORE_DEVICE_CUDA) return cuda::apply_epilogue(ctx, elem, y, yv, e);
#endif
    cpu::apply_epilogue(ctx, elem, y, yv, e);
}

// Data pointers must be aligned to their element size (4 or 8 bytes): the solvers read them
// as float/double (and the staging copies of the workspace as well).
inline void check_aligned(const void* p, size_t elem, const char* name) {
    if (reinterpret_cast<uintptr_t>(p) % elem != 0)
        throw_bad_param(std::string(name) + " is not aligned to its " + std::to_string(elem) +
                        "-byte elements (address " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                        ")");
}

// No two indices of an output view address the same element (strides that overlap would make
// threads write one element concurrently). Axes of length 1 do not count. Sufficient, not
// necessary: taken innermost first, each axis's stride must pass the last offset the axes inside
// it reach (so a 3-D tensor's depth slices two apart, a batch of a depth decomposition, pass).
inline bool has_distinct_elements(const int64_t* dims, const int64_t* strides, int count) {
    int order[5] = {0, 1, 2, 3, 4};
    std::sort(order, order + count, [&](int a, int b) { return strides[a] < strides[b]; });
    int64_t span = 1;  // one past the last offset the inner axes reach
    for (int j = 0; j < count; ++j) {
        const int i = order[j];
        if (dims[i] == 1) continue;
        if (strides[i] < span) return false;
        span += strides[i] * (dims[i] - 1);  // fits: the descriptor's extent was checked
    }
    return true;
}
inline bool has_distinct_elements(const int64_t dims[4], const int64_t strides[4]) {
    return has_distinct_elements(dims, strides, 4);
}

inline bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
    auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + uintptr_t(b_bytes) && pb < pa + uintptr_t(a_bytes);
}

}  // namespace api
}  // namespace convcore
