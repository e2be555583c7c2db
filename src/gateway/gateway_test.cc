// The gateway over real upstreams on loopback: fallback, no retry after the first
// byte, breakers, cancellation, routes, stages and reloads.
#include "gateway/gateway.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>

#include "tests/support/upstream_server.h"

namespace tachyon {
namespace {

using testing::UpstreamServer;

class Collector : public GatewaySink {
 public:
  void OnChunk(const BackendChunk& chunk, const CallInfo& info) override {
    std::lock_guard<std::mutex> lock(mutex_);
    chunks.push_back(chunk);
    first_info = info;
    cv_.notify_all();
  }
  void OnDone(const BackendResult& r, const CallInfo& i) override {
    std::lock_guard<std::mutex> lock(mutex_);
    result = r;
    info = i;
    done = true;
    cv_.notify_all();
  }
  bool Wait(double seconds = 10) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done; });
  }
  bool WaitForChunks(size_t n, double seconds = 10) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return chunks.size() >= n || done; });
    return chunks.size() >= n;
  }
  std::vector<BackendChunk> chunks;
  BackendResult result;
  CallInfo info, first_info;
  bool done = false;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
};

GatewayRequest Chat(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kChatCompletions);
  return GatewayRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                        .id = "chatcmpl-1",
                        .created = 1,
                        .arrival = std::chrono::steady_clock::now()};
}

std::string Backend(const std::string& name, const UpstreamServer& up, const std::string& extra = "") {
  return "[[backend]]\nname = '" + name + "'\nkind = 'openai'\nbase_url = '" + up.base_url() +
         "'\nfirst_byte_timeout = 0.3\n" + extra + "\n";
}

std::shared_ptr<Gateway> Build(const std::string& toml, MetricsRegistry* metrics, const Gateway* previous = nullptr,
                               const Clock* clock = nullptr) {
  StatusOr<GatewayConfig> config = ParseGatewayConfig(toml, "test.toml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  StatusOr<std::shared_ptr<Gateway>> g = Gateway::Build(*config, previous, metrics, nullptr, clock);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<Collector> Call(const Gateway& g, const std::string& body) {
  auto sink = std::make_shared<Collector>();
  g.Handle(Chat(body), sink);
  EXPECT_TRUE(sink->Wait());
  return sink;
}

const char* kStream = R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true})";
const char* kWhole = R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})";

// A backend that answers from a thread of its own once released (after Start
// has returned), with a cancel function that holds the call's sink, as the
// local and remote backends' do.
class LaterBackend : public tachyon::Backend {
 public:
  ~LaterBackend() override {
    Release();
    Shutdown();
  }
  const std::string& name() const override { return name_; }
  const char* kind() const override { return "test"; }
  const std::string& model_name() const override { return name_; }
  CancelFn Start(BackendRequest, std::shared_ptr<BackendSink> sink) override {
    threads_.emplace_back([sink, gate = gate_] {
      gate.wait();
      sink->OnDone(BackendResult{.body = R"({"choices":[]})"});
    });
    return [sink] { (void)sink; };
  }
  void Release() {
    if (!released_) go_.set_value();
    released_ = true;
  }
  void Shutdown() override {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  bool OnOwnThread() const override { return false; }

 private:
  std::promise<void> go_;
  std::shared_future<void> gate_ = go_.get_future().share();
  bool released_ = false;
  std::string name_ = "later";
  std::vector<std::thread> threads_;
};

// Every finished call is freed, its sink with it (the cancel function it kept held
// the call in a cycle: every call that was not cancelled leaked, ~5 KB each).
TEST(GatewayTest, AFinishedCallIsFreed) {
  MetricsRegistry metrics;
  auto backend = std::make_shared<LaterBackend>();
  std::shared_ptr<Gateway> g = Gateway::Single(backend, "chat", &metrics);
  std::weak_ptr<Collector> watched;
  {
    auto sink = std::make_shared<Collector>();
    watched = sink;
    g->Handle(Chat(kWhole), sink);
    backend->Release();  // Start has returned: the call holds the attempt's cancel function
    ASSERT_TRUE(sink->Wait());
    EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk);
  }
  backend->Shutdown();
  EXPECT_TRUE(watched.expired()) << "the call and its sink outlived the answer";
}

