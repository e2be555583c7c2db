#include "model/model_quantize.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <map>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "model/model.h"
#include "model/model_gen.h"

namespace tachyon {
namespace {

// ctest runs test cases as parallel processes: the pid keeps their files apart.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

// llama-quantize --pure made the Q8_0 and Q4_0 fixtures from the F32 one; so must we, byte for byte.
TEST(ModelQuantizeTest, ReproducesLlamaCppPureQuantization) {
  std::string dir = testing_util::SharedDir() + "/fixtures/models";
  if (!std::filesystem::exists(dir + "/llama-tiny-f32.gguf")) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  for (const char* type : {"q8_0", "q4_0"}) {
    std::string out = TempPath(std::string("quantized_") + type + ".gguf");
    StatusOr<QuantizeResult> result =
        QuantizeModel(dir + "/llama-tiny-f32.gguf", out, *ParseQuantScheme(type), 2);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->num_requantized, 2 + 4 * 7);
    StatusOr<GgufFile> ours = GgufFile::Open(out);
    StatusOr<GgufFile> theirs = GgufFile::Open(dir + "/llama-tiny-" + type + ".gguf");
    ASSERT_TRUE(ours.ok() && theirs.ok());
    ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
    for (const GgufTensorInfo& t : theirs->tensors()) {
      const GgufTensorInfo* o = ours->FindTensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      EXPECT_EQ(o->type, t.type) << t.name;
      ASSERT_EQ(o->num_bytes, t.num_bytes) << t.name;
      EXPECT_EQ(std::memcmp(o->data, t.data, t.num_bytes), 0) << type << " " << t.name;
    }
    EXPECT_EQ(*ours->GetUint("general.file_type"), std::string(type) == "q8_0" ? 7u : 2u);
    std::filesystem::remove(out);
  }
}

// The logits after 8 tokens of a model file.
std::vector<float> LogitsOf(const std::string& path) {
  auto model = std::move(Model::Load(path)).value();
  KvBuffer kv(model->config(), 16, 1);
  std::vector<int32_t> table = {0};
  ForwardBatch batch;
  for (int i = 0; i < 8; ++i) {
    batch.tokens.push_back(TokenId(i * 31 % 258));
    batch.positions.push_back(i);
    batch.sequence_index.push_back(0);
  }
  batch.sequences.push_back({table.data(), 1});
  batch.logit_tokens.push_back(7);
  ThreadPool pool(2);
  return model->Forward(batch, kv, pool);
}

double RelativeError(const std::vector<float>& reference, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    diff += (reference[i] - b[i]) * (reference[i] - b[i]);
    norm += reference[i] * reference[i];
  }
  return std::sqrt(diff / norm);
}

// Every type and k-quant mix people download: the file loads, runs, and its logits
// stay as close to the F32 model's as its bits allow.
TEST(ModelQuantizeTest, EveryTypeAndMixRunsCloseToF32) {
  const ModelShape& tiny = *FindModelShape("tiny");
  std::string f32 = TempPath("mix_src.gguf");
  ASSERT_TRUE(GenerateRandomModel({.shape = &tiny, .scheme = PureScheme(GgmlType::kF32), .seed = 6, .out_path = f32}).ok());
  const std::vector<float> reference = LogitsOf(f32);
  std::map<std::string, double> errors;
  for (const char* type : {"q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q5_k_s", "q5_k_m", "q6_k", "q4_1",
                           "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q8_0"}) {
    std::string path = TempPath(std::string("mix_") + type + ".gguf");
    StatusOr<QuantizeResult> result = QuantizeModel(f32, path, *ParseQuantScheme(type), 2);
    ASSERT_TRUE(result.ok()) << type << ": " << result.status().ToString();
    errors[type] = RelativeError(reference, LogitsOf(path));
    std::printf("%s: relative logit error %.4f\n", type, errors[type]);
    std::filesystem::remove(path);
  }
  EXPECT_LT(errors["q3_k_m"], errors["q2_k"]);
  EXPECT_LT(errors["q5_k_m"], errors["q3_k_m"]);
  EXPECT_LT(errors["q6_k"], errors["q5_k_m"]);
  EXPECT_LT(errors["q8_0"], errors["q6_k"]);
  EXPECT_LT(errors["q5_1"], errors["q4_1"]);
  EXPECT_LT(errors["q5_0"], errors["iq4_nl"]);
  // 2 and 3 bits a weight (q2_k, q3_k_s) are coarse; the rest stay within what 4 bits give.
  for (const auto& [type, error] : errors) EXPECT_LT(error, type == "q2_k" || type == "q3_k_s" ? 0.6 : 0.33) << type;
  std::filesystem::remove(f32);
}

TEST(ModelQuantizeTest, Q4KMModelRunsCloseToF32) {
  const ModelShape& tiny = *FindModelShape("tiny");
  std::string f32 = TempPath("quant_src.gguf"), q = TempPath("quant_q4km.gguf");
  ASSERT_TRUE(GenerateRandomModel({.shape = &tiny, .scheme = PureScheme(GgmlType::kF32), .seed = 4, .out_path = f32}).ok());
  StatusOr<QuantizeResult> result = QuantizeModel(f32, q, *ParseQuantScheme("q4_k_m"), 2);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  StatusOr<GgufFile> file = GgufFile::Open(q);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->FindTensor("output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(file->FindTensor("blk.1.attn_q.weight")->type, GgmlType::kQ4_K);
  // With 4 layers, llama.cpp's more-bits rule picks layer 3 only.
  EXPECT_EQ(file->FindTensor("blk.0.attn_v.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(file->FindTensor("blk.3.attn_v.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(file->FindTensor("blk.3.ffn_down.weight")->type, GgmlType::kQ8_0) << "704-long rows: Q6_K falls back";
  EXPECT_EQ(file->FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kQ5_0) << "704-long rows: Q4_K falls back";
  EXPECT_EQ(file->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(*file->GetUint("general.file_type"), 15u);

  const std::vector<float> reference = LogitsOf(f32);
  auto relative_error = [&](const std::string& path) { return RelativeError(reference, LogitsOf(path)); };
  std::map<std::string, double> errors;
  for (const char* type : {"q8_0", "q6_k", "q4_0", "q4_k"}) {
    std::string path = TempPath(std::string("quant_") + type + ".gguf");
    ASSERT_TRUE(QuantizeModel(f32, path, *ParseQuantScheme(type), 2).ok());
    errors[type] = relative_error(path);
    std::filesystem::remove(path);
  }
  errors["q4_k_m"] = relative_error(q);
  for (const auto& [type, error] : errors) std::printf("%s: relative logit error %.4f\n", type.c_str(), error);
  // More bits, less error; the Q4_K_M mix does at least as well as pure 4-bit types.
  EXPECT_LT(errors["q8_0"], errors["q6_k"]);
  EXPECT_LT(errors["q6_k"], errors["q4_k"]);
  EXPECT_LT(errors["q4_k_m"], errors["q4_k"]);
  EXPECT_LT(errors["q4_k"], 1.5 * errors["q4_0"]);
  std::filesystem::remove(f32);
  std::filesystem::remove(q);
}

TEST(ModelQuantizeTest, ClearErrors) {
  EXPECT_EQ(QuantizeModel("/nonexistent.gguf", "/tmp/x.gguf", *ParseQuantScheme("q8_0"), 1).status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(QuantizeModel("/tmp/same.gguf", "/tmp/same.gguf", *ParseQuantScheme("q8_0"), 1).ok());
}

}  // namespace
}  // namespace tachyon
