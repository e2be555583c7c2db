#include "cli/bench_command.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/bench_runner.h"
#include "bench/compare.h"
#include "bench/report.h"
#include "bench/run_file.h"
#include "bench/workload.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

struct BenchFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string endpoint = "completions";
  std::string model;
  std::string api_key;
  std::vector<std::string> headers;
  std::string workload = "random";
  std::string input_len = "256";
  std::string output_len = "128";
  int num_prefixes = 1;
  int64_t prefix_len = 512;
  std::string trace;
  std::string traffic;
  std::vector<std::string> model_map;
  std::vector<std::string> routes;
  double time_scale = 1;
  int64_t max_input_len = 0;
  int64_t max_output_len = 0;
  std::string prompts;
  int turns = 3;
  std::string tokenizer;
  bool prompt_ids = false;
  bool ignore_eos = false;
  bool no_stream = false;
  double temperature = 0;
  std::string extra_body;
  int concurrency = 0;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1;
  int64_t num_requests = 0;
  double duration = 0;
  int64_t warmup = 0;
  uint64_t seed = 0;
  double request_timeout = 600;
  std::string slo;
  std::string out;
  std::string html;
  std::string label;
  bool no_progress = false;
  bool insecure = false;
  std::string ca_file;
  std::string command;
};

struct CompareFlags {
  std::string a, b;
  int resamples = 1000;
  uint64_t seed = 0;
  double min_effect_percent = 5;
  bool markdown = false;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tachyon bench: error: %s\n", message.c_str());
  return 2;
}

// "ttft=500,tpot=50,e2e=10000" (milliseconds).
StatusOr<Slo> ParseSlo(const std::string& spec) {
  Slo slo;
  if (spec.empty()) return slo;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t eq = item.find('=');
    char* end = nullptr;
    const double ms = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    if (eq == std::string::npos || end == item.c_str() + eq + 1 || *end != '\0' || !(ms > 0)) {
      return InvalidArgumentError("--slo: '" + item + "' is not NAME=MS with MS > 0 (names: ttft, tpot, e2e)");
    }
    const std::string name = item.substr(0, eq);
    if (name == "ttft") {
      slo.ttft_seconds = ms / 1e3;
    } else if (name == "tpot") {
      slo.tpot_seconds = ms / 1e3;
    } else if (name == "e2e") {
      slo.e2e_seconds = ms / 1e3;
    } else {
      return InvalidArgumentError("--slo: unknown metric '" + name + "' (ttft, tpot, e2e)");
    }
  }
  return slo;
}

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Thousands of streams need thousands of sockets: take the hard limit.
void RaiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// The first model the server lists, as vllm bench serve does without --model.
StatusOr<std::string> DiscoverModel(const BenchTarget& target, const HttpClientOptions& tls) {
  HttpClient client(tls);
  std::string body;
  int status = 0;
  Status done = Status::Ok();
  HttpClientRequest request{.method = "GET",
                            .host = target.url.host,
                            .port = target.url.port,
                            .target = ApiPath(target, "/models"),
                            .headers = target.headers,
                            .timeout_seconds = 30,
                            .tls = target.url.tls};
  if (!target.api_key.empty()) request.headers.emplace_back("Authorization", "Bearer " + target.api_key);
  client.Send(request, {.on_head = [&](const HttpResponseHead& h) { status = h.status; },
                        .on_data = [&](std::string_view d) { body.append(d); },
                        .on_done = [&](const Status& s) { done = s; }});
  client.Run();
  const std::string where = "GET " + ApiPath(target, "/models");
  if (!done.ok()) {
    const bool tls = done.message().find("TLS handshake") != std::string::npos;
    return UnavailableError(where + ": " + done.message() +
                            (tls ? " (trust its CA with --ca-file, or skip the check with --insecure)"
                                 : " (is the server up? or pass --model)"));
  }
  if (status != 200) {
    return UnavailableError(where + " answered HTTP " + std::to_string(status) + ": " + body.substr(0, 200) +
                            " (pass --model)");
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].is_object() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return UnavailableError(where + ": no model in the answer (pass --model)");
  }
  return j["data"][0]["id"].get<std::string>();
}

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  void Show(const BenchProgress& p) {
    if (!enabled_) return;
    const int width = 30;
    const double frac = p.num_planned > 0 ? std::min(1.0, static_cast<double>(p.num_done) / p.num_planned) : 0;
    const int filled = static_cast<int>(frac * width);
    std::string bar(filled, '#');
    bar += std::string(width - filled, '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld done, %lld failed, %lld in flight, %.1f s ", bar.c_str(),
                 static_cast<long long>(p.num_done), static_cast<long long>(p.num_planned),
                 static_cast<long long>(p.num_failed), static_cast<long long>(p.num_in_flight), p.elapsed_seconds);
    std::fflush(stderr);
    shown_ = true;
  }
  void End() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  bool shown_ = false;
};

