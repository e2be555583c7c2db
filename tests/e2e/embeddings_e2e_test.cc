// /v1/embeddings end to end: `tachyon serve --embedding-model` (and a config's
// kind = "embedding" backend) on a random-weight bert-tiny model, driven by curl,
// against `tachyon embed` on the same file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "run_command.h"
#include "server_process.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

std::string TempFile(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) dot += a[i] * b[i], na += a[i] * a[i], nb += b[i] * b[i];
  return a.size() == b.size() && na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0.0;
}

std::vector<float> FromBase64(const std::string& text) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(kAlphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

class EmbeddingsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = TempFile("embedding_models");
    fs::create_directories(dir);
    model_ = new std::string((dir / "bert-tiny.gguf").string());
    CommandResult gen = RunTachyon("model gen --shape bert-tiny --type f32 --out " + *model_);
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(fs::path(*model_).parent_path());
    delete model_;
  }
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  }
  static nlohmann::json Post(const std::string& url, const std::string& body, const std::string& tag = "body") {
    const std::string file = TempFile(tag + ".json");
    { std::ofstream(file) << body; }
    const std::string out = Curl("-X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url +
                                 "/v1/embeddings");
    fs::remove(file);
    return nlohmann::json::parse(out, nullptr, false);
  }
  static std::vector<float> Vector(const nlohmann::json& response, size_t i) {
    return response["data"][i]["embedding"].get<std::vector<float>>();
  }
  static std::string* model_;
};
std::string* EmbeddingsE2eTest::model_ = nullptr;

TEST_F(EmbeddingsE2eTest, ServerMatchesTachyonEmbedInEveryEncoding) {
  ServerProcess server({"--embedding-model", *model_, "--served-model-name", "chat"});
  ASSERT_TRUE(server.started());
  const std::vector<std::string> texts = {"Hello world", "The quick brown fox", "a"};
  nlohmann::json r = Post(server.url(), nlohmann::json({{"model", "bert-tiny"}, {"input", texts}}).dump());
  ASSERT_TRUE(r.contains("data")) << r.dump();
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "bert-tiny");
  ASSERT_EQ(r["data"].size(), 3u);

  CommandResult cli = RunTachyon("embed --model " + *model_ + " 'Hello world' 'The quick brown fox' a");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  std::stringstream lines(cli.out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["text"], texts[i]);
    EXPECT_GT(Cosine(j["embedding"].get<std::vector<float>>(), Vector(r, i)), 0.99999) << i;
    EXPECT_EQ(r["data"][i]["index"], i);
  }
  // Token counts: the byte-level vocabulary's BOS plus one token per byte.
  EXPECT_EQ(r["usage"]["prompt_tokens"], (1 + 11) + (1 + 19) + (1 + 1));

  // base64 is the same float32 vector; dimensions cuts then renormalizes.
  nlohmann::json b = Post(server.url(), R"({"input":"Hello world","encoding_format":"base64","dimensions":16})");
  ASSERT_TRUE(b.contains("data")) << b.dump();  // no model: the server's only embedding model
  std::vector<float> cut = FromBase64(b["data"][0]["embedding"]);
  ASSERT_EQ(cut.size(), 16u);
  std::vector<float> full = Vector(r, 0);
  double norm = 0;
  for (int i = 0; i < 16; ++i) norm += full[i] * full[i];
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(cut[i], full[i] / std::sqrt(norm), 1e-6) << i;

  // Token-id input: the same ids as the text give the same vector.
  nlohmann::json ids = Post(server.url(), R"({"input":[[256,97]]})");
  nlohmann::json text = Post(server.url(), R"({"input":"a"})");
  EXPECT_GT(Cosine(Vector(ids, 0), Vector(text, 0)), 0.999999);

  // Listed beside the chat model, and counted.
  nlohmann::json models = nlohmann::json::parse(Curl(server.url() + "/v1/models"));
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][1]["id"], "bert-tiny");
  EXPECT_EQ(models["data"][1]["type"], "embedding");
  EXPECT_EQ(models["data"][1]["dimension"], 64);
  const std::string metrics = Curl(server.url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:embedding_requests_total{model_name=\"bert-tiny\",status=\"200\"} 4"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tachyon:embedding_inputs_total{model_name=\"bert-tiny\"} 6"), std::string::npos);
}

