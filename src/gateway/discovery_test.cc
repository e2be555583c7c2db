// Backends discovered by DNS: the expansion, the watcher's membership changes
// (through a resolver the test scripts, and through a hosts file), drained
// members, and prefix-affinity kept stable as replicas join and leave.
#include "gateway/discovery.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <future>

#include "gateway/gateway.h"
#include "gateway/route/route_policy.h"
#include "tests/support/upstream_server.h"

namespace tachyon {
namespace {

using testing::UpstreamServer;

// Answers what the test last set, by host; counts its calls.
class ScriptedResolver : public Resolver {
 public:
  StatusOr<std::vector<std::string>> Resolve(const std::string& host, const std::string&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    cv_.notify_all();
    if (failing_) return UnavailableError("the resolver timed out");
    return answers_[host];
  }
  void Set(const std::string& host, std::vector<std::string> addresses) {
    std::lock_guard<std::mutex> lock(mutex_);
    answers_[host] = std::move(addresses);
  }
  void Fail(bool failing) {
    std::lock_guard<std::mutex> lock(mutex_);
    failing_ = failing;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  bool WaitForCalls(int n, double seconds) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return calls_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::string>> answers_;
  bool failing_ = false;
  int calls_ = 0;
};

GatewayConfig Parse(const std::string& toml) {
  StatusOr<GatewayConfig> config = ParseGatewayConfig(toml, "/tmp/test.toml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : GatewayConfig{};
}

std::string Discovered(int port, const std::string& extra = "") {
  return "[[backend]]\nname = 'engines'\nkind = 'openai'\nbase_url = 'http://tachyon-engine.test:" +
         std::to_string(port) + "/v1'\ndiscover = 'dns'\ndiscover_interval = 60\nconnect_timeout = 1\n" + extra +
         "\n[[backend]]\nname = 'hosted'\nkind = 'openai'\nbase_url = 'http://127.0.0.1:1/v1'\n"
         "[[route]]\nmodel = 'chat'\nbackends = ['engines']\npolicy = 'prefix-affinity'\n"
         "[[route]]\nmodel = 'hosted'\nbackends = ['hosted']\n";
}

TEST(DiscoveryConfigTest, KeysAreCheckedAndOnlyForRemoteBackends) {
  EXPECT_EQ(Parse(Discovered(8000)).backends[0].discover, "dns");
  EXPECT_DOUBLE_EQ(Parse(Discovered(8000)).backends[0].discover_interval, 60);
  auto error = [](const std::string& toml) {
    StatusOr<GatewayConfig> c = ParseGatewayConfig(toml, "t.toml");
    return c.ok() ? std::string() : c.status().message();
  };
  const std::string head = "[[backend]]\nname = 'e'\nkind = 'openai'\nbase_url = 'http://e:8000/v1'\n";
  const std::string route = "[[route]]\nmodel = 'chat'\nbackends = ['e']\n";
  EXPECT_NE(error(head + "discover = 'srv'\n" + route).find("must be \"dns\""), std::string::npos);
  EXPECT_NE(error(head + "discover_interval = 3\n" + route).find("needs discover = \"dns\""), std::string::npos);
  EXPECT_NE(error(head + "discover = 'dns'\ndiscover_interval = 0\n" + route).find("discover_interval"),
            std::string::npos);
  EXPECT_NE(error("[[backend]]\nname = 'e'\nkind = 'local'\nmodel = 'm.gguf'\ndiscover = 'dns'\n" + route)
                .find("unknown key"),
            std::string::npos);
  EXPECT_EQ(Parse(head + "discover = 'dns'\nhosts_file = 'fleet.hosts'\n" + route).backends[0].hosts_file,
            "/tmp/fleet.hosts")
      << "beside the config file";
}

TEST(DiscoveryTest, EachAddressIsABackendAndRoutesNameThemAll) {
  const GatewayConfig config = Parse(Discovered(8000));
  const GatewayConfig out = ExpandDiscovered(config, {{"engines", {"10.0.0.5", "10.0.0.6"}}});
  ASSERT_EQ(out.backends.size(), 3u);
  EXPECT_EQ(out.backends[0].name, "engines/10.0.0.5");
  EXPECT_EQ(out.backends[0].remote.name, "engines/10.0.0.5");
  EXPECT_EQ(out.backends[0].remote.connect_address, "10.0.0.5");
  EXPECT_EQ(out.backends[0].remote.base_url, config.backends[0].remote.base_url) << "Host and SNI keep the name";
  EXPECT_EQ(out.backends[0].discovered_from, "engines");
  EXPECT_NE(out.backends[0].fingerprint, out.backends[1].fingerprint);
  EXPECT_EQ(out.routes[0].backends, (std::vector<std::string>{"engines/10.0.0.5", "engines/10.0.0.6"}));
  EXPECT_EQ(out.routes[1].backends, (std::vector<std::string>{"hosted"}));
  // No address: the backend as written (its calls say the name does not resolve).
  const GatewayConfig none = ExpandDiscovered(config, {{"engines", {}}});
  EXPECT_EQ(none.backends[0].name, "engines");
  EXPECT_EQ(none.routes[0].backends, config.routes[0].backends);
}

TEST(DiscoveryTest, ClassesAndFallbacksNameTheMembersToo) {
  const GatewayConfig config = Parse(
      "[[backend]]\nname = 'small'\nkind = 'openai'\nbase_url = 'http://small:8000/v1'\ndiscover = 'dns'\n"
      "[[backend]]\nname = 'big'\nkind = 'openai'\nbase_url = 'http://big:8000/v1'\n"
      "[[route]]\nmodel = 'chat'\npolicy = 'classify'\ndefault = 'easy'\n"
      "[[route.class]]\nname = 'easy'\nbackends = ['small']\nfallback = ['big']\n"
      "[[route.class]]\nname = 'hard'\nbackends = ['big']\nfallback = ['small']\n");
  const GatewayConfig out = ExpandDiscovered(config, {{"small", {"10.1.0.1", "10.1.0.2"}}});
  ASSERT_EQ(out.routes[0].classes.size(), 2u);
  EXPECT_EQ(out.routes[0].classes[0].backends, (std::vector<std::string>{"small/10.1.0.1", "small/10.1.0.2"}));
  EXPECT_EQ(out.routes[0].classes[1].fallback, (std::vector<std::string>{"small/10.1.0.1", "small/10.1.0.2"}));
  MetricsRegistry metrics;
  EXPECT_TRUE(Gateway::Build(out, nullptr, &metrics).ok()) << "the expansion builds";
}

TEST(DiscoveryTest, HostsFilesAreReadLikeTheSystemsOwn) {
  char path[] = "/tmp/tachyon_hosts_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "# the fleet\n127.0.0.3 tachyon-engine\n127.0.0.2   Tachyon-Engine other # comment\n"
                         "not-an-address tachyon-engine\n::1 tachyon-engine\n127.0.0.9 gateway\n127.0.0.2 x\n";
  StatusOr<std::vector<std::string>> found = ResolveHostsFile(path, "tachyon-engine");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<std::string>{"127.0.0.2", "127.0.0.3", "::1"}));
  EXPECT_TRUE(ResolveHostsFile(path, "nobody")->empty());
  std::remove(path);
  EXPECT_FALSE(ResolveHostsFile(path, "tachyon-engine").ok()) << "an unreadable file is a failure, not no members";
  StatusOr<std::vector<std::string>> local = SystemResolver()->Resolve("127.0.0.1", "");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(*local, (std::vector<std::string>{"127.0.0.1"}));
}

// A discovery whose apply builds and publishes gateways as tachyon serve does.
struct Fleet {
  MetricsRegistry metrics;
  std::shared_ptr<ScriptedResolver> resolver = std::make_shared<ScriptedResolver>();
  std::mutex mutex;
  std::shared_ptr<Gateway> gateway;
  int applied = 0;
  std::shared_ptr<BackendDiscovery> discovery = BackendDiscovery::Create(
      resolver,
      [this](const GatewayConfig& expanded) -> Status {
        std::lock_guard<std::mutex> lock(mutex);
        StatusOr<std::shared_ptr<Gateway>> g = Gateway::Build(expanded, gateway.get(), &metrics);
        if (!g.ok()) return g.status();
        (*g)->set_on_connect_failure([this](const std::string& backend) { discovery->Poke(backend); });
        gateway = *g;
        ++applied;
        return Status::Ok();
      },
      &metrics);