// The server and what every request carries, from the flags.
StatusOr<BenchTarget> BuildTarget(const BenchFlags& f) {
  StatusOr<HttpUrl> url = ParseHttpUrl(f.url);
  if (!url.ok()) return InvalidArgumentError("--url " + url.status().message());
  if (f.endpoint != "completions" && f.endpoint != "chat") {
    return InvalidArgumentError("--endpoint must be completions or chat");
  }
  if (f.prompt_ids && f.endpoint == "chat") return InvalidArgumentError("--prompt-ids needs --endpoint completions");
  nlohmann::json extra_body = nlohmann::json::object();
  if (!f.extra_body.empty()) {
    extra_body = nlohmann::json::parse(f.extra_body, nullptr, false);
    if (!extra_body.is_object()) return InvalidArgumentError("--extra-body must be a JSON object");
  }
  if (!(f.request_timeout > 0)) return InvalidArgumentError("--request-timeout must be > 0");
  BenchTarget target{.url = *url,
                     .endpoint = f.endpoint,
                     .model = f.model,
                     .api_key = f.api_key,
                     .ignore_eos = f.ignore_eos,
                     .temperature = f.temperature,
                     .extra_body = std::move(extra_body),
                     .timeout_seconds = f.request_timeout,
                     .stream = !f.no_stream};
  if (target.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY"); env != nullptr) target.api_key = env;
  }
  for (const std::string& h : f.headers) {
    const size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgumentError("--header '" + h + "' is not 'Name: value'");
    }
    std::string value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    target.headers.emplace_back(h.substr(0, colon), value);
  }
  return target;
}

// The workload's options from the flags (the tokenizer, when given, stays owned by the caller).
StatusOr<WorkloadOptions> BuildWorkloadOptions(const BenchFlags& f, const Tokenizer* tokenizer) {
  WorkloadOptions wo{.kind = f.workload,
                     .num_prefixes = f.num_prefixes,
                     .prefix_len = f.prefix_len,
                     .trace_path = f.trace,
                     .time_scale = f.time_scale,
                     .max_input_len = f.max_input_len,
                     .max_output_len = f.max_output_len,
                     .prompts_path = f.prompts,
                     .traffic_path = f.traffic,
                     .routes = f.routes,
                     .num_turns = f.turns,
                     .num_requests = f.num_requests,
                     .seed = f.seed,
                     .tokenizer = tokenizer,
                     .prompt_ids = f.prompt_ids};
  for (const std::string& m : f.model_map) {
    const size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
      return InvalidArgumentError("--model-map '" + m + "' is not OLD=NEW");
    }
    wo.model_map.emplace_back(m.substr(0, eq), m.substr(eq + 1));
  }
  if (f.workload != "replay" && (!f.traffic.empty() || !f.model_map.empty() || !f.routes.empty())) {
    return InvalidArgumentError("--traffic, --model-map and --routes are for --workload replay");
  }
  if (f.workload == "replay" && f.warmup > 0) {
    return InvalidArgumentError("--warmup does not go with --workload replay (it would send the captured requests "
                                "themselves, and fill the caches the replay measures)");
  }
  StatusOr<LengthDist> in = LengthDist::Parse(f.input_len), out = LengthDist::Parse(f.output_len);
  if (!in.ok()) return InvalidArgumentError("--input-len " + in.status().message());
  if (!out.ok()) return InvalidArgumentError("--output-len " + out.status().message());
  wo.input_len = *in;
  wo.output_len = *out;
  return wo;
}

