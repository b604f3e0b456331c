// The thread count OpenBLAS uses for the calls made in a scope.
#pragma once
#include <omp.h>

namespace convcore {
namespace cpu {

// The OpenMP build of OpenBLAS sizes its team from omp_get_max_threads() of the calling thread
// (and runs single-threaded inside an active parallel region; a 1-thread region is not
// active). BlasThreads makes `threads` that default for the scope and restores the caller's
// setting after, so that the handle's thread count, not the process's, governs BLAS.
struct BlasThreads {
    int saved;
    explicit BlasThreads(int threads) : saved(omp_get_max_threads()) { omp_set_num_threads(threads); }
    ~BlasThreads() { omp_set_num_threads(saved); }
    BlasThreads(const BlasThreads&) = delete;
    BlasThreads& operator=(const BlasThreads&) = delete;
};

}  // namespace cpu
}  // namespace convcore
