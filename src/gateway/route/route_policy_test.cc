#include "gateway/route/route_policy.h"

#include <gtest/gtest.h>

#include <map>

namespace tachyon {
namespace {

using Order = std::vector<size_t>;

TEST(RoutePolicyTest, FallbackKeepsTheConfiguredOrderAndSkipsUnavailable) {
  auto p = RoutePolicy::Make(PolicyKind::kFallback, 3);
  EXPECT_EQ(p->Order({{true}, {true}, {true}}, {}), (Order{0, 1, 2}));
  EXPECT_EQ(p->Order({{false}, {true}, {true}}, {}), (Order{1, 2}));
  EXPECT_EQ(p->Order({{false}, {false}, {false}}, {}), Order{});
}

TEST(RoutePolicyTest, RoundRobinRotates) {
  auto p = RoutePolicy::Make(PolicyKind::kRoundRobin, 3);
  std::vector<CandidateState> c(3);
  EXPECT_EQ(p->Order(c, {}), (Order{0, 1, 2}));
  EXPECT_EQ(p->Order(c, {}), (Order{1, 2, 0}));
  EXPECT_EQ(p->Order(c, {}), (Order{2, 0, 1}));
  EXPECT_EQ(p->Order(c, {}), (Order{0, 1, 2}));
}

TEST(RoutePolicyTest, LeastOutstandingPicksTheIdlestAndTiesTakeTurns) {
  auto p = RoutePolicy::Make(PolicyKind::kLeastOutstanding, 3);
  EXPECT_EQ(p->Order({{true, 5}, {true, 1}, {true, 3}}, {})[0], 1u);
  std::map<size_t, int> firsts;
  for (int i = 0; i < 30; ++i) ++firsts[p->Order({{true, 2}, {true, 2}, {true, 9}}, {})[0]];
  EXPECT_EQ(firsts[0], 15);
  EXPECT_EQ(firsts[1], 15);
  EXPECT_EQ(firsts.count(2), 0u);
}

TEST(RoutePolicyTest, LatencyPrefersUnmeasuredThenFastestAndExploresAtItsRate) {
  auto p = RoutePolicy::Make(PolicyKind::kLatency, 3, {.explore = 0.1});
  EXPECT_EQ(p->Order({{true, 0, 0.5}, {true, 0, -1}, {true, 0, 0.1}}, {.random = 0.9}), (Order{1, 2, 0}));
  EXPECT_EQ(p->Order({{true, 0, 0.5}, {true, 0, 0.2}, {true, 0, 0.1}}, {.random = 0.9}), (Order{2, 1, 0}));
  // random < explore: random / explore picks the explorer (0.05 / 0.1 = 0.5 -> the middle one of three).
  EXPECT_EQ(p->Order({{true, 0, 0.5}, {true, 0, 0.2}, {true, 0, 0.1}}, {.random = 0.05})[0], 1u);
  EXPECT_EQ(p->Order({{true, 0, 0.5}, {true, 0, 0.2}, {true, 0, 0.1}}, {.random = 0.095})[0], 0u);
}

TEST(RoutePolicyTest, PrefixAffinityIsStickySpreadsPrefixesAndBoundsTheLoad) {
  auto p = RoutePolicy::Make(PolicyKind::kPrefixAffinity, 4, {.load_factor = 1.25});
  std::vector<CandidateState> idle(4);
  std::map<size_t, int> per_backend;
  for (uint64_t prefix = 0; prefix < 400; ++prefix) {
    const uint64_t h = prefix * 0x9e3779b97f4a7c15ull;
    const Order first = p->Order(idle, {.prefix_hash = h});
    ASSERT_EQ(first.size(), 4u) << "every backend, as fallbacks";
    EXPECT_EQ(p->Order(idle, {.prefix_hash = h}), first) << "the same prefix, the same replica";
    ++per_backend[first[0]];
  }
  for (size_t b = 0; b < 4; ++b) {
    EXPECT_GT(per_backend[b], 50) << "400 prefixes spread over 4 replicas; backend " << b;
  }
  // A replica over its bound (c = 1.25: ceil(1.25 * (12 + 1) / 4) = 5) is passed over.
  const uint64_t h = 12345;
  const size_t home = p->Order(idle, {.prefix_hash = h})[0];
  std::vector<CandidateState> busy(4, CandidateState{true, 2});
  busy[home].outstanding = 6;
  const Order moved = p->Order(busy, {.prefix_hash = h});
  EXPECT_NE(moved[0], home);
  busy[home].outstanding = 4;  // 4 + 1 <= ceil(1.25 * 11 / 4) = 4? no: 5 > 4 -> still moved
  EXPECT_NE(p->Order(busy, {.prefix_hash = h})[0], home);
  busy[home].outstanding = 3;  // 3 + 1 <= ceil(1.25 * 10 / 4) = 4
  EXPECT_EQ(p->Order(busy, {.prefix_hash = h})[0], home);
  // An unavailable home: the next on the ring.
  idle[home].available = false;
  EXPECT_NE(p->Order(idle, {.prefix_hash = h})[0], home);
}

TEST(RoutePolicyTest, PrefixAffinityKeepsFewPrefixesEven) {
  // Four prefixes on two replicas: hashing alone puts three or four on one of them
  // most of the time; the two choices give two each, whatever the hashes.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto p = RoutePolicy::Make(PolicyKind::kPrefixAffinity, 2);
    std::vector<CandidateState> idle(2);
    std::map<size_t, int> homes;
    for (uint64_t prefix = 0; prefix < 4; ++prefix) {
      const uint64_t h = (seed * 4 + prefix + 1) * 0x9e3779b97f4a7c15ull;
      const size_t home = p->Order(idle, {.prefix_hash = h})[0];
      ++homes[home];
      for (int again = 0; again < 3; ++again) EXPECT_EQ(p->Order(idle, {.prefix_hash = h})[0], home) << "sticky";
    }
    EXPECT_EQ(homes[0], 2) << "seed " << seed;
    EXPECT_EQ(homes[1], 2) << "seed " << seed;
  }
}

TEST(RoutePolicyTest, NamesParse) {
  for (const char* name : {"fallback", "round-robin", "least-outstanding", "latency", "prefix-affinity"}) {
    StatusOr<PolicyKind> k = ParsePolicyKind(name);
    ASSERT_TRUE(k.ok());
    EXPECT_STREQ(PolicyName(*k), name);
  }
  EXPECT_FALSE(ParsePolicyKind("random").ok());
}

}  // namespace
}  // namespace tachyon
