#include "bench/run_file.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tachyon {
namespace {

using nlohmann::json;

json DistributionJson(const Distribution& d) {
  return {{"mean_ms", d.mean * 1e3}, {"p50_ms", d.p50 * 1e3}, {"p90_ms", d.p90 * 1e3},
          {"p95_ms", d.p95 * 1e3},   {"p99_ms", d.p99 * 1e3}, {"count", d.count}};
}

json OptionalMs(const std::optional<double>& s) { return s ? json(*s * 1e3) : json(nullptr); }

std::optional<double> ReadOptionalMs(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>() / 1e3;
}

}  // namespace

std::string RunFileJson(const RunFile& run) {
  const RunInfo& i = run.info;
  const BenchSummary& s = run.summary;
  json info = {{"label", i.label},
               {"url", i.url},
               {"endpoint", i.endpoint},
               {"model", i.model},
               {"workload", i.workload},
               {"arrivals", i.arrivals},
               {"started_at", i.started_at},
               {"command", i.command},
               {"seed", i.seed},
               {"slo_ms", {{"ttft", OptionalMs(i.slo.ttft_seconds)},
                           {"tpot", OptionalMs(i.slo.tpot_seconds)},
                           {"e2e", OptionalMs(i.slo.e2e_seconds)}}},
               {"duration_s", i.duration_seconds},
               {"stopped_by_duration", i.stopped_by_duration},
               {"stopped_by_interrupt", i.stopped_by_interrupt},
               {"connections_opened", i.connections_opened},
               {"connections_reused", i.connections_reused},
               {"client_cpu_share", i.client_cpu_share},
               {"client_lag_p99_ms", i.client_lag_p99_seconds * 1e3},
               {"client_lag_max_ms", i.client_lag_max_seconds * 1e3}};
  json summary = {{"num_requests", s.num_requests},
                  {"num_ok", s.num_ok},
                  {"errors_by_kind", s.errors_by_kind},
                  {"ttft", DistributionJson(s.ttft)},
                  {"tpot", DistributionJson(s.tpot)},
                  {"itl", DistributionJson(s.itl)},
                  {"e2e", DistributionJson(s.e2e)},
                  {"duration_s", s.duration_seconds},
                  {"request_throughput", s.request_throughput},
                  {"output_token_throughput", s.output_token_throughput},
                  {"goodput", s.goodput},
                  {"total_prompt_tokens", s.total_prompt_tokens},
                  {"total_output_tokens", s.total_output_tokens},
                  {"all_tokens_from_usage", s.all_tokens_from_usage}};
  json records = json::array();
  for (const RequestRecord& r : run.records) {
    records.push_back({{"session", r.session},
                       {"turn", r.turn},
                       {"start_s", r.start_seconds},
                       {"ok", r.ok},
                       {"error_kind", r.error_kind},
                       {"error", r.error_message},
                       {"max_tokens", r.max_tokens},
                       {"prompt_tokens", r.prompt_tokens},
                       {"output_tokens", r.output_tokens},
                       {"tokens_from_usage", r.tokens_from_usage},
                       {"e2e_s", r.e2e_seconds},
                       {"chunks_s", r.chunk_seconds}});
  }
  json out = {{"format", "tachyon-bench-run"}, {"version", 1}, {"info", info}, {"summary", summary},
              {"records", records}};
  return out.dump(1);
}

Status WriteRunFile(const std::string& path, const RunFile& run) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return UnavailableError(path + ": cannot write");
    out << RunFileJson(run) << "\n";
    if (!out) return UnavailableError(path + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return UnavailableError(path + ": " + ec.message());
  return Status::Ok();
}

StatusOr<RunFile> ReadRunFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (!j.is_object() || j.value("format", "") != "tachyon-bench-run") {
    return InvalidArgumentError(path + ": not a run file of tachyon bench (written by --out)");
  }
  if (j.value("version", 0) != 1) return InvalidArgumentError(path + ": unknown run file version");
  if (!j.contains("records") || !j["records"].is_array() || !j.contains("info") || !j["info"].is_object()) {
    return InvalidArgumentError(path + ": 'records' and 'info' are missing");
  }
  RunFile run;
  try {
    const json& i = j["info"];
    run.info.label = i.value("label", "");
    run.info.url = i.value("url", "");
    run.info.endpoint = i.value("endpoint", "");
    run.info.model = i.value("model", "");
    run.info.workload = i.value("workload", "");
    run.info.arrivals = i.value("arrivals", "");
    run.info.started_at = i.value("started_at", "");
    run.info.command = i.value("command", "");
    run.info.seed = i.value("seed", uint64_t{0});
    if (i.contains("slo_ms") && i["slo_ms"].is_object()) {
      run.info.slo = {ReadOptionalMs(i["slo_ms"], "ttft"), ReadOptionalMs(i["slo_ms"], "tpot"),
                      ReadOptionalMs(i["slo_ms"], "e2e")};
    }
    run.info.duration_seconds = i.value("duration_s", 0.0);
    run.info.stopped_by_duration = i.value("stopped_by_duration", false);
    run.info.stopped_by_interrupt = i.value("stopped_by_interrupt", false);
    run.info.connections_opened = i.value("connections_opened", int64_t{0});
    run.info.connections_reused = i.value("connections_reused", int64_t{0});
    run.info.client_cpu_share = i.value("client_cpu_share", 0.0);
    run.info.client_lag_p99_seconds = i.value("client_lag_p99_ms", 0.0) / 1e3;
    run.info.client_lag_max_seconds = i.value("client_lag_max_ms", 0.0) / 1e3;
    for (const json& r : j["records"]) {
      RequestRecord rec;
      rec.session = r.at("session").get<int64_t>();
      rec.turn = r.at("turn").get<int>();
      rec.start_seconds = r.at("start_s").get<double>();
      rec.ok = r.at("ok").get<bool>();
      rec.error_kind = r.value("error_kind", "");
      rec.error_message = r.value("error", "");
      rec.max_tokens = r.value("max_tokens", int64_t{0});
      rec.prompt_tokens = r.at("prompt_tokens").get<int64_t>();
      rec.output_tokens = r.at("output_tokens").get<int64_t>();
      rec.tokens_from_usage = r.value("tokens_from_usage", true);
      rec.e2e_seconds = r.at("e2e_s").get<double>();
      rec.chunk_seconds = r.at("chunks_s").get<std::vector<double>>();
      run.records.push_back(std::move(rec));
    }
  } catch (const json::exception& e) {
    return InvalidArgumentError(path + ": malformed record: " + e.what());
  }
  run.summary = Summarize(run.records, run.info.duration_seconds, run.info.slo);
  return run;
}

}  // namespace tachyon
