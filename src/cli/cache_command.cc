#include "cli/cache_command.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "embed/calibration.h"
#include "embed/pair_verifier.h"
#include "gateway/embedder_spec.h"
#include "http/http_client.h"

namespace tachyon::cli {
namespace {

struct AdminFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string admin_key_env = "TACHYON_ADMIN_KEY";
  std::string route, tenant;
};

// ?route=R&tenant=T, percent-encoded.
std::string AdminQuery(const AdminFlags& flags) {
  auto encode = [](const std::string& v) {
    std::string out;
    for (unsigned char c : v) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
        out.push_back(static_cast<char>(c));
      } else {
        char hex[4];
        std::snprintf(hex, sizeof(hex), "%%%02X", c);
        out += hex;
      }
    }
    return out;
  };
  std::string q;
  if (!flags.route.empty()) q += "route=" + encode(flags.route);
  if (!flags.tenant.empty()) q += std::string(q.empty() ? "" : "&") + "tenant=" + encode(flags.tenant);
  return q.empty() ? "" : "?" + q;
}

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
                            .target = url->path + "/v1/cache" + AdminQuery(flags),
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
  std::string verifier = "off";        // calibrate: on|off; eval: off, or the minimum score
  std::string verifier_weights;        // a file of fit-verifier; empty: the built-in weights
  std::string guards = "off";          // on: every hit; off
  double band = 0;                     // eval: cosines this far under the threshold hit when the guards pass
};

struct Scored {
  std::vector<LabeledPair> pairs;
  std::vector<float> cosines;
  std::vector<PairAlignment> alignments;
  std::string describe;
};

StatusOr<Scored> Score(const CacheFlags& flags) {
  Scored s;
  ASSIGN_OR_RETURN(s.pairs, ReadLabeledPairs(flags.pairs, flags.positive_score));
  ASSIGN_OR_RETURN(std::unique_ptr<Embedder> embedder,
                   MakeEmbedder(flags.embedder, {.threads = flags.threads, .corpus = flags.corpus}, &s.describe));
  ASSIGN_OR_RETURN(s.cosines, PairCosines(*embedder, s.pairs));
  for (const LabeledPair& p : s.pairs) s.alignments.push_back(AlignPair(p.a, p.b));
  return s;
}

StatusOr<PairVerifier> LoadVerifier(const CacheFlags& flags) {
  if (flags.verifier_weights.empty()) return PairVerifier();
  ASSIGN_OR_RETURN(VerifierWeights w, ReadVerifierWeights(flags.verifier_weights));
  return PairVerifier(std::move(w));
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

// What each guard rejects among the pairs at or above `threshold`: paraphrases
// lost and non-paraphrases kept out.
nlohmann::ordered_json GuardEffects(const Scored& s, double threshold) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (std::string_view guard : {"numbers", "negation", "entities"}) {
    int64_t paraphrases = 0, others = 0;
    for (size_t i = 0; i < s.pairs.size(); ++i) {
      if (s.cosines[i] < threshold || GuardRejection(s.alignments[i]) != guard) continue;
      (s.pairs[i].paraphrase ? paraphrases : others) += 1;
    }
    out[std::string(guard)] = {{"rejected_paraphrases", paraphrases}, {"rejected_others", others}};
  }
  return out;
}

// The cosines with every pair the verifier (its scores at verifier_min, 0: none)
// or the guards turn away set below any threshold.
std::vector<float> Gated(const Scored& s, const std::vector<double>& scores, double verifier_min, bool guards) {
  std::vector<float> gated = s.cosines;
  for (size_t i = 0; i < gated.size(); ++i) {
    const bool rejected = (guards && !GuardRejection(s.alignments[i]).empty()) ||
                          (verifier_min > 0 && scores[i] < verifier_min);
    if (rejected) gated[i] = -2.0f;
  }
  return gated;
}

