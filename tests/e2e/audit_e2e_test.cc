// The capture -> audit -> replay loop through the real binary: `tachyon serve
// --capture` writes a line per request, `tachyon audit` reads it (text, JSON,
// HTML checked in headless Chromium when it is installed), and `tachyon bench
// --workload replay` sends it again and `bench compare` reads two replays.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_command.h"
#include "tests/e2e/server_process.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

class AuditE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    if (!fs::exists(StoriesModel())) GTEST_SKIP() << StoriesModel() << " is absent (needs ../shared)";
    dir_ = ::testing::TempDir() + "/audit_e2e_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    capture_ = dir_ + "/traffic.jsonl";
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--model", StoriesModel(), "--chat-template", "llama2", "--no-access-log"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ServerProcess>(args);
    ASSERT_TRUE(server_->started()) << "no 'listening on' line";
  }
  std::string Post(const std::string& path, const nlohmann::json& body) {
    const std::string file = dir_ + "/body.json";
    { std::ofstream(file) << body.dump(); }
    return Curl("-X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + server_->url() + path);
  }
  std::vector<nlohmann::json> Lines() const {
    std::vector<nlohmann::json> lines;
    std::ifstream in(capture_);
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }
  static nlohmann::json Lever(const nlohmann::json& report, const std::string& name) {
    for (const auto& lever : report["levers"]) {
      if (lever["lever"] == name) return lever;
    }
    return nullptr;
  }

  std::string dir_, capture_;
  std::unique_ptr<ServerProcess> server_;
};

// Long enough (over 256 bytes) for whole blocks of shared prefix.
const char* kSystem =
    "You tell short stories about a cat named Tom. Tom lives in a small house by the sea with an old fisherman. "
    "Every story is three sentences long, uses simple words a child knows, and ends with Tom asleep in the sun. "
    "Never mention dogs unless the reader asks for one.";

nlohmann::json ChatBody(const std::string& user, bool stream) {
  return {{"messages", {{{"role", "system"}, {"content", kSystem}},
                        {{"role", "user"}, {"content", user}}}},
          {"max_tokens", 12},
          {"temperature", 0},
          {"stream", stream}};
}

