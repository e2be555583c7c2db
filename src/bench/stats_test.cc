#include "bench/stats.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

RequestRecord Record(std::vector<double> chunks, double e2e, int64_t out, bool ok = true) {
  RequestRecord r;
  r.ok = ok;
  r.chunk_seconds = std::move(chunks);
  r.e2e_seconds = e2e;
  r.output_tokens = out;
  r.prompt_tokens = 10;
  return r;
}

TEST(BenchStatsTest, PercentilesInterpolateLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [50, 90]) = [2.5, 3.7]
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_NEAR(Percentile({4, 1, 3, 2}, 0.9), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0);
  Distribution d = Distribute({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_NEAR(d.p95, 9.55, 1e-12);
  EXPECT_EQ(d.count, 10);
}

TEST(BenchStatsTest, TtftTpotItlDefinitions) {
  RequestRecord r = Record({0.1, 0.15, 0.25}, 0.5, 5);
  EXPECT_DOUBLE_EQ(*Ttft(r), 0.1);
  EXPECT_DOUBLE_EQ(*Tpot(r), (0.5 - 0.1) / 4);
  // One output token: no TPOT (division by zero avoided), TTFT still counts.
  RequestRecord one = Record({0.2}, 0.2, 1);
  EXPECT_FALSE(Tpot(one).has_value());
  EXPECT_DOUBLE_EQ(*Ttft(one), 0.2);
  // Nothing streamed: neither.
  RequestRecord none = Record({}, 0.3, 0);
  EXPECT_FALSE(Ttft(none).has_value());
  BenchSummary s = Summarize({r, one}, 2.0, {});
  EXPECT_EQ(s.itl.count, 2) << "gaps of r only";
  EXPECT_NEAR(s.itl.mean, (0.05 + 0.1) / 2, 1e-12);
  EXPECT_EQ(s.tpot.count, 1);
  EXPECT_EQ(s.ttft.count, 2);
  EXPECT_DOUBLE_EQ(s.output_token_throughput, 6 / 2.0);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
}

TEST(BenchStatsTest, ErrorsAreCountedNotDropped) {
  RequestRecord bad = Record({}, 0.01, 0, false);
  bad.error_kind = "http_429";
  RequestRecord bad2 = bad;
  bad2.error_kind = "timeout";
  BenchSummary s = Summarize({Record({0.1}, 0.2, 3), bad, bad, bad2}, 1.0, {});
  EXPECT_EQ(s.num_requests, 4);
  EXPECT_EQ(s.num_ok, 1);
  EXPECT_EQ(s.errors_by_kind["http_429"], 2);
  EXPECT_EQ(s.errors_by_kind["timeout"], 1);
  EXPECT_EQ(s.e2e.count, 1) << "failed requests are not in the latency figures";
}

TEST(BenchStatsTest, GoodputCountsRequestsMeetingEverySlo) {
  std::vector<RequestRecord> rs = {
      Record({0.1, 0.2}, 0.3, 3),   // ttft 0.1, tpot 0.1, e2e 0.3
      Record({0.5, 0.6}, 0.7, 3),   // ttft too slow
      Record({0.1, 0.9}, 1.9, 3),   // tpot 0.9 too slow
      Record({0.05}, 0.05, 1),      // no tpot: only ttft and e2e apply
  };
  BenchSummary s = Summarize(rs, 2.0, {.ttft_seconds = 0.2, .tpot_seconds = 0.2});
  EXPECT_DOUBLE_EQ(s.goodput, 2 / 2.0);
  BenchSummary e2e_only = Summarize(rs, 2.0, {.e2e_seconds = 0.5});
  EXPECT_DOUBLE_EQ(e2e_only.goodput, 2 / 2.0);
  EXPECT_DOUBLE_EQ(Summarize(rs, 2.0, {}).goodput, 0.0) << "no SLO, no goodput";
}

TEST(BenchStatsTest, TokenCountSourceIsTracked) {
  RequestRecord a = Record({0.1}, 0.2, 2), b = a;
  b.tokens_from_usage = false;
  EXPECT_TRUE(Summarize({a, a}, 1, {}).all_tokens_from_usage);
  EXPECT_FALSE(Summarize({a, b}, 1, {}).all_tokens_from_usage);
}

}  // namespace
}  // namespace tachyon
