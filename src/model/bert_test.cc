#include "model/bert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "gguf/gguf_writer.h"
#include "model/model_gen.h"
#include "model/quant_scheme.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

class EncoderModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tachyon_bert_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / (GetParam() + ".gguf")).string();
    ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape(GetParam()),
                                     .scheme = *ParseQuantScheme("f32"),
                                     .seed = 3,
                                     .out_path = path_})
                    .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string path_;
};

std::vector<TokenId> Ids(std::initializer_list<int32_t> ids) {
  std::vector<TokenId> out;
  for (int32_t id : ids) out.push_back(TokenId(id));
  return out;
}

// A batch is masked per sequence: each sequence's vector is the same whether it
// runs alone or beside others of other lengths.
TEST_P(EncoderModelTest, BatchedSequencesEqualSequencesAlone) {
  StatusOr<std::unique_ptr<EncoderModel>> model = EncoderModel::Load(path_);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const int64_t e = (*model)->config().n_embd;
  ThreadPool pool(2);
  std::vector<std::vector<TokenId>> seqs = {Ids({256, 10, 20, 30, 257}), Ids({256, 5, 257}),
                                            Ids({256, 40, 41, 42, 43, 44, 45, 46, 47, 48, 257})};
  for (Pooling pooling : {Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    std::vector<float> together = (*model)->Embed(seqs, pooling, pool);
    ASSERT_EQ(together.size(), seqs.size() * e);
    for (size_t s = 0; s < seqs.size(); ++s) {
      std::vector<float> alone = (*model)->Embed(std::span(&seqs[s], 1), pooling, pool);
      for (int64_t i = 0; i < e; ++i) {
        ASSERT_NEAR(together[s * e + i], alone[i], 1e-5f) << PoolingName(pooling) << " sequence " << s;
      }
    }
  }
  // Different inputs give different vectors, and CLS pooling differs from mean.
  std::vector<float> mean = (*model)->Embed(seqs, Pooling::kMean, pool);
  std::vector<float> cls = (*model)->Embed(seqs, Pooling::kCls, pool);
  EXPECT_NE(std::vector<float>(mean.begin(), mean.begin() + e), std::vector<float>(mean.begin() + e, mean.begin() + 2 * e));
  EXPECT_NE(mean, cls);
}

// Attention sees the whole sequence both ways: changing the last token changes
// the first token's (CLS) vector, which a causal model would not.
TEST_P(EncoderModelTest, AttentionIsBidirectional) {
  std::unique_ptr<EncoderModel> model = *EncoderModel::Load(path_);
  ThreadPool pool(1);
  std::vector<std::vector<TokenId>> a = {Ids({256, 10, 20, 30})}, b = {Ids({256, 10, 20, 31})};
  EXPECT_NE(model->Embed(a, Pooling::kCls, pool), model->Embed(b, Pooling::kCls, pool));
}

INSTANTIATE_TEST_SUITE_P(Shapes, EncoderModelTest, ::testing::Values("bert-tiny", "nomic-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "bert-tiny" ? std::string("Bert") : std::string("NomicBert");
                         });

TEST(EncoderConfigTest, ReadsPoolingAndRefusesWhatItCannotRun) {
  const fs::path dir = fs::temp_directory_path() / ("tachyon_bert_config_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "m.gguf").string();
  ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape("nomic-tiny"), .scheme = *ParseQuantScheme("q8_0"),
                                   .out_path = path})
                  .ok());
  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  StatusOr<EncoderConfig> config = EncoderConfig::FromGguf(*file);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->architecture, "nomic-bert");
  EXPECT_EQ(config->pooling, Pooling::kCls);
  EXPECT_EQ(config->n_token_types, 2);
  EXPECT_FLOAT_EQ(config->rope_base, 1000.0f);
  EXPECT_EQ(file->FindTensor("token_types.weight")->type, GgmlType::kF32);  // kept as floats when quantized

  // A decoder is not an encoder, and the message says what is.
  const std::string llama = (dir / "llama.gguf").string();
  ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape("tiny"), .scheme = *ParseQuantScheme("q8_0"), .out_path = llama}).ok());
  StatusOr<std::unique_ptr<EncoderModel>> refused = EncoderModel::Load(llama);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("bert and nomic-bert are"), std::string::npos)
      << refused.status().message();
  fs::remove_all(dir);

  EXPECT_EQ(*ParsePooling("cls"), Pooling::kCls);
  EXPECT_FALSE(ParsePooling("max").ok());
}

}  // namespace
}  // namespace tachyon
