// The semantic cache's precision, measured live: for a sampled share of a
// route's semantic hits, the gateway also sends the request upstream in the
// background (GatewayCall: never delaying the client, not while the breaker of
// the backend it would use is open) and this compares the fresh answer with
// the one the cache gave:
//   exact    the texts are equal (after trimming): right for a deterministic
//            backend at temperature 0, where any difference is a different answer;
//   similar  the embedder's cosine of the two answers is at least `agree`, and
//            the route's verifier (when it has one) consents: for backends whose
//            answers to one question differ in wording.
// "auto" (the default) is exact for a local engine at temperature 0, else similar.
//
// The audited hits since the threshold last changed give the estimated false-hit
// rate with its 95% Wilson interval (tachyon:cache_semantic_false_hit_rate). With
// auto_threshold, when the interval's lower bound passes max_false_hit_rate (the
// rate is above it with 95% confidence) the route's threshold is raised, in
// memory and logged, to the lowest cosine at which the audited hits at or above
// it were wrong at most max_false_hit_rate of the time (above every wrong one
// when none is); it is never lowered but by a reload.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "embed/embedder.h"
#include "embed/pair_verifier.h"
#include "obs/metrics.h"

namespace tachyon {

struct SemanticAuditOptions {
  double sample = 0;                 // share of hits audited (0: off)
  int concurrency = 4;               // audits in flight at most, per route; more are skipped
  std::string compare = "auto";      // "auto", "exact" or "similar"
  double agree = 0.9;                // "similar": the answers' cosine that agrees
  double max_false_hit_rate = 0.02;
  bool auto_threshold = false;
  bool operator==(const SemanticAuditOptions&) const = default;
};

// The 95% Wilson score interval of a proportion k/n (n > 0).
std::pair<double, double> WilsonInterval(double k, double n, double z = 1.959963984540054);

class SemanticAudit {
 public:
  static constexpr size_t kMinAudits = 20;     // audits before the threshold may move
  static constexpr size_t kMaxSamples = 4096;  // audited hits remembered

  SemanticAudit(std::string route, double threshold, SemanticAuditOptions options,
                std::shared_ptr<Embedder> embedder, std::shared_ptr<const PairVerifier> verifier,
                double verifier_min, MetricsRegistry* metrics);

  // The threshold hits need now (the configured one, or higher once raised).
  double threshold() const { return threshold_.load(); }
  const SemanticAuditOptions& options() const { return options_; }

  // Whether this hit is audited: sampled, and a slot free (then End must follow).
  bool Begin();
  // The audit of a hit of cosine `similarity` ended: the fresh answer (nullopt:
  // none came, for `why_not`: "breaker", "failed") against the cached one.
  // deterministic: the fresh answer came from a local engine at temperature 0.
  void End(double similarity, const std::string& cached, const std::optional<std::string>& fresh,
           bool deterministic, const std::string& why_not);

  // Whether two answers agree, by the options' comparison.
  bool Agree(const std::string& cached, const std::string& fresh, bool deterministic) const;
  // The audited hits and the estimate, for /v1/cache.
  nlohmann::json Stats() const;

 private:
  void Record(double similarity, bool agree);
  void PublishLocked();

  const std::string route_;
  const SemanticAuditOptions options_;
  const double configured_threshold_;
  std::atomic<double> threshold_;
  std::shared_ptr<Embedder> embedder_;
  std::shared_ptr<const PairVerifier> verifier_;
  const double verifier_min_;
  std::atomic<int> in_flight_{0};

  mutable std::mutex mutex_;
  std::mt19937_64 rng_;                          // guarded by mutex_
  std::deque<std::pair<double, bool>> samples_;  // guarded by mutex_: (cosine, agreed), since the last raise
  size_t audits_ = 0, disagreements_ = 0;        // guarded by mutex_: in samples_
  int raises_ = 0;                               // guarded by mutex_

  CounterFamily* audits_total_;   // {route, result}
  CounterFamily* skipped_;        // {route, reason}
  GaugeFamily* rate_;             // {route, estimate}
  Gauge* threshold_gauge_;
};

}  // namespace tachyon
