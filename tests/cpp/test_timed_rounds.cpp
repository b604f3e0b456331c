// Find's timed rounds (core/timed_rounds.hpp): which contenders run again. Synthetic times: no
// timed assertions.
#include <gtest/gtest.h>

#include <vector>

#include "core/timed_rounds.hpp"

namespace {

using convcore::timed_rounds::kPerCall;
using convcore::timed_rounds::kPrepared;
using convcore::timed_rounds::open_places;
using convcore::timed_rounds::Timed;

constexpr unsigned kBoth = kPerCall | kPrepared;

TEST(TimedRounds, AClearRankingStopsEveryone) {
    const std::vector<Timed> t = {{kBoth, true, {1.0, 1.1}}, {kBoth, true, {2.0, 2.2}}, {kBoth, true, {1.2, 1.3}}};
    EXPECT_EQ(open_places(t), std::vector<bool>({false, false, false}));
}

TEST(TimedRounds, RunsThatOverlapTheLeadersKeepBothOpen) {
    // The third's fastest run (1.4) reaches the leader's slowest (1.5); the second's does not.
    const std::vector<Timed> t = {{kBoth, true, {1.0, 1.5}}, {kBoth, true, {1.6, 1.7}}, {kBoth, true, {1.4, 2.0}}};
    EXPECT_EQ(open_places(t), std::vector<bool>({true, false, true}));
}

TEST(TimedRounds, EachRankingHasItsOwnLeader) {
    // A: per call 5 ms, 1 ms with prepared filters; B prepares nothing (2 ms in both rankings);
    // C: per call 2.1 ms (overlapping B's), prepared 3 ms.
    const std::vector<Timed> t = {{kPerCall, true, {5.0, 5.0}}, {kPrepared, true, {1.0, 1.0}},
                                  {kBoth, true, {2.0, 2.2}},    {kPerCall, true, {2.1, 2.5}},
                                  {kPrepared, true, {3.0, 3.0}}};
    // Per call B leads and C is open against it; with prepared filters A leads, all settled.
    EXPECT_EQ(open_places(t), std::vector<bool>({false, false, true, true, false}));
}

TEST(TimedRounds, FailedContendersAreLeftOut) {
    // A failed contender has no say, even with no runs or a time that would lead.
    const std::vector<Timed> t = {{kBoth, false, {}}, {kBoth, true, {1.0, 1.1}}, {kBoth, true, {1.05, 1.2}},
                                  {kBoth, false, {0.1, 0.1}}};
    EXPECT_EQ(open_places(t), std::vector<bool>({false, true, true, false}));
}

TEST(TimedRounds, ALoneContenderIsSettled) {
    EXPECT_EQ(open_places({{kBoth, true, {3.0, 9.0}}}), std::vector<bool>({false}));
    EXPECT_TRUE(open_places({}).empty());
}

}  // namespace
