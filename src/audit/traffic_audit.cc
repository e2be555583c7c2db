#include "audit/traffic_audit.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "api/messages_front.h"
#include "api/responses_front.h"
#include "api/openai.h"
#include "embed/calibration.h"
#include "embed/text_classifier.h"
#include "gateway/cache/exact_cache.h"
#include "gateway/cache/semantic_cache.h"
#include "gateway/embedder_spec.h"
#include "gateway/gateway.h"
#include "gateway/trim/prompt_audit.h"
#include "gguf/gguf_file.h"
#include "model/model_summary.h"

namespace tachyon {
namespace {

constexpr double kNone = -1e300;          // no answer stored
constexpr size_t kBlockBytes = 128;       // prefix blocks (about 32 tokens)
constexpr size_t kMaxPrefixBlocks = 512;  // 64 KiB of prompt text compared at most
constexpr size_t kMaxSystemPrompts = 20000;  // distinct system prompts whose text is kept
constexpr size_t kMaxAuditedPrompts = 200;   // the most used are audited
constexpr double kDefaultHitMs = 2;
constexpr int kMinFit = 20;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

double Round(double v, int digits = 4) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}
double Share(double part, double whole) { return whole > 0 ? Round(part / whole) : 0.0; }

uint64_t Hash(std::string_view s, uint64_t seed = 0) { return XXH3_64bits_withSeed(s.data(), s.size(), seed); }

bool Hosted(const std::string& kind) { return kind == "openai" || kind == "anthropic"; }

std::string Fmt(const char* format, double v) {
  char out[64];
  std::snprintf(out, sizeof(out), format, v);
  return out;
}
std::string Pct(double share) { return Fmt("%.1f%%", share * 100); }

}  // namespace

struct TrafficAudit::Row {
  double ts = -1, ttft = -1, e2e = -1, queue = -1;  // ms but ts
  double prompt_tokens = 0;       // the capture's, else estimated
  double completion_tokens = -1;  // -1: unknown
  double cached_tokens = -1;
  double prompt_units = 0;        // of the prompt text: tokenizer tokens or bytes / 4
  double shared_share = 0;        // of the prompt text in a prefix an earlier request sent
  double recent_share = 0;        // ... sent within the hosted cache's TTL
  double removable_units = 0;     // documents over the budget (+ the system prompt's, at Finish)
  double ngram = -1;
  uint32_t route = 0, backend = 0;
  bool ok = false, stream = false, chat = false, parsed = false;
  bool exact_dup = false, exact_hit = false, semantic_dup = false, semantic_hit = false;
  bool small = false, hosted = false, local = false, capture_hit = false, documents_over = false;

  double Perceived() const { return stream && ttft >= 0 ? ttft : e2e; }
  double TokensPerUnit() const { return prompt_units > 0 ? prompt_tokens / prompt_units : 1; }
};

struct TrafficAudit::RouteState {
  std::string name;
  const RouteConfig* config = nullptr;
  std::shared_ptr<Embedder> embedder;
  std::string embedder_spec;
  double threshold = 0.93, ttl = 3600;
  bool sampled = false;
  bool configured_semantic = false;
  std::shared_ptr<const TaskRouter> router;
  std::vector<bool> small_class;
  std::string router_source;
  VectorIndex* index = nullptr;
  double intercept = 0, slope = 0;  // TTFT ms = intercept + slope x uncached prompt tokens
  int fit_samples = 0;
  bool fitted = false;
};

TrafficAudit::TrafficAudit(TrafficAuditOptions options) : options_(std::move(options)) {}
TrafficAudit::~TrafficAudit() = default;

StatusOr<std::unique_ptr<TrafficAudit>> TrafficAudit::Create(TrafficAuditOptions options) {
  std::unique_ptr<TrafficAudit> audit(new TrafficAudit(std::move(options)));
  RETURN_IF_ERROR(audit->Init());
  return audit;
}

Status TrafficAudit::Init() {
  if (!options_.tokenizer.empty()) {
    StatusOr<std::shared_ptr<const TokenCounter>> counter = TokenCounter::ForModel(options_.tokenizer);
    if (!counter.ok()) return InvalidArgumentError("--tokenizer: " + counter.status().message());
    counter_ = *counter;
  }
  if (options_.config) {
    ASSIGN_OR_RETURN(routers_, BuildTaskRouters(*options_.config));
    for (const BackendConfig& b : options_.config->backends) backend_kind_[b.name] = b.kind;
  }
  if (!options_.router_model.empty()) {
    StatusOr<TextClassifier> loaded = TextClassifier::Load(options_.router_model);
    if (!loaded.ok()) return InvalidArgumentError("--router-model: " + loaded.status().message());
    auto classifier = std::make_shared<const TextClassifier>(std::move(loaded).value());
    StatusOr<std::unique_ptr<Embedder>> embedder = MakeEmbedder(classifier->embedder_spec());
    if (!embedder.ok()) return InvalidArgumentError("--router-model: embedder: " + embedder.status().message());
    TaskRouterOptions o{.classes = classifier->labels(), .classifier = classifier, .embedder = std::move(*embedder)};
    for (size_t i = 0; i < o.classes.size(); ++i) o.label_class.push_back(static_cast<int>(i));
    model_router_ = std::make_shared<const TaskRouter>(std::move(o));
  }
  StatusOr<std::unique_ptr<Embedder>> embedder = MakeEmbedder(options_.embedder);
  if (!embedder.ok()) return InvalidArgumentError("--embedder '" + options_.embedder + "': " + embedder.status().message());
  embedders_[options_.embedder] = std::move(*embedder);
  if (!options_.pairs_path.empty()) {
    StatusOr<std::vector<LabeledPair>> pairs = ReadLabeledPairs(options_.pairs_path);
    if (!pairs.ok()) return InvalidArgumentError("--pairs: " + pairs.status().message());
    StatusOr<std::vector<float>> cosines = PairCosines(*embedders_[options_.embedder], *pairs);
    if (!cosines.ok()) return InvalidArgumentError("--pairs: " + cosines.status().message());
    const ThresholdQuality q = EvaluateThreshold(*cosines, *pairs, options_.threshold);
    false_hit_rate_ = q.hits > 0 ? 1 - q.precision : 0;
    false_hit_note_ = "1 - precision at threshold " + Fmt("%.3f", options_.threshold) + " on " +
                      std::to_string(pairs->size()) + " labelled pairs of " + options_.pairs_path + " (" +
                      std::to_string(q.hits) + " hits)";
  }
  return Status::Ok();
}

