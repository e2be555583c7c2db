// Backends discovered by DNS: `[[backend]] discover = "dns"` names a set of
// replicas by one host name (a Kubernetes headless Service resolves to one
// address per ready pod), and each address becomes a backend of its own.
//
//   ExpandDiscovered   the config with each discovering backend replaced by its
//                      members, "<name>/<address>" (the base_url kept, so the Host
//                      header, SNI and certificate still name the service; the
//                      connection goes to the address), and every route's list
//                      naming the backend naming its members instead. With no
//                      address, the backend stays as written (its calls fail
//                      to resolve, and say so).
//   BackendDiscovery   a thread that re-resolves each discovering backend every
//                      discover_interval seconds, and at once (at most once a
//                      second) when a member's connection fails; when the set of
//                      addresses changes it builds the gateway of the new
//                      expansion from the running one (Gateway::Build keeps every
//                      unchanged member's slot: its breaker, connections and
//                      prefixes) and publishes it. A member that left gets no new
//                      request; its calls in flight finish on the gateway they
//                      started on (drained). A name that does not resolve at all
//                      has no members; a resolver that fails (timeout, server
//                      error) keeps the last addresses.
//
// The resolver is a seam: the system's (getaddrinfo, or a hosts(5) file when the
// backend names one), or a test's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "gateway/gateway_config.h"
#include "obs/metrics.h"

namespace tachyon {

class Resolver {
 public:
  virtual ~Resolver() = default;
  // Every address of host, numeric, unique and sorted; an empty list when the name
  // has none (NXDOMAIN, or no entry in hosts_file); an error when the answer is
  // unknown (the resolver failed). hosts_file: read it instead of asking DNS.
  virtual StatusOr<std::vector<std::string>> Resolve(const std::string& host, const std::string& hosts_file) = 0;
};

// getaddrinfo, or the hosts(5)-format file a backend names.
std::shared_ptr<Resolver> SystemResolver();

// The addresses a hosts(5)-format file gives host (case-insensitive; comments and
// malformed addresses skipped).
StatusOr<std::vector<std::string>> ResolveHostsFile(const std::string& path, const std::string& host);

// A discovering backend's addresses, by its name.
using DiscoveredAddresses = std::map<std::string, std::vector<std::string>>;

// The config a gateway is built from: each discovering backend replaced by one
// backend per address (none found: left as written).
GatewayConfig ExpandDiscovered(const GatewayConfig& config, const DiscoveredAddresses& found);

// Whether any backend of config discovers its replicas.
bool HasDiscovery(const GatewayConfig& config);

class BackendDiscovery : public std::enable_shared_from_this<BackendDiscovery> {
 public:
  // Builds and publishes the gateway of an expanded config; an error leaves the
  // running one. Called with one config at a time (never concurrently).
  using Apply = std::function<Status(const GatewayConfig& expanded)>;

  static std::shared_ptr<BackendDiscovery> Create(std::shared_ptr<Resolver> resolver, Apply apply,
                                                  MetricsRegistry* metrics);
  ~BackendDiscovery();

  // Resolves config's discovering backends now and applies the expansion (at
  // start, and at a reload); the thread then watches them. An error from apply
  // is returned and the previous config stays watched.
  Status SetConfig(const GatewayConfig& config);

  // A member of `backend` failed to connect: resolve it again soon.
  void Poke(const std::string& backend);

  // One pass over every discovering backend now; true when the addresses changed
  // (and the new expansion was applied). For tests.
  StatusOr<bool> ResolveNow();

  // The addresses last found, by backend.
  DiscoveredAddresses addresses() const;

  // Stops the thread (the destructor does too).
  void Stop();

 private:
  BackendDiscovery(std::shared_ptr<Resolver> resolver, Apply apply, MetricsRegistry* metrics);
  void Run();
  // Resolves `names` (all when empty) and applies a change; true when one was applied.
  StatusOr<bool> Pass(const std::set<std::string>& names);
  // Resolves `names` (all when empty) into *found; true when any changed.
  bool ResolveInto(const GatewayConfig& config, const std::set<std::string>& names, DiscoveredAddresses* found);

  std::shared_ptr<Resolver> resolver_;
  Apply apply_;
  MetricsRegistry* metrics_;
  GaugeFamily* members_ = nullptr;       // {backend}: addresses found
  CounterFamily* changes_ = nullptr;     // {backend}: membership changes applied
  CounterFamily* failures_ = nullptr;    // {backend}: resolutions that failed (the last addresses kept)

  std::mutex apply_mutex_;  // one resolution + apply at a time (the thread, a reload, a test)
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  GatewayConfig config_;                 // guarded by mutex_
  DiscoveredAddresses found_;            // guarded by mutex_
  std::map<std::string, std::chrono::steady_clock::time_point> due_;  // guarded by mutex_
  std::map<std::string, std::chrono::steady_clock::time_point> poked_;  // guarded by mutex_: last poke honoured
  bool stop_ = false;                    // guarded by mutex_
  std::thread thread_;
};

}  // namespace tachyon