// "concurrency 4", "rate 2/s (Poisson), at most 8 in flight", "the trace's times / 4".
std::string DescribeArrivals(const BenchFlags& f, bool trace_times) {
  char buf[128];
  std::string arrivals = "all at once";
  if (!std::isinf(f.request_rate)) {
    if (f.burstiness == 1) {
      std::snprintf(buf, sizeof(buf), "rate %g/s (Poisson)", f.request_rate);
    } else {
      std::snprintf(buf, sizeof(buf), "rate %g/s (gamma, burstiness %g)", f.request_rate, f.burstiness);
    }
    arrivals = buf;
  } else if (trace_times) {
    std::snprintf(buf, sizeof(buf), "the trace's times / %g", f.time_scale);
    arrivals = f.time_scale != 1 ? std::string(buf) : "the trace's times";
  }
  if (f.concurrency > 0) {
    arrivals = arrivals == "all at once" ? "concurrency " + std::to_string(f.concurrency)
                                         : arrivals + ", at most " + std::to_string(f.concurrency) + " in flight";
  }
  return arrivals;
}

// Warm-up requests have the workload's shape but their own text (another seed), so
// they do not fill a prefix cache with the measured prompts; they run on the
// measured run's client, whose connections stay open for it.
Status Warmup(const BenchFlags& f, WorkloadOptions wo, BenchRunOptions ro, HttpClient& client) {
  wo.seed = f.seed + 0x5EED;
  wo.num_requests = f.warmup;
  StatusOr<std::unique_ptr<Workload>> warm = Workload::Create(wo);
  if (!warm.ok()) return warm.status();
  ro.request_rate = std::numeric_limits<double>::infinity();
  ro.use_trace_times = false;
  ro.duration_seconds = 0;
  if (ro.concurrency <= 0) ro.concurrency = 16;
  std::fprintf(stderr, "tachyon bench: %lld warm-up requests...\n", static_cast<long long>(f.warmup));
  BenchRun w = RunBench(**warm, ro, client);
  int64_t failed = 0;
  for (const RequestRecord& r : w.records) failed += r.ok ? 0 : 1;
  if (failed > 0) std::fprintf(stderr, "tachyon bench: %lld warm-up requests failed\n", static_cast<long long>(failed));
  return Status::Ok();
}

// The terminal summary, then the files asked for.
Status Report(const BenchFlags& f, const RunFile& file) {
  std::printf("%s", RenderTerminalSummary(file).c_str());
  if (!f.out.empty()) {
    Status s = WriteRunFile(f.out, file);
    if (!s.ok()) return s;
    std::printf("\nrecords and summary: %s\n", f.out.c_str());
  }
  if (!f.html.empty()) {
    std::ofstream h(f.html, std::ios::binary | std::ios::trunc);
    h << RenderHtmlReport(file);
    if (!h) return UnavailableError(f.html + ": cannot write");
    std::printf("report: %s\n", f.html.c_str());
  }
  return Status::Ok();
}