TrafficAudit::RouteState& TrafficAudit::Route(const std::string& name) {
  auto [it, added] = route_index_.emplace(name, static_cast<uint32_t>(routes_.size()));
  if (!added) return *routes_[it->second];
  auto state = std::make_unique<RouteState>();
  RouteState& r = *state;
  routes_.push_back(std::move(state));
  r.name = name;
  r.embedder_spec = options_.embedder;
  r.threshold = options_.threshold;
  r.ttl = options_.cache_ttl_seconds;
  if (options_.config) {
    for (const RouteConfig& c : options_.config->routes) {
      if (c.model == name) r.config = &c;
    }
  }
  if (r.config) {
    r.sampled = r.config->cache_sampled;
    if (r.config->exact_cache) r.ttl = r.config->exact_cache_ttl;
    if (r.config->semantic_cache) {
      r.embedder_spec = r.config->semantic_cache->embedder;
      r.threshold = r.config->semantic_cache->threshold;
      r.configured_semantic = true;
    }
  }
  std::shared_ptr<Embedder>& embedder = embedders_[r.embedder_spec];
  if (!embedder) {
    StatusOr<std::unique_ptr<Embedder>> made = MakeEmbedder(r.embedder_spec);
    if (made.ok()) {
      embedder = std::move(*made);
    } else {  // the route's embedder cannot be made here: the audit's own
      std::fprintf(stderr, "tachyon audit: route '%s': embedder '%s': %s; using '%s'\n", name.c_str(),
                   r.embedder_spec.c_str(), made.status().message().c_str(), options_.embedder.c_str());
      r.embedder_spec = options_.embedder;
      r.threshold = options_.threshold;
    }
  }
  r.embedder = embedders_[r.embedder_spec];
  std::unique_ptr<VectorIndex>& index = indexes_[r.embedder_spec];
  if (!index) index = std::make_unique<VectorIndex>(r.embedder->dimension());
  r.index = index.get();
  auto router = routers_.find(name);
  if (router != routers_.end()) {
    r.router = router->second;
    r.router_source = "the route's classify rules and classifier";
  } else if (model_router_) {
    r.router = model_router_;
    r.router_source = "--router-model " + options_.router_model;
  }
  if (r.router) {
    for (const std::string& c : r.router->classes()) {
      r.small_class.push_back(std::find(options_.small_classes.begin(), options_.small_classes.end(), c) !=
                              options_.small_classes.end());
    }
  }
  return r;
}

double TrafficAudit::PromptUnits(const std::string& text) const {
  return counter_ ? static_cast<double>(counter_->Count(text)) : static_cast<double>(text.size()) / 4;
}

void TrafficAudit::AddMalformed(int64_t line_number, const std::string& error) {
  ++lines_;
  ++malformed_;
  if (malformed_samples_.size() < 5) malformed_samples_.push_back("line " + std::to_string(line_number) + ": " + error);
}

void TrafficAudit::Add(const CapturedRequest& r) {
  ++lines_;
  const bool messages = r.endpoint == "/v1/messages";
  const bool chat = messages || r.endpoint == "/v1/chat/completions" || r.endpoint == "/v1/responses";
  if (!chat && r.endpoint != "/v1/completions") {
    ++other_endpoints_;
    return;
  }
  if (r.status >= 400 && r.status < 500) {  // refused (bad body, limits): no latency to read
    ++refused_;
    return;
  }
  RouteState& route = Route(r.route);
  Row row;
  row.route = route_index_[r.route];
  {
    auto [it, added] = backend_index_.emplace(r.backend, static_cast<uint32_t>(backends_.size()));
    if (added) backends_.push_back(r.backend);
    row.backend = it->second;
  }
  std::string kind = r.backend_kind;
  if (kind.empty()) {
    auto k = backend_kind_.find(r.backend);
    if (k != backend_kind_.end()) kind = k->second;
  } else if (!r.backend.empty()) {
    backend_kind_.emplace(r.backend, kind);
  }
  row.hosted = Hosted(kind);
  row.local = kind == "local";
  row.ts = r.ts;
  row.ttft = r.ttft_ms;
  row.e2e = r.e2e_ms;
  row.queue = r.queue_ms;
  row.ok = r.error.empty() && (r.status == 200 || r.status == 0);
  row.stream = r.stream;
  row.chat = chat;
  row.completion_tokens = static_cast<double>(r.completion_tokens);
  row.cached_tokens = static_cast<double>(r.cached_tokens);
  row.capture_hit = r.cache == "hit";
  row.ngram = r.output_ngram_share;
  Extract(r, route, row);
  row.prompt_tokens = r.prompt_tokens >= 0 ? static_cast<double>(r.prompt_tokens) : row.prompt_units;
  rows_.push_back(row);
}