TEST(GatewayTest, FallbackTriesTheNextOnConnectErrorsFiveHundredsAndFirstByteTimeouts) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("a", a) + Backend("b", b) + "[[route]]\nmodel='chat'\nbackends=['a','b']\n", &metrics);
  ASSERT_NE(g, nullptr);
  for (UpstreamServer::Mode mode : {UpstreamServer::Mode::kStatus, UpstreamServer::Mode::kHang}) {
    a.mode = mode;
    auto sink = Call(*g, kStream);
    EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk) << sink->result.error.message;
    EXPECT_EQ(sink->info.backend, "b");
    EXPECT_EQ(sink->info.attempts, 2);
    EXPECT_EQ(sink->chunks.size(), 4u);
    EXPECT_EQ(sink->first_info.backend, "b") << "the headers name the backend that answered";
  }
  a.mode = UpstreamServer::Mode::kStream;
  a.Stop();  // connect error
  auto whole = Call(*g, kWhole);
  EXPECT_EQ(whole->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(whole->info.backend, "b");
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tachyon:route_retries_total{route=\"chat\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:route_fallbacks_total{route=\"chat\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("tachyon:backend_errors_total{backend=\"a\",kind=\"upstream_5xx\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tachyon:backend_errors_total{backend=\"a\",kind=\"first_byte_timeout\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tachyon:backend_errors_total{backend=\"a\",kind=\"connect\"} 1\n"), std::string::npos);
}

TEST(GatewayTest, NoRetryOnceTheFirstByteWentOutAndFourHundredsPassThrough) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("a", a) + Backend("b", b) + "[[route]]\nmodel='chat'\nbackends=['a','b']\n", &metrics);
  a.mode = UpstreamServer::Mode::kCutAfter;
  a.num_chunks = 5;
  a.cut_after = 2;
  auto cut = Call(*g, kStream);
  EXPECT_EQ(cut->result.kind, BackendResult::Kind::kBroken);
  EXPECT_EQ(cut->chunks.size(), 2u);
  EXPECT_EQ(b.num_requests(), 0) << "never retried after the first byte";
  a.mode = UpstreamServer::Mode::kStatus;
  a.status = 400;
  auto four = Call(*g, kWhole);
  EXPECT_EQ(four->result.kind, BackendResult::Kind::kRejected);
  EXPECT_EQ(four->result.http_status, 400);
  EXPECT_NE(four->result.body.find("scripted failure 400"), std::string::npos);
  EXPECT_EQ(b.num_requests(), 0) << "a 4xx is the client's answer, not a reason to fall back";
}

TEST(GatewayTest, TheBreakerOpensAfterFailuresThenAProbeClosesIt) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  MetricsRegistry metrics;
  ManualClock clock;
  auto g = Build(Backend("a", a, "breaker_failures = 2\nbreaker_cooldown = 0.3") + Backend("b", b) +
                     "[[route]]\nmodel='chat'\nbackends=['a','b']\n",
                 &metrics, nullptr, &clock);
  a.mode = UpstreamServer::Mode::kStatus;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(Call(*g, kWhole)->info.backend, "b");
  EXPECT_EQ(a.num_requests(), 2);
  EXPECT_EQ(Call(*g, kWhole)->info.backend, "b");
  EXPECT_EQ(a.num_requests(), 2) << "open: a is not asked";
  EXPECT_NE(metrics.Render().find("tachyon:backend_breaker_state{backend=\"a\"} 1\n"), std::string::npos);
  nlohmann::json health;
  EXPECT_EQ(g->Health(&health), 200) << "the route still has b";
  EXPECT_EQ(health["backends"]["a"]["state"], "open");
  clock.AdvanceSeconds(0.2);
  EXPECT_EQ(Call(*g, kWhole)->info.backend, "b") << "still open before the cooldown ends";
  EXPECT_EQ(a.num_requests(), 2);
  clock.AdvanceSeconds(0.15);
  a.mode = UpstreamServer::Mode::kStream;
  EXPECT_EQ(Call(*g, kWhole)->info.backend, "a") << "the half-open probe";
  EXPECT_NE(metrics.Render().find("tachyon:backend_breaker_state{backend=\"a\"} 0\n"), std::string::npos);
  EXPECT_EQ(Call(*g, kWhole)->info.backend, "a");
}