int RunBenchCommand(const BenchFlags& f) {
  RaiseFileLimit();
  StatusOr<BenchTarget> target = BuildTarget(f);
  if (!target.ok()) return Fail(target.status().message());
  StatusOr<Slo> slo = ParseSlo(f.slo);
  if (!slo.ok()) return Fail(slo.status().message());
  if (f.concurrency < 0) return Fail("--concurrency must be >= 0");
  if (!(f.request_rate > 0)) return Fail("--request-rate must be > 0 (inf: all at once)");
  if (!(f.burstiness > 0)) return Fail("--burstiness must be > 0");
  if (f.duration < 0 || f.warmup < 0) return Fail("--duration and --warmup must be >= 0");

  std::optional<GgufFile> vocab_file;
  std::unique_ptr<Tokenizer> tokenizer;
  if (!f.tokenizer.empty()) {
    StatusOr<GgufFile> file = GgufFile::Open(f.tokenizer);
    if (!file.ok()) return Fail("--tokenizer " + file.status().message());
    vocab_file.emplace(std::move(file).value());
    StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromGguf(*vocab_file);
    if (!t.ok()) return Fail("--tokenizer " + f.tokenizer + ": " + t.status().message());
    tokenizer = std::move(t).value();
  }
  StatusOr<WorkloadOptions> wo = BuildWorkloadOptions(f, tokenizer.get());
  if (!wo.ok()) return Fail(wo.status().message());
  StatusOr<std::unique_ptr<Workload>> workload = Workload::Create(*wo);
  if (!workload.ok()) return Fail(workload.status().message());

  const HttpClientOptions tls{.verify_peer = !f.insecure, .ca_file = f.ca_file};
  if (target->model.empty() && f.workload != "replay") {  // a replay sends the captured model names
    StatusOr<std::string> model = DiscoverModel(*target, tls);
    if (!model.ok()) return Fail(model.status().message());
    target->model = *model;
  }
  BenchRunOptions ro{.target = *target,
                     .concurrency = f.concurrency,
                     .request_rate = f.request_rate,
                     .burstiness = f.burstiness,
                     .duration_seconds = f.duration,
                     .seed = f.seed};
  HttpClient client(tls);
  if (f.warmup > 0) {
    Status s = Warmup(f, *wo, ro, client);
    if (!s.ok()) return Fail(s.message());
  }

  ProgressBar bar(!f.no_progress && ::isatty(STDERR_FILENO));
  ro.on_progress = [&bar](const BenchProgress& p) { bar.Show(p); };
  ro.stop_on_interrupt = true;
  const std::string endpoint = (target->url.tls ? "https://" : "http://") + target->url.host + ":" +
                               std::to_string(target->url.port) +
                               (f.workload == "replay" ? ApiPath(*target, "") + " (the captured endpoints)"
                                                       : EndpointPath(*target));
  std::fprintf(stderr, "tachyon bench: %s -> %s\n", (*workload)->Describe().c_str(), endpoint.c_str());
  const std::string started = UtcNow();
  BenchRun run = RunBench(**workload, ro, client);
  bar.End();
  if (run.interrupted) std::fprintf(stderr, "tachyon bench: interrupted: the results so far follow\n");

  RunFile file;
  file.info = {.label = !f.label.empty() ? f.label
                        : !f.out.empty() ? std::filesystem::path(f.out).stem().string()
                                         : "bench run",
               .url = f.url,
               .endpoint = f.endpoint,
               .model = target->model,
               .workload = (*workload)->Describe(),
               .arrivals = DescribeArrivals(f, (*workload)->has_arrival_times()),
               .started_at = started,
               .command = f.command,
               .seed = f.seed,
               .slo = *slo,
               .duration_seconds = run.duration_seconds,
               .stopped_by_duration = run.stopped_by_duration,
               .stopped_by_interrupt = run.interrupted,
               .connections_opened = run.client.connections_opened,
               .connections_reused = run.client.connections_reused,
               .client_cpu_share = run.load.cpu_share,
               .client_lag_p99_seconds = run.load.lag_p99_seconds,
               .client_lag_max_seconds = run.load.lag_max_seconds};
  file.records = std::move(run.records);
  file.summary = Summarize(file.records, file.info.duration_seconds, file.info.slo);
  Status reported = Report(f, file);
  if (!reported.ok()) return Fail(reported.message());
  // Exit 1 when nothing succeeded, so scripts notice a dead or misconfigured target.
  return file.summary.num_ok == 0 && file.summary.num_requests > 0 ? 1 : 0;
}

