#include "gateway/route/route_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

#include <xxhash.h>

namespace tachyon {
namespace {

std::vector<size_t> Available(const std::vector<CandidateState>& c) {
  std::vector<size_t> out;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].available) out.push_back(i);
  }
  return out;
}

class FallbackPolicy : public RoutePolicy {
 public:
  std::vector<size_t> Order(const std::vector<CandidateState>& c, const PolicyInput&) override { return Available(c); }
};

class RoundRobinPolicy : public RoutePolicy {
 public:
  std::vector<size_t> Order(const std::vector<CandidateState>& c, const PolicyInput&) override {
    std::vector<size_t> a = Available(c);
    if (!a.empty()) std::rotate(a.begin(), a.begin() + static_cast<long>(next_++ % a.size()), a.end());
    return a;
  }

 private:
  uint64_t next_ = 0;
};

class LeastOutstandingPolicy : public RoutePolicy {
 public:
  std::vector<size_t> Order(const std::vector<CandidateState>& c, const PolicyInput&) override {
    std::vector<size_t> a = Available(c);
    if (a.empty()) return a;
    std::stable_sort(a.begin(), a.end(), [&](size_t x, size_t y) { return c[x].outstanding < c[y].outstanding; });
    // The backends tied for the fewest take turns at the front.
    size_t num_tied = 1;
    while (num_tied < a.size() && c[a[num_tied]].outstanding == c[a[0]].outstanding) ++num_tied;
    std::rotate(a.begin(), a.begin() + static_cast<long>(next_++ % num_tied), a.begin() + static_cast<long>(num_tied));
    return a;
  }

 private:
  uint64_t next_ = 0;
};

class LatencyPolicy : public RoutePolicy {
 public:
  explicit LatencyPolicy(double explore) : explore_(explore) {}
  std::vector<size_t> Order(const std::vector<CandidateState>& c, const PolicyInput& in) override {
    std::vector<size_t> a = Available(c);
    if (a.empty()) return a;
    // No sample first (each gets measured), then fastest first.
    std::stable_sort(a.begin(), a.end(), [&](size_t x, size_t y) {
      const bool sx = c[x].ttft_ewma >= 0, sy = c[y].ttft_ewma >= 0;
      if (sx != sy) return !sx;
      return c[x].ttft_ewma < c[y].ttft_ewma;
    });
    if (a.size() > 1 && in.random < explore_) {
      // in.random / explore_ is uniform in [0, 1) again: it picks which one explores.
      const size_t pick = std::min(a.size() - 1, static_cast<size_t>(in.random / explore_ * static_cast<double>(a.size())));
      std::rotate(a.begin(), a.begin() + static_cast<long>(pick), a.begin() + static_cast<long>(pick) + 1);
    }
    return a;
  }

 private:
  double explore_;
};

class PrefixAffinityPolicy : public RoutePolicy {
 public:
  PrefixAffinityPolicy(const std::vector<std::string>& names, double load_factor, int virtual_nodes)
      : load_factor_(load_factor), names_(names), owned_(names.size(), 0) {
    for (size_t b = 0; b < names.size(); ++b) {
      const uint64_t seed = XXH3_64bits(names[b].data(), names[b].size());
      for (int v = 0; v < virtual_nodes; ++v) {
        const uint64_t key[2] = {seed, static_cast<uint64_t>(v)};
        ring_.emplace_back(XXH3_64bits(key, sizeof(key)), b);
      }
    }
    std::sort(ring_.begin(), ring_.end());
  }

  void Inherit(const RoutePolicy& previous, const std::vector<std::string>& previous_names) override {
    const auto* p = dynamic_cast<const PrefixAffinityPolicy*>(&previous);
    if (p == nullptr) return;
    std::unordered_map<std::string, size_t> index;
    for (size_t b = 0; b < names_.size(); ++b) index.emplace(names_[b], b);
    for (const auto& [hash, old] : p->owner_) {
      if (old >= previous_names.size()) continue;
      auto found = index.find(previous_names[old]);
      if (found == index.end()) continue;  // its replica left: the prefix finds a new home when it recurs
      owner_[hash] = found->second;
      ++owned_[found->second];
    }
  }

  std::vector<size_t> Order(const std::vector<CandidateState>& c, const PolicyInput& in) override {
    std::vector<size_t> walk = Walk(c, in.prefix_hash);
    if (walk.empty()) return walk;
    const auto home = std::find(walk.begin(), walk.end(), Home(c, walk, in.prefix_hash));
    std::rotate(walk.begin(), home, home + 1);
    int64_t total = 0;
    for (size_t b : walk) total += c[b].outstanding;
    const double capacity = std::ceil(load_factor_ * static_cast<double>(total + 1) / static_cast<double>(walk.size()));
    // The home, if it has room; else the next on the ring with room. The others keep their order.
    for (size_t k = 0; k < walk.size(); ++k) {
      if (static_cast<double>(c[walk[k]].outstanding + 1) <= capacity) {
        std::rotate(walk.begin(), walk.begin() + static_cast<long>(k), walk.begin() + static_cast<long>(k) + 1);
        break;
      }
    }
    return walk;
  }