TEST(GatewayTest, AllBackendsDownIsA503NamingThem) {
  UpstreamServer a;
  ASSERT_TRUE(a.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("a", a, "breaker_failures = 1\nbreaker_cooldown = 60") +
                     "[[route]]\nmodel='chat'\nbackends=['a']\n", &metrics);
  a.mode = UpstreamServer::Mode::kStatus;
  auto first = Call(*g, kWhole);
  EXPECT_EQ(first->result.kind, BackendResult::Kind::kFailed);
  EXPECT_EQ(first->result.error.http_status, 502);
  auto second = Call(*g, kWhole);
  EXPECT_EQ(second->result.error.http_status, 503);
  EXPECT_NE(second->result.error.message.find("a: open"), std::string::npos) << second->result.error.message;
  nlohmann::json health;
  EXPECT_EQ(g->Health(&health), 503);
  EXPECT_EQ(health["routes"]["chat"], "unavailable");
}

TEST(GatewayTest, CancelClosesTheUpstreamRequestAndFreesTheSlot) {
  UpstreamServer a;
  ASSERT_TRUE(a.ok());
  a.num_chunks = 200;
  a.gap_ms = 10;
  MetricsRegistry metrics;
  auto g = Build(Backend("a", a) + "[[route]]\nmodel='chat'\nbackends=['a']\n", &metrics);
  auto sink = std::make_shared<Collector>();
  CancelFn cancel = g->Handle(Chat(kStream), sink);
  ASSERT_TRUE(sink->WaitForChunks(2));
  cancel();
  EXPECT_TRUE(a.WaitClientClosed(1));
  EXPECT_EQ(a.num_client_closed(), 1);
  EXPECT_FALSE(sink->Wait(0.1));
  nlohmann::json health;
  g->Health(&health);
  EXPECT_EQ(health["backends"]["a"]["in_flight"], 0);
  EXPECT_NE(metrics.Render().find("tachyon:request_cancelled_total{model_name=\"a\",route=\"chat\",backend=\"a\"} 1\n"),
            std::string::npos);
}

TEST(GatewayTest, RoutesByModelNameAndSpreadsRoundRobin) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("a", a, "upstream_model = 'big'") + Backend("b", b) +
                     "[[route]]\nmodel='chat'\nbackends=['a','b']\npolicy='round-robin'\n"
                     "[[route]]\nmodel='only-b'\nbackends=['b']\n",
                 &metrics);
  for (int i = 0; i < 4; ++i) Call(*g, kWhole);
  EXPECT_EQ(a.num_requests(), 2);
  EXPECT_EQ(b.num_requests(), 2);
  EXPECT_EQ(a.bodies()[0]["model"], "big");
  EXPECT_EQ(b.bodies()[0]["model"], "chat") << "no upstream_model: the client's name";
  Call(*g, R"({"model":"only-b","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(b.num_requests(), 3);
  auto unknown = Call(*g, R"({"model":"gpt-9","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(unknown->result.http_status, 404);
  EXPECT_NE(unknown->result.body.find("model_not_found"), std::string::npos);
  auto missing = Call(*g, R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(missing->result.http_status, 400) << "two routes: the model must be named";
  const nlohmann::json models = g->Models(0);
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][0]["id"], "chat");
  EXPECT_EQ(models["data"][0]["backends"][1]["name"], "b");
}

// A stage that answers requests whose last message is "ping" and marks the others.
class PingStage : public Stage {
 public:
  std::string_view name() const override { return "ping"; }
  std::optional<StageAnswer> Process(GatewayRequest& request) override {
    if (request.request->messages.back().content != "ping") {
      request.request->body["x_seen_by_stage"] = true;
      return std::nullopt;
    }
    StageAnswer answer;
    answer.answered_by = "ping-stage";
    answer.result.body = R"({"pong":true})";
    return answer;
  }
};

