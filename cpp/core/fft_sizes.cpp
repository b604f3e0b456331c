// Transform sizes of the FFT family: see fft_sizes.hpp.
#include "core/fft_sizes.hpp"

#include <climits>
#include <cmath>
#include <cstdio>

namespace convcore {
namespace fft {

double size_weight(int64_t m) {
    if (m < 1) return 1e30;
    int64_t r = m, twos = 0;
    double weight = 1.0;
    while (r % 2 == 0) r /= 2, ++twos;
    while (r % 3 == 0) r /= 3, weight += 0.3;
    while (r % 5 == 0) r /= 5, weight += 0.2;
    while (r % 7 == 0) r /= 7, weight += 0.8;
    if (r != 1) return 1e30;  // not 2^a 3^b 5^c 7^d
    if (twos == 0 && m > 1) weight *= 1.5;
    return weight;
}

namespace {
// Calls fn(m) for every m = 2^a 3^b 5^c 7^d in [lo, hi] (a few hundred at most).
template <typename Fn>
void for_smooth(int64_t lo, int64_t hi, Fn fn) {
    const int64_t cap = INT64_MAX / 8;
    if (hi > cap) hi = cap;
    for (int64_t p7 = 1; p7 <= hi; p7 *= 7)
        for (int64_t p5 = p7; p5 <= hi; p5 *= 5)
            for (int64_t p3 = p5; p3 <= hi; p3 *= 3)
                for (int64_t m = p3; m <= hi; m *= 2)
                    if (m >= lo) fn(m);
}
}  // namespace

int64_t good_size(int64_t n, bool even) {
    if (n < 1) n = 1;
    int64_t best = 0;
    double best_cost = 0;
    for_smooth(n, 2 * n + 2, [&](int64_t m) {
        if (even && (m & 1)) return;
        const double cost = double(m) * std::log2(double(m) + 1.0) * size_weight(m);
        if (best == 0 || cost < best_cost || (cost == best_cost && m < best)) {
            best = m;
            best_cost = cost;
        }
    });
    return best > 0 ? best : n;
}

int64_t good_size_multiple(int64_t n, int64_t multiple) {
    if (n < 1) n = 1;
    int64_t best = 0;
    for_smooth(n, 2 * n + 2, [&](int64_t m) {
        if (m % multiple == 0 && (best == 0 || m < best)) best = m;
    });
    return best;
}

std::string too_big(const char* algo, double bytes) {
    char buf[192];
    std::snprintf(buf, sizeof buf,
                  "%s would need %.1f GB of workspace for this problem (the cap is 4 GiB)", algo,
                  bytes / 1e9);
    return buf;
}

}  // namespace fft
}  // namespace convcore
