#include "gateway/discovery.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "http/http_client.h"

namespace tachyon {
namespace {

// A numeric address in its canonical text ("::1", "10.0.0.5"); "" when not one.
std::string Canonical(const std::string& text) {
  unsigned char raw[sizeof(in6_addr)];
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, text.c_str(), raw) == 1) return inet_ntop(AF_INET, raw, out, sizeof(out)) ? out : "";
  if (inet_pton(AF_INET6, text.c_str(), raw) == 1) return inet_ntop(AF_INET6, raw, out, sizeof(out)) ? out : "";
  return "";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void SortUnique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

class SystemResolverImpl : public Resolver {
 public:
  StatusOr<std::vector<std::string>> Resolve(const std::string& host, const std::string& hosts_file) override {
    if (!hosts_file.empty()) return ResolveHostsFile(hosts_file, host);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
    if (rc == EAI_NONAME
#ifdef EAI_NODATA
        || rc == EAI_NODATA
#endif
    ) {
      return std::vector<std::string>{};  // the name has no address: no members
    }
    if (rc != 0) return UnavailableError("cannot resolve '" + host + "': " + gai_strerror(rc));
    std::vector<std::string> out;
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN];
      const void* raw = a->ai_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
      if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
          inet_ntop(a->ai_family, raw, text, sizeof(text)) != nullptr) {
        out.emplace_back(text);
      }
    }
    freeaddrinfo(list);
    SortUnique(&out);
    return out;
  }
};

}  // namespace

std::shared_ptr<Resolver> SystemResolver() { return std::make_shared<SystemResolverImpl>(); }

StatusOr<std::vector<std::string>> ResolveHostsFile(const std::string& path, const std::string& host) {
  std::ifstream in(path);
  if (!in) return UnavailableError("cannot read the hosts file '" + path + "'");
  const std::string want = Lower(host);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string address, name;
    if (!(fields >> address)) continue;
    const std::string canonical = Canonical(address);
    if (canonical.empty()) continue;
    while (fields >> name) {
      if (Lower(name) == want) {
        out.push_back(canonical);
        break;
      }
    }
  }
  SortUnique(&out);
  return out;
}

bool HasDiscovery(const GatewayConfig& config) {
  return std::any_of(config.backends.begin(), config.backends.end(),
                     [](const BackendConfig& b) { return !b.discover.empty(); });
}

GatewayConfig ExpandDiscovered(const GatewayConfig& config, const DiscoveredAddresses& found) {
  GatewayConfig out = config;
  out.backends.clear();
  std::map<std::string, std::vector<std::string>> members;  // a discovering backend -> its members' names
  for (const BackendConfig& b : config.backends) {
    auto it = found.find(b.name);
    if (b.discover.empty() || it == found.end() || it->second.empty()) {
      out.backends.push_back(b);
      continue;
    }
    for (const std::string& address : it->second) {
      BackendConfig m = b;
      m.name = b.name + "/" + address;
      m.remote.name = m.name;
      m.remote.connect_address = address;
      m.discover.clear();
      m.discovered_from = b.name;
      m.fingerprint = b.fingerprint + "\n@" + address;
      members[b.name].push_back(m.name);
      out.backends.push_back(std::move(m));
    }
  }
  auto expand = [&](std::vector<std::string>* names) {
    std::vector<std::string> expanded;
    for (const std::string& n : *names) {
      auto it = members.find(n);
      if (it == members.end()) {
        expanded.push_back(n);
      } else {
        expanded.insert(expanded.end(), it->second.begin(), it->second.end());
      }
    }
    *names = std::move(expanded);
  };
  for (RouteConfig& r : out.routes) {
    expand(&r.backends);
    for (RouteClassConfig& k : r.classes) {
      expand(&k.backends);
      expand(&k.fallback);
    }
  }
  return out;
}

BackendDiscovery::BackendDiscovery(std::shared_ptr<Resolver> resolver, Apply apply, MetricsRegistry* metrics)
    : resolver_(std::move(resolver)), apply_(std::move(apply)), metrics_(metrics) {
  members_ = &metrics->AddGauge("tachyon:discovered_backends",
                                "Addresses a discover = \"dns\" backend resolved to (each one a backend)", {"backend"});
  changes_ = &metrics->AddCounter("tachyon:discovery_changes_total",
                                  "Membership changes of a discovered backend applied to the routes", {"backend"});
  failures_ = &metrics->AddCounter("tachyon:discovery_failures_total",
                                   "Resolutions that failed (the last addresses kept)", {"backend"});
}

std::shared_ptr<BackendDiscovery> BackendDiscovery::Create(std::shared_ptr<Resolver> resolver, Apply apply,
                                                           MetricsRegistry* metrics) {
  std::shared_ptr<BackendDiscovery> d(new BackendDiscovery(std::move(resolver), std::move(apply), metrics));
  d->thread_ = std::thread([raw = d.get()] { raw->Run(); });
  return d;
}

