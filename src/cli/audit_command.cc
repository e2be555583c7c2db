#include "cli/audit_command.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "audit/audit_report.h"
#include "audit/traffic_audit.h"
#include "cli/format.h"
#include "gateway/gateway_config.h"

namespace tachyon::cli {
namespace {

struct AuditFlags {
  std::vector<std::string> files;
  bool json = false;
  std::string html;
  std::string config;
  TrafficAuditOptions options;
  int64_t limit = 0;
};

int RunAudit(AuditFlags& flags) {
  std::optional<GatewayConfig> config;
  if (!flags.config.empty()) {
    StatusOr<GatewayConfig> loaded = LoadGatewayConfig(flags.config);
    if (!loaded.ok()) return Fail(loaded.status().message());
    config = std::move(loaded).value();
    flags.options.config = &*config;
  }
  StatusOr<std::unique_ptr<TrafficAudit>> audit = TrafficAudit::Create(flags.options);
  if (!audit.ok()) return Fail(audit.status().message());
  const auto start = std::chrono::steady_clock::now();
  int64_t requests = 0;
  std::string source;
  for (const std::string& path : flags.files) {
    source += (source.empty() ? "" : " ") + path;
    std::ifstream file;
    std::istream* in = &std::cin;
    if (path != "-") {
      file.open(path, std::ios::binary);
      if (!file) return Fail("cannot read '" + path + "'");
      in = &file;
    }
    std::string line, error;
    CapturedRequest r;
    for (int64_t number = 1; std::getline(*in, line); ++number) {
      if (line.empty() || line == "\r") continue;
      if (flags.limit > 0 && requests >= flags.limit) break;
      ++requests;
      if (ParseCaptureLine(line, &r, &error)) {
        (*audit)->Add(r);
      } else {
        (*audit)->AddMalformed(number, path + ": " + error);
      }
    }
  }
  nlohmann::json report = (*audit)->Finish();
  report["audit_seconds"] =
      std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3) / 1e3;
  if (!flags.html.empty()) {
    std::ofstream out(flags.html, std::ios::binary | std::ios::trunc);
    out << AuditHtml(report, source);
    if (!out) return Fail("cannot write '" + flags.html + "'");
  }
  if (flags.json) {
    std::printf("%s\n", report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(AuditText(report, source).c_str(), stdout);
    if (!flags.html.empty()) std::printf("report written to %s\n", flags.html.c_str());
  }
  return report["requests"].get<int64_t>() > 0 ? 0 : Fail("no chat or completion requests in " + source);
}

}  // namespace

void AddAuditCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<AuditFlags>();
  CLI::App* cmd = app.add_subcommand(
      "audit",
      "Read a traffic capture (tachyon serve --capture, or request logs with the same fields) lever by lever in the "
      "latency playbook's order: streaming, semantic caching, routing, prompt trimming, prefix caching, batching, "
      "quantization, speculative decoding; each with what this traffic says, a recommendation, the config line that "
      "applies it and the TTFT p95 it predicts (docs/audit.md)");
  cmd->add_option("files", flags->files, "Capture files (JSON lines), read in order; - reads stdin")->required();
  cmd->add_flag("--json", flags->json, "Print the report as JSON");
  cmd->add_option("--html", flags->html, "Also write a self-contained HTML report with charts to FILE")
      ->type_name("FILE");
  cmd->add_option("--config", flags->config,
                  "The gateway config the traffic ran under: routes' caches, classify routers and trimmers, "
                  "backends' kinds and local models' weight types");
  cmd->add_option("--embedder", flags->options.embedder,
                  "Embedder SPEC for the semantic comparison of routes without a semantic_cache of their own")
      ->capture_default_str();
  cmd->add_option("--threshold", flags->options.threshold, "Cosine a semantic duplicate needs (with --embedder)")
      ->capture_default_str();
  cmd->add_option("--pairs", flags->options.pairs_path,
                  "Labelled pairs (as tachyon cache calibrate reads): the expected false-hit rate at the threshold");
  cmd->add_option("--router-model", flags->options.router_model,
                  "A tachyon router train file: which requests are small tasks (routes that are not classify routes)");
  cmd->add_option("--small-class", flags->options.small_classes,
                  "Classes (or classifier labels) that are small tasks")
      ->capture_default_str();
  cmd->add_option("--small-ttft-ms", flags->options.small_ttft_ms,
                  "The small model's TTFT when the capture has none of its answers");
  cmd->add_option("--tokenizer", flags->options.tokenizer,
                  "A GGUF file whose tokenizer counts prompt text (default: bytes / 4)");
  cmd->add_option("--documents-budget", flags->options.documents_budget,
                  "Tokens of retrieval documents a request should need at most")
      ->capture_default_str();
  cmd->add_option("--long-output-tokens", flags->options.long_output_tokens, "An answer this long is long")
      ->capture_default_str();
  cmd->add_option("--limit", flags->limit, "Read at most N lines");
  cmd->callback([flags, exit_code] { *exit_code = RunAudit(*flags); });
}

}  // namespace tachyon::cli
