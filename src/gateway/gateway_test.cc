// The gateway over real upstreams on loopback: fallback, no retry after the first
// byte, breakers, cancellation, routes, stages and reloads.
#include "gateway/gateway.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>

#include "gateway/cache/exact_cache.h"
#include "gateway/cache/semantic_cache.h"
#include "tests/support/eventually.h"
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

// Hedged requests: two real upstreams, the first late by first_chunk_ms.
std::string Hedged(const UpstreamServer& a, const UpstreamServer& b, const std::string& hedge,
                   const std::string& route_extra = "") {
  auto backend = [](const std::string& name, const UpstreamServer& up) {
    return "[[backend]]\nname = '" + name + "'\nkind = 'openai'\nbase_url = '" + up.base_url() +
           "'\nfirst_byte_timeout = 10\n";
  };
  return backend("a", a) + backend("b", b) + "[[route]]\nmodel = 'chat'\nbackends = ['a', 'b']\nhedge = " + hedge +
         "\n" + route_extra + "\n";
}

double Metric(const MetricsRegistry& metrics, const std::string& series) {
  const std::string text = metrics.Render();
  const size_t at = text.find(series + " ");
  return at == std::string::npos ? 0 : std::strtod(text.c_str() + at + series.size() + 1, nullptr);
}

int InFlight(const Gateway& g, const std::string& backend) {
  nlohmann::json health;
  g.Health(&health);
  return health["backends"][backend]["in_flight"].get<int>();
}

TEST(GatewayHedgeTest, ALateFirstByteStartsTheNextBackendAndTheFirstToAnswerWins) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  a.first_chunk_ms = 3000;
  MetricsRegistry metrics;
  auto g = Build(Hedged(a, b, "{ after_ms = 50 }"), &metrics);
  ASSERT_NE(g, nullptr);
  for (const char* body : {kStream, kWhole}) {
    const auto start = std::chrono::steady_clock::now();
    auto sink = Call(*g, body);
    ASSERT_EQ(sink->result.kind, BackendResult::Kind::kOk) << sink->result.error.message;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500)) << "a's answer was awaited";
    EXPECT_EQ(sink->info.backend, "b");
    EXPECT_EQ(sink->info.attempts, 2);
    EXPECT_EQ(sink->info.hedges, 1);
    EXPECT_TRUE(sink->info.hedge_won);
    if (body == kStream) {
      EXPECT_EQ(sink->chunks.size(), 4u);
      EXPECT_EQ(sink->first_info.backend, "b") << "the headers name the winner";
    } else {
      EXPECT_TRUE(sink->result.text.has_value());
    }
  }
  EXPECT_TRUE(a.WaitClientClosed(2)) << "the losers' upstream requests are closed at once";
  EXPECT_EQ(InFlight(*g, "a"), 0);
  EXPECT_EQ(InFlight(*g, "b"), 0);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="won"})"), 2);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="lost"})"), 0);
  EXPECT_EQ(Metric(metrics, R"(tachyon:backend_errors_total{backend="a",kind="cancelled"})"), 0);
}

TEST(GatewayHedgeTest, AFirstAttemptThatAnswersInTimeIsNeverHedged) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  MetricsRegistry metrics;
  auto g = Build(Hedged(a, b, "{ after_ms = 500 }"), &metrics);
  ASSERT_NE(g, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto sink = Call(*g, kStream);
    EXPECT_EQ(sink->info.backend, "a");
    EXPECT_EQ(sink->info.hedges, 0);
  }
  EXPECT_EQ(b.num_requests(), 0);
  EXPECT_EQ(metrics.Render().find("tachyon:hedges_total{"), std::string::npos);
}

TEST(GatewayHedgeTest, WhenTheFirstAttemptAnswersFirstTheHedgeIsCancelledAndLost) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  a.first_chunk_ms = 300;
  b.first_chunk_ms = 5000;
  MetricsRegistry metrics;
  auto g = Build(Hedged(a, b, "{ after_ms = 30 }"), &metrics);
  ASSERT_NE(g, nullptr);
  auto sink = Call(*g, kStream);
  ASSERT_EQ(sink->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(sink->info.backend, "a");
  EXPECT_EQ(sink->info.hedges, 1);
  EXPECT_FALSE(sink->info.hedge_won);
  EXPECT_EQ(sink->chunks.size(), 4u) << "one answer, the winner's, whole";
  EXPECT_EQ(b.num_requests(), 1);
  EXPECT_TRUE(b.WaitClientClosed(1));
  EXPECT_EQ(InFlight(*g, "b"), 0);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="lost"})"), 1);
}

