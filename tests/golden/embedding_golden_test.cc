// Sentence embeddings against llama.cpp's llama-embedding on the same files:
// random-weight bge-small (bert) and nomic-embed (nomic-bert) models in F32 and
// Q8_0, regenerated here with the seed the fixture was made from (see
// make_embedding_golden.sh). Cosine per input at least 0.9999 at F32 and 0.999
// at Q8_0; the token ids of every input match llama.cpp's first.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "embed/local_embedder.h"
#include "model/model_gen.h"
#include "model/quant_scheme.h"
#include "gguf/gguf_test_util.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

using testing_util::SharedDir;

class EmbeddingGoldenTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    std::ifstream in(std::string(TACHYON_SOURCE_DIR) + "/tests/golden/embedding_golden.json");
    ASSERT_TRUE(in) << "tests/golden/embedding_golden.json is missing";
    golden_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    delete golden_;
    golden_ = nullptr;
  }
  static nlohmann::json* golden_;
};
nlohmann::json* EmbeddingGoldenTest::golden_ = nullptr;

TEST_P(EmbeddingGoldenTest, MatchesLlamaCpp) {
  const std::string vocab = SharedDir() + "/fixtures/tokenizer/ggml-vocab-bert-bge.gguf";
  if (!fs::exists(vocab)) GTEST_SKIP() << vocab << " is absent (../shared is not beside the checkout)";
  const nlohmann::json& entry = (*golden_)["models"][GetParam()];
  const std::string shape = entry["shape"], type = entry["type"];
  const fs::path dir = fs::temp_directory_path() / ("tachyon_embed_golden_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / (shape + "-" + type + ".gguf")).string();
  ModelGenOptions gen{.shape = FindModelShape(shape),
                      .scheme = *ParseQuantScheme(type),
                      .seed = entry["seed"],
                      .vocab_path = vocab,
                      .out_path = path,
                      .num_threads = 2};
  ASSERT_TRUE(GenerateRandomModel(gen).ok());
  StatusOr<std::unique_ptr<LocalEmbedder>> embedder = LocalEmbedder::Create({.model_path = path, .threads = 2});
  ASSERT_TRUE(embedder.ok()) << embedder.status().message();

  const nlohmann::json& inputs = (*golden_)["inputs"];
  std::vector<std::vector<TokenId>> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ids.push_back((*embedder)->Tokenize(inputs[i].get<std::string>(), /*truncate=*/false));
    std::vector<int32_t> got;
    for (TokenId id : ids.back()) got.push_back(id.value());
    ASSERT_EQ(got, (*golden_)["token_ids"][i].get<std::vector<int32_t>>()) << "input " << i;
  }
  StatusOr<std::vector<float>> vectors = (*embedder)->EmbedTokens(ids);
  fs::remove_all(dir);
  ASSERT_TRUE(vectors.ok()) << vectors.status().message();
  const int dim = (*embedder)->dimension();
  const double threshold = type == "f32" ? 0.9999 : 0.999;
  double worst = 1.0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> expected = entry["embeddings"][i];
    ASSERT_EQ(static_cast<int>(expected.size()), dim);
    double dot = 0, na = 0, nb = 0;
    for (int d = 0; d < dim; ++d) {
      const double a = (*vectors)[i * dim + d], b = expected[d];
      dot += a * b, na += a * a, nb += b * b;
    }
    const double cosine = dot / std::sqrt(na * nb);
    worst = std::min(worst, cosine);
    EXPECT_GE(cosine, threshold) << shape << " " << type << " input " << i << " (" << ids[i].size() << " tokens)";
  }
  std::printf("%s %s: worst cosine with llama.cpp over %zu inputs %.7f\n", shape.c_str(), type.c_str(),
              inputs.size(), worst);
}

std::string ModelName(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"BgeSmallF32", "BgeSmallQ8_0", "NomicEmbedF32", "NomicEmbedQ8_0"};
  return kNames[info.param];
}

INSTANTIATE_TEST_SUITE_P(Models, EmbeddingGoldenTest, ::testing::Values(0, 1, 2, 3), ModelName);

}  // namespace
}  // namespace tachyon
