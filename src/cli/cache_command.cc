#include "cli/cache_command.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "embed/calibration.h"
#include "gateway/embedder_spec.h"
#include "http/http_client.h"

namespace tachyon::cli {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "tachyon: error: %s\n", message.c_str());
  return 1;
}

struct AdminFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string admin_key_env = "TACHYON_ADMIN_KEY";
  std::string route;
};

// One request to the server's /v1/cache; prints the answer.
int RunAdmin(const AdminFlags& flags, const std::string& method) {
  StatusOr<HttpUrl> url = ParseHttpUrl(flags.url);
  if (!url.ok()) return Fail("--url: " + url.status().message());
  const char* key = std::getenv(flags.admin_key_env.c_str());
  if (key == nullptr || *key == '\0') return Fail(flags.admin_key_env + " is not set (the server's --admin-key)");
  HttpClient client;
  HttpClientRequest request{.method = method,
                            .host = url->host,
                            .port = url->port,
                            .target = url->path + "/v1/cache" + (flags.route.empty() ? "" : "?route=" + flags.route),
                            .headers = {{"Authorization", std::string("Bearer ") + key}},
                            .timeout_seconds = 30,
                            .tls = url->tls};
  int status = 0;
  std::string body;
  Status done;
  client.Send(std::move(request), {.on_head = [&](const HttpResponseHead& h) { status = h.status; },
                                   .on_data = [&](std::string_view d) { body.append(d); },
                                   .on_done = [&](const Status& s) { done = s; }});
  client.Run();
  if (!done.ok()) return Fail(flags.url + ": " + done.message());
  if (status != 200) return Fail(flags.url + "/v1/cache answered " + std::to_string(status) + ": " + body);
  std::cout << body << "\n";
  return 0;
}

struct CacheFlags {
  std::string pairs;
  std::string embedder = "hash";
  std::vector<std::string> corpus;
  int threads = 1;
  double positive_score = 4.0;
  double target_precision = 0.95;
  double threshold = 0.9;
  int min_hits = 10;
  int bootstrap = 1000;
  bool json = false;
};

struct Scored {
  std::vector<LabeledPair> pairs;
  std::vector<float> cosines;
  std::string describe;
};

StatusOr<Scored> Score(const CacheFlags& flags) {
  Scored s;
  ASSIGN_OR_RETURN(s.pairs, ReadLabeledPairs(flags.pairs, flags.positive_score));
  ASSIGN_OR_RETURN(std::unique_ptr<Embedder> embedder,
                   MakeEmbedder(flags.embedder, {.threads = flags.threads, .corpus = flags.corpus}, &s.describe));
  ASSIGN_OR_RETURN(s.cosines, PairCosines(*embedder, s.pairs));
  return s;
}

nlohmann::ordered_json QualityJson(const ThresholdQuality& q, const Scored& s, const CacheFlags& flags) {
  return {{"embedder", flags.embedder},
          {"embedder_id", s.describe},
          {"pairs_file", flags.pairs},
          {"pairs", s.pairs.size()},
          {"paraphrases", q.paraphrases},
          {"threshold", q.threshold},
          {"precision", q.precision},
          {"recall", q.recall},
          {"false_hit_rate", q.false_hit_rate},
          {"hits", q.hits}};
}

int RunCalibrate(const CacheFlags& flags) {
  StatusOr<Scored> s = Score(flags);
  if (!s.ok()) return Fail(s.status().message());
  const Calibration c =
      CalibrateThreshold(s->cosines, s->pairs, flags.target_precision, flags.min_hits, flags.bootstrap);
  if (!c.reached) {
    char best[160];
    std::snprintf(best, sizeof(best), " (the best is %.4f, at threshold %.4f)", c.best_precision, c.best_threshold);
    return Fail("no threshold reaches precision " + std::to_string(flags.target_precision) + " with at least " +
                std::to_string(flags.min_hits) + " hits on " + flags.pairs + " with " + s->describe + best);
  }
  nlohmann::ordered_json out = QualityJson(c.quality, *s, flags);
  out["target_precision"] = flags.target_precision;
  out["threshold_interval"] = {c.threshold_low, c.threshold_high};
  out["bootstrap_runs"] = c.bootstrap_runs;
  char config[256];
  std::snprintf(config, sizeof(config), "semantic_cache = { embedder = \"%s\", threshold = %.4f }",
                flags.embedder.c_str(), c.quality.threshold);
  out["config"] = config;
  if (flags.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::printf("%s on %s (%zu pairs, %lld paraphrases):\n", s->describe.c_str(), flags.pairs.c_str(), s->pairs.size(),
                static_cast<long long>(c.quality.paraphrases));
    std::printf("  lowest threshold with precision >= %.3f: %.4f (bootstrap 95%%: %.4f .. %.4f, %d runs)\n",
                flags.target_precision, c.quality.threshold, c.threshold_low, c.threshold_high, c.bootstrap_runs);
    std::printf("  precision %.4f, recall %.4f, false-hit rate %.4f (%lld hits)\n", c.quality.precision,
                c.quality.recall, c.quality.false_hit_rate, static_cast<long long>(c.quality.hits));
    std::printf("  %s\n", config);
  }
  return 0;
}