BackendDiscovery::~BackendDiscovery() { Stop(); }

void BackendDiscovery::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

DiscoveredAddresses BackendDiscovery::addresses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return found_;
}

bool BackendDiscovery::ResolveInto(const GatewayConfig& config, const std::set<std::string>& names,
                                   DiscoveredAddresses* found) {
  bool changed = false;
  for (const BackendConfig& b : config.backends) {
    if (b.discover.empty() || (!names.empty() && !names.count(b.name))) continue;
    StatusOr<HttpUrl> url = ParseHttpUrl(b.remote.base_url);
    StatusOr<std::vector<std::string>> addresses =
        url.ok() ? resolver_->Resolve(url->host, b.hosts_file) : StatusOr<std::vector<std::string>>(url.status());
    if (!addresses.ok()) {
      failures_->With({b.name}).Add();
      std::fprintf(stderr, "tachyon serve: discovery: backend '%s': %s (keeping its last addresses)\n",
                   b.name.c_str(), addresses.status().message().c_str());
      if (!found->count(b.name)) (*found)[b.name] = {};
      continue;
    }
    auto it = found->find(b.name);
    if (it != found->end() && it->second == *addresses) continue;
    std::string joined;
    for (const std::string& a : *addresses) joined += (joined.empty() ? "" : ", ") + a;
    std::fprintf(stderr, "tachyon serve: discovery: backend '%s' (%s): %s\n", b.name.c_str(), url->host.c_str(),
                 joined.empty() ? "no addresses" : joined.c_str());
    (*found)[b.name] = std::move(addresses).value();
    changed = true;
  }
  return changed;
}

Status BackendDiscovery::SetConfig(const GatewayConfig& config) {
  std::lock_guard<std::mutex> apply_lock(apply_mutex_);
  DiscoveredAddresses found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    found = found_;  // a backend already watched keeps its addresses if the resolver fails now
  }
  for (auto it = found.begin(); it != found.end();) {  // forget backends the new config does not discover
    const bool kept = std::any_of(config.backends.begin(), config.backends.end(),
                                  [&](const BackendConfig& b) { return b.name == it->first && !b.discover.empty(); });
    it = kept ? std::next(it) : found.erase(it);
  }
  ResolveInto(config, {}, &found);
  RETURN_IF_ERROR(apply_(ExpandDiscovered(config, found)));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    config_ = config;
    found_ = std::move(found);
    due_.clear();
    const auto now = std::chrono::steady_clock::now();
    for (const BackendConfig& b : config_.backends) {
      if (b.discover.empty()) continue;
      due_[b.name] = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(b.discover_interval));
      members_->With({b.name}).Set(static_cast<double>(found_[b.name].size()));
    }
  }
  wake_.notify_all();
  return Status::Ok();
}

void BackendDiscovery::Poke(const std::string& backend) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto due = due_.find(backend);
    if (due == due_.end()) return;
    const auto now = std::chrono::steady_clock::now();
    auto& last = poked_[backend];
    if (now - last < std::chrono::seconds(1)) return;  // a burst of failures asks once
    last = now;
    due->second = now;
  }
  wake_.notify_all();
}

StatusOr<bool> BackendDiscovery::ResolveNow() { return Pass({}); }

StatusOr<bool> BackendDiscovery::Pass(const std::set<std::string>& names) {
  std::lock_guard<std::mutex> apply_lock(apply_mutex_);
  GatewayConfig config;
  DiscoveredAddresses found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    config = config_;
    found = found_;
  }
  if (!ResolveInto(config, names, &found)) return false;
  RETURN_IF_ERROR(apply_(ExpandDiscovered(config, found)));
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, addresses] : found) {
    if (found_[name] != addresses) changes_->With({name}).Add();
    members_->With({name}).Set(static_cast<double>(addresses.size()));
  }
  found_ = std::move(found);
  return true;
}

void BackendDiscovery::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (due_.empty()) {
      wake_.wait(lock);
      continue;
    }
    auto next = due_.begin()->second;
    for (const auto& [name, at] : due_) next = std::min(next, at);
    if (std::chrono::steady_clock::now() < next) {
      wake_.wait_until(lock, next);
      continue;
    }
    // Every backend that is due, resolved and applied without holding mutex_ (a
    // reload may replace the config meanwhile: apply_mutex_ orders the two).
    const auto now = std::chrono::steady_clock::now();
    std::set<std::string> names;
    for (auto& [name, at] : due_) {
      if (at > now) continue;
      names.insert(name);
      for (const BackendConfig& b : config_.backends) {
        if (b.name == name) {
          at = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(b.discover_interval));
        }
      }
    }
    lock.unlock();
    if (StatusOr<bool> changed = Pass(names); !changed.ok()) {
      std::fprintf(stderr, "tachyon serve: discovery: the new members were not applied: %s\n",
                   changed.status().message().c_str());
    }
    lock.lock();
  }
}

}  // namespace tachyon
