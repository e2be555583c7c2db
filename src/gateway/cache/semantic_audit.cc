#include "gateway/cache/semantic_audit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace tachyon {
namespace {

std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::pair<double, double> WilsonInterval(double k, double n, double z) {
  if (n <= 0) return {0, 1};
  const double p = k / n, z2 = z * z;
  const double center = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
  // At k = 0 (k = n) the bound is 0 (1) exactly, not a rounding error away.
  return {k <= 0 ? 0.0 : std::max(0.0, center - half), k >= n ? 1.0 : std::min(1.0, center + half)};
}

SemanticAudit::SemanticAudit(std::string route, double threshold, SemanticAuditOptions options,
                             std::shared_ptr<Embedder> embedder, std::shared_ptr<const PairVerifier> verifier,
                             double verifier_min, MetricsRegistry* metrics)
    : route_(std::move(route)),
      options_(std::move(options)),
      configured_threshold_(threshold),
      threshold_(threshold),
      embedder_(std::move(embedder)),
      verifier_(std::move(verifier)),
      verifier_min_(verifier_min),
      rng_(std::random_device{}()) {
  audits_total_ = &metrics->AddCounter("tachyon:cache_semantic_audits_total",
                                       "Semantic hits audited against a fresh upstream answer, by result", {"route", "result"});
  skipped_ = &metrics->AddCounter("tachyon:cache_semantic_audits_skipped_total",
                                  "Sampled semantic hits not audited: busy (the route's audits at their concurrency), "
                                  "breaker (its backend's breaker open), failed (no fresh answer came)",
                                  {"route", "reason"});
  rate_ = &metrics->AddGauge("tachyon:cache_semantic_false_hit_rate",
                             "The semantic cache's false-hit rate estimated by its audits since the threshold last "
                             "changed: the point estimate and its 95% Wilson interval (lower, upper)",
                             {"route", "estimate"});
  threshold_gauge_ = &metrics->AddGauge("tachyon:cache_semantic_threshold",
                                        "The cosine a semantic hit needs now (raised by auto_threshold)", {"route"})
                          .With({route_});
  threshold_gauge_->Set(threshold);
  std::lock_guard<std::mutex> lock(mutex_);
  PublishLocked();
}

bool SemanticAudit::Begin() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (options_.sample <= 0 || std::uniform_real_distribution<double>(0, 1)(rng_) >= options_.sample) return false;
  }
  if (in_flight_.fetch_add(1) >= options_.concurrency) {
    in_flight_.fetch_sub(1);
    skipped_->With({route_, "busy"}).Add();
    return false;
  }
  return true;
}

void SemanticAudit::End(double similarity, const std::string& cached, const std::optional<std::string>& fresh,
                        bool deterministic, const std::string& why_not) {
  in_flight_.fetch_sub(1);
  if (!fresh) {
    skipped_->With({route_, why_not.empty() ? "failed" : why_not}).Add();
    return;
  }
  Record(similarity, Agree(cached, *fresh, deterministic));
}

bool SemanticAudit::Agree(const std::string& cached, const std::string& fresh, bool deterministic) const {
  if (Trimmed(cached) == Trimmed(fresh)) return true;
  const bool exact = options_.compare == "exact" || (options_.compare == "auto" && deterministic);
  if (exact) return false;
  const std::string texts[2] = {cached, fresh};
  StatusOr<std::vector<float>> v = embedder_->Embed(texts);
  if (!v.ok()) return true;  // no evidence either way: not counted against the cache
  const int dim = embedder_->dimension();
  if (Dot(v->data(), v->data() + dim, dim) < options_.agree) return false;
  return verifier_ == nullptr || verifier_->Score(cached, fresh) >= verifier_min_;
}

void SemanticAudit::Record(double similarity, bool agree) {
  audits_total_->With({route_, agree ? "agree" : "disagree"}).Add();
  std::lock_guard<std::mutex> lock(mutex_);
  samples_.emplace_back(similarity, agree);
  ++audits_;
  if (!agree) ++disagreements_;
  if (samples_.size() > kMaxSamples) {
    audits_ -= 1;
    if (!samples_.front().second) --disagreements_;
    samples_.pop_front();
  }
  const auto [lower, upper] = WilsonInterval(static_cast<double>(disagreements_), static_cast<double>(audits_));
  if (options_.auto_threshold && audits_ >= kMinAudits && lower > options_.max_false_hit_rate) {
    // The lowest cosine at which the audited hits at or above it were wrong at
    // most max_false_hit_rate of the time; above every wrong one when none is.
    std::vector<std::pair<double, bool>> sorted(samples_.begin(), samples_.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const double old = threshold_.load();
    double raised = std::nextafter(sorted.front().first, 2.0);
    size_t n = 0, wrong = 0;
    for (size_t i = 0; i < sorted.size(); ++i) {
      ++n;
      if (!sorted[i].second) ++wrong;
      const bool last_of_value = i + 1 == sorted.size() || sorted[i + 1].first < sorted[i].first;
      if (last_of_value && static_cast<double>(wrong) <= options_.max_false_hit_rate * static_cast<double>(n)) {
        raised = sorted[i].first;
      }
    }
    raised = std::min(1.0, std::max(raised, std::nextafter(old, 2.0)));
    threshold_.store(raised);
    threshold_gauge_->Set(raised);
    ++raises_;
    std::fprintf(stderr,
                 "tachyon: semantic cache of route '%s': %zu of %zu audited hits disagreed (false-hit rate %.4f, 95%% "
                 "interval %.4f..%.4f, above max_false_hit_rate %.4f): threshold raised %.4f -> %.4f\n",
                 route_.c_str(), disagreements_, audits_, static_cast<double>(disagreements_) / audits_, lower, upper,
                 options_.max_false_hit_rate, old, raised);
    // The estimate starts again, from the audited hits the new threshold still lets through.
    std::erase_if(samples_, [&](const auto& s) { return s.first < raised; });
    audits_ = samples_.size();
    disagreements_ = static_cast<size_t>(std::count_if(samples_.begin(), samples_.end(), [](const auto& s) { return !s.second; }));
  }
  PublishLocked();
}

void SemanticAudit::PublishLocked() {
  const double n = static_cast<double>(audits_), k = static_cast<double>(disagreements_);
  const auto [lower, upper] = WilsonInterval(k, n);
  rate_->With({route_, "point"}).Set(n > 0 ? k / n : 0);
  rate_->With({route_, "lower"}).Set(lower);
  rate_->With({route_, "upper"}).Set(upper);
}

nlohmann::json SemanticAudit::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const double n = static_cast<double>(audits_), k = static_cast<double>(disagreements_);
  const auto [lower, upper] = WilsonInterval(k, n);
  return {{"threshold", threshold_.load()},
          {"configured_threshold", configured_threshold_},
          {"raises", raises_},
          {"sample", options_.sample},
          {"audits", audits_},
          {"disagreements", disagreements_},
          {"false_hit_rate", n > 0 ? k / n : 0.0},
          {"interval_95", {lower, upper}},
          {"max_false_hit_rate", options_.max_false_hit_rate},
          {"auto_threshold", options_.auto_threshold}};
}

}  // namespace tachyon
