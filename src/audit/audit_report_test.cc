#include "audit/audit_report.h"

#include <gtest/gtest.h>

#include "audit/traffic_audit.h"

namespace tachyon {
namespace {

nlohmann::json Report() {
  auto audit = TrafficAudit::Create({});
  EXPECT_TRUE(audit.ok());
  for (int i = 0; i < 30; ++i) {
    CapturedRequest r;
    r.ts = i;
    r.route = i % 2 ? "chat" : "<script>alert(1)</script>";
    r.endpoint = "/v1/chat/completions";
    r.status = 200;
    r.stream = i % 3 != 0;
    r.ttft_ms = 50 + i;
    r.e2e_ms = 500 + 10 * i;
    r.prompt_tokens = 100 + i;
    r.completion_tokens = 40;
    r.body = {{"model", "chat"}, {"temperature", 0}, {"messages", {{{"role", "user"}, {"content", "q" + std::to_string(i % 5)}}}}};
    (*audit)->Add(r);
  }
  return (*audit)->Finish();
}

TEST(AuditReportTest, TextNamesEveryLeverAndTheRanking) {
  const std::string text = AuditText(Report(), "traffic.jsonl");
  for (const char* lever : {"1. streaming", "2. semantic_cache", "3. routing", "4. prompt_trimming", "5. prefix_caching",
                            "6. continuous_batching", "7. quantization", "8. speculative_decoding"}) {
    EXPECT_NE(text.find(lever), std::string::npos) << lever;
  }
  EXPECT_NE(text.find("Ranked by expected TTFT p95 gain"), std::string::npos);
  EXPECT_NE(text.find("30 requests"), std::string::npos);
}

TEST(AuditReportTest, HtmlIsSelfContainedWithChartsAndEscapesWhatTheTrafficSays) {
  const std::string html = AuditHtml(Report(), "traffic.jsonl");
  for (const char* id : {"ttft-chart", "e2e-chart", "arrivals-chart", "shares-chart", "gains-chart", "levers"}) {
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_EQ(html.find("<script>alert(1)"), std::string::npos) << "a route name is text, not markup";
  EXPECT_NE(html.find("&lt;script&gt;alert(1)"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos) << "nothing loaded from elsewhere";
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

}  // namespace
}  // namespace tachyon
