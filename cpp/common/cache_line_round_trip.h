/* A cache line's round trip between two OpenMP threads, in ns: threads 0 and 1 take turns
 * incrementing one cache line, so each increment is a round trip of the line between their
 * cores. The best of `runs` runs of up to 200000 trips or `max_ms` milliseconds each; 0 where
 * fewer than two threads run. On a 2-vCPU VM it is ~50 ns while the vCPUs share an L3 and
 * ~330 ns while the host has split them across L3 domains, which doubles the time of code
 * whose threads hand data to each other (bench/results/cpu-2026-11-23-s6.md).
 *
 * C and C++ (GCC/Clang atomic builtins): used by tools/vcpu_speed.c and by the Python bindings'
 * diagnostic convcore._convcore.cache_line_round_trip_ns (the bench's per-layer check). */
#ifndef CONVCORE_CACHE_LINE_ROUND_TRIP_H
#define CONVCORE_CACHE_LINE_ROUND_TRIP_H

#include <omp.h>
#include <time.h>

static inline double convcore_seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double convcore_cache_line_round_trip_ns(int runs, double max_ms) {
    if (omp_get_num_procs() < 2) return 0.0;
    double best = 0.0;
    for (int run = 0; run < runs; ++run) {
        /* the shared line, and a flag on its own line: thread 0 stops early at max_ms */
        static long turn __attribute__((aligned(64)));
        static long stop __attribute__((aligned(64)));
        long trips_done = 0;
        double seconds = 0.0;
        __atomic_store_n(&turn, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
#pragma omp parallel num_threads(2)
        {
            const int id = omp_get_thread_num();
            if (omp_get_num_threads() == 2) {
#pragma omp barrier
                const double t0 = convcore_seconds_now();
                long i = 0;
                for (; i < 200000; ++i) {
                    const long mine = 2 * i + id;
                    int stopped = 0;
                    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != mine)
                        if (__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
                            stopped = 1;
                            break;
                        }
                    if (stopped) break;
                    __atomic_store_n(&turn, mine + 1, __ATOMIC_RELEASE);
                    if (id == 0 && (i & 255) == 255 && (convcore_seconds_now() - t0) * 1e3 > max_ms) {
                        ++i;
                        break;
                    }
                }
                if (id == 0) {
                    seconds = convcore_seconds_now() - t0;
                    trips_done = i;
                    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
                }
            }
        }
        if (trips_done == 0) return 0.0;
        const double ns = seconds / (double)trips_done * 1e9;
        best = run == 0 || ns < best ? ns : best;
    }
    return best;
}

#endif