// Requests that arrive together share forward passes; each still gets exactly
// its own vectors.
TEST_F(EmbeddingsE2eTest, ConcurrentRequestsGetTheirOwnVectors) {
  ServerProcess server({"--embedding-model", *model_});
  ASSERT_TRUE(server.started());
  constexpr int kRequests = 12;
  std::vector<std::string> texts;
  for (int i = 0; i < kRequests; ++i) texts.push_back("request number " + std::to_string(i) + std::string(i, '!'));
  std::vector<nlohmann::json> alone(kRequests), together(kRequests);
  for (int i = 0; i < kRequests; ++i) alone[i] = Post(server.url(), nlohmann::json({{"input", texts[i]}}).dump());
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      together[i] = Post(server.url(), nlohmann::json({{"input", texts[i]}}).dump(), "c" + std::to_string(i));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(together[i].contains("data")) << together[i].dump();
    EXPECT_GT(Cosine(Vector(alone[i], 0), Vector(together[i], 0)), 0.99999) << i;
    if (i > 0) {
      EXPECT_LT(Cosine(Vector(together[i - 1], 0), Vector(together[i], 0)), 0.9999) << i;
    }
  }
}

TEST_F(EmbeddingsE2eTest, ClearErrorsForBadInputs) {
  ServerProcess server({"--embedding-model", *model_, "--max-embedding-inputs", "4"});
  ASSERT_TRUE(server.started());
  auto error = [&](const std::string& body) {
    nlohmann::json r = Post(server.url(), body);
    EXPECT_TRUE(r.contains("error")) << body << " -> " << r.dump();
    return r.contains("error") ? r["error"] : nlohmann::json::object();
  };
  EXPECT_NE(error(R"({"input":""})")["message"].get<std::string>().find("empty string"), std::string::npos);
  EXPECT_NE(error(R"({"input":[]})")["message"].get<std::string>().find("empty array"), std::string::npos);
  EXPECT_NE(error(R"({"input":["a","b","c","d","e"]})")["message"].get<std::string>().find("limit of 4"),
            std::string::npos);
  EXPECT_EQ(error(R"({"model":"nope","input":"x"})")["code"], "model_not_found");
  EXPECT_NE(error(R"({"input":[[1,300]]})")["message"].get<std::string>().find("token id 300"), std::string::npos);
  EXPECT_EQ(error(R"({"input":"x","dimensions":65})")["param"], "dimensions");
  EXPECT_NE(error(R"({"input":"x",)")["message"].get<std::string>().find("JSON"), std::string::npos);
  // Longer than the context of 128 tokens: refused, or cut when asked.
  const std::string long_text(300, 'z');
  EXPECT_EQ(error(nlohmann::json({{"input", long_text}}).dump())["code"], "context_length_exceeded");
  nlohmann::json cut = Post(server.url(), nlohmann::json({{"input", long_text}, {"truncate", true}}).dump());
  ASSERT_TRUE(cut.contains("data")) << cut.dump();
  EXPECT_EQ(cut["usage"]["prompt_tokens"], 128);
  // The server still answers after all of that.
  EXPECT_TRUE(Post(server.url(), R"({"input":"fine"})").contains("data"));
}

// The remote embedder (`tachyon embed --kind remote`) through a server gives the
// local vectors; a dead upstream is a clear error.
TEST_F(EmbeddingsE2eTest, RemoteEmbedderThroughTheServer) {
  ServerProcess server({"--embedding-model", *model_});
  ASSERT_TRUE(server.started());
  CommandResult remote =
      RunTachyon("embed --kind remote --url " + server.url() + "/v1 --model bert-tiny 'Hello world' 'a b c'");
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  CommandResult local = RunTachyon("embed --model " + *model_ + " 'Hello world' 'a b c'");
  ASSERT_EQ(local.exit_code, 0) << local.err;
  std::stringstream r(remote.out), l(local.out);
  std::string rl, ll;
  int lines = 0;
  while (std::getline(r, rl) && std::getline(l, ll)) {
    ++lines;
    EXPECT_GT(Cosine(nlohmann::json::parse(rl)["embedding"].get<std::vector<float>>(),
                     nlohmann::json::parse(ll)["embedding"].get<std::vector<float>>()),
              0.99999);
  }
  EXPECT_EQ(lines, 2);
  CommandResult wrong = RunTachyon("embed --kind remote --url " + server.url() + "/v1 --model nope x");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("answered 404"), std::string::npos) << wrong.err;
  const std::string url = server.url();
  server.Stop();
  CommandResult dead = RunTachyon("embed --kind remote --url " + url + "/v1 --model bert-tiny x");
  EXPECT_NE(dead.exit_code, 0);
  EXPECT_NE(dead.err.find(url + "/v1/embeddings"), std::string::npos) << dead.err;
}

