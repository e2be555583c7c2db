#include "bench/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/compare.h"

namespace tachyon {
namespace {

// A run of n requests whose TTFT is about base_ms, with a little deterministic spread.
RunFile MakeRun(int n, double base_ms, uint64_t salt) {
  RunFile run;
  run.info.label = "run";
  run.info.workload = "random: test";
  run.info.arrivals = "concurrency 2";
  run.info.duration_seconds = 10;
  run.info.slo.ttft_seconds = 0.2;
  uint64_t x = 12345 + salt;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double jitter = static_cast<double>((x >> 33) % 1000) / 1000.0;  // 0..1
    RequestRecord r;
    r.session = i;
    r.start_seconds = i * 0.1;
    r.ok = true;
    const double ttft = base_ms * (0.8 + 0.4 * jitter) / 1e3;
    r.chunk_seconds = {ttft, ttft + 0.01, ttft + 0.02, ttft + 0.03};
    r.e2e_seconds = ttft + 0.035;
    r.prompt_tokens = 100;
    r.output_tokens = 4;
    run.records.push_back(r);
  }
  RequestRecord failed;
  failed.error_kind = "http_503";
  failed.error_message = "overloaded <now>";
  run.records.push_back(failed);
  run.summary = Summarize(run.records, run.info.duration_seconds, run.info.slo);
  return run;
}

TEST(RunFileTest, RoundTripsEveryRecord) {
  RunFile run = MakeRun(20, 100, 0);
  run.info.slo.e2e_seconds = 1.5;
  run.info.client_lag_p99_seconds = 0.0025;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("run_file_test_" + std::to_string(::getpid()) + ".json")).string();
  ASSERT_TRUE(WriteRunFile(path, run).ok());
  auto back = ReadRunFile(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->records.size(), run.records.size());
  for (size_t i = 0; i < run.records.size(); ++i) {
    EXPECT_EQ(back->records[i].chunk_seconds, run.records[i].chunk_seconds);
    EXPECT_EQ(back->records[i].ok, run.records[i].ok);
    EXPECT_EQ(back->records[i].error_kind, run.records[i].error_kind);
    EXPECT_EQ(back->records[i].error_message, run.records[i].error_message);
  }
  EXPECT_DOUBLE_EQ(*back->info.slo.e2e_seconds, 1.5);
  EXPECT_DOUBLE_EQ(back->info.client_lag_p99_seconds, run.info.client_lag_p99_seconds);
  EXPECT_FALSE(back->info.slo.tpot_seconds.has_value());
  EXPECT_DOUBLE_EQ(back->summary.ttft.p95, run.summary.ttft.p95);
  EXPECT_EQ(back->summary.errors_by_kind.at("http_503"), 1);
}

TEST(RunFileTest, RejectsWhatIsNotARunFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("run_file_bad_" + std::to_string(::getpid()) + ".json")).string();
  for (const char* content : {"{}", "[1,2]", "not json",
                              R"({"format":"tachyon-bench-run","version":1,"info":{},"records":[{"ok":true}]})"}) {
    std::ofstream(path) << content;
    auto r = ReadRunFile(path);
    EXPECT_FALSE(r.ok()) << content;
  }
  std::filesystem::remove(path);
  EXPECT_EQ(ReadRunFile(path).status().code(), StatusCode::kNotFound);
}

TEST(ReportTest, TerminalSummaryShowsMetricsAndErrors) {
  RunFile run = MakeRun(20, 100, 0);
  const std::string text = RenderTerminalSummary(run);
  EXPECT_NE(text.find("20 ok, 1 failed"), std::string::npos) << text;
  EXPECT_NE(text.find("TTFT"), std::string::npos);
  EXPECT_NE(text.find("goodput"), std::string::npos);
  EXPECT_NE(text.find("http_503"), std::string::npos);
  EXPECT_NE(text.find("overloaded <now>"), std::string::npos);
  EXPECT_NE(text.find("client    0% of one core"), std::string::npos) << text;
  EXPECT_EQ(text.find("the client was busy"), std::string::npos);
  run.info.client_cpu_share = 0.97;  // a saturated client is called out
  EXPECT_NE(RenderTerminalSummary(run).find("warning   the client was busy"), std::string::npos);
  EXPECT_NE(RenderHtmlReport(run).find("the client was busy"), std::string::npos);
}