 private:
  // Distinct available backends, clockwise from the prefix's point on the ring.
  std::vector<size_t> Walk(const std::vector<CandidateState>& c, uint64_t hash) const {
    std::vector<size_t> walk;
    if (ring_.empty()) return walk;
    const size_t start = std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(hash, size_t{0})) - ring_.begin();
    std::vector<bool> seen(c.size(), false);
    for (size_t k = 0; k < ring_.size() && walk.size() < c.size(); ++k) {
      const size_t b = ring_[(start + k) % ring_.size()].second;
      if (b >= c.size() || seen[b]) continue;
      seen[b] = true;
      if (c[b].available) walk.push_back(b);
    }
    return walk;
  }

  // The prefix's replica: the one it was given when first seen (while available),
  // else the less loaded of the first two on its walk (fewer prefixes owned, then
  // fewer in flight): with few prefixes, hashing alone puts three of four on one
  // replica half the time; two choices keep them even (Azar et al. 1999).
  size_t Home(const std::vector<CandidateState>& c, const std::vector<size_t>& walk, uint64_t hash) {
    auto it = owner_.find(hash);
    if (it != owner_.end() && it->second < c.size() && c[it->second].available) return it->second;
    size_t home = walk[0];
    if (walk.size() > 1) {
      const size_t other = walk[1];
      if (owned_[other] < owned_[home] ||
          (owned_[other] == owned_[home] && c[other].outstanding < c[home].outstanding)) {
        home = other;
      }
    }
    if (it != owner_.end()) {
      if (it->second < owned_.size()) --owned_[it->second];
      it->second = home;
    } else {
      if (owner_.size() >= kMaxPrefixes) {  // bounded memory: start over (homes are found again as prefixes recur)
        owner_.clear();
        std::fill(owned_.begin(), owned_.end(), 0);
      }
      owner_.emplace(hash, home);
    }
    ++owned_[home];
    return home;
  }

  static constexpr size_t kMaxPrefixes = 1 << 16;

  double load_factor_;
  std::vector<std::string> names_;
  std::vector<std::pair<uint64_t, size_t>> ring_;  // (point, backend), sorted
  std::unordered_map<uint64_t, size_t> owner_;     // prefix hash -> its replica
  std::vector<int64_t> owned_;                     // prefixes owned per backend
};

}  // namespace

StatusOr<PolicyKind> ParsePolicyKind(const std::string& name) {
  if (name == "fallback") return PolicyKind::kFallback;
  if (name == "round-robin") return PolicyKind::kRoundRobin;
  if (name == "least-outstanding") return PolicyKind::kLeastOutstanding;
  if (name == "latency") return PolicyKind::kLatency;
  if (name == "prefix-affinity") return PolicyKind::kPrefixAffinity;
  if (name == "classify") return PolicyKind::kClassify;
  return InvalidArgumentError("unknown policy '" + name +
                              "' (fallback, round-robin, least-outstanding, latency, prefix-affinity, classify)");
}

const char* PolicyName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFallback: return "fallback";
    case PolicyKind::kRoundRobin: return "round-robin";
    case PolicyKind::kLeastOutstanding: return "least-outstanding";
    case PolicyKind::kLatency: return "latency";
    case PolicyKind::kPrefixAffinity: return "prefix-affinity";
    case PolicyKind::kClassify: return "classify";
  }
  return "fallback";
}

std::unique_ptr<RoutePolicy> RoutePolicy::Make(PolicyKind kind, size_t num_backends, RoutePolicyOptions options) {
  std::vector<std::string> names;
  for (size_t b = 0; b < num_backends; ++b) names.push_back(std::to_string(b));
  return Make(kind, names, options);
}

std::unique_ptr<RoutePolicy> RoutePolicy::Make(PolicyKind kind, const std::vector<std::string>& names,
                                               RoutePolicyOptions options) {
  switch (kind) {
    case PolicyKind::kFallback: return std::make_unique<FallbackPolicy>();
    case PolicyKind::kRoundRobin: return std::make_unique<RoundRobinPolicy>();
    case PolicyKind::kLeastOutstanding: return std::make_unique<LeastOutstandingPolicy>();
    case PolicyKind::kLatency: return std::make_unique<LatencyPolicy>(options.explore);
    case PolicyKind::kPrefixAffinity:
      return std::make_unique<PrefixAffinityPolicy>(names, options.load_factor, options.virtual_nodes);
    case PolicyKind::kClassify: break;  // a route's classes order their own backends
  }
  return std::make_unique<FallbackPolicy>();
}

}  // namespace tachyon