TEST(GatewayTest, PipelineStagesMayAnswerOrChangeTheRequest) {
  UpstreamServer a;
  ASSERT_TRUE(a.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("a", a) + "[[route]]\nmodel='chat'\nbackends=['a']\n", &metrics);
  g->pipeline().Add(std::make_unique<PingStage>());
  auto pong = Call(*g, R"({"model":"chat","messages":[{"role":"user","content":"ping"}]})");
  EXPECT_EQ(pong->result.body, R"({"pong":true})");
  EXPECT_EQ(pong->info.backend, "ping-stage");
  EXPECT_EQ(a.num_requests(), 0);
  Call(*g, kWhole);
  ASSERT_EQ(a.num_requests(), 1);
  EXPECT_EQ(a.bodies()[0]["x_seen_by_stage"], true) << "the changed body went upstream";
}

TEST(GatewayTest, AReloadKeepsUnchangedBackendsAndRebuildsChangedOnes) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  MetricsRegistry metrics;
  auto first = Build(Backend("a", a) + Backend("b", b) + "[[route]]\nmodel='chat'\nbackends=['a','b']\n", &metrics);
  auto second = Build(Backend("a", a) + Backend("b", b, "pool_size = 3") +
                          "[[route]]\nmodel='chat'\nbackends=['b','a']\n",
                      &metrics, first.get());
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->backends()[0]->backend.get(), second->backends()[0]->backend.get()) << "a is unchanged";
  EXPECT_NE(first->backends()[1]->backend.get(), second->backends()[1]->backend.get()) << "b changed";
  EXPECT_EQ(Call(*second, kWhole)->info.backend, "b");
  EXPECT_EQ(Call(*first, kWhole)->info.backend, "a") << "the old gateway still serves its calls";
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

TEST(GatewayTest, AClassifyRouteSendsEachClassToItsBackendsAndFallsBack) {
  UpstreamServer small, large;
  ASSERT_TRUE(small.ok() && large.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("small", small, "breaker_failures = 1\nbreaker_cooldown = 60") + Backend("large", large) +
                     R"(
[[route]]
model = "auto"
aliases = ["*-mini"]
policy = "classify"
default = "large"
[[route.class]]
name = "small"
backends = ["small"]
fallback = ["large"]
[[route.class]]
name = "large"
backends = ["large"]
[[route.rule]]
name = "extraction"
class = "small"
user_regex = "(?i)^extract"
)",
                 &metrics);
  ASSERT_NE(g, nullptr);
  auto ask = [&](const std::string& model, const std::string& user) {
    return Call(*g, R"({"model":")" + model + R"(","messages":[{"role":"user","content":")" + user + "\"}]}");
  };
  auto sink = ask("auto", "Extract the dates: May 1 and June 2");
  EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(sink->info.backend, "small");
  EXPECT_EQ(sink->info.route_class, "small");
  EXPECT_EQ(sink->info.route_reason, "rule=extraction");
  sink = ask("auto", "Write a sonnet about the sea");
  EXPECT_EQ(sink->info.backend, "large");
  EXPECT_EQ(sink->info.route_class, "large");
  EXPECT_EQ(sink->info.route_reason, "default");
  // An alias reaches the route (its name is still the route's).
  sink = ask("gpt-4o-mini", "Extract the names");
  EXPECT_EQ(sink->info.route, "auto");
  EXPECT_EQ(sink->info.backend, "small");
  EXPECT_EQ(Call(*g, R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})")->result.error.http_status,
            404);

  // The small backend fails: the class's fallback answers, and once its breaker
  // is open the small one is not even tried.
  small.mode = UpstreamServer::Mode::kStatus;
  sink = ask("auto", "Extract the dates");
  EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(sink->info.backend, "large");
  EXPECT_EQ(sink->info.attempts, 2);
  sink = ask("auto", "Extract the dates");
  EXPECT_EQ(sink->info.backend, "large");
  EXPECT_EQ(sink->info.attempts, 1);
  EXPECT_EQ(sink->info.route_class, "small");

  const std::string text = metrics.Render();
  EXPECT_NE(text.find(R"(tachyon:router_decisions_total{route="auto",class="small",by="rule"} 4)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(tachyon:router_decisions_total{route="auto",class="large",by="default"} 1)"),
            std::string::npos);
  const nlohmann::json models = g->Models(0);
  EXPECT_EQ(models["data"][0]["policy"], "classify");
  EXPECT_EQ(models["data"][0]["classes"][0]["name"], "small");
  EXPECT_EQ(models["data"][0]["default_class"], "large");
  EXPECT_EQ(models["data"][0]["aliases"][0], "*-mini");
}

