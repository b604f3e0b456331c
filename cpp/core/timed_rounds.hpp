// Find's timed rounds (core/find.cpp): which contenders are still worth another run.
//
// Find times its contenders (an algorithm, or an algorithm with prepared filters) in
// interleaved rounds. A contender's place is settled in a ranking (per call; with prepared
// filters) when it is the ranking's leader, the lowest median, and no other contender's fastest
// run reaches the leader's slowest; or when its own fastest run is slower than the leader's
// slowest. From kSettleRounds on, a contender whose place is settled in every ranking it is part
// of stops; the rounds end when none is left. A clear ranking then takes kSettleRounds runs of
// each contender after the warm-up instead of kMaxRounds: a network's first training step times
// hundreds of contenders.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace convcore {
namespace timed_rounds {

constexpr int kMaxRounds = 5;     // after one warm-up run each; Find reports the median
constexpr int kSettleRounds = 2;  // rounds before a contender may stop

enum Ranking : unsigned { kPerCall = 1u, kPrepared = 2u };

struct Timed {
    unsigned rankings = 0;      // the rankings it is part of (Ranking bits)
    bool alive = true;          // false once a run failed
    std::vector<double> times;  // its timed runs, ms
};

inline double median(std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Whether each contender's place is still open in some ranking (then it runs again). Every
// live contender has at least one timed run.
inline std::vector<bool> open_places(const std::vector<Timed>& timed) {
    const size_t m = timed.size();
    std::vector<bool> open(m, false);
    for (unsigned ranking : {kPerCall, kPrepared}) {
        const auto in = [&](size_t j) { return timed[j].alive && (timed[j].rankings & ranking); };
        size_t leader = m;
        for (size_t j = 0; j < m; ++j)
            if (in(j) && (leader == m || median(timed[j].times) < median(timed[leader].times))) leader = j;
        if (leader == m) continue;
        const std::vector<double>& lead = timed[leader].times;
        const double slowest = *std::max_element(lead.begin(), lead.end());
        for (size_t j = 0; j < m; ++j) {
            if (j == leader || !in(j)) continue;
            const std::vector<double>& t = timed[j].times;
            if (*std::min_element(t.begin(), t.end()) <= slowest) open[j] = open[leader] = true;
        }
    }
    return open;
}

}  // namespace timed_rounds
}  // namespace convcore