  ~Fleet() { discovery->Stop(); }
  std::shared_ptr<Gateway> Current() {
    std::lock_guard<std::mutex> lock(mutex);
    return gateway;
  }
  std::vector<std::string> Names() {
    std::vector<std::string> names;
    for (const auto& slot : Current()->backends()) names.push_back(slot->backend->name());
    return names;
  }
};

TEST(DiscoveryTest, MembershipChangesRebuildTheRoutesAndKeepUnchangedMembers) {
  Fleet fleet;
  fleet.resolver->Set("tachyon-engine.test", {"10.0.0.5", "10.0.0.6"});
  ASSERT_TRUE(fleet.discovery->SetConfig(Parse(Discovered(8000))).ok());
  EXPECT_EQ(fleet.Names(), (std::vector<std::string>{"engines/10.0.0.5", "engines/10.0.0.6", "hosted"}));
  const std::shared_ptr<BackendSlot> kept = fleet.Current()->backends()[1];
  EXPECT_EQ(*fleet.discovery->ResolveNow(), false) << "nothing changed: nothing rebuilt";
  EXPECT_EQ(fleet.applied, 1);

  fleet.resolver->Set("tachyon-engine.test", {"10.0.0.6", "10.0.0.7"});  // one replaced
  EXPECT_EQ(*fleet.discovery->ResolveNow(), true);
  EXPECT_EQ(fleet.Names(), (std::vector<std::string>{"engines/10.0.0.6", "engines/10.0.0.7", "hosted"}));
  EXPECT_EQ(fleet.Current()->backends()[0], kept) << "an unchanged member keeps its slot (breaker, connections)";
  EXPECT_NE(fleet.metrics.Render().find("tachyon:discovered_backends{backend=\"engines\"} 2"), std::string::npos);
  EXPECT_NE(fleet.metrics.Render().find("tachyon:discovery_changes_total{backend=\"engines\"} 1"), std::string::npos);

  fleet.resolver->Fail(true);  // a resolver failure keeps the members
  EXPECT_EQ(*fleet.discovery->ResolveNow(), false);
  EXPECT_EQ(fleet.Names().size(), 3u);
  EXPECT_NE(fleet.metrics.Render().find("tachyon:discovery_failures_total{backend=\"engines\"} 1"), std::string::npos);
  fleet.resolver->Fail(false);

  fleet.resolver->Set("tachyon-engine.test", {});  // the name has no address left
  EXPECT_EQ(*fleet.discovery->ResolveNow(), true);
  EXPECT_EQ(fleet.Names(), (std::vector<std::string>{"engines", "hosted"}));
}

TEST(DiscoveryTest, AReplicaThatLeftFinishesItsCallsAndGetsNoNewOnes) {
  UpstreamServer a("127.0.0.2");
  ASSERT_TRUE(a.ok());
  UpstreamServer b("127.0.0.3", a.port());
  ASSERT_TRUE(b.ok()) << "127.0.0.3:" << a.port() << " is taken";
  a.num_chunks = 20;
  a.gap_ms = 50;  // a 1-second stream
  Fleet fleet;
  fleet.resolver->Set("tachyon-engine.test", {"127.0.0.2"});
  ASSERT_TRUE(fleet.discovery->SetConfig(Parse(Discovered(a.port()))).ok());

  struct Sink : GatewaySink {
    std::mutex mutex;
    std::condition_variable cv;
    int chunks = 0;
    bool done = false;
    BackendResult result;
    CallInfo info;
    void OnChunk(const BackendChunk&, const CallInfo&) override {
      std::lock_guard<std::mutex> lock(mutex);
      ++chunks;
      cv.notify_all();
    }
    void OnDone(const BackendResult& r, const CallInfo& i) override {
      std::lock_guard<std::mutex> lock(mutex);
      result = r;
      info = i;
      done = true;
      cv.notify_all();
    }
    bool Wait(const std::function<bool()>& until) {
      std::unique_lock<std::mutex> lock(mutex);
      return cv.wait_for(lock, std::chrono::seconds(10), until);
    }
  };
  auto request = [] {
    auto parsed = ParseCompletionRequest(
        R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true})", Endpoint::kChatCompletions);
    return GatewayRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                          .id = "chatcmpl-1",
                          .created = 1,
                          .arrival = std::chrono::steady_clock::now()};
  };
  auto in_flight = std::make_shared<Sink>();
  fleet.Current()->Handle(request(), in_flight);
  ASSERT_TRUE(in_flight->Wait([&] { return in_flight->chunks > 0; }));