TEST_F(AuditE2eTest, CaptureAuditAndReplayTheSameTraffic) {
  Start({"--capture", capture_});
  // Six chat requests, two of them repeats of the first, two answered whole; one completion; one bad body.
  Post("/v1/chat/completions", ChatBody("Tell me a story.", true));
  Post("/v1/chat/completions", ChatBody("Tell me a story.", true));
  Post("/v1/chat/completions", ChatBody("Tell me a story about a dog.", false));
  Post("/v1/chat/completions", ChatBody("Tell me a story.", false));
  Post("/v1/chat/completions", ChatBody("Once there was a mouse.", true));
  Post("/v1/chat/completions", ChatBody("A cat sat on the mat.", true));
  Post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  Post("/v1/chat/completions", {{"messages", "not a list"}});
  // The Responses API: read (and replayed) as the chat request it becomes.
  Post("/v1/responses", {{"instructions", kSystem}, {"input", "Tell me a story."}, {"max_output_tokens", 16},
                         {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(server_->Stop(), 0);  // the capture is written through before the process ends

  struct stat st {};
  ASSERT_EQ(::stat(capture_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the capture holds prompts: only its owner reads it";
  const std::vector<nlohmann::json> lines = Lines();
  ASSERT_EQ(lines.size(), 9u);
  int refused = 0, streamed = 0;
  for (const auto& line : lines) {
    for (const char* key : {"ts", "endpoint", "status", "e2e_ms", "route", "tenant", "backend"}) {
      EXPECT_TRUE(line.contains(key)) << key << " in " << line.dump();
    }
    if (line["status"] == 400) {
      ++refused;
      EXPECT_EQ(line["error"], "invalid_request");
      continue;
    }
    EXPECT_EQ(line["status"], 200) << line.dump();
    EXPECT_TRUE(line["body"].is_object()) << "the request as received";
    EXPECT_GT(line["prompt_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(line["backend_kind"], "local");
    EXPECT_TRUE(line.contains("queue_ms")) << "a local engine says how long the request queued";
    EXPECT_GE(line["ttft_ms"].get<double>(), 0);
    streamed += line["stream"].get<bool>();
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(streamed, 5);
  EXPECT_EQ(lines.back()["endpoint"], "/v1/responses");

  // The audit: 8 requests; 2 of the 6 chats repeat an earlier one exactly (the
  // Responses request asks for 16 tokens: another key); 3 of 8 answered whole.
  const std::string html = dir_ + "/audit.html";
  CommandResult audit = RunTachyon("audit --json --html " + html + " " + capture_);
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const nlohmann::json report = nlohmann::json::parse(audit.out);
  EXPECT_EQ(report["requests"], 8);
  EXPECT_EQ(report["lines"], 9);
  EXPECT_EQ(report["other_endpoints"], 0);
  EXPECT_DOUBLE_EQ(Lever(report, "streaming")["non_streaming_share"].get<double>(), 0.375);
  EXPECT_DOUBLE_EQ(Lever(report, "semantic_cache")["exact_duplicate_share"].get<double>(), 0.25)
      << "stream true and false ask the same question: one key";
  EXPECT_GT(Lever(report, "prefix_caching")["shared_prefix_token_share"].get<double>(), 0)
      << "the repeats share their whole prompt";
  EXPECT_EQ(Lever(report, "continuous_batching")["local_requests"], 8);
  EXPECT_TRUE(fs::exists(html));
  CommandResult text = RunTachyon("audit " + capture_);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("8. speculative_decoding"), std::string::npos) << text.out;

  // The page renders in a real browser: its charts' bars have a laid-out size.
  if (std::system("command -v chromium > /dev/null 2>&1") == 0) {
    const std::string dom = Shell("timeout 120 chromium --headless --no-sandbox --disable-gpu "
                                  "--virtual-time-budget=3000 --dump-dom file://" + html + " 2>/dev/null");
    const size_t at = dom.find("data-bars=\"");
    ASSERT_NE(at, std::string::npos) << "the page's check did not run: " << dom.substr(0, 300);
    EXPECT_GT(std::stoi(dom.substr(at + 11)), 40) << "histogram, arrival and share bars";
  }

  // Replay, twice, against a fresh server, then compare.
  Start();
  for (const char* name : {"before", "after"}) {
    CommandResult replay = RunTachyon("bench --url " + server_->url() + " --workload replay --traffic " + capture_ +
                                      " --time-scale 10 --out " + dir_ + "/" + name + ".json");
    ASSERT_EQ(replay.exit_code, 0) << replay.err << replay.out;
    EXPECT_NE(replay.out.find("replay: 8 requests"), std::string::npos) << replay.out;
    EXPECT_NE(replay.out.find("1 refused ones left out"), std::string::npos) << replay.out;
    const nlohmann::json run = nlohmann::json::parse(std::ifstream(dir_ + "/" + name + ".json"));
    ASSERT_EQ(run["records"].size(), 8u);
    for (const auto& r : run["records"]) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  }
  CommandResult compare = RunTachyon("bench compare " + dir_ + "/before.json " + dir_ + "/after.json");
  EXPECT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find("TTFT"), std::string::npos) << compare.out;
}

TEST_F(AuditE2eTest, ConfigCaptureWithoutBodiesAndRedaction) {
  const std::string config = dir_ + "/tachyon.toml";
  std::ofstream(config) << "[[backend]]\nname = \"stories\"\nkind = \"local\"\nmodel = \"" << StoriesModel()
                        << "\"\nchat_template = \"llama2\"\nthreads = 1\n\n[[route]]\nmodel = \"chat\"\n"
                        << "backends = [\"stories\"]\n\n[server]\naccess_log = false\n"
                        << "capture = { path = \"" << capture_ << "\", redact = ['\\d{3}-\\d{4}'] }\n";
  server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config});
  ASSERT_TRUE(server_->started());
  nlohmann::json body = ChatBody("Call me at 555-1234 tomorrow.", false);
  body["model"] = "chat";
  Post("/v1/chat/completions", body);
  ASSERT_EQ(server_->Stop(), 0);
  std::vector<nlohmann::json> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["route"], "chat");
  EXPECT_EQ(lines[0]["body"]["messages"][1]["content"], "Call me at [REDACTED] tomorrow.");

  // bodies = false: the numbers only; the replay makes prompts of the captured lengths.
  fs::remove(capture_);
  std::string text;
  {
    std::ifstream in(config);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  text.replace(text.find("redact"), 0, "bodies = false, ");
  std::ofstream(config) << text;
  server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config});
  ASSERT_TRUE(server_->started());
  Post("/v1/chat/completions", body);
  lines.clear();
  Start();  // a second server, without capture, for the replay
  ASSERT_TRUE(server_->started());
  lines = Lines();
  ASSERT_EQ(lines.size(), 1u) << "the first server stopped when replaced, writing its capture";
  EXPECT_FALSE(lines[0].contains("body"));
  std::ifstream in(capture_);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find("555"), std::string::npos);
  CommandResult replay = RunTachyon("bench --url " + server_->url() + " --workload replay --traffic " + capture_ +
                                    " --model-map chat=stories260K --tokenizer " + StoriesModel());
  EXPECT_EQ(replay.exit_code, 0) << replay.err << replay.out;
  EXPECT_NE(replay.out.find("synthetic prompts of the captured lengths"), std::string::npos) << replay.out;
}

}  // namespace
}  // namespace tachyon::e2e