TEST(GatewayTest, AClassifyRouteLoadsItsClassifierAndRefusesAMismatch) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  MetricsRegistry metrics;
  const std::string route = "[[route]]\nmodel = 'auto'\npolicy = 'classify'\nclassifier = { model = '/nonexistent/router.bin' }\n"
                            "[[route.class]]\nname = 'only'\nbackends = ['a']\n";
  StatusOr<GatewayConfig> config = ParseGatewayConfig(Backend("a", up) + route, "test.toml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  StatusOr<std::shared_ptr<Gateway>> g = Gateway::Build(*config, nullptr, &metrics);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("route 'auto': classifier"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

TEST(GatewayTest, ATrimmedRouteSendsTheTrimmedBodyUpstreamAndCountsIt) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  MetricsRegistry metrics;
  auto g = Build(Backend("a", up) + R"(
[[route]]
model = "rag"
backends = ["a"]
trim = { whitespace = true, duplicates = true, documents = true, documents_top_k = 1 }
[[route]]
model = "plain"
backends = ["a"]
)",
                 &metrics);
  ASSERT_NE(g, nullptr);
  const std::string body = R"({"model":"rag","messages":[
      {"role":"system","content":"Answer only from the documents given.\n\n\n\nAnswer only from the documents given."},
      {"role":"user","content":"refund window?"}],
    "documents":[{"text":"Refunds within 30 days.","score":0.9},{"text":"Shipping is slow.","score":0.2}],
    "temperature":0.5})";
  auto sink = Call(*g, body);
  ASSERT_EQ(sink->result.kind, BackendResult::Kind::kOk) << sink->result.error.message;
  const nlohmann::json sent = up.bodies().back();
  EXPECT_EQ(sent["messages"][0]["content"], "Answer only from the documents given.");
  EXPECT_EQ(sent["messages"][1]["content"],
            "<documents>\n<document index=\"1\">\nRefunds within 30 days.\n</document>\n</documents>\n\nrefund window?");
  EXPECT_FALSE(sent.contains("documents"));
  EXPECT_EQ(sent["temperature"], 0.5);  // the rest passes through
  ASSERT_EQ(sink->info.trimmed_tokens.size(), 3u);
  EXPECT_EQ(sink->info.trimmed_tokens[0], (std::pair<std::string, int64_t>{"whitespace", 2}));
  EXPECT_EQ(sink->info.trimmed_tokens[1], (std::pair<std::string, int64_t>{"duplicates", 39}));
  EXPECT_EQ(sink->info.trimmed_tokens[2], (std::pair<std::string, int64_t>{"documents", 17}));
  EXPECT_NE(metrics.Render().find(R"(tachyon:trimmed_tokens_total{route="rag",step="duplicates"} 39)"),
            std::string::npos);

  // A bad documents array is the client's 400, and nothing goes upstream.
  const size_t before = up.bodies().size();
  sink = Call(*g, R"({"model":"rag","messages":[{"role":"user","content":"q"}],"documents":[{"score":1}]})");
  EXPECT_EQ(sink->result.kind, BackendResult::Kind::kRejected);
  EXPECT_EQ(sink->result.http_status, 400);
  EXPECT_NE(sink->result.body.find("documents[0].text"), std::string::npos) << sink->result.body;
  EXPECT_EQ(up.bodies().size(), before);
  // A route without trim passes documents through as they are.
  sink = Call(*g, R"({"model":"plain","messages":[{"role":"user","content":"q  \n\n\n"}],"documents":[{"score":1}]})");
  EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk);
  EXPECT_TRUE(up.bodies().back().contains("documents"));
  EXPECT_EQ(up.bodies().back()["messages"][0]["content"], "q  \n\n\n");
  EXPECT_TRUE(sink->info.trimmed_tokens.empty());
}

}  // namespace
}  // namespace tachyon
