// A reduction over tasks with one partial sum per thread: the filter gradients of IM2COL_GEMM
// (2-D NHWC and 3-D), whose tasks are blocks of output pixels, each unfolded and reduced by a
// single-threaded GEMM while the unfolded rows are in L2.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace partial_sums {
struct Sums;  // thread_vector sites
struct Partials;
}  // namespace partial_sums

// out[0, partial) = the sum over tasks 0 .. tasks-1 of their contributions. `teams` threads each
// run the tasks t, t + teams, ... with a scratch of their own: `partial` elements of sum, then
// `col` elements for the task's unfolded rows; `accumulate(task, col, sum, first)` adds one
// task's contribution into sum (first: sum holds nothing yet, overwrite it). Then the partials
// are added, each thread a range of the elements.
template <typename T, typename Accumulate>
void sum_tasks_in_partials(int64_t tasks, int teams, size_t partial, size_t col, T* out, Accumulate accumulate) {
    std::vector<T*>& partials = thread_vector<T*, partial_sums::Partials>(static_cast<size_t>(teams));
#pragma omp parallel num_threads(teams)
    {
        const int me = omp_get_thread_num();
        T* sum = thread_buffer<T, partial_sums::Sums>(partial + col);  // each thread's
        partials[size_t(me)] = sum;
        if (me >= tasks) std::fill(sum, sum + partial, T(0));  // a thread without a task
        for (int64_t task = me; task < tasks; task += teams) accumulate(task, sum + partial, sum, task == me);
#pragma omp barrier
        const size_t lo = partial * size_t(me) / size_t(teams), hi = partial * size_t(me + 1) / size_t(teams);
        for (size_t i = lo; i < hi; ++i) {
            T acc = T(0);
            for (int u = 0; u < teams; ++u) acc += partials[size_t(u)][i];
            out[i] = acc;
        }
    }
}

}  // namespace cpu
}  // namespace convcore