int RunCompare(const CompareFlags& f) {
  StatusOr<RunFile> a = ReadRunFile(f.a);
  if (!a.ok()) return Fail(a.status().message());
  StatusOr<RunFile> b = ReadRunFile(f.b);
  if (!b.ok()) return Fail(b.status().message());
  if (f.resamples < 100) return Fail("--resamples must be >= 100");
  if (f.min_effect_percent < 0) return Fail("--min-effect must be >= 0");
  Comparison c = CompareRuns(*a, *b, f.resamples, f.seed, f.min_effect_percent / 100);
  auto label = [](const RunFile& r, const std::string& path) {
    return r.info.label + " (" + path + "): " + r.info.workload + ", " + r.info.arrivals;
  };
  std::printf("%s", RenderComparison(c, label(*a, f.a), label(*b, f.b), f.markdown).c_str());
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code, const std::string& command_line) {
  auto flags = std::make_shared<BenchFlags>();
  flags->command = command_line;
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Load generator for any OpenAI-compatible server: streams every response, reports TTFT, TPOT, ITL and E2E "
      "(mean/p50/p90/p95/p99, definitions of vllm bench serve), throughput, goodput and errors by kind. "
      "Exit status: 0 when a request succeeded, 1 when none did, 2 for bad flags or no model list. Ctrl-C ends "
      "the run early and reports what was measured.");
  cmd->add_option("--url", flags->url, "server base URL, http:// or https://, with or without /v1")
      ->capture_default_str();
  cmd->add_flag("--insecure", flags->insecure, "https: accept any certificate (no verification)");
  cmd->add_option("--ca-file", flags->ca_file, "https: PEM file of trusted CAs (default: the system's)");
  cmd->add_option("--endpoint", flags->endpoint, "completions or chat")->capture_default_str();
  cmd->add_option("--model", flags->model, "model name to send (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", flags->api_key, "sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)");
  cmd->add_option("--header", flags->headers, "extra request header 'Name: value' (repeatable)");
  cmd->add_option("--workload", flags->workload, "random, shared-prefix, trace, prompts, conversation or replay")
      ->capture_default_str();
  cmd->add_option("--input-len", flags->input_len,
                  "prompt length in tokens (shared-prefix: the unique suffix; conversation: each turn): N, "
                  "uniform:LO:HI, normal:MEAN:STD, lognormal:MEDIAN:SIGMA")
      ->capture_default_str();
  cmd->add_option("--output-len", flags->output_len, "max_tokens of each request, same forms as --input-len")
      ->capture_default_str();
  cmd->add_option("--num-prefixes", flags->num_prefixes, "shared-prefix: distinct prefixes, used round robin")
      ->capture_default_str();
  cmd->add_option("--prefix-len", flags->prefix_len, "shared-prefix: tokens in each prefix")->capture_default_str();
  cmd->add_option("--trace", flags->trace,
                  "trace: Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or Mooncake JSONL (timestamp ms, "
                  "input_length, output_length, hash_ids of 512-token blocks)");
  cmd->add_option("--traffic", flags->traffic,
                  "replay: a capture (tachyon serve --capture): its requests as captured (bodies, endpoints, "
                  "stream flags) at their arrival times; lines without a body get synthetic prompts of their "
                  "captured lengths; --num-requests caps the count (docs/audit.md)");
  cmd->add_option("--model-map", flags->model_map, "replay: send model NEW where the capture says OLD (OLD=NEW, repeatable)");
  cmd->add_option("--routes", flags->routes, "replay: only the requests of these routes");
  cmd->add_option("--limit", flags->num_requests, "replay: at most N requests (the first N by arrival)");
  cmd->add_option("--time-scale", flags->time_scale,
                  "trace, replay: arrival times are divided by this (2 = twice as fast)")
      ->capture_default_str();
  cmd->add_option("--max-input-len", flags->max_input_len,
                  "trace: cap each request's input tokens, for servers with a short context (0: no cap)")
      ->capture_default_str();
  cmd->add_option("--max-output-len", flags->max_output_len, "trace: cap each request's output tokens (0: no cap)")
      ->capture_default_str();
  cmd->add_option("--prompts", flags->prompts,
                  "prompts / conversation: JSONL with prompt, messages, turns (MT-Bench), instruction, text or "
                  "question, and optional max_tokens, tools, tool_choice, parallel_tool_calls, response_format (sent as they are); or a ShareGPT / FastChat JSON array of {conversations: [{from, value}]}, "
                  "one request per human turn with the conversation so far");
  cmd->add_option("--turns", flags->turns, "conversation without --prompts: turns per session")
      ->capture_default_str();
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "GGUF file with the server's vocabulary: exact token lengths (else a token is one common word)");
  cmd->add_flag("--prompt-ids", flags->prompt_ids, "send prompts as token-id arrays (needs --tokenizer)");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "send ignore_eos so every output is exactly max_tokens long");
  cmd->add_flag("--no-stream", flags->no_stream,
                "send \"stream\": false: one JSON answer per request, its TTFT is its E2E (TPOT and ITL need streams)");
  cmd->add_option("--temperature", flags->temperature, "sampling temperature sent")->capture_default_str();
  cmd->add_option("--extra-body", flags->extra_body, "JSON object merged into every request body");
  cmd->add_option("--concurrency", flags->concurrency,
                  "at most N requests in flight (alone: a closed loop); 0: no cap")
      ->capture_default_str();
  cmd->add_option("--request-rate", flags->request_rate,
                  "requests per second, Poisson or gamma gaps (default inf: all at once, or the trace's times)");
  cmd->add_option("--burstiness", flags->burstiness, "gamma shape of the gaps: 1 Poisson, < 1 burstier")
      ->capture_default_str();
  cmd->add_option("--num-requests", flags->num_requests,
                  "requests to send (default: 100, or every line of --trace / --prompts)");
  cmd->add_option("--duration", flags->duration, "seconds; no new request after this (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "requests sent first and not measured (other text, same shape)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "same seed, same requests and arrival times")->capture_default_str();
  cmd->add_option("--request-timeout", flags->request_timeout, "seconds per request, connect to last byte")
      ->capture_default_str();
  cmd->add_option("--slo", flags->slo, "goodput SLOs in ms, e.g. ttft=500,tpot=50,e2e=10000");
  cmd->add_option("--out", flags->out, "write every request record and the summary to this JSON file");
  cmd->add_option("--html", flags->html, "write a self-contained HTML report with plots");
  cmd->add_option("--label", flags->label, "name of this run in reports (default: the --out file name)");
  cmd->add_flag("--no-progress", flags->no_progress, "no progress bar (it is shown only on a terminal anyway)");

  auto compare_flags = std::make_shared<CompareFlags>();
  CLI::App* compare = cmd->add_subcommand(
      "compare", "Compare two runs (--out files): every metric with B/A and a bootstrap 95% interval of the ratio.");
  compare->add_option("A", compare_flags->a, "the baseline run (JSON from --out)")->required();
  compare->add_option("B", compare_flags->b, "the run to judge against A")->required();
  compare->add_option("--resamples", compare_flags->resamples, "bootstrap resamples")->capture_default_str();
  compare->add_option("--seed", compare_flags->seed, "bootstrap seed")->capture_default_str();
  compare->add_option("--min-effect", compare_flags->min_effect_percent,
                      "percent; a smaller change is called negligible even when outside the noise")
      ->capture_default_str();
  compare->add_flag("--markdown", compare_flags->markdown, "print a Markdown table");
  compare->callback([compare_flags, exit_code] { *exit_code = RunCompare(*compare_flags); });
  cmd->require_subcommand(0, 1);
  cmd->callback([compare, flags, exit_code] {
    if (compare->parsed()) return;
    *exit_code = RunBenchCommand(*flags);
  });
}

}  // namespace tachyon::cli