std::string ConfigLine(const CacheFlags& flags, double threshold, double verifier_min) {
  char config[320];
  std::snprintf(config, sizeof(config), "semantic_cache = { embedder = \"%s\", threshold = %.4f", flags.embedder.c_str(),
                threshold);
  std::string line = config;
  if (verifier_min > 0) {
    std::snprintf(config, sizeof(config), ", verifier = %.2f", verifier_min);
    line += config;
    if (!flags.verifier_weights.empty()) line += ", verifier_weights = \"" + flags.verifier_weights + "\"";
  }
  if (flags.guards == "on") line += ", guards = \"all\"";
  return line + " }";
}

int RunCalibrate(const CacheFlags& flags) {
  StatusOr<Scored> s = Score(flags);
  if (!s.ok()) return Fail(s.status().message());
  StatusOr<PairVerifier> verifier = LoadVerifier(flags);
  if (!verifier.ok()) return Fail(verifier.status().message());
  const bool guards = flags.guards == "on";
  // With the verifier: every verifier level from 0.30 to 0.98 is tried, each with
  // its lowest cosine threshold; the pair with the best recall wins.
  std::vector<double> levels = {0};
  if (flags.verifier == "on") {
    levels.clear();
    for (int v = 30; v <= 98; v += 2) levels.push_back(v / 100.0);
  }
  std::vector<double> scores;  // the verifier's, once for every level
  for (const PairAlignment& a : s->alignments) scores.push_back(verifier->Score(a));
  Calibration c;
  double verifier_min = 0;
  std::vector<float> cosines;
  for (double level : levels) {
    std::vector<float> gated = Gated(*s, scores, level, guards);
    Calibration candidate = CalibrateThreshold(gated, s->pairs, flags.target_precision, flags.min_hits, 0);
    if (candidate.best_precision > c.best_precision && !c.reached) {
      c.best_precision = candidate.best_precision;
      c.best_threshold = candidate.best_threshold;
    }
    if (candidate.reached && (!c.reached || candidate.quality.recall > c.quality.recall)) {
      c = candidate;
      verifier_min = level;
      cosines = std::move(gated);
    }
  }
  if (!c.reached) {
    char best[160];
    std::snprintf(best, sizeof(best), " (the best is %.4f, at threshold %.4f)", c.best_precision, c.best_threshold);
    return Fail("no threshold reaches precision " + std::to_string(flags.target_precision) + " with at least " +
                std::to_string(flags.min_hits) + " hits on " + flags.pairs + " with " + s->describe + best);
  }
  c = CalibrateThreshold(cosines, s->pairs, flags.target_precision, flags.min_hits, flags.bootstrap);
  nlohmann::ordered_json out = QualityJson(c.quality, *s, flags);
  out["target_precision"] = flags.target_precision;
  out["threshold_interval"] = {c.threshold_low, c.threshold_high};
  out["bootstrap_runs"] = c.bootstrap_runs;
  out["verifier"] = verifier_min;
  out["guards"] = flags.guards;
  const std::string config = ConfigLine(flags, c.quality.threshold, verifier_min);
  out["config"] = config;
  if (flags.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::printf("%s on %s (%zu pairs, %lld paraphrases), verifier %s, guards %s:\n", s->describe.c_str(),
                flags.pairs.c_str(), s->pairs.size(), static_cast<long long>(c.quality.paraphrases),
                verifier_min > 0 ? ("at " + std::to_string(verifier_min).substr(0, 4)).c_str() : "off",
                flags.guards.c_str());
    std::printf("  lowest threshold with precision >= %.3f: %.4f (bootstrap 95%%: %.4f .. %.4f, %d runs)\n",
                flags.target_precision, c.quality.threshold, c.threshold_low, c.threshold_high, c.bootstrap_runs);
    std::printf("  precision %.4f, recall %.4f, false-hit rate %.4f (%lld hits)\n", c.quality.precision,
                c.quality.recall, c.quality.false_hit_rate, static_cast<long long>(c.quality.hits));
    std::printf("  %s\n", config.c_str());
  }
  return 0;
}

