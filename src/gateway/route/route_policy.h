// RoutePolicy: in which order a route tries its backends for one request.
//
//   fallback           the configured order
//   round-robin        a rotating start
//   least-outstanding  fewest requests in flight first (rotating among ties)
//   latency            lowest EWMA of recent TTFT first; a backend with no sample
//                      yet goes first, and with probability `explore` a random
//                      one does, so a backend that got faster is noticed
//   prefix-affinity    requests whose prompts share a leading prefix go to the
//                      same replica (its prefix cache then hits): consistent
//                      hashing on a ring of virtual nodes, a new prefix taking
//                      the less loaded of its first two replicas on the ring and
//                      keeping it (two choices: few prefixes still spread
//                      evenly), with bounded load (Mirrokni, Thorup,
//                      Zadimoghaddam 2018): a replica already holding more than
//                      ceil(c * (in flight + 1) / n) requests is passed over for
//                      the next one on the ring, so one hot prefix cannot swamp
//                      a replica. Points are placed by backend name: when one
//                      of N replicas joins, about 1/(N+1) of the ring moves to
//                      it, and a remembered prefix stays where it was.
//
// Only available backends (breaker closed, or a half-open probe) are ordered;
// the route tries them in this order until one answers. Pure: the backends'
// state and chance come in as arguments (a policy keeps only its own: a
// rotation counter, the prefixes' replicas); not thread-safe (the route holds a lock).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tachyon {

struct CandidateState {
  bool available = true;
  int outstanding = 0;     // requests in flight on it
  double ttft_ewma = -1;   // seconds; < 0: no sample yet
};

struct PolicyInput {
  uint64_t prefix_hash = 0;  // of the prompt's leading characters (prefix-affinity)
  double random = 0;         // uniform in [0, 1) (latency's exploration)
};

// kClassify is a route's, not an order: its classes each have one of the others.
enum class PolicyKind { kFallback, kRoundRobin, kLeastOutstanding, kLatency, kPrefixAffinity, kClassify };

StatusOr<PolicyKind> ParsePolicyKind(const std::string& name);
const char* PolicyName(PolicyKind kind);

struct RoutePolicyOptions {
  double explore = 0.1;        // latency: the chance of trying a random backend first
  double load_factor = 2.0;    // prefix-affinity: c of the bounded load (a spill recomputes a whole prefix: not eager)
  int virtual_nodes = 64;      // prefix-affinity: points per backend on the ring
};

class RoutePolicy {
 public:
  virtual ~RoutePolicy() = default;
  // Indices of the available candidates, in the order to try them.
  virtual std::vector<size_t> Order(const std::vector<CandidateState>& candidates, const PolicyInput& input) = 0;

  // Takes over what `previous` (the same route's policy in the gateway this one
  // replaces) learned that still applies: prefix-affinity keeps each remembered
  // prefix on its replica while that replica is still a member. previous_names are
  // its backends' names, in its order.
  virtual void Inherit(const RoutePolicy& previous, const std::vector<std::string>& previous_names) {
    (void)previous;
    (void)previous_names;
  }

  // names are the backends' names, in order: the prefix-affinity ring is placed by
  // name, so a backend keeps its points when others join or leave (a route's
  // backends do not change while it lives: a reload or a discovered membership
  // change builds a new route, which inherits the old one's state).
  static std::unique_ptr<RoutePolicy> Make(PolicyKind kind, const std::vector<std::string>& names,
                                           RoutePolicyOptions options = {});
  // Backends named "0", "1", ... (tests).
  static std::unique_ptr<RoutePolicy> Make(PolicyKind kind, size_t num_backends, RoutePolicyOptions options = {});
};

}  // namespace tachyon