// `tachyon cache calibrate` / `eval` on labelled pairs: the JSON keys scripts read.
TEST_F(EmbeddingsE2eTest, CacheCalibrateAndEvalJson) {
  const std::string pairs = TempFile("pairs.jsonl");
  {
    std::ofstream out(pairs);
    const char* rows[][3] = {{"How do I reset my password?", "how do i reset my password", "1"},
                             {"What is the capital of France?", "what's the capital of france", "1"},
                             {"Tell me a joke", "tell me a joke please", "1"},
                             {"How do I reset my password?", "How do I delete my account?", "0"},
                             {"What is the capital of France?", "What is the capital of Spain?", "0"},
                             {"Tell me a joke", "Write a poem about the sea", "0"}};
    for (const auto& r : rows) {
      out << nlohmann::json({{"a", r[0]}, {"b", r[1]}, {"label", std::stoi(r[2])}}).dump() << "\n";
    }
  }
  CommandResult c = RunTachyon("cache calibrate --pairs " + pairs +
                               " --embedder hash --target-precision 0.99 --min-hits 1 --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  nlohmann::json j = nlohmann::json::parse(c.out);
  for (const char* key : {"threshold", "precision", "recall", "false_hit_rate", "pairs"}) {
    EXPECT_TRUE(j.contains(key)) << key << " in " << c.out;
  }
  EXPECT_EQ(j["pairs"], 6);
  EXPECT_GE(j["precision"].get<double>(), 0.99);
  EXPECT_EQ(j["false_hit_rate"], 0.0);
  EXPECT_GT(j["recall"].get<double>(), 0.0);
  const double threshold = j["threshold"];
  CommandResult e = RunTachyon("cache eval --pairs " + pairs + " --embedder hash --threshold " +
                               std::to_string(threshold - 1e-6) + " --json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  nlohmann::json k = nlohmann::json::parse(e.out);
  EXPECT_DOUBLE_EQ(k["recall"].get<double>(), j["recall"].get<double>());
  CommandResult none = RunTachyon("cache calibrate --pairs " + pairs + " --embedder nope");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("unknown embedder 'nope'"), std::string::npos) << none.err;
  fs::remove(pairs);
}

TEST_F(EmbeddingsE2eTest, ConfigBackendOfKindEmbedding) {
  const std::string config = TempFile("embedding.toml");
  std::ofstream(config) << "[[backend]]\nname = \"enc\"\nkind = \"embedding\"\nmodel = \"" + *model_ +
                               "\"\nserved_model_name = \"enc-model\"\npooling = \"cls\"\nthreads = 1\n";
  ServerProcess server({"--config", config});
  ASSERT_TRUE(server.started());
  nlohmann::json r = Post(server.url(), R"({"model":"enc-model","input":"Hello world"})");
  ASSERT_TRUE(r.contains("data")) << r.dump();
  // CLS pooling as the config asks (the file says mean): the CLI with --pooling cls agrees.
  CommandResult cli = RunTachyon("embed --model " + *model_ + " --pooling cls 'Hello world'");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_GT(Cosine(nlohmann::json::parse(cli.out)["embedding"].get<std::vector<float>>(), Vector(r, 0)), 0.99999);
  nlohmann::json health = nlohmann::json::parse(Curl(server.url() + "/health"));
  EXPECT_EQ(health["status"], "ok") << health.dump();
  EXPECT_EQ(health["backends"]["enc"]["kind"], "embedding");
  fs::remove(config);
}

}  // namespace
}  // namespace tachyon::e2e