void TrafficAudit::Extract(const CapturedRequest& r, RouteState& route, Row& row) {
  if (!r.body.is_object()) {
    ++without_body_;
    return;
  }
  const bool messages = r.endpoint == "/v1/messages";
  const Endpoint endpoint = r.endpoint == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions;
  std::string text = r.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (messages) {
    auto chat = ChatBodyFromMessagesRequest(text);
    if (chat.index() != 0) {
      ++unreadable_bodies_;
      return;
    }
    text = std::get<0>(chat).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else if (r.endpoint == "/v1/responses") {  // the request alone: an earlier turn it continues is not in the line
    auto responses = ParseResponsesRequest(text);
    if (responses.index() != 0) {
      ++unreadable_bodies_;
      return;
    }
    text = ChatBodyFromResponses(std::get<0>(responses), nlohmann::json::array())
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  auto parsed = ParseCompletionRequest(text, endpoint);
  if (parsed.index() != 0) {
    ++unreadable_bodies_;
    return;
  }
  const CompletionRequest& request = std::get<0>(parsed);
  row.parsed = true;
  const uint32_t row_id = static_cast<uint32_t>(rows_.size());
  const bool cacheable = (request.sampling.temperature == 0 || route.sampled) && request.n == 1;

  // Lever 2: the exact cache's key, then the semantic cache's scope and question.
  {
    auto [it, added] = exact_.try_emplace(Hash(ExactCacheKeyText(request, route.name, r.tenant)));
    ExactEntry& e = it->second;
    row.exact_dup = !added;
    if (cacheable && e.stored != kNone && r.ts - e.stored <= route.ttl) {
      row.exact_hit = true;
    } else if (cacheable && row.ok) {
      e.stored = r.ts;
    }
  }
  std::string question, scope;
  if (SemanticKey(request, route.name, r.tenant, &question, &scope)) {
    const uint64_t scope_hash = Hash(scope, Hash(route.embedder_spec));
    const uint64_t question_hash = Hash(question, scope_hash);
    // The entry whose answer this request would get: the same question's, else the
    // nearest earlier one's at or above the threshold, else a new entry of its own.
    int64_t entry = -1;
    auto known = questions_.find(question_hash);
    if (known != questions_.end()) {
      row.semantic_dup = true;
      entry = static_cast<int64_t>(known->second);
    } else {
      StatusOr<std::vector<float>> vector = route.embedder->Embed(std::span<const std::string>(&question, 1));
      if (vector.ok()) {
        char partition[24];
        std::snprintf(partition, sizeof(partition), "%016llx", static_cast<unsigned long long>(scope_hash));
        auto nearest = route.index->Search(partition, vector->data(), 1);
        if (!nearest.empty() && nearest[0].second >= route.threshold) {
          row.semantic_dup = true;
          entry = static_cast<int64_t>(nearest[0].first);
        } else if (entry_stored_.size() < options_.max_semantic_entries) {
          entry = static_cast<int64_t>(entry_stored_.size());
          entry_stored_.push_back(kNone);
          route.index->Add(partition, static_cast<uint64_t>(entry), vector->data());
        } else {
          semantic_capped_ = true;
        }
        if (entry >= 0) questions_.emplace(question_hash, static_cast<uint64_t>(entry));
      }
    }
    if (row.exact_hit) {
      row.semantic_hit = true;
    } else if (entry >= 0) {
      double& stored = entry_stored_[static_cast<size_t>(entry)];
      if (cacheable && stored != kNone && r.ts - stored <= route.ttl) {
        row.semantic_hit = true;
      } else if (cacheable && row.ok) {
        stored = r.ts;
      }
    }
  } else {
    row.semantic_hit = row.exact_hit;
  }
  // Lever 3: the router's decision, else the length rule.
  if (route.router) {
    const RouteDecision d = route.router->Decide(request);
    row.small = d.class_idx >= 0 && static_cast<size_t>(d.class_idx) < route.small_class.size() &&
                route.small_class[d.class_idx];
  }

  // Lever 4: the system prompt, and retrieval documents.
  std::string system, prompt_text;
  if (endpoint == Endpoint::kChatCompletions) {
    for (const ChatMessage& m : request.messages) {
      if (m.role == "system" || m.role == "developer") system += m.content + "\n";
    }
  }
  if (!system.empty()) {
    SystemPrompt& p = system_prompts_[Hash(system)];
    if (p.requests == 0 && system_prompts_.size() <= kMaxSystemPrompts) {
      p.text = system;
      p.units = PromptUnits(system);
    }
    ++p.requests;
    p.rows.push_back(row_id);
  }
  auto documents = request.body.find("documents");
  if (documents != request.body.end() && documents->is_array()) {
    double units = 0;
    for (const auto& d : *documents) {
      if (d.is_object() && d.contains("text") && d["text"].is_string()) units += PromptUnits(d["text"].get<std::string>());
    }
    if (units > static_cast<double>(options_.documents_budget)) {
      row.documents_over = true;
      row.removable_units += units - static_cast<double>(options_.documents_budget);
    }
  }

  // Lever 5: the prompt as a provider's cache sees it (tools, then the messages in order), by blocks.
  if (!request.tools.empty()) prompt_text = request.tools.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (endpoint == Endpoint::kChatCompletions) {
    for (const ChatMessage& m : request.messages) prompt_text.append(m.role).append(":").append(m.content).append("\n");
  } else {
    prompt_text = request.prompt;
  }
  if (documents != request.body.end()) prompt_text += documents->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  row.prompt_units = PromptUnits(prompt_text);
  size_t shared = 0, recent = 0;
  bool intact = true, recent_intact = true;
  uint64_t chain = 0x7461636879;
  const size_t blocks = std::min(prompt_text.size() / kBlockBytes, kMaxPrefixBlocks);
  for (size_t b = 0; b < blocks; ++b) {
    chain = Hash(std::string_view(prompt_text).substr(b * kBlockBytes, kBlockBytes), chain);
    auto [it, added] = blocks_.emplace(chain, r.ts);
    if (added) intact = false;
    if (intact) {
      shared += kBlockBytes;
      if (recent_intact && r.ts - it->second <= options_.hosted_cache_ttl_seconds) {
        recent += kBlockBytes;
      } else {
        recent_intact = false;
      }
    }
    it->second = r.ts;
  }
  if (!prompt_text.empty()) {
    row.shared_share = static_cast<double>(shared) / static_cast<double>(prompt_text.size());
    row.recent_share = static_cast<double>(recent) / static_cast<double>(prompt_text.size());
  }
  return;
}

template <typename Fn>
double TrafficAudit::PredictedTtftP95(Fn fn) const {
  std::vector<double> v;
  v.reserve(rows_.size());
  for (const Row& row : rows_) {
    const double now = row.Perceived();
    if (now < 0) continue;
    const double next = fn(row, now);
    v.push_back(next >= 0 ? next : now);
  }
  return Percentile(std::move(v), 95);
}

double TrafficAudit::Slope(const Row& row) const { return routes_[row.route]->slope; }

nlohmann::json TrafficAudit::Totals() {
  nlohmann::json out;
  std::vector<double> ttft, e2e;
  double first = 1e300, last = -1e300;
  std::vector<std::vector<double>> route_ttft(routes_.size()), route_e2e(routes_.size());
  for (const Row& row : rows_) {
    if (row.Perceived() >= 0) {
      ttft.push_back(row.Perceived());
      route_ttft[row.route].push_back(row.Perceived());
    }
    if (row.e2e >= 0) {
      e2e.push_back(row.e2e);
      route_e2e[row.route].push_back(row.e2e);
    }
    if (row.ts >= 0) {
      first = std::min(first, row.ts);
      last = std::max(last, row.ts + std::max(0.0, row.e2e) / 1e3);
    }
  }
  out["requests"] = rows_.size();
  out["duration_s"] = last > first ? Round(last - first, 3) : 0.0;
  out["ttft_p50_ms"] = Round(Percentile(ttft, 50), 2);
  out["ttft_p95_ms"] = Round(Percentile(ttft, 95), 2);
  out["e2e_p50_ms"] = Round(Percentile(e2e, 50), 2);
  out["e2e_p95_ms"] = Round(Percentile(e2e, 95), 2);
  out["lines"] = lines_;
  out["malformed_lines"] = malformed_;
  if (!malformed_samples_.empty()) out["malformed_examples"] = malformed_samples_;
  out["other_endpoints"] = other_endpoints_;
  out["refused"] = refused_;
  out["requests_without_body"] = without_body_;
  out["unreadable_bodies"] = unreadable_bodies_;
  out["prompt_units"] = counter_ ? "tokens of " + counter_->description() : "bytes / 4";
  nlohmann::json routes = nlohmann::json::object();
  for (size_t i = 0; i < routes_.size(); ++i) {
    const RouteState& r = *routes_[i];
    nlohmann::json j = {{"requests", route_ttft[i].size()},
                        {"ttft_p50_ms", Round(Percentile(route_ttft[i], 50), 2)},
                        {"ttft_p95_ms", Round(Percentile(route_ttft[i], 95), 2)},
                        {"e2e_p50_ms", Round(Percentile(route_e2e[i], 50), 2)},
                        {"e2e_p95_ms", Round(Percentile(route_e2e[i], 95), 2)}};
    if (r.fitted) {
      j["ttft_model"] = {{"intercept_ms", Round(r.intercept, 3)},
                         {"ms_per_prompt_token", Round(r.slope, 5)},
                         {"samples", r.fit_samples}};
    }
    routes[r.name.empty() ? "(none)" : r.name] = j;
  }
  out["routes"] = routes;
  return out;
}

// For the report's charts: TTFT and E2E histograms over log-spaced bins, and
// arrivals over time in at most 120 buckets.
nlohmann::json TrafficAudit::Distributions() const {
  auto histogram = [&](bool e2e) {
    std::vector<double> v;
    for (const Row& row : rows_) {
      const double x = e2e ? row.e2e : row.Perceived();
      if (x >= 0) v.push_back(std::max(x, 0.01));
    }
    nlohmann::json h = {{"edges_ms", nlohmann::json::array()}, {"counts", nlohmann::json::array()}};
    if (v.empty()) return h;
    const double lo = std::log10(*std::min_element(v.begin(), v.end()));
    const double hi = std::log10(*std::max_element(v.begin(), v.end())) + 1e-9;
    const int bins = 40;
    const double width = std::max((hi - lo) / bins, 1e-6);
    std::vector<int64_t> counts(bins, 0);
    for (double x : v) counts[std::min(bins - 1, static_cast<int>((std::log10(x) - lo) / width))]++;
    for (int i = 0; i <= bins; ++i) h["edges_ms"].push_back(Round(std::pow(10.0, lo + width * i), 3));
    h["counts"] = counts;
    return h;
  };
  double first = 1e300, last = -1e300;
  for (const Row& row : rows_) {
    if (row.ts < 0) continue;
    first = std::min(first, row.ts);
    last = std::max(last, row.ts);
  }
  nlohmann::json arrivals = {{"bucket_s", 0}, {"counts", nlohmann::json::array()}};
  if (last >= first) {
    const double span = std::max(last - first, 1e-3);
    const double nice[] = {0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400};
    double bucket = nice[0];
    for (double b : nice) {
      bucket = b;
      if (span / b <= 120) break;
    }
    // Beyond 120 days, whole days: still at most ~121 buckets, however far apart the
    // first and last arrivals of a file are.
    if (span / bucket > 120) bucket = std::ceil(span / 120 / 86400) * 86400;
    std::vector<int64_t> counts(static_cast<size_t>(span / bucket) + 1, 0);
    for (const Row& row : rows_) {
      if (row.ts >= 0) counts[std::min(counts.size() - 1, static_cast<size_t>((row.ts - first) / bucket))]++;
    }
    arrivals = {{"bucket_s", bucket}, {"start_ts", first}, {"counts", counts}};
  }
  return {{"ttft_ms", histogram(false)}, {"e2e_ms", histogram(true)}, {"arrivals", arrivals}};
}

nlohmann::json TrafficAudit::Streaming() {
  int64_t whole = 0, whole_chat = 0;
  std::vector<double> ratios, stream_ttft;
  for (const Row& row : rows_) {
    if (!row.stream) {
      ++whole;
      whole_chat += row.chat;
    } else if (row.ok && row.ttft >= 0 && row.e2e > 0) {
      ratios.push_back(row.ttft / row.e2e);
      stream_ttft.push_back(row.ttft);
    }
  }
  const double share = Share(static_cast<double>(whole), static_cast<double>(rows_.size()));
  const double ratio = ratios.size() >= 10 ? Percentile(ratios, 50) : -1;
  std::string basis;
  const double predicted = PredictedTtftP95([&](const Row& row, double) {
    if (row.stream || !row.chat || !row.ok || row.e2e < 0) return -1.0;
    const RouteState& r = *routes_[row.route];
    if (r.fitted) return r.intercept + r.slope * std::max(0.0, row.prompt_tokens - std::max(0.0, row.cached_tokens));
    return ratio >= 0 ? row.e2e * ratio : -1.0;
  });
  nlohmann::json j = {{"step", 1},
                      {"lever", "streaming"},
                      {"non_streaming_share", share},
                      {"non_streaming_chat_share", Share(static_cast<double>(whole_chat), static_cast<double>(whole))},
                      {"streamed_ttft_p95_ms", Round(Percentile(stream_ttft, 95), 2)},
                      {"predicted_ttft_p95_ms", Round(predicted, 2)},
                      {"basis", "a whole answer's perceived wait is its E2E; streamed, its TTFT would follow the "
                                "route's TTFT model, else the streamed answers' median TTFT/E2E ratio" +
                                    (ratio >= 0 ? " (" + Fmt("%.3f", ratio) + ")" : std::string(" (none streamed)"))}};
  const double chat_share = static_cast<double>(whole_chat) / std::max<double>(1, static_cast<double>(rows_.size()));
  if (chat_share >= 0.05) {
    j["recommendation"] = Pct(chat_share) + " of requests are chat answered whole: the user waits for the whole "
                          "answer. Stream them so the first words show at TTFT.";
    j["config"] = "\"stream\": true in the client's request body (and \"stream_options\": {\"include_usage\": true})";
  } else {
    j["recommendation"] = "Chat traffic already streams" + std::string(whole > 0 ? " (the whole answers are not chat)" : "") +
                          ": nothing to do.";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::SemanticCache() {
  int64_t parsed = 0, exact_dup = 0, exact_hit = 0, semantic_dup = 0, semantic_hit = 0;
  std::vector<double> hit_ttft;
  for (const Row& row : rows_) {
    if (row.capture_hit && row.Perceived() >= 0) hit_ttft.push_back(row.Perceived());
    if (!row.parsed) continue;
    ++parsed;
    exact_dup += row.exact_dup;
    exact_hit += row.exact_hit;
    semantic_dup += row.semantic_dup;
    semantic_hit += row.semantic_hit;
  }
  const double hit_ms = hit_ttft.size() >= 5 ? Percentile(hit_ttft, 50) : kDefaultHitMs;
  const double predicted = PredictedTtftP95([&](const Row& row, double) {
    return row.semantic_hit && !row.capture_hit ? hit_ms : -1.0;
  });
  const double n = static_cast<double>(parsed);
  const double semantic_only = static_cast<double>(semantic_hit - exact_hit);
  nlohmann::json j = {{"step", 2},
                      {"lever", "semantic_cache"},
                      {"exact_duplicate_share", Share(static_cast<double>(exact_dup), n)},
                      {"semantic_duplicate_share", Share(static_cast<double>(semantic_dup), n)},
                      {"exact_hit_rate", Share(static_cast<double>(exact_hit), n)},
                      {"semantic_hit_rate", Share(static_cast<double>(semantic_hit), n)},
                      {"requests_compared", parsed},
                      {"embedder", options_.embedder},
                      {"threshold", options_.threshold},
                      {"hit_ttft_ms", Round(hit_ms, 2)},
                      {"predicted_ttft_p95_ms", Round(predicted, 2)},
                      {"basis", "hits are answered at the capture's own cache-hit TTFT (else 2 ms); a hit needs an "
                                "earlier successful answer within the TTL, temperature 0 (unless the route caches "
                                "sampled answers) and n = 1"}};
  nlohmann::json per_route = nlohmann::json::object();
  for (const auto& r : routes_) {
    if (r->configured_semantic) per_route[r->name] = {{"embedder", r->embedder_spec}, {"threshold", r->threshold}};
  }
  if (!per_route.empty()) j["route_embedders"] = per_route;
  if (false_hit_rate_) {
    j["expected_false_hit_rate"] = Round(*false_hit_rate_);
    j["expected_false_hits_share"] = Round(*false_hit_rate_ * semantic_only / std::max(1.0, n));
    j["false_hit_basis"] = false_hit_note_;
  } else {
    j["expected_false_hit_rate"] = nullptr;
    j["false_hit_basis"] = "no labelled pairs given (--pairs FILE, as tachyon cache calibrate reads)";
  }
  if (semantic_capped_) j["note"] = "more distinct questions than --max-semantic-entries: later ones were only searched";
  const double exact_rate = static_cast<double>(exact_hit) / std::max(1.0, n);
  const double semantic_rate = semantic_only / std::max(1.0, n);
  std::string rec, config;
  if (exact_rate >= 0.02) {
    rec += Pct(exact_rate) + " of requests repeat an earlier one exactly: turn on the exact cache. ";
    config += "exact_cache = true";
  }
  if (semantic_rate >= 0.02) {
    rec += Pct(semantic_rate) + " more ask an earlier question in other words: a semantic cache would answer them";
    rec += false_hit_rate_ ? " (expect " + Pct(*false_hit_rate_) + " of those hits to be wrong answers). "
                           : " (calibrate the threshold on your own pairs first: tachyon cache calibrate). ";
    if (!config.empty()) config += "; ";
    config += "semantic_cache = { embedder = \"" + options_.embedder + "\", threshold = " +
              Fmt("%.2f", options_.threshold) + " }";
  }
  if (rec.empty()) rec = "Few repeats (" + Pct(static_cast<double>(semantic_hit) / std::max(1.0, n)) +
                         " would hit): a cache would rarely answer; leave it off.";
  j["recommendation"] = rec;
  j["config"] = config.empty() ? "" : "[[route]] " + config;
  return j;
}

nlohmann::json TrafficAudit::Routing() {
  // Routes without a router: the length rule.
  std::string method;
  for (const auto& r : routes_) {
    if (r->router) method = r->router_source;
  }
  int64_t small = 0, parsed = 0;
  for (Row& row : rows_) {
    if (!routes_[row.route]->router) {
      row.small = row.prompt_tokens <= 512 && row.completion_tokens >= 0 && row.completion_tokens <= 64;
    }
    small += row.small;
    parsed += 1;
  }
  if (method.empty()) method = "length rule: prompt <= 512 tokens and answer <= 64 tokens (give --config with a "
                               "classify route, or --router-model, for a real router)";
  // The small backend's TTFT: answers of the small classes in the capture, else --small-ttft-ms.
  std::vector<double> small_ttft, all_ttft;
  std::unordered_set<std::string> small_backends;
  if (options_.config) {
    for (const RouteConfig& rc : options_.config->routes) {
      for (const RouteClassConfig& k : rc.classes) {
        if (std::find(options_.small_classes.begin(), options_.small_classes.end(), k.name) != options_.small_classes.end()) {
          small_backends.insert(k.backends.begin(), k.backends.end());
        }
      }
    }
  }
  for (const Row& row : rows_) {
    if (row.Perceived() < 0) continue;
    all_ttft.push_back(row.Perceived());
    if (small_backends.count(backends_[row.backend])) small_ttft.push_back(row.Perceived());
  }
  std::sort(small_ttft.begin(), small_ttft.end());
  std::sort(all_ttft.begin(), all_ttft.end());
  std::string basis;
  double predicted = -1;
  if (small_ttft.size() >= 10 || options_.small_ttft_ms >= 0) {
    const bool measured = small_ttft.size() >= 10;
    basis = measured ? "the small backends' own TTFT in this capture, at each request's quantile"
                     : "--small-ttft-ms " + Fmt("%g", options_.small_ttft_ms);
    predicted = PredictedTtftP95([&](const Row& row, double now) {
      if (!row.small || small_backends.count(backends_[row.backend])) return -1.0;
      if (!measured) return std::min(now, options_.small_ttft_ms);
      const double q = static_cast<double>(std::lower_bound(all_ttft.begin(), all_ttft.end(), now) - all_ttft.begin()) /
                       static_cast<double>(all_ttft.size());
      return std::min(now, Percentile(small_ttft, q * 100));
    });
  } else {
    basis = "no small backend in this capture: give --small-ttft-ms (its measured TTFT) for a prediction";
  }
  const double share = Share(static_cast<double>(small), static_cast<double>(parsed));
  nlohmann::json j = {{"step", 3},
                      {"lever", "routing"},
                      {"small_task_share", share},
                      {"small_classes", options_.small_classes},
                      {"method", method},
                      {"basis", basis}};
  if (predicted >= 0) j["predicted_ttft_p95_ms"] = Round(predicted, 2);
  if (share >= 0.2) {
    j["recommendation"] = Pct(share) + " of requests are small tasks: send them to a small, fast model with a "
                          "classify route.";
    j["config"] = "[[route]] policy = \"classify\" with [[route.class]] name = \"small\", backends = [\"<small model>\"]"
                  " and name = \"large\"; rules or classifier = { model = \"router.bin\" } (docs/router.md)";
  } else {
    j["recommendation"] = "Few small tasks (" + Pct(share) + "): routing would move little traffic.";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::PromptTrimming() {
  // The most used distinct system prompts, audited by the trimmer's own steps.
  std::vector<std::pair<double, SystemPrompt*>> ranked;
  for (auto& [hash, p] : system_prompts_) {
    if (!p.text.empty()) ranked.emplace_back(static_cast<double>(p.requests) * p.units, &p);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (ranked.size() > kMaxAuditedPrompts) ranked.resize(kMaxAuditedPrompts);
  std::shared_ptr<const TokenCounter> counter = counter_;
  if (!counter) counter = *TokenCounter::ForModel("");  // built-in: bytes, scaled to bytes / 4 below
  const double scale = counter_ ? 1.0 : 0.25;
  StatusOr<std::unique_ptr<Embedder>> embedder = MakeEmbedder("hash");
  double removable_prompt_units = 0;
  int64_t prompts_with_removable = 0;
  nlohmann::json examples = nlohmann::json::array();
  for (auto& [weight, p] : ranked) {
    StatusOr<AuditReport> report = AuditPrompt(p->text, *counter, **embedder);
    if (!report.ok()) continue;
    const double removable = static_cast<double>(report->removable_tokens) * scale;
    if (removable <= 0) continue;
    ++prompts_with_removable;
    removable_prompt_units += removable;
    for (uint32_t id : p->rows) rows_[id].removable_units += removable;
    if (examples.size() < 5) {
      examples.push_back({{"requests", p->requests},
                          {"prompt_tokens", Round(p->units, 1)},
                          {"removable_tokens", Round(removable, 1)},
                          {"duplicate_instructions", report->duplicates.size()},
                          {"starts", p->text.substr(0, 80)}});
    }
  }
  double units = 0, removable = 0;
  int64_t documents_over = 0;
  for (const Row& row : rows_) {
    if (!row.parsed) continue;
    units += row.prompt_units;
    removable += std::min(row.removable_units, row.prompt_units);
    documents_over += row.documents_over;
  }
  const double predicted = PredictedTtftP95([&](const Row& row, double now) {
    if (row.removable_units <= 0 || !routes_[row.route]->fitted) return -1.0;
    return std::max(0.0, now - Slope(row) * row.removable_units * row.TokensPerUnit());
  });
  const double share = Share(removable, units);
  nlohmann::json j = {{"step", 4},
                      {"lever", "prompt_trimming"},
                      {"removable_token_share", share},
                      {"distinct_system_prompts", system_prompts_.size()},
                      {"system_prompts_with_removable_tokens", prompts_with_removable},
                      {"documents_over_budget_share", Share(static_cast<double>(documents_over),
                                                            static_cast<double>(rows_.size()))},
                      {"documents_budget_tokens", options_.documents_budget},
                      {"examples", examples},
                      {"basis", "the trimmer's whitespace and duplicates steps on the " +
                                    std::to_string(ranked.size()) + " most used system prompts, and retrieval "
                                    "documents beyond the budget; TTFT from the route's TTFT model"}};
  if (predicted >= 0) j["predicted_ttft_p95_ms"] = Round(predicted, 2);
  if (share >= 0.02) {
    j["recommendation"] = Pct(share) + " of prompt tokens could go without changing meaning: trim them "
                          "(tachyon prompt audit shows each system prompt's).";
    j["config"] = std::string("[[route]] trim = { whitespace = true, duplicates = true") +
                  (documents_over > 0 ? ", documents = true, max_document_tokens = " +
                                            std::to_string(options_.documents_budget)
                                      : std::string()) +
                  " }";
  } else {
    j["recommendation"] = "Prompts are already lean (" + Pct(share) + " removable): nothing to trim.";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::PrefixCaching() {
  double prompt = 0, shared = 0, cached = 0, prompt_with_cached = 0;
  int64_t hosted = 0, hosted_cacheable = 0, hosted_long = 0;
  for (const Row& row : rows_) {
    if (!row.parsed) continue;
    prompt += row.prompt_tokens;
    shared += row.shared_share * row.prompt_tokens;
    if (row.cached_tokens >= 0) {
      cached += row.cached_tokens;
      prompt_with_cached += row.prompt_tokens;
    }
    if (row.hosted) {
      ++hosted;
      const double recent_tokens = row.recent_share * row.prompt_tokens;
      hosted_long += row.shared_share * row.prompt_tokens >= static_cast<double>(options_.hosted_min_prefix_tokens);
      hosted_cacheable += recent_tokens >= static_cast<double>(options_.hosted_min_prefix_tokens);
    }
  }
  auto extra = [&](const Row& row) {
    double tokens = row.shared_share * row.prompt_tokens;
    if (row.hosted) {  // the provider caches only long, recent prefixes
      tokens = row.recent_share * row.prompt_tokens;
      if (tokens < static_cast<double>(options_.hosted_min_prefix_tokens)) tokens = 0;
    }
    return std::max(0.0, tokens - std::max(0.0, row.cached_tokens));
  };
  const double predicted = PredictedTtftP95([&](const Row& row, double now) {
    if (!row.parsed || !routes_[row.route]->fitted) return -1.0;
    const double e = extra(row);
    return e > 0 ? std::max(0.0, now - Slope(row) * e) : -1.0;
  });
  const double shared_share = Share(shared, prompt);
  const double cached_share = Share(cached, prompt_with_cached);
  nlohmann::json j = {{"step", 5},
                      {"lever", "prefix_caching"},
                      {"shared_prefix_token_share", shared_share},
                      {"cached_token_share", cached_share},
                      {"hosted_requests", hosted},
                      {"hosted_long_prefix_share", Share(static_cast<double>(hosted_long), static_cast<double>(hosted))},
                      {"hosted_cacheable_share", Share(static_cast<double>(hosted_cacheable), static_cast<double>(hosted))},
                      {"hosted_min_prefix_tokens", options_.hosted_min_prefix_tokens},
                      {"basis", "prompt text (tools, then messages) hashed in 128-byte blocks, each chained to the "
                                "ones before; a hosted prefix counts when >= the provider's minimum and sent again "
                                "within its TTL (" + Fmt("%g", options_.hosted_cache_ttl_seconds) + " s); TTFT from "
                                "the route's TTFT model, less the tokens already reported cached"}};
  if (predicted >= 0) j["predicted_ttft_p95_ms"] = Round(predicted, 2);
  if (shared_share >= 0.2 && cached_share < shared_share * 0.8) {
    std::string rec = Pct(shared_share) + " of prompt tokens repeat an earlier prefix but only " + Pct(cached_share) +
                      " were reported cached.";
    std::string config;
    if (hosted > 0) {
      rec += " Keep hosted prefixes byte-stable and mark them for the provider's cache.";
      config = "[[route]] prompt_cache = \"auto\"";
    }
    bool local = false;
    for (const Row& row : rows_) local = local || row.local;
    if (local) {
      rec += " Local engines: keep prefix_caching on and send a prefix to the replica that holds it.";
      config += std::string(config.empty() ? "" : "; ") + "[[route]] policy = \"prefix-affinity\" ([[backend]] prefix_caching = true)";
    }
    if (config.empty()) config = "[[route]] prompt_cache = \"auto\"";
    j["recommendation"] = rec;
    j["config"] = config;
  } else if (shared_share >= 0.2) {
    j["recommendation"] = "Prefixes repeat (" + Pct(shared_share) + ") and the backends already report most of them cached.";
    j["config"] = "";
  } else {
    j["recommendation"] = "Little shared prefix (" + Pct(shared_share) + "): a prefix cache would save little.";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::ContinuousBatching() {
  // Concurrency: in flight at each arrival, and averaged over time.
  std::vector<std::pair<double, int>> events;
  for (const Row& row : rows_) {
    if (row.ts < 0 || row.e2e < 0) continue;
    events.emplace_back(row.ts, +1);
    events.emplace_back(row.ts + row.e2e / 1e3, -1);
  }
  std::sort(events.begin(), events.end());
  std::vector<double> at_arrival;
  double area = 0, last = events.empty() ? 0 : events.front().first;
  int in_flight = 0, peak = 0;
  for (const auto& [t, d] : events) {
    area += in_flight * (t - last);
    last = t;
    if (d > 0) at_arrival.push_back(in_flight);
    in_flight += d;
    peak = std::max(peak, in_flight);
  }
  const double span = events.empty() ? 0 : events.back().first - events.front().first;
  double queue = 0, ttft = 0;
  std::vector<double> queues;
  int64_t local = 0;
  for (const Row& row : rows_) {
    if (!row.local || row.queue < 0 || row.Perceived() <= 0) continue;
    ++local;
    queue += row.queue;
    ttft += row.Perceived();
    queues.push_back(row.queue);
  }
  const double queue_share = Share(queue, ttft);
  const double predicted = PredictedTtftP95([&](const Row& row, double now) {
    return row.local && row.queue > 0 ? std::max(0.0, now - row.queue) : -1.0;
  });
  nlohmann::json j = {{"step", 6},
                      {"lever", "continuous_batching"},
                      {"concurrency_mean", span > 0 ? Round(area / span, 2) : 0.0},
                      {"concurrency_p95_at_arrival", Round(Percentile(at_arrival, 95), 1)},
                      {"concurrency_max", peak},
                      {"local_requests", local},
                      {"queueing_share_of_ttft", queue_share},
                      {"queue_p95_ms", Round(Percentile(queues, 95), 2)}};
  if (local > 0) {
    j["predicted_ttft_p95_ms"] = Round(predicted, 2);
    j["basis"] = "an upper bound: every local request scheduled at once (no queueing)";
  } else {
    j["basis"] = "no local engine in this capture (queue_ms comes from local backends)";
  }
  if (local > 0 && queue_share >= 0.2) {
    j["recommendation"] = Pct(queue_share) + " of local TTFT is spent queued: let the engine batch more sequences "
                          "per step (or add a replica).";
    j["config"] = "[[backend]] max_num_seqs = <higher>, max_num_batched_tokens = <higher>";
  } else {
    j["recommendation"] = local > 0 ? "Queueing is a small part of TTFT (" + Pct(queue_share) + "): batching is not the bottleneck."
                                    : "Hosted backends batch for you; nothing to change here.";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::Quantization() {
  nlohmann::json models = nlohmann::json::array();
  std::vector<std::string> unquantized;
  if (options_.config) {
    for (const BackendConfig& b : options_.config->backends) {
      if (b.kind != "local") continue;
      nlohmann::json m = {{"backend", b.name}, {"model", b.local.model_path}};
      StatusOr<GgufFile> file = GgufFile::Open(b.local.model_path);
      if (file.ok()) {
        const ModelSummary s = SummarizeModel(*file);
        nlohmann::json types = nlohmann::json::object();
        int64_t big = 0, all = 0;
        for (const auto& [type, count] : s.tensors_by_type) {
          types[type] = count;
          all += count;
          if (type == "F32" || type == "F16" || type == "BF16") big += count;
        }
        m["tensor_types"] = types;
        if (s.file_type) m["file_type"] = FileTypeName(*s.file_type);
        // 1-d norms stay F32 in every quantized file: half the tensors in float means the weights are.
        if (all > 0 && big * 2 > all) unquantized.push_back(b.name);
      } else {
        m["error"] = file.status().message();
      }
      models.push_back(m);
    }
  }
  nlohmann::json j = {{"step", 7}, {"lever", "quantization"}, {"local_models", models}};
  if (!options_.config) {
    j["recommendation"] = "Give --config to read the local backends' weight types.";
    j["config"] = "";
  } else if (!unquantized.empty()) {
    std::string names;
    for (const std::string& n : unquantized) names += (names.empty() ? "" : ", ") + n;
    j["recommendation"] = "Local models with float weights (" + names + "): Q8_0 halves the bytes each token reads "
                          "(decode is memory-bound), Q4_K_M quarters them.";
    j["config"] = "tachyon model quantize --type q8_0 IN.gguf OUT.gguf, then [[backend]] model = \"OUT.gguf\"";
  } else {
    j["recommendation"] = models.empty() ? "No local models: nothing to quantize." : "Local models are already quantized.";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::SpeculativeDecoding() {
  int64_t known = 0, long_outputs = 0, with_share = 0, repetitive = 0, long_local = 0;
  for (const Row& row : rows_) {
    if (row.completion_tokens >= 0) {
      ++known;
      const bool is_long = row.completion_tokens >= static_cast<double>(options_.long_output_tokens);
      long_outputs += is_long;
      long_local += is_long && row.local;
    }
    if (row.ngram >= 0) {
      ++with_share;
      repetitive += row.ngram >= options_.repetitive_share;
    }
  }
  const double long_share = Share(static_cast<double>(long_outputs), static_cast<double>(known));
  const double repetitive_share = Share(static_cast<double>(repetitive), static_cast<double>(with_share));
  nlohmann::json j = {{"step", 8},
                      {"lever", "speculative_decoding"},
                      {"long_output_share", long_share},
                      {"long_output_tokens", options_.long_output_tokens},
                      {"repetitive_output_share", repetitive_share},
                      {"outputs_measured", with_share},
                      {"basis", "repetitive: output_ngram_share >= " + Fmt("%g", options_.repetitive_share) +
                                " (the answer's word trigrams seen earlier in the prompt or the answer); "
                                "speculation shortens decoding (E2E), not TTFT"}};
  if (long_local > 0 && (repetitive_share >= 0.2 || long_share >= 0.3)) {
    j["recommendation"] = Pct(long_share) + " of answers are long and " + Pct(repetitive_share) +
                          " repeat their context: speculative decoding shortens their E2E.";
    j["config"] = repetitive_share >= 0.2 ? "[[backend]] speculative = \"ngram\", num_speculative_tokens = 4"
                                          : "[[backend]] speculative = \"draft:SMALL.gguf\"";
  } else {
    j["recommendation"] = long_local > 0 ? "Outputs are short or novel: speculation would gain little."
                                         : "No long answers from a local engine: speculative decoding is the "
                                           "engine's lever (a hosted API decides its own).";
    j["config"] = "";
  }
  return j;
}

nlohmann::json TrafficAudit::Finish() {
  // The TTFT model of each route: a + b x uncached prompt tokens, on the streamed answers.
  struct Sums {
    double n = 0, x = 0, y = 0, xx = 0, xy = 0;
  };
  std::vector<Sums> sums(routes_.size() + 1);
  for (const Row& row : rows_) {
    if (!row.stream || !row.ok || row.capture_hit || row.ttft < 0 || row.prompt_tokens <= 0) continue;
    const double x = std::max(0.0, row.prompt_tokens - std::max(0.0, row.cached_tokens));
    for (Sums* s : {&sums[row.route], &sums.back()}) {
      s->n += 1;
      s->x += x;
      s->y += row.ttft;
      s->xx += x * x;
      s->xy += x * row.ttft;
    }
  }
  auto fit = [](const Sums& s, double* a, double* b) {
    const double var = s.n * s.xx - s.x * s.x;
    if (s.n < kMinFit || var <= 1e-9 * s.n * s.n) return false;
    *b = std::max(0.0, (s.n * s.xy - s.x * s.y) / var);
    *a = (s.y - *b * s.x) / s.n;
    return true;
  };
  double pooled_a = 0, pooled_b = 0;
  const bool pooled = fit(sums.back(), &pooled_a, &pooled_b);
  for (size_t i = 0; i < routes_.size(); ++i) {
    RouteState& r = *routes_[i];
    r.fit_samples = static_cast<int>(sums[i].n);
    r.fitted = fit(sums[i], &r.intercept, &r.slope);
    if (!r.fitted && pooled) {
      r.intercept = pooled_a;
      r.slope = pooled_b;
      r.fitted = true;
      r.fit_samples = static_cast<int>(sums.back().n);
    }
  }
  nlohmann::json out = Totals();
  nlohmann::json levers = nlohmann::json::array();
  levers.push_back(Streaming());
  levers.push_back(SemanticCache());
  levers.push_back(PromptTrimming());  // before routing and prefix caching: they read its removable tokens
  levers.push_back(Routing());
  levers.push_back(PrefixCaching());
  levers.push_back(ContinuousBatching());
  levers.push_back(Quantization());
  levers.push_back(SpeculativeDecoding());
  std::swap(levers[2], levers[3]);  // back in the playbook's order
  const double now = out["ttft_p95_ms"].get<double>();
  std::vector<std::pair<double, std::string>> ranking;
  for (auto& lever : levers) {
    if (lever.contains("predicted_ttft_p95_ms")) {
      const double gain = Round(std::max(0.0, now - lever["predicted_ttft_p95_ms"].get<double>()), 2);
      lever["expected_ttft_p95_gain_ms"] = gain;
      ranking.emplace_back(gain, lever["lever"].get<std::string>());
    } else {
      lever["predicted_ttft_p95_ms"] = nullptr;
      lever["expected_ttft_p95_gain_ms"] = nullptr;
      ranking.emplace_back(-1, lever["lever"].get<std::string>());
    }
  }
  std::stable_sort(ranking.begin(), ranking.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  nlohmann::json ranked = nlohmann::json::array();
  for (const auto& [gain, name] : ranking) ranked.push_back(name);
  out["levers"] = levers;
  out["ranking"] = ranked;
  out["distributions"] = Distributions();
  return out;
}

}  // namespace tachyon
