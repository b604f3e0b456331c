/* Is every CPU of this machine running at full speed right now?
 *
 * On a shared VM one vCPU at a time can run at ~55-60% speed for seconds to minutes
 * (bench/results/cpu-2026-11-23-e6256e2.md). A multi-threaded convolution whose threads
 * meet at barriers then runs at that vCPU's pace, and 2-thread benchmark ratios move by up to
 * 2x. This times the same register-only arithmetic on every OpenMP thread, round after round,
 * and says how often one thread was more than 30% slower than the fastest.
 *
 * Then how late the OpenMP workers join a parallel region after the program sat idle (5 ms:
 * libgomp's workers still spin and join within microseconds; 30 ms: they sleep, and waking a
 * halted vCPU can take ~2 ms; a benchmark should wake them before timing, as `convcore
 * bench` does).
 *
 * Last, the round trip of a cache line between threads 0 and 1: ~50 ns when two vCPUs share
 * an L3, ~330 ns when the host has put them on different L3 domains (CCDs). Code whose threads
 * hand written data to each other then runs up to 2x slower: Winograd's shared transformed
 * input, OpenBLAS's shared packed panels, barriers. Single-threaded and register-only code
 * does not change, nor does PyTorch's oneDNN (its threads work on private data)
 * (bench/results/cpu-2026-11-23-s6.md). This check catches that state; the arithmetic rounds
 * above do not.
 *
 *     make vcpu-check                 # 20 s (VCPU_SECONDS=60 for longer)
 *     build/vcpu_speed [seconds] [-v] # (after make vcpu-check) -v: one line per round
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cache_line_round_trip.h"

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? atof(argv[1]) : 20.0;
    const int verbose = argc > 2 && strcmp(argv[2], "-v") == 0;
    const int threads = omp_get_max_threads();
    double* t = calloc((size_t)threads, sizeof(double));
    double best = 1e30, end = convcore_seconds_now() + seconds;
    long rounds = 0, slow_rounds = 0;
    volatile float sink = 0;
    while (convcore_seconds_now() < end) {
#pragma omp parallel num_threads(threads)
        {
            /* Four independent multiply-add chains with different seeds (so the compiler cannot
             * merge them), all in registers: the time is the core's arithmetic speed only. */
            const int id = omp_get_thread_num();
            float a0 = 1.0f + id, a1 = 2.0f + id, a2 = 3.0f + id, a3 = 4.0f + id;
            const float m = 0.9999999f, c = 1e-7f;
            const double t0 = convcore_seconds_now();
            for (long i = 0; i < 20000000L; ++i) {
                a0 = a0 * m + c;
                a1 = a1 * m + c;
                a2 = a2 * m + c;
                a3 = a3 * m + c;
            }
            t[id] = convcore_seconds_now() - t0;
            sink += a0 + a1 + a2 + a3;
        }
        double lo = t[0], hi = t[0];
        for (int i = 1; i < threads; ++i) {
            lo = t[i] < lo ? t[i] : lo;
            hi = t[i] > hi ? t[i] : hi;
        }
        best = lo < best ? lo : best;
        ++rounds;
        if (hi > 1.3 * best) ++slow_rounds;
        if (verbose) {
            printf("round %ld:", rounds);
            for (int i = 0; i < threads; ++i) printf(" %.1f", t[i] * 1e3);
            printf(" ms\n");
        }
    }
    printf("%d threads, %ld rounds of %.1f ms at best: %ld rounds (%.0f%%) had a thread more than "
           "30%% slower than the best\n",
           threads, rounds, best * 1e3, slow_rounds, rounds ? 100.0 * slow_rounds / rounds : 0.0);

    /* Wake-up latency: idle a while, then a parallel region in which every thread notes when
     * it started. After 5 ms the workers normally still spin (libgomp's default); after 30 ms
     * they sleep, and waking a sleeping vCPU can cost about 2 ms. */
    enum { WAKES = 60 };
    double lat[WAKES];
    for (int idle_ms = 5; idle_ms <= 30; idle_ms += 25) {
        for (int r = 0; r < WAKES; ++r) {
            usleep(idle_ms * 1000);
            const double t0 = convcore_seconds_now();
#pragma omp parallel num_threads(threads)
            t[omp_get_thread_num()] = convcore_seconds_now();
            double last = t[0];
            for (int i = 1; i < threads; ++i) last = t[i] > last ? t[i] : last;
            lat[r] = last - t0;
            if (verbose) printf("wake after %d ms: the last thread started %.0f us after the region\n",
                                idle_ms, lat[r] * 1e6);
        }
        int late = 0;
        for (int i = 1; i < WAKES; ++i)  /* sorted, for the median */
            for (int j = i; j > 0 && lat[j] < lat[j - 1]; --j) {
                const double x = lat[j];
                lat[j] = lat[j - 1];
                lat[j - 1] = x;
            }
        for (int r = 0; r < WAKES; ++r) late += lat[r] > 1e-3;
        printf("%d wake-ups after %d ms idle: the last thread joined after %.0f us (median), "
               "%.0f us (worst); %d took more than 1 ms\n",
               WAKES, idle_ms, lat[WAKES / 2] * 1e6, lat[WAKES - 1] * 1e6, late);
    }
    if (threads >= 2) {
        double best_rt = 1e30;
        for (int round = 0; round < 5; ++round) {
            const double rt = convcore_cache_line_round_trip_ns(1, 100.0);
            best_rt = rt < best_rt ? rt : best_rt;
            if (verbose) printf("cache-line round trip: %.0f ns\n", rt);
        }
        printf("cache-line round trip between threads 0 and 1: %.0f ns (best of 5; ~53 ns when the "
               "vCPUs share an L3 here, ~330 ns when the host has split them)\n", best_rt);
    }
    free(t);
    return 0;
}