int RunEval(const CacheFlags& flags) {
  StatusOr<Scored> s = Score(flags);
  if (!s.ok()) return Fail(s.status().message());
  StatusOr<PairVerifier> verifier = LoadVerifier(flags);
  if (!verifier.ok()) return Fail(verifier.status().message());
  double verifier_min = 0;
  if (flags.verifier != "off") {
    char* end = nullptr;
    verifier_min = std::strtod(flags.verifier.c_str(), &end);
    if (end == flags.verifier.c_str() || *end != '\0' || verifier_min <= 0 || verifier_min >= 1) {
      return Fail("--verifier: expected off or a score in (0, 1), got " + flags.verifier);
    }
  }
  const HitOptions options{.threshold = flags.threshold,
                           .verifier_min = verifier_min,
                           .band = flags.band,
                           .guards_on_hits = flags.guards == "on"};
  std::vector<float> hits(s->pairs.size());
  for (size_t i = 0; i < hits.size(); ++i) {
    const HitDecision d = DecideHit(s->cosines[i], s->pairs[i].a, s->pairs[i].b, &*verifier, options);
    hits[i] = d.hit ? 1.0f : 0.0f;
  }
  ThresholdQuality q = EvaluateThreshold(hits, s->pairs, 0.5);
  q.threshold = flags.threshold;
  nlohmann::ordered_json out = QualityJson(q, *s, flags);
  out["verifier"] = verifier_min;
  out["guards"] = flags.guards;
  out["band"] = flags.band;
  out["guard_effects"] = GuardEffects(*s, flags.threshold - flags.band);
  if (flags.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::printf("%s on %s (%zu pairs, %lld paraphrases) at threshold %.4f, verifier %s, guards %s, band %.3f:\n",
                s->describe.c_str(), flags.pairs.c_str(), s->pairs.size(), static_cast<long long>(q.paraphrases),
                q.threshold, flags.verifier.c_str(), flags.guards.c_str(), flags.band);
    std::printf("  precision %.4f, recall %.4f, false-hit rate %.4f (%lld hits)\n", q.precision, q.recall,
                q.false_hit_rate, static_cast<long long>(q.hits));
    for (const auto& [guard, effect] : out["guard_effects"].items()) {
      std::printf("  guard %-8s would reject %lld paraphrases and %lld others at or above %.4f\n", guard.c_str(),
                  static_cast<long long>(effect["rejected_paraphrases"].get<int64_t>()),
                  static_cast<long long>(effect["rejected_others"].get<int64_t>()), flags.threshold - flags.band);
    }
  }
  return 0;
}

struct FitFlags {
  std::string pairs;
  double positive_score = 4.0;
  double l2 = 1.0;
  std::string out;
  bool cpp = false;
};

int RunFitVerifier(const FitFlags& flags) {
  StatusOr<std::vector<LabeledPair>> pairs = ReadLabeledPairs(flags.pairs, flags.positive_score);
  if (!pairs.ok()) return Fail(pairs.status().message());
  std::vector<PairAlignment> alignments;
  std::vector<char> labels;
  for (const LabeledPair& p : *pairs) {
    alignments.push_back(AlignPair(p.a, p.b));
    labels.push_back(p.paraphrase);
  }
  VerifierWeights w = FitVerifier(alignments, labels, flags.l2);
  w.source = flags.pairs;
  if (flags.cpp) {
    auto list = [](const std::array<double, kVerifierFeatures>& v) {
      std::string s = "{";
      for (int k = 0; k < kVerifierFeatures; ++k) {
        char x[32];
        std::snprintf(x, sizeof(x), "%s%.9g", k ? ", " : "", v[k]);
        s += x;
      }
      return s + "}";
    };
    std::printf("    v.mean = %s;\n    v.scale = %s;\n    v.weight = %s;\n    v.bias = %.9g;\n", list(w.mean).c_str(),
                list(w.scale).c_str(), list(w.weight).c_str(), w.bias);
  }
  if (!flags.out.empty()) {
    Status s = WriteVerifierWeights(w, flags.out);
    if (!s.ok()) return Fail(s.message());
    std::fprintf(stderr, "tachyon: verifier weights for %zu pairs written to %s\n", pairs->size(), flags.out.c_str());
  }
  if (!flags.cpp && flags.out.empty()) return Fail("give --out FILE or --cpp");
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
  cmd->add_option("--guards", flags->guards,
                  "on: a hit must also pass the guards (same numbers, negation and named entities on both sides)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--verifier-weights", flags->verifier_weights,
                  "Verifier weights written by tachyon cache fit-verifier (default: the built-in ones)");
}

}  // namespace

