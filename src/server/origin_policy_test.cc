#include "server/origin_policy.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

HttpRequest Request(const std::string& host, const std::string& origin = "") {
  HttpRequest r{.method = "POST", .target = "/v1/chat/completions"};
  if (!host.empty()) r.headers["host"] = host;
  if (!origin.empty()) r.headers["origin"] = origin;
  return r;
}

using Kind = OriginVerdict::Kind;

TEST(OriginPolicyTest, WithoutAKeyOnlyThisServersHostsAndOriginsPass) {
  const OriginPolicyOptions o{.listen_host = "0.0.0.0"};
  for (const char* host : {"127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "10.1.2.3:8000", "0.0.0.0"}) {
    EXPECT_EQ(CheckOrigin(o, Request(host)).kind, Kind::kPass) << host;
  }
  // DNS rebinding: a name the attacker's page controls, resolved to this machine.
  OriginVerdict v = CheckOrigin(o, Request("evil.example:8000"));
  EXPECT_EQ(v.kind, Kind::kRefuse);
  EXPECT_EQ(v.code, "host_not_allowed");
  EXPECT_NE(v.message.find("evil.example"), std::string::npos);
  // A cross-site page.
  v = CheckOrigin(o, Request("127.0.0.1:8000", "https://evil.example"));
  EXPECT_EQ(v.kind, Kind::kRefuse);
  EXPECT_EQ(v.code, "origin_not_allowed");
  EXPECT_EQ(CheckOrigin(o, Request("127.0.0.1:8000", "null")).kind, Kind::kRefuse);
  // The server's own page (same host and port) needs no CORS.
  EXPECT_EQ(CheckOrigin(o, Request("127.0.0.1:8000", "http://127.0.0.1:8000")).kind, Kind::kPass);
  EXPECT_EQ(CheckOrigin(o, Request("127.0.0.1:8000", "http://127.0.0.1:9000")).kind, Kind::kRefuse);
  // No Host at all (HTTP/1.0): nothing to check.
  EXPECT_EQ(CheckOrigin(o, Request("")).kind, Kind::kPass);
}

TEST(OriginPolicyTest, AllowedHostsAndOriginsAndTheKey) {
  OriginPolicyOptions o{.allowed_origins = {"https://app.example.com"}, .allowed_hosts = {"tachyon.internal"},
                        .listen_host = "127.0.0.1"};
  EXPECT_EQ(CheckOrigin(o, Request("tachyon.internal:8000")).kind, Kind::kPass);
  EXPECT_EQ(CheckOrigin(o, Request("Tachyon.Internal")).kind, Kind::kPass);
  OriginVerdict v = CheckOrigin(o, Request("tachyon.internal", "https://app.example.com"));
  EXPECT_EQ(v.kind, Kind::kCors);
  EXPECT_EQ(v.origin, "https://app.example.com");
  EXPECT_EQ(CheckOrigin(o, Request("tachyon.internal", "https://other.example.com")).kind, Kind::kRefuse);
  // With a key every host passes, and other origins pass without CORS headers (a browser cannot read the answer).
  o.has_api_key = true;
  EXPECT_EQ(CheckOrigin(o, Request("evil.example")).kind, Kind::kPass);
  EXPECT_EQ(CheckOrigin(o, Request("evil.example", "https://other.example.com")).kind, Kind::kPass);
  EXPECT_EQ(CheckOrigin(o, Request("x", "https://app.example.com")).kind, Kind::kCors);
  o = {.allowed_origins = {"*"}, .allowed_hosts = {"*"}};
  EXPECT_EQ(CheckOrigin(o, Request("any.name", "https://any.origin")).kind, Kind::kCors);
  const HttpHeaders preflight = CorsHeaders("https://a.b", true);
  EXPECT_EQ(preflight[0], (std::pair<std::string, std::string>{"Access-Control-Allow-Origin", "https://a.b"}));
  EXPECT_EQ(preflight.size(), 5u);
}

}  // namespace
}  // namespace tachyon