TEST(GatewayHedgeTest, AHedgeThatFailsLeavesTheFirstAttemptToAnswer) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  a.first_chunk_ms = 200;
  b.mode = UpstreamServer::Mode::kStatus;
  MetricsRegistry metrics;
  auto g = Build(Hedged(a, b, "{ after_ms = 20 }"), &metrics);
  ASSERT_NE(g, nullptr);
  auto sink = Call(*g, kStream);
  ASSERT_EQ(sink->result.kind, BackendResult::Kind::kOk) << sink->result.error.message;
  EXPECT_EQ(sink->info.backend, "a");
  EXPECT_EQ(b.num_requests(), 1);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="lost"})"), 1);
  EXPECT_EQ(Metric(metrics, R"(tachyon:route_retries_total{route="chat"})"), 0);
  // Both failing: the call ends with the last failure, the hedge counted cancelled.
  a.first_chunk_ms = 0;
  a.mode = UpstreamServer::Mode::kStatus;
  b.first_chunk_ms = 0;
  auto failed = Call(*g, kStream);
  EXPECT_EQ(failed->result.kind, BackendResult::Kind::kFailed);
  EXPECT_EQ(InFlight(*g, "a"), 0);
  EXPECT_EQ(InFlight(*g, "b"), 0);
}

TEST(GatewayHedgeTest, TheClientsHeaderTurnsItOffAndTheBudgetCapsIt) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  a.first_chunk_ms = 150;
  MetricsRegistry metrics;
  auto g = Build(Hedged(a, b, "{ after_ms = 10, max_rate = 0 }"), &metrics);
  ASSERT_NE(g, nullptr);
  GatewayRequest off = Chat(kStream);
  off.hedge = false;  // x-tachyon-hedge: off
  auto sink = std::make_shared<Collector>();
  g->Handle(std::move(off), sink);
  ASSERT_TRUE(sink->Wait());
  EXPECT_EQ(sink->info.backend, "a");
  EXPECT_EQ(b.num_requests(), 0);
  // max_rate = 0: the budget's first burst, then no more.
  const int burst = static_cast<int>(HedgeBudget::kBurst);
  for (int i = 0; i < burst; ++i) EXPECT_EQ(Call(*g, kStream)->info.backend, "b");
  auto refused = Call(*g, kStream);
  EXPECT_EQ(refused->info.backend, "a");
  EXPECT_EQ(refused->info.hedges, 0);
  EXPECT_EQ(b.num_requests(), burst);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_refused_total{route="chat"})"), 1);
}

TEST(GatewayHedgeTest, AHedgedMissIsStoredOnceAndServedFromTheCache) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  a.first_chunk_ms = 3000;
  a.word = "slow";
  b.word = "fast";
  MetricsRegistry metrics;
  auto g = Build("[cache]\nstore = 'memory'\n" + Hedged(a, b, "{ after_ms = 30 }", "exact_cache = true"), &metrics);
  ASSERT_NE(g, nullptr);
  const char* body = R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true,"temperature":0})";
  auto first = Call(*g, body);
  ASSERT_EQ(first->info.backend, "b");
  EXPECT_TRUE(a.WaitClientClosed(1));
  EXPECT_EQ(g->exact_cache()->entries(), 1u);
  auto second = Call(*g, body);
  EXPECT_EQ(second->info.cache, "hit");
  std::string text;
  for (const BackendChunk& c : second->chunks) text += c.text;
  EXPECT_EQ(text, "fastfastfast");
  EXPECT_EQ(a.num_requests() + b.num_requests(), 2);
}

TEST(GatewayHedgeTest, MaxHedgesMoreThanOneStartsThemOneDelayApart) {
  UpstreamServer a, b, c;
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  a.first_chunk_ms = 3000;
  b.first_chunk_ms = 3000;
  MetricsRegistry metrics;
  auto backend = [](const std::string& name, const UpstreamServer& up) {
    return "[[backend]]\nname = '" + name + "'\nkind = 'openai'\nbase_url = '" + up.base_url() + "'\n";
  };
  auto g = Build(backend("a", a) + backend("b", b) + backend("c", c) +
                     "[[route]]\nmodel = 'chat'\nbackends = ['a', 'b', 'c']\nhedge = { after_ms = 30, max = 2 }\n",
                 &metrics);
  ASSERT_NE(g, nullptr);
  auto sink = Call(*g, kStream);
  EXPECT_EQ(sink->info.backend, "c");
  EXPECT_EQ(sink->info.hedges, 2);
  EXPECT_EQ(sink->info.attempts, 3);
  EXPECT_TRUE(a.WaitClientClosed(1));
  EXPECT_TRUE(b.WaitClientClosed(1));
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="won"})"), 1);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="lost"})"), 1);
}