  fleet.resolver->Set("tachyon-engine.test", {"127.0.0.3"});  // a rolled over to b
  EXPECT_EQ(*fleet.discovery->ResolveNow(), true);
  auto next = std::make_shared<Sink>();
  fleet.Current()->Handle(request(), next);
  ASSERT_TRUE(next->Wait([&] { return next->done; }));
  EXPECT_EQ(next->info.backend, "engines/127.0.0.3");
  EXPECT_EQ(next->result.kind, BackendResult::Kind::kOk);

  ASSERT_TRUE(in_flight->Wait([&] { return in_flight->done; }));
  EXPECT_EQ(in_flight->result.kind, BackendResult::Kind::kOk) << "drained: the call in flight finished";
  EXPECT_EQ(in_flight->info.backend, "engines/127.0.0.2");
  EXPECT_EQ(in_flight->chunks, 20 + 1) << "every chunk, then the final one";
  EXPECT_EQ(a.num_requests(), 1);
}

TEST(DiscoveryTest, AConnectFailureResolvesTheNameAgainAtOnce) {
  UpstreamServer b("127.0.0.3");
  ASSERT_TRUE(b.ok());
  Fleet fleet;
  // 127.0.0.2 has nothing listening on b's port: the replica is gone.
  fleet.resolver->Set("tachyon-engine.test", {"127.0.0.2"});
  ASSERT_TRUE(fleet.discovery->SetConfig(Parse(Discovered(b.port()))).ok());
  const int calls = fleet.resolver->calls();
  fleet.resolver->Set("tachyon-engine.test", {"127.0.0.3"});
  struct Sink : GatewaySink {
    std::promise<BackendResult> done;
    void OnChunk(const BackendChunk&, const CallInfo&) override {}
    void OnDone(const BackendResult& r, const CallInfo&) override { done.set_value(r); }
  };
  auto parsed = ParseCompletionRequest(R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})",
                                       Endpoint::kChatCompletions);
  auto sink = std::make_shared<Sink>();
  fleet.Current()->Handle(
      GatewayRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                     .id = "chatcmpl-1",
                     .created = 1,
                     .arrival = std::chrono::steady_clock::now()},
      sink);
  sink->done.get_future().wait_for(std::chrono::seconds(10));
  // The interval is 60 s: only the poke makes the watcher ask again this soon.
  ASSERT_TRUE(fleet.resolver->WaitForCalls(calls + 1, 5));
  for (int i = 0; i < 100 && fleet.Names()[0] != "engines/127.0.0.3"; ++i) usleep(20000);
  EXPECT_EQ(fleet.Names()[0], "engines/127.0.0.3");
}