int RunEval(const CacheFlags& flags) {
  StatusOr<Scored> s = Score(flags);
  if (!s.ok()) return Fail(s.status().message());
  const ThresholdQuality q = EvaluateThreshold(s->cosines, s->pairs, flags.threshold);
  if (flags.json) {
    std::cout << QualityJson(q, *s, flags).dump() << "\n";
  } else {
    std::printf("%s on %s (%zu pairs, %lld paraphrases) at threshold %.4f:\n", s->describe.c_str(),
                flags.pairs.c_str(), s->pairs.size(), static_cast<long long>(q.paraphrases), q.threshold);
    std::printf("  precision %.4f, recall %.4f, false-hit rate %.4f (%lld hits)\n", q.precision, q.recall,
                q.false_hit_rate, static_cast<long long>(q.hits));
  }
  return 0;
}

void AddPairsOptions(CLI::App* cmd, CacheFlags* flags) {
  cmd->add_option("--pairs", flags->pairs,
                  "Labelled pairs: JSON lines {\"a\", \"b\", \"label\": 0|1 or \"score\": 0..5}, GPTCache's "
                  "[{\"origin\", \"similar\"}] (all paraphrases), or STS Benchmark TSV")
      ->required();
  cmd->add_option("--embedder", flags->embedder,
                  "hash, hash:DIM, words:VECTORS, local:MODEL.gguf or remote:BASE_URL#MODEL")
      ->capture_default_str();
  cmd->add_option("--corpus", flags->corpus, "words: text files (one text a line) that fit the SIF weights");
  cmd->add_option("--threads", flags->threads, "local: threads")->capture_default_str();
  cmd->add_option("--positive-score", flags->positive_score, "A scored pair is a paraphrase at this score or more")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "One JSON object (threshold, precision, recall, false_hit_rate, pairs, ...)");
}

}  // namespace

void AddCacheCommand(CLI::App& app, int* exit_code) {
  CLI::App* cache = app.add_subcommand("cache", "The gateway's caches: calibrate or evaluate a semantic-cache "
                                                "threshold on labelled pairs; a running server's exact-cache stats "
                                                "and purge");
  cache->require_subcommand(1);
  auto calibrate_flags = std::make_shared<CacheFlags>();
  CLI::App* calibrate = cache->add_subcommand(
      "calibrate", "The lowest cosine threshold whose precision (paraphrase hits / all hits) reaches the target on "
                   "labelled pairs, with its recall, false-hit rate and a bootstrap interval, e.g. tachyon cache "
                   "calibrate --pairs ../shared/data/similarity/stsb/sts-train.csv --embedder hash "
                   "--target-precision 0.95");
  AddPairsOptions(calibrate, calibrate_flags.get());
  calibrate->add_option("--target-precision", calibrate_flags->target_precision, "Precision to reach")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  calibrate->add_option("--min-hits", calibrate_flags->min_hits, "Hits a threshold needs to count")
      ->capture_default_str();
  calibrate->add_option("--bootstrap", calibrate_flags->bootstrap, "Resamples for the threshold's interval")
      ->capture_default_str();
  calibrate->callback([calibrate_flags, exit_code] { *exit_code = RunCalibrate(*calibrate_flags); });
  auto eval_flags = std::make_shared<CacheFlags>();
  CLI::App* eval = cache->add_subcommand(
      "eval", "Precision, recall and false-hit rate (non-paraphrases that would hit / all non-paraphrases) of one "
              "threshold on labelled pairs");
  AddPairsOptions(eval, eval_flags.get());
  eval->add_option("--threshold", eval_flags->threshold, "Cosine threshold")->required();
  eval->callback([eval_flags, exit_code] { *exit_code = RunEval(*eval_flags); });

  for (const char* name : {"stats", "purge"}) {
    auto flags = std::make_shared<AdminFlags>();
    const bool purge = std::string(name) == "purge";
    CLI::App* cmd = cache->add_subcommand(
        name, purge ? "Drop the exact cache's entries of a running server (all, or --route's), through DELETE /v1/cache"
                    : "The exact cache's entries and bytes, by route, of a running server (GET /v1/cache)");
    cmd->add_option("--url", flags->url, "The server")->capture_default_str();
    cmd->add_option("--admin-key-env", flags->admin_key_env, "Environment variable holding the server's --admin-key")
        ->capture_default_str();
    if (purge) cmd->add_option("--route", flags->route, "Only this route's entries");
    cmd->callback([flags, exit_code, purge] { *exit_code = RunAdmin(*flags, purge ? "DELETE" : "GET"); });
  }
}

}  // namespace tachyon::cli