TEST(GatewayHedgeTest, ACancelledHedgedCallFreesEveryAttempt) {
  UpstreamServer a, b;
  ASSERT_TRUE(a.ok() && b.ok());
  a.first_chunk_ms = 3000;
  b.first_chunk_ms = 3000;
  MetricsRegistry metrics;
  auto g = Build(Hedged(a, b, "{ after_ms = 20 }"), &metrics);
  ASSERT_NE(g, nullptr);
  auto sink = std::make_shared<Collector>();
  CancelFn cancel = g->Handle(Chat(kStream), sink);
  for (int i = 0; i < 500 && b.num_requests() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(b.num_requests(), 1);
  cancel();
  EXPECT_TRUE(a.WaitClientClosed(1));
  EXPECT_TRUE(b.WaitClientClosed(1));
  EXPECT_FALSE(sink->Wait(0.1));
  EXPECT_EQ(InFlight(*g, "a"), 0);
  EXPECT_EQ(InFlight(*g, "b"), 0);
  EXPECT_EQ(Metric(metrics, R"(tachyon:hedges_total{route="chat",outcome="cancelled"})"), 1);
}

// Single flight: identical exact-cache misses in flight at once.
std::string Coalescing(const UpstreamServer& up, const std::string& extra = "first_byte_timeout = 10") {
  return "[cache]\nstore = 'memory'\n[[backend]]\nname = 'a'\nkind = 'openai'\nbase_url = '" + up.base_url() +
         "'\n" + extra + "\n[[route]]\nmodel = 'chat'\nbackends = ['a']\nexact_cache = true\n";
}

const char* kSame = R"({"model":"chat","messages":[{"role":"user","content":"same"}],"stream":true,"temperature":0})";
const char* kSameWhole = R"({"model":"chat","messages":[{"role":"user","content":"same"}],"temperature":0})";

std::string TextOf(const Collector& sink) {
  std::string text;
  for (const BackendChunk& c : sink.chunks) text += c.text;
  return text;
}

TEST(GatewaySingleFlightTest, IdenticalMissesInFlightShareOneUpstreamCallAndEachGetsTheWholeStream) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  up.num_chunks = 5;
  up.gap_ms = 30;
  MetricsRegistry metrics;
  auto g = Build(Coalescing(up), &metrics);
  ASSERT_NE(g, nullptr);
  std::vector<std::shared_ptr<Collector>> sinks;
  for (int i = 0; i < 20; ++i) {
    sinks.push_back(std::make_shared<Collector>());
    g->Handle(Chat(i % 4 == 3 ? kSameWhole : kSame), sinks.back());
    if (i == 0) {
      ASSERT_TRUE(sinks[0]->WaitForChunks(2)) << "the leader streams";
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    ASSERT_TRUE(sinks[i]->Wait()) << i;
    EXPECT_EQ(sinks[i]->result.kind, BackendResult::Kind::kOk) << i << ": " << sinks[i]->result.error.message;
  }
  EXPECT_EQ(up.num_requests(), 1);
  EXPECT_EQ(TextOf(*sinks[0]), "toktoktoktoktok");
  EXPECT_EQ(sinks[0]->info.backend, "a");
  for (size_t i = 1; i < sinks.size(); ++i) {
    EXPECT_EQ(sinks[i]->info.cache, "coalesced") << i;
    EXPECT_EQ(sinks[i]->info.backend, "single-flight") << i;
    if (i % 4 == 3) {
      ASSERT_TRUE(sinks[i]->result.text.has_value());
      EXPECT_EQ(*sinks[i]->result.text, "toktoktoktoktok");
      nlohmann::json body = nlohmann::json::parse(sinks[i]->result.body);
      EXPECT_EQ(body["choices"][0]["message"]["content"], "toktoktoktoktok");
      EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
      continue;
    }
    EXPECT_EQ(TextOf(*sinks[i]), "toktoktoktoktok") << i << ": every piece from the start, once";
    ASSERT_GE(sinks[i]->chunks.size(), 2u);
    nlohmann::json first = nlohmann::json::parse(sinks[i]->chunks.front().event);
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    EXPECT_EQ(first["id"], "chatcmpl-1");
    EXPECT_EQ(sinks[i]->chunks.back().finish_reason, "stop");
  }
  EXPECT_EQ(Metric(metrics, R"(tachyon:cache_coalesced_total{route="chat"})"), 19);
  // Stored once, then hits.
  auto later = Call(*g, kSame);
  EXPECT_EQ(later->info.cache, "hit");
  EXPECT_EQ(up.num_requests(), 1);
  // The leader lands its flight (takes it out of the table) just after handing its
  // end to the followers, on its own thread: a moment after their sinks finish.
  for (int i = 0; i < 1000 && g->flights().size() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(g->flights().size(), 0u) << "no flight is left behind";
}

TEST(GatewaySingleFlightTest, ALeaderThatFailsBeforeAnyTextLetsOneFollowerGoUpstream) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  up.first_chunk_ms = 1500;  // the leader's whole answer is later than its first-byte timeout
  MetricsRegistry metrics;
  auto g = Build(Coalescing(up, "first_byte_timeout = 0.3"), &metrics);
  ASSERT_NE(g, nullptr);
  auto leader = std::make_shared<Collector>();
  g->Handle(Chat(kSameWhole), leader);
  for (int i = 0; i < 500 && up.num_requests() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(up.num_requests(), 1);
  up.first_chunk_ms = 0;
  std::vector<std::shared_ptr<Collector>> followers;
  for (int i = 0; i < 4; ++i) {
    followers.push_back(std::make_shared<Collector>());
    g->Handle(Chat(i % 2 ? kSame : kSameWhole), followers.back());
  }
  ASSERT_TRUE(leader->Wait());
  EXPECT_EQ(leader->result.kind, BackendResult::Kind::kFailed);
  EXPECT_EQ(leader->result.error_kind, "first_byte_timeout");
  for (auto& f : followers) {
    ASSERT_TRUE(f->Wait());
    EXPECT_EQ(f->result.kind, BackendResult::Kind::kOk) << f->result.error.message;
  }
  EXPECT_EQ(up.num_requests(), 2) << "one follower led the second flight, the others followed it";
  int led = 0;
  for (auto& f : followers) led += f->info.backend == "a";
  EXPECT_EQ(led, 1);
}

TEST(GatewaySingleFlightTest, ALeaderWhoseClientLeavesGoesOnForItsFollowers) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  up.num_chunks = 6;
  up.gap_ms = 30;
  MetricsRegistry metrics;
  auto g = Build(Coalescing(up), &metrics);
  ASSERT_NE(g, nullptr);
  auto leader = std::make_shared<Collector>();
  CancelFn cancel = g->Handle(Chat(kSame), leader);
  ASSERT_TRUE(leader->WaitForChunks(2));
  auto follower = std::make_shared<Collector>();
  CancelFn cancel_follower = g->Handle(Chat(kSame), follower);
  auto leaving = std::make_shared<Collector>();
  CancelFn cancel_leaving = g->Handle(Chat(kSame), leaving);
  cancel();
  cancel_leaving();
  ASSERT_TRUE(follower->Wait());
  EXPECT_EQ(follower->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(TextOf(*follower), "toktoktoktoktoktok");
  EXPECT_FALSE(leader->Wait(0.05)) << "the leader's client hears nothing more";
  EXPECT_FALSE(leaving->done);
  EXPECT_EQ(up.num_requests(), 1);
  EXPECT_EQ(up.num_client_closed(), 0) << "the upstream call was not cancelled";
  EXPECT_EQ(Call(*g, kSame)->info.cache, "hit") << "and its answer was stored";
  // Without followers, a leader's client leaving cancels the upstream call as before.
  const char* other = R"({"model":"chat","messages":[{"role":"user","content":"other"}],"stream":true,"temperature":0})";
  auto alone = std::make_shared<Collector>();
  CancelFn cancel_alone = g->Handle(Chat(other), alone);
  ASSERT_TRUE(alone->WaitForChunks(2));
  cancel_alone();
  EXPECT_TRUE(up.WaitClientClosed(1));
  EXPECT_EQ(InFlight(*g, "a"), 0);
}

TEST(GatewaySingleFlightTest, OffForARouteThatSaysSoAndForNoCacheRequests) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  up.num_chunks = 4;
  up.gap_ms = 30;
  MetricsRegistry metrics;
  auto g = Build(Coalescing(up) + "coalesce = false\n", &metrics);
  ASSERT_NE(g, nullptr);
  std::vector<std::shared_ptr<Collector>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<Collector>());
    g->Handle(Chat(kSame), sinks.back());
  }
  for (auto& s : sinks) ASSERT_TRUE(s->Wait());
  EXPECT_EQ(up.num_requests(), 3);
  auto on = Build(Coalescing(up), &metrics);
  std::vector<std::shared_ptr<Collector>> fresh;
  const char* again = R"({"model":"chat","messages":[{"role":"user","content":"again"}],"stream":true,"temperature":0})";
  for (int i = 0; i < 3; ++i) {
    fresh.push_back(std::make_shared<Collector>());
    GatewayRequest r = Chat(again);
    r.cache_control = "no-cache";
    on->Handle(std::move(r), fresh.back());
  }
  for (auto& s : fresh) ASSERT_TRUE(s->Wait());
  EXPECT_EQ(up.num_requests(), 6) << "no-cache asks for a fresh answer of its own";
}

