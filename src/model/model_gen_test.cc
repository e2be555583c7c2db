#include "model/model_gen.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "kernels/ref/quantize.h"
#include "model/model_summary.h"

namespace tachyon {
namespace {

// ctest runs test cases as parallel processes: the pid keeps their files apart.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

ModelGenResult Generate(const ModelShape& shape, GgmlType type, uint64_t seed,
                        const std::string& path, int threads = 2, std::string vocab = "") {
  StatusOr<ModelGenResult> result = GenerateRandomModel({.shape = &shape, .scheme = PureScheme(type),
                                                         .seed = seed, .vocab_path = vocab,
                                                         .out_path = path, .num_threads = threads});
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : ModelGenResult{};
}

std::vector<float> Dequantized(const GgufTensorInfo& t) {
  std::vector<float> out(t.num_elements());
  int64_t ne0 = t.shape[0];
  uint64_t row_bytes = *GgmlRowBytes(t.type, ne0);
  for (int64_t r = 0; r < t.num_elements() / ne0; ++r) {
    ref::DequantizeRow(t.type, t.data + r * row_bytes, out.data() + r * ne0, ne0);
  }
  return out;
}

TEST(ModelGenTest, TinyShapeHasLlamaTensorsAndMetadata) {
  const ModelShape& shape = *FindModelShape("tiny");
  std::string path = TempPath("gen_tiny_f32.gguf");
  ModelGenResult result = Generate(shape, GgmlType::kF32, 1, path);
  EXPECT_EQ(result.vocab_size, 258);

  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetUint("llama.embedding_length"), 256u);
  EXPECT_EQ(*file->GetUint("llama.block_count"), 4u);
  EXPECT_EQ(*file->GetUint("llama.attention.head_count"), 8u);
  EXPECT_EQ(*file->GetUint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*file->GetUint("llama.feed_forward_length"), 704u);
  EXPECT_EQ(*file->GetUint("llama.rope.dimension_count"), 32u);
  EXPECT_EQ(*file->GetUint("llama.vocab_size"), 258u);
  EXPECT_EQ(*file->GetUint("general.file_type"), 0u);
  EXPECT_EQ(*file->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ((*file->GetArray("tokenizer.ggml.tokens"))->get<std::string>()->at(32), "Ġ");
  EXPECT_EQ((*file->GetArray("tokenizer.ggml.tokens"))->get<std::string>()->at(65), "A");

  // 1 embedding + 9 per layer + output norm + output.
  EXPECT_EQ(file->tensors().size(), 1u + 4u * 9u + 2u);
  EXPECT_EQ(file->FindTensor("token_embd.weight")->shape, (std::vector<int64_t>{256, 258}));
  EXPECT_EQ(file->FindTensor("blk.3.attn_k.weight")->shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(file->FindTensor("blk.0.attn_output.weight")->shape, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(file->FindTensor("blk.0.ffn_down.weight")->shape, (std::vector<int64_t>{704, 256}));
  EXPECT_EQ(file->FindTensor("blk.0.ffn_gate.weight")->shape, (std::vector<int64_t>{256, 704}));
  EXPECT_NE(file->FindTensor("output.weight"), nullptr);

  ModelSummary summary = SummarizeModel(*file);
  EXPECT_EQ(summary.num_parameters, shape.NumParameters(258));
  EXPECT_EQ(result.num_parameters, summary.num_parameters);

  for (float v : Dequantized(*file->FindTensor("blk.2.ffn_norm.weight"))) EXPECT_EQ(v, 1.0f);
  std::vector<float> w = Dequantized(*file->FindTensor("blk.1.ffn_up.weight"));
  double sum = 0, sum_sq = 0;
  for (float v : w) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  double mean = sum / w.size(), std = std::sqrt(sum_sq / w.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 2e-4);
  EXPECT_NEAR(std, 0.02, 2e-4);
  std::filesystem::remove(path);
}

TEST(ModelGenTest, SameSeedSameBytesWhateverTheThreadCount) {
  const ModelShape& shape = *FindModelShape("tiny");
  std::string a = TempPath("gen_seed_a.gguf"), b = TempPath("gen_seed_b.gguf"),
              c = TempPath("gen_seed_c.gguf");
  Generate(shape, GgmlType::kQ8_0, 7, a, 1);
  Generate(shape, GgmlType::kQ8_0, 7, b, 3);
  Generate(shape, GgmlType::kQ8_0, 8, c, 2);
  std::vector<uint8_t> bytes_a = testing_util::ReadFileBytes(a);
  EXPECT_FALSE(bytes_a.empty());
  EXPECT_EQ(bytes_a, testing_util::ReadFileBytes(b));
  EXPECT_NE(bytes_a, testing_util::ReadFileBytes(c));
  for (const auto& p : {a, b, c}) std::filesystem::remove(p);
}

// Each type quantizes the same draws: dequantized weights stay near the F32 ones.
TEST(ModelGenTest, QuantizedTypesEncodeTheSameWeights) {
  const ModelShape& shape = *FindModelShape("tiny");
  std::string f32_path = TempPath("gen_q_f32.gguf");
  Generate(shape, GgmlType::kF32, 3, f32_path);
  StatusOr<GgufFile> f32 = GgufFile::Open(f32_path);
  ASSERT_TRUE(f32.ok());
  struct Case {
    GgmlType type;
    float max_abs_error;
    uint32_t file_type;
  };
  // Weights are within ~5.8 std (0.116); error bounds are one quantization step.
  for (Case c : {Case{GgmlType::kF16, 1e-4f, 1}, Case{GgmlType::kBF16, 5e-4f, 32},
                 Case{GgmlType::kQ8_0, 0.116f / 127, 7}, Case{GgmlType::kQ4_0, 0.116f / 8, 2},
                 Case{GgmlType::kQ6_K, 0.116f / 16, 18}}) {
    std::string path = TempPath("gen_q_other.gguf");
    Generate(shape, c.type, 3, path);
    StatusOr<GgufFile> q = GgufFile::Open(path);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(*q->GetUint("general.file_type"), c.file_type);
    EXPECT_EQ(q->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32) << "norms stay F32";
    for (const char* name : {"token_embd.weight", "blk.1.attn_v.weight", "output.weight"}) {
      const GgufTensorInfo* t = q->FindTensor(name);
      ASSERT_EQ(t->type, c.type);
      std::vector<float> expected = Dequantized(*f32->FindTensor(name));
      std::vector<float> actual = Dequantized(*t);
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(actual[i], expected[i], c.max_abs_error) << GgmlTypeName(c.type) << " " << name;
      }
    }
    std::filesystem::remove(path);
  }
  std::filesystem::remove(f32_path);
}

TEST(ModelGenTest, Qwen2BiasesAndLlama3RopeFreqs) {
  ModelShape qwen = *FindModelShape("qwen2-0.5b");
  qwen.n_layer = 1;  // same tensors per layer, a fraction of the size
  qwen.n_ff = 256;
  std::string path = TempPath("gen_qwen2.gguf");
  Generate(qwen, GgmlType::kF16, 1, path);
  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->GetString("general.architecture"), "qwen2");
  EXPECT_EQ(*file->GetUint("qwen2.attention.head_count_kv"), 2u);
  EXPECT_NEAR(*file->GetFloat("qwen2.rope.freq_base"), 1e6, 1);
  EXPECT_EQ(file->FindTensor("blk.0.attn_q.bias")->shape, (std::vector<int64_t>{896}));
  EXPECT_EQ(file->FindTensor("blk.0.attn_k.bias")->shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(file->FindTensor("blk.0.attn_v.bias")->type, GgmlType::kF32);
  EXPECT_EQ(file->FindTensor("output.weight"), nullptr) << "tied embeddings";
  std::filesystem::remove(path);

  ModelShape llama = *FindModelShape("llama-1b");
  llama.n_layer = 1;
  llama.n_ff = 256;
  path = TempPath("gen_llama3.gguf");
  Generate(llama, GgmlType::kQ4_0, 1, path);
  file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  const GgufTensorInfo* freqs = file->FindTensor("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  ASSERT_EQ(freqs->shape, (std::vector<int64_t>{32}));
  const float* f = reinterpret_cast<const float*>(freqs->data);
  EXPECT_EQ(f[0], 1.0f) << "high frequencies are not scaled";
  EXPECT_EQ(f[31], 32.0f) << "low frequencies are scaled by the factor";
  for (int i = 1; i < 32; ++i) EXPECT_GE(f[i], f[i - 1]);
  std::filesystem::remove(path);
}

TEST(ModelGenTest, VocabularyComesFromTheVocabFile) {
  std::string vocab = testing_util::SharedDir() + "/fixtures/tokenizer/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << vocab << " is absent (needs ../shared)";
  std::string path = TempPath("gen_vocab.gguf");
  ModelGenResult result = Generate(*FindModelShape("tiny"), GgmlType::kQ4_0, 1, path, 2, vocab);
  EXPECT_EQ(result.vocab_size, 32000);
  StatusOr<GgufFile> file = GgufFile::Open(path);
  StatusOr<GgufFile> source = GgufFile::Open(vocab);
  ASSERT_TRUE(file.ok() && source.ok());
  EXPECT_EQ(file->FindTensor("token_embd.weight")->shape, (std::vector<int64_t>{256, 32000}));
  int num_copied = 0;
  for (const GgufKeyValue& kv : source->metadata()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* copied = file->Find(kv.key);
    ASSERT_NE(copied, nullptr) << kv.key;
    EXPECT_TRUE(*copied == kv.value) << kv.key;
    ++num_copied;
  }
  EXPECT_GT(num_copied, 5);
  EXPECT_EQ(*file->GetUint("llama.embedding_length"), 256u) << "the shape, not the vocab file's";
  std::filesystem::remove(path);
}

TEST(ModelGenTest, ClearErrors) {
  const ModelShape& shape = *FindModelShape("tiny");
  std::string path = TempPath("gen_errors.gguf");
  StatusOr<ModelGenResult> missing = GenerateRandomModel(
      {.shape = &shape, .scheme = PureScheme(GgmlType::kF16), .vocab_path = "/nonexistent/vocab.gguf",
       .out_path = path});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(path));
  StatusOr<QuantScheme> bad_type = ParseQuantScheme("q3_k");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("unknown type 'q3_k'"), std::string::npos);
  StatusOr<ModelGenResult> bad_dir = GenerateRandomModel(
      {.shape = &shape, .scheme = PureScheme(GgmlType::kF16), .out_path = "/nonexistent/dir/m.gguf"});
  ASSERT_FALSE(bad_dir.ok());
  EXPECT_EQ(bad_dir.status().code(), StatusCode::kUnavailable);
}

TEST(QuantSchemeTest, Q4KMMixesLikeLlamaCpp) {
  QuantScheme m = *ParseQuantScheme("Q4_K_M");
  auto type = [&](std::string_view name, int64_t ne0, int layer, bool output = false) {
    return TensorTypeFor(m, {.name = name, .row_length = ne0, .num_dims = 2, .layer = layer,
                             .num_layers = 16, .is_output = output});
  };
  EXPECT_EQ(type("output.weight", 2048, -1, true), GgmlType::kQ6_K);
  EXPECT_EQ(type("blk.0.attn_v.weight", 2048, 0), GgmlType::kQ6_K) << "first eighth";
  EXPECT_EQ(type("blk.15.ffn_down.weight", 8192, 15), GgmlType::kQ6_K) << "last eighth";
  EXPECT_EQ(type("blk.4.ffn_down.weight", 8192, 4), GgmlType::kQ6_K) << "(4 - 2) % 3 == 2";
  EXPECT_EQ(type("blk.3.ffn_down.weight", 8192, 3), GgmlType::kQ4_K);
  EXPECT_EQ(type("blk.3.attn_q.weight", 2048, 3), GgmlType::kQ4_K);
  EXPECT_EQ(type("blk.3.attn_q.weight", 576, 3), GgmlType::kQ5_0) << "576 is not a multiple of 256";
  EXPECT_EQ(type("output.weight", 576, -1, true), GgmlType::kQ8_0);
  EXPECT_EQ(TensorTypeFor(m, {.name = "blk.0.attn_norm.weight", .row_length = 2048, .num_dims = 1}),
            GgmlType::kF32);
  EXPECT_EQ(LayerOfTensor("blk.12.attn_k.weight"), 12);
  EXPECT_EQ(LayerOfTensor("token_embd.weight"), -1);
}

// The other mixes, rule by rule (llama.cpp's llama_tensor_get_type for a 16-layer
// Llama with 4 query heads per KV head); on llama-tiny-f32.gguf llama-quantize gave
// every tensor the type these rules give (Q2_K, Q3_K_S, Q3_K_M, Q5_K_M, Q6_K).
TEST(QuantSchemeTest, KQuantMixesLikeLlamaCpp) {
  auto type = [&](const char* mix, std::string_view name, int64_t ne0, int layer, bool output = false) {
    return TensorTypeFor(*ParseQuantScheme(mix), {.name = name, .row_length = ne0, .num_dims = 2, .layer = layer,
                                                  .num_layers = 16, .is_output = output, .gqa = 4});
  };
  using T = GgmlType;
  EXPECT_EQ(type("q3_k_m", "output.weight", 2048, -1, true), T::kQ6_K);
  EXPECT_EQ(type("q3_k_m", "blk.1.attn_v.weight", 2048, 1), T::kQ5_K) << "the first two layers";
  EXPECT_EQ(type("q3_k_m", "blk.2.attn_v.weight", 2048, 2), T::kQ4_K);
  EXPECT_EQ(type("q3_k_m", "blk.0.ffn_down.weight", 8192, 0), T::kQ5_K) << "the first sixteenth";
  EXPECT_EQ(type("q3_k_m", "blk.1.ffn_down.weight", 8192, 1), T::kQ4_K);
  EXPECT_EQ(type("q3_k_m", "blk.5.attn_output.weight", 2048, 5), T::kQ4_K);
  EXPECT_EQ(type("q3_k_m", "blk.5.attn_q.weight", 2048, 5), T::kQ3_K);
  EXPECT_EQ(type("q3_k_m", "blk.5.ffn_down.weight", 704, 5), T::kQ5_0) << "Q4_K falls back to Q5_0";
  EXPECT_EQ(type("q3_k_m", "blk.5.ffn_up.weight", 704, 5), T::kIQ4_NL) << "Q3_K falls back to IQ4_NL";
  EXPECT_EQ(type("q5_k_m", "blk.0.attn_v.weight", 2048, 0), T::kQ6_K);
  EXPECT_EQ(type("q5_k_m", "blk.3.attn_v.weight", 2048, 3), T::kQ5_K);
  EXPECT_EQ(type("q5_k_m", "blk.4.ffn_down.weight", 8192, 4), T::kQ6_K) << "(4 - 2) % 3 == 2";
  EXPECT_EQ(type("q5_k_m", "blk.4.ffn_gate.weight", 704, 4), T::kQ5_1) << "Q5_K falls back to Q5_1";
  EXPECT_EQ(type("q2_k", "blk.4.attn_v.weight", 2048, 4), T::kQ4_K) << "4 query heads per KV head";
  EXPECT_EQ(TensorTypeFor(*ParseQuantScheme("q2_k"), {.name = "blk.4.attn_v.weight", .row_length = 2048,
                                                      .num_dims = 2, .layer = 4, .num_layers = 16, .gqa = 1}),
            T::kQ3_K);
  EXPECT_EQ(type("q2_k", "blk.4.ffn_down.weight", 8192, 4), T::kQ3_K);
  EXPECT_EQ(type("q2_k", "blk.4.attn_output.weight", 2048, 4), T::kQ3_K);
  EXPECT_EQ(type("q2_k", "blk.4.ffn_up.weight", 2048, 4), T::kQ2_K);
  EXPECT_EQ(type("q4_k_s", "blk.3.attn_v.weight", 2048, 3), T::kQ5_K);
  EXPECT_EQ(type("q4_k_s", "blk.4.attn_v.weight", 2048, 4), T::kQ4_K);
  EXPECT_EQ(type("q3_k_l", "blk.9.ffn_down.weight", 8192, 9), T::kQ5_K);
  EXPECT_EQ(type("q6_k", "blk.9.ffn_down.weight", 8192, 9), T::kQ6_K);
  EXPECT_EQ(type("q6_k", "output.weight", 576, -1, true), T::kQ8_0);
  EXPECT_EQ(type("iq4_xs", "blk.9.ffn_down.weight", 8192, 9), T::kIQ4_XS) << "a pure type";
  EXPECT_EQ(type("iq4_xs", "blk.9.ffn_down.weight", 704, 9), T::kIQ4_NL);
  EXPECT_EQ(ParseQuantScheme("Q3_K_M")->file_type, 12u);
  EXPECT_EQ(ParseQuantScheme("q5_k_m")->file_type, 17u);
}

TEST(ModelShapeTest, ParameterCountsOfRealModels) {
  // Llama-3.2-1B with its 128256-token vocabulary: 1.236 B parameters.
  EXPECT_NEAR(FindModelShape("llama-1b")->NumParameters(128256) / 1e9, 1.236, 0.001);
  // SmolLM-135M with its 49152-token vocabulary: 134.5 M.
  EXPECT_NEAR(FindModelShape("smol-135m")->NumParameters(49152) / 1e6, 134.5, 0.1);
  // Qwen2-0.5B with 151936 tokens: 494 M.
  EXPECT_NEAR(FindModelShape("qwen2-0.5b")->NumParameters(151936) / 1e6, 494.0, 0.1);
  EXPECT_EQ(FindModelShape("no-such-shape"), nullptr);
}

}  // namespace
}  // namespace tachyon