TEST(DiscoveryTest, PrefixAffinityMovesAboutOneInNPlusOneWhenAReplicaJoins) {
  // Where each prefix goes on a fresh ring (no memory: another gateway replica,
  // or a prefix not seen since the memory was reset).
  auto home = [](const std::vector<std::string>& names, uint64_t hash) {
    auto p = RoutePolicy::Make(PolicyKind::kPrefixAffinity, names);
    return names[p->Order(std::vector<CandidateState>(names.size()), {.prefix_hash = hash})[0]];
  };
  const std::vector<std::string> four = {"e/10.0.0.1", "e/10.0.0.2", "e/10.0.0.3", "e/10.0.0.4"};
  std::vector<std::string> five = four;
  five.insert(five.begin() + 2, "e/10.0.0.9");  // joins in the middle of the order: indices shift
  int moved = 0, moved_elsewhere = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const uint64_t hash = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);
    const std::string before = home(four, hash), after = home(five, hash);
    moved += before != after;
    moved_elsewhere += before != after && after != "e/10.0.0.9";
  }
  EXPECT_NEAR(static_cast<double>(moved) / n, 1.0 / 5, 0.06) << moved;
  EXPECT_EQ(moved_elsewhere, 0) << "a prefix moves only to the replica that joined";

  // With memory: a remembered prefix stays on its replica across the rebuild.
  auto old_policy = RoutePolicy::Make(PolicyKind::kPrefixAffinity, four);
  std::map<uint64_t, std::string> placed;
  for (int i = 0; i < 200; ++i) {
    const uint64_t hash = 0x51ed2701ULL * static_cast<uint64_t>(i + 7);
    placed[hash] = four[old_policy->Order(std::vector<CandidateState>(4), {.prefix_hash = hash})[0]];
  }
  auto new_policy = RoutePolicy::Make(PolicyKind::kPrefixAffinity, five);
  new_policy->Inherit(*old_policy, four);
  for (const auto& [hash, name] : placed) {
    EXPECT_EQ(five[new_policy->Order(std::vector<CandidateState>(5), {.prefix_hash = hash})[0]], name);
  }
}

}  // namespace
}  // namespace tachyon