TEST(GatewaySemanticAuditTest, ASampledHitIsAskedAgainUpstreamAndAWrongOneRaisesTheThreshold) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  MetricsRegistry metrics;
  auto g = Build("[cache]\nstore = 'memory'\n[[backend]]\nname = 'a'\nkind = 'openai'\nbase_url = '" + up.base_url() +
                     "'\n[[route]]\nmodel = 'chat'\nbackends = ['a']\n"
                     "semantic_cache = { embedder = 'hash', threshold = 0.5, guards = 'off', audit_sample = 1.0, "
                     "audit_compare = 'exact', auto_threshold = true, max_false_hit_rate = 0.02 }\n",
                 &metrics);
  ASSERT_NE(g, nullptr);
  auto ask = [&](const std::string& question) {
    return Call(*g, R"({"model":"chat","messages":[{"role":"user","content":")" + question +
                        R"("}],"stream":true,"temperature":0})");
  };
  EXPECT_EQ(ask("what is the capital city of france")->info.cache, "miss");
  // The answer is stored after the client has it (and put on the cache's inserter
  // thread): wait for it to be in.
  ASSERT_TRUE(testing::Eventually([&] { return g->semantic_cache()->entries() == 1; }));
  // The same meaning, the same fresh answer: the audit agrees.
  auto hit = ask("what is the capital city of france please");
  ASSERT_EQ(hit->info.cache, "hit");
  EXPECT_EQ(TextOf(*hit), "toktoktok");
  EXPECT_TRUE(testing::Eventually(
      [&] { return Metric(metrics, R"(tachyon:cache_semantic_audits_total{route="chat",result="agree"})") == 1; }));
  EXPECT_EQ(up.num_requests(), 2) << "the audit asked upstream, in the background";
  // The upstream's answers change: every hit is now wrong.
  up.word = "new";
  const char* rewordings[] = {"what is the capital city of france now", "what is the capital city of france today",
                              "so what is the capital city of france", "what is the capital city of france then"};
  int hits = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = ask(rewordings[i % 4] + std::string(i / 4, '?'));
    if (r->info.cache != "hit") break;
    EXPECT_EQ(TextOf(*r), "toktoktok") << "the client gets the cached answer at once";
    ++hits;
    const double audited = hits + 1;
    ASSERT_TRUE(testing::Eventually([&] {
      return Metric(metrics, R"(tachyon:cache_semantic_audits_total{route="chat",result="agree"})") +
                 Metric(metrics, R"(tachyon:cache_semantic_audits_total{route="chat",result="disagree"})") ==
             audited;
    }));
  }
  const nlohmann::json stats = g->semantic_audits().at("chat")->Stats();
  EXPECT_GT(stats["threshold"].get<double>(), 0.5) << stats.dump();
  EXPECT_GE(stats["raises"].get<int>(), 1);
  EXPECT_LT(hits, 40) << "a raised threshold turns the wrong hits into misses";
  EXPECT_GT(Metric(metrics, R"(tachyon:cache_semantic_threshold{route="chat"})"), 0.5);
}

}  // namespace
}  // namespace tachyon
