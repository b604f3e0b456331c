// Helpers shared by the C API's translation units (core/api.cpp: forward and descriptors;
// core/api_backward.cpp: backward passes): the error guard with its per-thread reason
// string, argument checks, and the strided staging copies. Internal: not installed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "convcore/convcore.h"
#include "core/device.hpp"
#include "core/error.hpp"

namespace convcore {
namespace api {

// The reason for the last failed call on this thread (convcoreGetLastErrorString).
inline thread_local std::string last_error;

// Runs an entry point's body: a thrown convcore::Error becomes its status code and reason.
template <typename F>
convcoreStatus_t guard(F&& body) {
    try {
        body();
        last_error.clear();
        return CONVCORE_STATUS_SUCCESS;
    } catch (const Error& e) {
        last_error = e.what();
        return e.status();
    } catch (const std::bad_alloc&) {
        last_error = "out of host memory";
        return CONVCORE_STATUS_ALLOC_FAILED;
    } catch (const std::exception& e) {
        last_error = std::string("internal error: ") + e.what();
        return CONVCORE_STATUS_INTERNAL_ERROR;
    } catch (...) {
        last_error = "internal error: unknown exception";
        return CONVCORE_STATUS_INTERNAL_ERROR;
    }
}

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
    for (int i = 0; i < 4; ++i) last += checked_mul(dims[i] - 1, strides[i], "tensor extent");
    return checked_mul(last + 1, int64_t(elem), "tensor extent");
}

constexpr size_t kAlign = 64;
inline size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

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

inline bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
    auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + uintptr_t(b_bytes) && pb < pa + uintptr_t(a_bytes);
}

}  // namespace api
}  // namespace convcore
