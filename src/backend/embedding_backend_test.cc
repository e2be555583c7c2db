#include "backend/embedding_backend.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "model/model_gen.h"
#include "model/quant_scheme.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

class EmbeddingBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tachyon_embedding_backend_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "bert-tiny.gguf").string();
    ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape("bert-tiny"), .scheme = *ParseQuantScheme("f32"),
                                     .out_path = path_})
                    .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

// Many requests queued at once are answered together; each answer holds the
// vectors of its own inputs, in order.
TEST_F(EmbeddingBackendTest, QueuedRequestsShareAPassAndGetTheirOwnVectors) {
  MetricsRegistry metrics;
  auto backend = *EmbeddingBackend::Create({.embedder = {.model_path = path_}}, &metrics);
  constexpr int kRequests = 20;
  std::vector<std::promise<EmbeddingAnswer>> answers(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    EmbeddingRequest r;
    r.texts = {"first input of " + std::to_string(i), std::string(100 + i, 'x')};
    backend->Handle(std::move(r), [&answers, i](EmbeddingAnswer a) { answers[i].set_value(std::move(a)); });
  }
  for (int i = 0; i < kRequests; ++i) {
    EmbeddingAnswer a = answers[i].get_future().get();
    ASSERT_EQ(a.http_status, 200) << a.body;
    nlohmann::json body = nlohmann::json::parse(a.body);
    const std::vector<std::string> texts = {"first input of " + std::to_string(i), std::string(100 + i, 'x')};
    std::vector<float> alone = *backend->embedder().Embed(texts);
    for (size_t k = 0; k < 2; ++k) {
      std::vector<float> got = body["data"][k]["embedding"];
      ASSERT_EQ(got.size(), 64u);
      for (size_t d = 0; d < 64; ++d) ASSERT_NEAR(got[d], alone[k * 64 + d], 1e-5f) << i << " " << k;
    }
    EXPECT_EQ(a.prompt_tokens, static_cast<int64_t>(1 + texts[0].size() + 1 + texts[1].size()));
  }
  EXPECT_NE(metrics.Render().find("tachyon:embedding_inputs_total{model_name=\"bert-tiny\"} 40"), std::string::npos);
}

TEST_F(EmbeddingBackendTest, AfterShutdownRequestsAreAnswered503) {
  MetricsRegistry metrics;
  auto backend = *EmbeddingBackend::Create({.embedder = {.model_path = path_}}, &metrics);
  backend->Shutdown();
  EmbeddingRequest r;
  r.texts = {"late"};
  int status = 0;
  backend->Handle(std::move(r), [&](EmbeddingAnswer a) { status = a.http_status; });
  EXPECT_EQ(status, 503);
}

TEST_F(EmbeddingBackendTest, RefusesAnEncoderThatIsNot) {
  MetricsRegistry metrics;
  const std::string llama = (dir_ / "llama.gguf").string();
  ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape("tiny"), .scheme = *ParseQuantScheme("q8_0"), .out_path = llama}).ok());
  StatusOr<std::unique_ptr<EmbeddingBackend>> b = EmbeddingBackend::Create({.embedder = {.model_path = llama}}, &metrics);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("not an embedding model"), std::string::npos) << b.status().message();
}

}  // namespace
}  // namespace tachyon