void AddCacheCommand(CLI::App& app, int* exit_code) {
  CLI::App* cache = app.add_subcommand("cache", "The gateway's caches: calibrate or evaluate a semantic-cache "
                                                "threshold (and its verifier and guards) on labelled pairs, fit the "
                                                "verifier; a running server's cache stats and purge");
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
  calibrate->add_option("--verifier", calibrate_flags->verifier,
                        "on: also choose the verifier's minimum score (the pair of score and threshold with the best "
                        "recall at the target precision)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  calibrate->callback([calibrate_flags, exit_code] { *exit_code = RunCalibrate(*calibrate_flags); });
  auto eval_flags = std::make_shared<CacheFlags>();
  CLI::App* eval = cache->add_subcommand(
      "eval", "Precision, recall and false-hit rate (non-paraphrases that would hit / all non-paraphrases) of one "
              "threshold on labelled pairs");
  AddPairsOptions(eval, eval_flags.get());
  eval->add_option("--threshold", eval_flags->threshold, "Cosine threshold")->required();
  eval->add_option("--verifier", eval_flags->verifier, "off, or the verifier score a hit needs, e.g. 0.9")
      ->capture_default_str();
  eval->add_option("--band", eval_flags->band,
                   "Cosines this far under the threshold hit too when the guards pass (needs --guards on)")
      ->capture_default_str();
  eval->callback([eval_flags, exit_code] { *exit_code = RunEval(*eval_flags); });

  auto fit_flags = std::make_shared<FitFlags>();
  CLI::App* fit = cache->add_subcommand(
      "fit-verifier", "Fit the semantic cache's second-stage verifier (logistic regression over the word alignment of "
                      "two questions) on labelled pairs, e.g. tachyon cache fit-verifier --pairs "
                      "../shared/data/similarity/stsb/sts-train.csv --out verifier.json");
  fit->add_option("--pairs", fit_flags->pairs, "Labelled pairs, as for calibrate")->required();
  fit->add_option("--positive-score", fit_flags->positive_score, "A scored pair is a paraphrase at this score or more")
      ->capture_default_str();
  fit->add_option("--l2", fit_flags->l2, "L2 penalty on the standardized weights")->capture_default_str();
  fit->add_option("--out", fit_flags->out, "Write the weights here (JSON; verifier_weights in a route)");
  fit->add_flag("--cpp", fit_flags->cpp, "Print the weights as the C++ lines of the built-in verifier");
  fit->callback([fit_flags, exit_code] { *exit_code = RunFitVerifier(*fit_flags); });

  for (const char* name : {"stats", "purge"}) {
    auto flags = std::make_shared<AdminFlags>();
    const bool purge = std::string(name) == "purge";
    CLI::App* cmd = cache->add_subcommand(
        name, purge ? "Drop cached entries of a running server, both caches (all, or --route's and/or --tenant's), "
                      "through DELETE /v1/cache"
                    : "Both caches' entries and bytes, by route, of a running server (GET /v1/cache)");
    cmd->add_option("--url", flags->url, "The server")->capture_default_str();
    cmd->add_option("--admin-key-env", flags->admin_key_env, "Environment variable holding the server's --admin-key")
        ->capture_default_str();
    if (purge) {
      cmd->add_option("--route", flags->route, "Only this route's entries");
      cmd->add_option("--tenant", flags->tenant, "Only this tenant's entries");
    }
    cmd->callback([flags, exit_code, purge] { *exit_code = RunAdmin(*flags, purge ? "DELETE" : "GET"); });
  }
}

}  // namespace tachyon::cli