TEST(ReportTest, HtmlIsSelfContainedWithThePlots) {
  RunFile run = MakeRun(50, 100, 0);
  const std::string html = RenderHtmlReport(run);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 5u);
  for (const char* title : {"CDF of TTFT", "CDF of E2E latency", "TTFT over the run", "Output throughput"}) {
    EXPECT_NE(html.find(title), std::string::npos) << title;
  }
  // Nothing to fetch: no scripts, links or external sources.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  // Untrusted text (server messages) is escaped.
  EXPECT_NE(html.find("overloaded &lt;now&gt;"), std::string::npos);
  EXPECT_EQ(html.find("overloaded <now>"), std::string::npos);
  // One dot per successful request on the TTFT-over-time plot.
  size_t dots = 0;
  for (size_t at = html.find("<circle"); at != std::string::npos; at = html.find("<circle", at + 1)) ++dots;
  EXPECT_EQ(dots, 50u);
}

TEST(CompareTest, ARealDifferenceIsSignificantAndNoiseIsNot) {
  RunFile a = MakeRun(200, 100, 1), a2 = MakeRun(200, 100, 2), b = MakeRun(200, 62, 3);
  Comparison faster = CompareRuns(a, b, 500, 0, 0.05);
  auto find = [](const Comparison& c, const std::string& name) {
    for (const MetricComparison& m : c.metrics) {
      if (m.name == name) return m;
    }
    ADD_FAILURE() << name;
    return MetricComparison{};
  };
  MetricComparison p95 = find(faster, "TTFT p95");
  EXPECT_NEAR(p95.ratio, 0.62, 0.03);
  EXPECT_TRUE(p95.has_ci);
  EXPECT_TRUE(p95.significant);
  EXPECT_LT(p95.ci_high, 1);
  EXPECT_LE(p95.ci_low, p95.ratio);
  EXPECT_GE(p95.ci_high, p95.ratio);
  Comparison same = CompareRuns(a, a2, 500, 0, 0.05);
  for (const char* name : {"TTFT p50", "TTFT p95", "TTFT mean", "E2E p95"}) {
    EXPECT_FALSE(find(same, name).significant) << name;
  }
  // ITL is the same 10 ms gaps in both: a ratio of exactly 1, within noise.
  EXPECT_NEAR(find(same, "ITL p50").ratio, 1, 1e-9);
  const std::string table = RenderComparison(faster, "A", "B");
  EXPECT_NE(table.find("TTFT p95 (ms)"), std::string::npos);
  EXPECT_NE(table.find("B better\n"), std::string::npos) << table;
  EXPECT_NE(table.find("-38%"), std::string::npos) << table;
  const std::string md = RenderComparison(faster, "A", "B", true);
  EXPECT_NE(md.find("|---|---|---|---|---|---|---|\n| TTFT mean (ms) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| B better |\n"), std::string::npos) << md;
}

TEST(CompareTest, RatesGetAnIntervalFromTimeSlices) {
  // Every request of A twice in the same 10 s: twice the throughput, clearly.
  RunFile a = MakeRun(200, 100, 4);
  for (size_t i = 0; i < a.records.size(); ++i) a.records[i].start_seconds = 0.05 * static_cast<double>(i);
  RunFile b = a;
  b.records.insert(b.records.end(), a.records.begin(), a.records.end());
  Comparison c = CompareRuns(a, b, 500, 0, 0.05);
  for (const MetricComparison& m : c.metrics) {
    if (m.name == "request throughput" || m.name == "output throughput") {
      EXPECT_NEAR(m.ratio, 2, 1e-9) << m.name;
      EXPECT_TRUE(m.has_ci && m.significant) << m.name;
      EXPECT_GT(m.ci_low, 1.3) << m.name;
    }
    if (m.name == "TTFT p50") {
      EXPECT_FALSE(m.significant) << "the same requests, twice";
    }
  }
}

}  // namespace
}  // namespace tachyon
