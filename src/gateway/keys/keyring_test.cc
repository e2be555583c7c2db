#include "gateway/keys/keyring.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

KeyConfig Key(const std::string& name, const std::string& secret) {
  return KeyConfig{.name = name, .sha256 = Sha256(secret), .tenant = name};
}

std::string Header(const Keyring::Admission& a, const std::string& name) {
  for (const auto& [k, v] : a.headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(KeyringTest, Sha256AndHex) {
  // FIPS 180-2's example: SHA-256("abc").
  EXPECT_EQ(HexOf(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string bytes;
  ASSERT_TRUE(FromHex("00ff10Ab", &bytes));
  EXPECT_EQ(HexOf(bytes), "00ff10ab");
  EXPECT_FALSE(FromHex("abc", &bytes));
  EXPECT_FALSE(FromHex("zz", &bytes));
}

TEST(KeyringTest, FindsKeysByTheirSecretAndRoutesByGlob) {
  MetricsRegistry m;
  KeyConfig a = Key("team-a", "secret-a");
  a.routes = {"chat", "embed*"};
  Keyring ring({a, Key("team-b", "secret-b")}, &m);
  ASSERT_NE(ring.Find("secret-a"), nullptr);
  EXPECT_EQ(ring.Find("secret-a")->config.name, "team-a");
  EXPECT_EQ(ring.Find("secret-b")->config.name, "team-b");
  EXPECT_EQ(ring.Find("secret-c"), nullptr);
  EXPECT_EQ(ring.Find(""), nullptr);
  EXPECT_TRUE(Keyring::MayUse(*ring.Find("secret-a"), "chat"));
  EXPECT_TRUE(Keyring::MayUse(*ring.Find("secret-a"), "embed-small"));
  EXPECT_FALSE(Keyring::MayUse(*ring.Find("secret-a"), "big"));
  EXPECT_TRUE(Keyring::MayUse(*ring.Find("secret-b"), "big")) << "no routes: every route";
}

TEST(KeyringTest, RequestsPerMinuteIsExactAndSmooth) {
  MetricsRegistry m;
  KeyConfig k = Key("k", "s");
  k.requests_per_minute = 5;
  Keyring ring({k}, &m);
  const Keyring::Key& key = *ring.Find("s");
  const double t0 = 1000;
  for (int i = 0; i < 5; ++i) {
    Keyring::Admission a = ring.Admit(key, 0, t0 + i * 0.1);
    ASSERT_TRUE(a.admitted) << i;
    EXPECT_EQ(Header(a, "x-ratelimit-limit-requests"), "5");
    EXPECT_EQ(Header(a, "x-ratelimit-remaining-requests"), std::to_string(4 - i));
  }
  Keyring::Admission sixth = ring.Admit(key, 0, t0 + 0.5);
  EXPECT_FALSE(sixth.admitted);
  EXPECT_EQ(sixth.limit, "requests");
  EXPECT_EQ(Header(sixth, "x-ratelimit-remaining-requests"), "0");
  // The first slot comes back 12 s (60 / 5) after the first request was charged.
  EXPECT_NEAR(sixth.retry_after, 12 - 0.5, 1e-6);
  EXPECT_EQ(Header(sixth, "retry-after"), "12");
  EXPECT_FALSE(ring.Admit(key, 0, t0 + 11.9).admitted) << "refusals do not count, and do not come early";
  EXPECT_TRUE(ring.Admit(key, 0, t0 + 12.0).admitted);
  EXPECT_FALSE(ring.Admit(key, 0, t0 + 12.1).admitted);
  // After a full quiet minute, 5 again at once (never 10: no window edge to double up on).
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += ring.Admit(key, 0, t0 + 200).admitted;
  EXPECT_EQ(admitted, 5);
  EXPECT_NE(m.Render().find("tachyon:key_limited_total{key=\"k\",limit=\"requests\"} 8"), std::string::npos)
      << m.Render();
}

TEST(KeyringTest, TokensAreEstimatedAtAdmissionAndCorrectedAtTheEnd) {
  MetricsRegistry m;
  KeyConfig k = Key("k", "s");
  k.tokens_per_minute = 1000;
  k.max_tokens_per_day = 1500;
  Keyring ring({k}, &m);
  const Keyring::Key& key = *ring.Find("s");
  const double t0 = 86400 * 100 + 10;  // early in a UTC day
  Keyring::Admission a = ring.Admit(key, 300, t0);
  ASSERT_TRUE(a.admitted);
  EXPECT_EQ(Header(a, "x-ratelimit-remaining-tokens"), "700");
  ring.Finish(key, a.charge, 250, 550, 200, t0);  // 800 used: 500 more than estimated
  Keyring::Admission b = ring.Admit(key, 300, t0 + 1);
  EXPECT_FALSE(b.admitted) << "800 + 300 > 1000 within the minute";
  EXPECT_EQ(b.limit, "tokens");
  EXPECT_TRUE(ring.Admit(key, 300, t0 + 7).admitted) << "6 s on, 100 of the tokens came back";
  Keyring::Admission huge = ring.Admit(key, 5000, t0 + 600);
  EXPECT_FALSE(huge.admitted);
  EXPECT_NE(huge.message.find("more than the key's 1000 tokens per minute"), std::string::npos) << huge.message;
  // The daily budget: 800 + 300 used; 400 more do not fit in 1,500.
  Keyring::Admission day = ring.Admit(key, 401, t0 + 600);
  EXPECT_FALSE(day.admitted);
  EXPECT_EQ(day.limit, "daily_tokens");
  EXPECT_TRUE(ring.Admit(key, 401, t0 + 86400).admitted) << "a new UTC day";
  const std::string text = m.Render();
  EXPECT_NE(text.find("tachyon:key_tokens_total{key=\"k\",kind=\"completion\"} 550"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:key_requests_total{key=\"k\",status=\"200\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:key_requests_total{key=\"k\",status=\"429\"} 3"), std::string::npos) << text;
}

TEST(KeyringTest, AReloadKeepsTheStateOfUnchangedKeys) {
  MetricsRegistry m;
  KeyConfig k = Key("k", "s");
  k.requests_per_minute = 2;
  Keyring old_ring({k}, &m);
  EXPECT_TRUE(old_ring.Admit(*old_ring.Find("s"), 0, 50).admitted);
  EXPECT_TRUE(old_ring.Admit(*old_ring.Find("s"), 0, 50).admitted);
  Keyring next({k, Key("new", "n")}, &m);
  next.Inherit(old_ring);
  EXPECT_FALSE(next.Admit(*next.Find("s"), 0, 51).admitted) << "SIGHUP is no way around a limit";
  const nlohmann::json described = next.Describe(51);
  EXPECT_EQ(described["limits"]["store"], "local");
  const nlohmann::json& keys = described["data"];
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0]["name"], "k");
  EXPECT_EQ(keys[0]["usage"]["remaining_requests"], 0);
  EXPECT_EQ(keys.dump().find(HexOf(Sha256("s"))), std::string::npos) << "never the hash";
}

TEST(KeyringTest, DurationsAsOpenAiWritesThem) {
  EXPECT_EQ(RateLimitDuration(0), "0s");
  EXPECT_EQ(RateLimitDuration(0.012), "12ms");
  EXPECT_EQ(RateLimitDuration(1.5), "1.5s");
  EXPECT_EQ(RateLimitDuration(360), "6m0s");
  EXPECT_EQ(RateLimitDuration(3725), "1h2m5s");
}

}  // namespace
}  // namespace tachyon
