// SharedLimits against a real redis-server started on a free port (skipped when
// redis-server is not installed) and stopped by its pid: two keyrings stand for
// two gateway replicas.
#include "gateway/keys/shared_limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "gateway/keys/keyring.h"
#include "tests/support/eventually.h"
#include "tests/support/redis_server.h"

namespace tachyon {
namespace {

using testing::Eventually;  // the limits' state lives in redis-server, another process

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

KeyConfig Key(const std::string& name, const std::string& secret) {
  return KeyConfig{.name = name, .sha256 = Sha256(secret), .tenant = name};
}

class SharedLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
    server_ = std::make_unique<testing_util::RedisServer>(testing_util::FreePort());
  }
  std::shared_ptr<SharedLimits> Open(int replicas = 1) {
    StatusOr<std::unique_ptr<SharedLimits>> s = SharedLimits::Open({.url = server_->url(), .replicas = replicas}, &m_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return std::move(*s);
  }
  MetricsRegistry m_;
  std::unique_ptr<testing_util::RedisServer> server_;
};

TEST_F(SharedLimitsTest, TwoReplicasEnforceOneLimitExactly) {
  std::shared_ptr<SharedLimits> a_limits = Open(), b_limits = Open();
  ASSERT_TRUE(a_limits->up());
  KeyConfig k = Key("team-a", "s");
  k.requests_per_minute = 5;
  Keyring a({k}, &m_, a_limits), b({k}, &m_, b_limits);
  int admitted = 0;
  for (int i = 0; i < 3; ++i) {  // 3 + 3: the sixth is refused, whichever replica it reaches
    Keyring::Admission x = Keyring::Admit(*a.Find("s"), 0, Now());
    Keyring::Admission y = Keyring::Admit(*b.Find("s"), 0, Now());
    admitted += x.admitted + y.admitted;
    if (i < 2) {
      EXPECT_TRUE(x.admitted && y.admitted) << i;
    }
    EXPECT_EQ(x.charge.scale, 0) << "charged in Redis";
  }
  EXPECT_EQ(admitted, 5);
  Keyring::Admission refused = Keyring::Admit(*a.Find("s"), 0, Now());
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "requests");
  EXPECT_GT(refused.retry_after, 10) << "the next slot is 12 s after the first";
  // Both replicas' heartbeats are in Redis.
  EXPECT_TRUE(Eventually([&] { return a_limits->replicas() == 2 && b_limits->replicas() == 2; }, 5));
  // /v1/keys reads Redis: every replica's usage.
  const nlohmann::json described = b.Describe(Now());
  EXPECT_EQ(described["limits"]["shared"], true);
  EXPECT_EQ(described["data"][0]["usage"]["remaining_requests"], 0);
}

TEST_F(SharedLimitsTest, TheUsageCorrectsTheTokensInRedis) {
  std::shared_ptr<SharedLimits> a_limits = Open(), b_limits = Open();
  KeyConfig k = Key("tokens", "s");
  k.tokens_per_minute = 1000;
  k.max_tokens_per_day = 100000;
  Keyring a({k}, &m_, a_limits), b({k}, &m_, b_limits);
  Keyring::Admission first = Keyring::Admit(*a.Find("s"), 300, Now());
  ASSERT_TRUE(first.admitted);
  Keyring::Finish(*a.Find("s"), first.charge, 250, 550, 200, Now());  // 800 used: 500 more than estimated
  a_limits->Flush();
  Keyring::Admission second = Keyring::Admit(*b.Find("s"), 300, Now());
  EXPECT_FALSE(second.admitted) << "800 + 300 > 1000, charged on the other replica";
  EXPECT_EQ(second.limit, "tokens");
  EXPECT_EQ(b.Describe(Now())["data"][0]["usage"]["tokens_today"], 800);
}

// The admission script decides as CheckLimits does: the same requests, one
// after the other within milliseconds (a refill of well under one token), get
// the same answers from Redis and from the per-process limiter.
TEST_F(SharedLimitsTest, TheScriptDecidesAsCheckLimits) {
  std::shared_ptr<SharedLimits> limits = Open();
  KeyConfig k = Key("same", "s");
  k.requests_per_minute = 30;
  k.tokens_per_minute = 2000;
  k.max_tokens_per_day = 3000;
  std::mt19937 rng(7);
  LimitCounters local;
  const double t0 = Now();
  int admitted = 0, refused = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t estimate = std::uniform_int_distribution<int64_t>(0, 2200)(rng);
    double retry = 0;
    const LimitHit expected = CheckLimits(k, &local, estimate, 1, t0, &retry);
    SharedLimits::Answer answer;
    ASSERT_TRUE(limits->Admit(k, estimate, &answer));
    EXPECT_EQ(answer.code, static_cast<int>(expected)) << "request " << i << " of " << estimate << " tokens";
    (expected == LimitHit::kNone ? admitted : refused)++;
    EXPECT_NEAR(answer.tokens_used, local.tokens.tat - t0, 0.5);
    EXPECT_EQ(answer.day_tokens, local.day_tokens);
  }
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused, 0);
}

TEST_F(SharedLimitsTest, WhenRedisDiesEachReplicaTakesItsShareThenRedisTakesOver) {
  std::shared_ptr<SharedLimits> a_limits = Open(), b_limits = Open();
  ASSERT_TRUE(Eventually([&] { return a_limits->replicas() == 2; }, 5));
  KeyConfig k = Key("fallback", "s");
  k.requests_per_minute = 4;
  Keyring a({k}, &m_, a_limits);
  ASSERT_TRUE(Keyring::Admit(*a.Find("s"), 0, Now()).admitted);  // 1 of 4 used, in Redis
  server_->Stop();
  // The first request after the kill finds the connection broken: no hang, the fallback answers.
  const auto start = std::chrono::steady_clock::now();
  Keyring::Admission x = Keyring::Admit(*a.Find("s"), 0, Now());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_FALSE(a_limits->up());
  // Its share: 4 / 2 replicas = 2, a quarter of which was used when Redis went: 1 more.
  EXPECT_TRUE(x.admitted);
  EXPECT_EQ(x.charge.scale, 2);
  EXPECT_FALSE(Keyring::Admit(*a.Find("s"), 0, Now()).admitted);
  EXPECT_EQ(m_.Render().find("tachyon:key_limits_shared 0") != std::string::npos, true);
  // Redis comes back (empty): the heartbeat notices, the limits are held there again.
  server_->Start();
  ASSERT_TRUE(Eventually([&] { return a_limits->up(); }, 10));
  Keyring::Admission back = Keyring::Admit(*a.Find("s"), 0, Now());
  EXPECT_TRUE(back.admitted);
  EXPECT_EQ(back.charge.scale, 0);
}

TEST_F(SharedLimitsTest, NeverReachedRedisFallsBackToTheConfiguredShare) {
  server_->Stop();
  std::shared_ptr<SharedLimits> limits = Open(3);
  EXPECT_FALSE(limits->up());
  KeyConfig k = Key("never", "s");
  k.requests_per_minute = 7;
  Keyring a({k}, &m_, limits);
  int admitted = 0;
  for (int i = 0; i < 7; ++i) admitted += Keyring::Admit(*a.Find("s"), 0, Now()).admitted;
  EXPECT_EQ(admitted, 2) << "7 / 3 replicas";
}

}  // namespace
}  // namespace tachyon
