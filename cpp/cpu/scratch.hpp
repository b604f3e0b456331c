// Per-thread temporaries of the CPU solvers that are not workspace (sized at run time, or one per
// OpenMP thread): each call site has its own vector per thread, grown to the largest request and
// kept, so that a repeated call allocates nothing (convcore.h, "the handle's plan cache").
#pragma once
#include <cstddef>
#include <vector>

namespace convcore {
namespace cpu {

// This thread's vector for the call site `Site`: a tag type of the caller's own (declared in its
// anonymous namespace), so that two call sites never share one. Either the calling thread takes
// it outside a parallel region (the region's threads use slices of it), or each thread of a
// region takes its own.
// With min_size, at least that many elements (zeros when first grown, else the contents the last
// call left).
template <typename T, typename Site>
std::vector<T>& thread_vector(size_t min_size = 0) {
    thread_local std::vector<T> v;
    if (v.size() < min_size) v.assign(min_size, T());
    return v;
}

// The same as a pointer to its first element.
template <typename T, typename Site>
T* thread_buffer(size_t count) {
    return thread_vector<T, Site>(count).data();
}

}  // namespace cpu
}  // namespace convcore
