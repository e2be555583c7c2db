// The forward pass on generated models: batch composition must not change
// results, long contexts work, and broken files fail to load with clear errors.
#include "model/model.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>

#include "gguf/gguf_writer.h"
#include "model/model_gen.h"
#include "model/quant_scheme.h"

namespace tachyon {
namespace {

// ctest runs test cases as parallel processes: the pid keeps their files apart.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

std::unique_ptr<Model> Generate(const ModelShape& shape, GgmlType type, const std::string& name) {
  std::string path = TempPath(name);
  StatusOr<ModelGenResult> gen =
      GenerateRandomModel({.shape = &shape, .scheme = PureScheme(type), .seed = 9, .out_path = path, .num_threads = 2});
  EXPECT_TRUE(gen.ok()) << gen.status().ToString();
  StatusOr<std::unique_ptr<Model>> model = Model::Load(path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  std::filesystem::remove(path);  // the mapping stays valid
  return model.ok() ? std::move(model).value() : nullptr;
}

std::vector<TokenId> Tokens(int n, int seed) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(TokenId((i * 37 + seed * 11) % 258));
  return t;
}

// Runs sequences (all from position 0) in one batch; returns each one's last-token logits.
std::vector<std::vector<float>> RunBatch(const Model& model, const std::vector<std::vector<TokenId>>& seqs,
                                         int block_size, ThreadPool& pool) {
  int64_t total_blocks = 0;
  for (const auto& s : seqs) total_blocks += (static_cast<int64_t>(s.size()) + block_size - 1) / block_size;
  KvBuffer kv(model.config(), block_size, total_blocks);
  // Blocks handed out round-robin so the sequences' blocks interleave in memory.
  std::vector<std::vector<int32_t>> tables(seqs.size());
  int32_t next_block = 0;
  for (bool more = true; more;) {
    more = false;
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (static_cast<int64_t>(tables[s].size()) * block_size < static_cast<int64_t>(seqs[s].size())) {
        tables[s].push_back(next_block++);
        more = true;
      }
    }
  }
  ForwardBatch batch;
  for (size_t s = 0; s < seqs.size(); ++s) {
    batch.sequences.push_back({tables[s].data(), static_cast<int64_t>(tables[s].size())});
    for (size_t i = 0; i < seqs[s].size(); ++i) {
      batch.tokens.push_back(seqs[s][i]);
      batch.positions.push_back(static_cast<int64_t>(i));
      batch.sequence_index.push_back(static_cast<int32_t>(s));
    }
    batch.logit_tokens.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
  }
  std::vector<float> logits = model.Forward(batch, kv, pool);
  const int64_t v = model.config().n_vocab;
  std::vector<std::vector<float>> out;
  for (size_t s = 0; s < seqs.size(); ++s) out.emplace_back(logits.begin() + s * v, logits.begin() + (s + 1) * v);
  return out;
}

TEST(ModelTest, MultiSequenceBatchEqualsSequencesOneByOne) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ4_0}) {
    auto model = Generate(*FindModelShape("tiny"), type, "model_batch.gguf");
    ASSERT_NE(model, nullptr);
    ThreadPool pool(2);
    std::vector<std::vector<TokenId>> seqs = {Tokens(5, 1), Tokens(19, 2), Tokens(3, 3), Tokens(16, 4)};
    std::vector<std::vector<float>> together = RunBatch(*model, seqs, 4, pool);
    for (size_t s = 0; s < seqs.size(); ++s) {
      std::vector<std::vector<float>> alone = RunBatch(*model, {seqs[s]}, 4, pool);
      EXPECT_EQ(together[s], alone[0]) << GgmlTypeName(type) << " sequence " << s << ": bit-identical";
      // Another block size regroups the online softmax: equal up to float rounding.
      std::vector<std::vector<float>> big_blocks = RunBatch(*model, {seqs[s]}, 16, pool);
      for (size_t i = 0; i < alone[0].size(); ++i) ASSERT_NEAR(big_blocks[0][i], alone[0][i], 1e-5f);
    }
  }
}

TEST(ModelTest, LongContextChunkedPrefillEqualsOneBatch) {
  ModelShape shape{.name = "long", .architecture = "llama", .n_embd = 64, .n_layer = 2, .n_head = 4,
                   .n_head_kv = 2, .n_ff = 128, .context_length = 8192};
  auto model = Generate(shape, GgmlType::kF32, "model_long.gguf");
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  const int n = 4200, block_size = 16;
  std::vector<TokenId> tokens = Tokens(n, 5);
  std::vector<int32_t> table((n + block_size - 1) / block_size);
  std::iota(table.begin(), table.end(), 0);
  auto run_chunks = [&](int chunk) {
    KvBuffer kv(model->config(), block_size, static_cast<int64_t>(table.size()));
    std::vector<float> logits;
    for (int start = 0; start < n; start += chunk) {
      ForwardBatch batch;
      batch.sequences.push_back({table.data(), static_cast<int64_t>(table.size())});
      for (int i = start; i < std::min(n, start + chunk); ++i) {
        batch.tokens.push_back(tokens[i]);
        batch.positions.push_back(i);
        batch.sequence_index.push_back(0);
      }
      batch.logit_tokens.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
      logits = model->Forward(batch, kv, pool);
    }
    return logits;
  };
  std::vector<float> whole = run_chunks(n), chunked = run_chunks(1000);
  ASSERT_EQ(whole.size(), chunked.size());
  EXPECT_EQ(whole, chunked) << "position 4199 sees the same 4200 keys either way";
  for (float x : whole) ASSERT_TRUE(std::isfinite(x));
}

// Rewrites the tiny model with one tensor changed by `edit`.
// `edit_metadata`, when given, may change a key's value; `extra` names F32
// tensors of zeros added at the end.
Status RewriteWith(const std::string& in, const std::string& out,
                   const std::function<bool(GgufTensorInfo&)>& edit,
                   const std::function<void(GgufKeyValue&)>& edit_metadata = nullptr,
                   const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra = {}) {
  ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(in));
  GgufWriter writer;
  for (GgufKeyValue kv : file.metadata()) {
    if (edit_metadata) edit_metadata(kv);
    writer.SetMetadata(kv.key, kv.value);
  }
  std::vector<GgufTensorInfo> tensors;
  for (GgufTensorInfo t : file.tensors()) {
    if (!edit(t)) continue;  // dropped
    RETURN_IF_ERROR(writer.AddTensor(t.name, t.type, t.shape));
    tensors.push_back(t);
  }
  for (const auto& [name, shape] : extra) RETURN_IF_ERROR(writer.AddTensor(name, GgmlType::kF32, shape));
  RETURN_IF_ERROR(writer.Open(out));
  for (size_t i = 0; i < writer.tensors().size(); ++i) {
    std::vector<uint8_t> bytes(writer.tensors()[i].num_bytes, 0);
    if (i < tensors.size()) {
      std::copy_n(tensors[i].data, std::min<uint64_t>(bytes.size(), tensors[i].num_bytes), bytes.begin());
    }
    RETURN_IF_ERROR(writer.WriteTensorData(bytes.data(), bytes.size()));
  }
  return writer.Close();
}

TEST(ModelTest, BrokenFilesFailToLoadWithClearErrors) {
  const ModelShape& tiny = *FindModelShape("tiny");
  std::string good = TempPath("model_good.gguf"), bad = TempPath("model_bad.gguf");
  ASSERT_TRUE(GenerateRandomModel({.shape = &tiny, .scheme = PureScheme(GgmlType::kF32), .out_path = good}).ok());

  ASSERT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo& t) {
    if (t.name == "blk.3.attn_q.weight") t.shape = {256, 128};
    return true;
  }).ok());
  StatusOr<std::unique_ptr<Model>> shape = Model::Load(bad);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find(
                "tensor blk.3.attn_q.weight: expected shape [256, 256], file has [256, 128]"),
            std::string::npos)
      << shape.status().message();

  ASSERT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo& t) { return t.name != "blk.1.ffn_up.weight"; }).ok());
  StatusOr<std::unique_ptr<Model>> missing = Model::Load(bad);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tensor blk.1.ffn_up.weight is missing"), std::string::npos);

  ASSERT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo& t) {
    if (t.name == "blk.0.ffn_down.weight") t.type = GgmlType::kQ8_1;  // a type no file uses for weights
    return true;
  }).ok());
  StatusOr<std::unique_ptr<Model>> type = Model::Load(bad);
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(type.status().message().find("blk.0.ffn_down.weight has type Q8_1"), std::string::npos)
      << type.status().message();

  // A q bias without k and v biases: refused at load (Forward would read the missing ones).
  ModelShape qwen = *FindModelShape("qwen2-0.5b");
  qwen.n_layer = 1;
  qwen.n_ff = 128;
  std::string biased = TempPath("model_biased.gguf");
  ASSERT_TRUE(GenerateRandomModel({.shape = &qwen, .scheme = PureScheme(GgmlType::kF16), .out_path = biased}).ok());
  ASSERT_TRUE(RewriteWith(biased, bad, [](GgufTensorInfo& t) { return t.name != "blk.0.attn_k.bias"; }).ok());
  StatusOr<std::unique_ptr<Model>> partial = Model::Load(bad);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("the q, k and v biases come all three or none"), std::string::npos)
      << partial.status().message();
  EXPECT_NE(partial.status().message().find("no blk.0.attn_k.bias"), std::string::npos);
  std::filesystem::remove(biased);

  // Hostile sizes: more heads than embedding dimensions (head_dim 0 divided by zero), and
  // 2^31 layers (one layer struct each was allocated before any tensor was looked up).
  auto with_key = [&](const std::string& key, uint32_t value) {
    return RewriteWith(good, bad, [](GgufTensorInfo&) { return true; }, [&](GgufKeyValue& kv) {
      if (kv.key == key) kv.value = GgufValue(value);
    });
  };
  ASSERT_TRUE(with_key("llama.attention.head_count", 512).ok());
  StatusOr<std::unique_ptr<Model>> heads = Model::Load(bad);
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("512 attention heads do not fit in embedding_length 256"),
            std::string::npos)
      << heads.status().message();
  ASSERT_TRUE(with_key("llama.attention.head_count", 1024).ok());
  ASSERT_TRUE(with_key("llama.attention.head_count_kv", 1024).ok());
  EXPECT_FALSE(Model::Load(bad).ok());
  ASSERT_TRUE(with_key("llama.block_count", 1u << 31).ok());
  StatusOr<std::unique_ptr<Model>> layers = Model::Load(bad);
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.status().message().find("block_count 2147483648 is more than the file's"),
            std::string::npos)
      << layers.status().message();
  ASSERT_TRUE(with_key("llama.feed_forward_length", 1u << 31).ok());
  EXPECT_FALSE(Model::Load(bad).ok());

  EXPECT_EQ(Model::Load("/nonexistent.gguf").status().code(), StatusCode::kNotFound);
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

TEST(ModelTest, Qwen2BiasesAndLlama3RopeFactorsLoad) {
  ModelShape qwen = *FindModelShape("qwen2-0.5b");
  qwen.n_layer = 1;
  qwen.n_ff = 128;
  auto q = Generate(qwen, GgmlType::kF16, "model_qwen.gguf");
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(q->config().rope_neox);
  ModelShape llama = *FindModelShape("llama-1b");
  llama.n_layer = 1;
  llama.n_ff = 128;
  auto l = Generate(llama, GgmlType::kQ8_0, "model_llama3.gguf");
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->config().rope_neox);
  ThreadPool pool(2);
  for (const Model* m : {q.get(), l.get()}) {
    std::vector<std::vector<float>> out = RunBatch(*m, {Tokens(6, 1)}, 16, pool);
    for (float x : out[0]) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(ModelTest, Qwen3ReadsItsHeadDimensionAndNeedsItsQkNorms) {
  const ModelShape& shape = *FindModelShape("qwen3-tiny");
  ASSERT_NE(shape.head_dim(), shape.n_embd / shape.n_head) << "the test shape's heads are not n_embd / n_head wide";
  auto m = Generate(shape, GgmlType::kQ8_0, "model_qwen3.gguf");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().architecture, "qwen3");
  EXPECT_EQ(m->config().head_dim, 64);
  EXPECT_EQ(m->config().q_dim(), 256);
  EXPECT_TRUE(m->config().qk_norm);
  EXPECT_TRUE(m->config().rope_neox);
  ThreadPool pool(2);
  std::vector<std::vector<float>> out = RunBatch(*m, {Tokens(20, 3)}, 16, pool);
  for (float x : out[0]) ASSERT_TRUE(std::isfinite(x));

  const std::string good = TempPath("model_qwen3_good.gguf"), bad = TempPath("model_qwen3_bad.gguf");
  ASSERT_TRUE(GenerateRandomModel({.shape = &shape, .scheme = PureScheme(GgmlType::kF32), .out_path = good}).ok());
  ASSERT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo& t) { return t.name != "blk.2.attn_k_norm.weight"; }).ok());
  StatusOr<std::unique_ptr<Model>> missing = Model::Load(bad);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("blk.2.attn_k_norm.weight"), std::string::npos)
      << missing.status().message();
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

TEST(ModelTest, MixturesOfExpertsLoadAndRefuseBadExpertKeysAndTensors) {
  for (const char* name : {"qwen3moe-tiny", "mixtral-tiny"}) {
    const ModelShape& shape = *FindModelShape(name);
    auto m = Generate(shape, GgmlType::kQ8_0, std::string("model_") + name + ".gguf");
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->config().n_expert, shape.n_expert) << name;
    EXPECT_EQ(m->config().n_expert_used, shape.n_expert_used) << name;
    EXPECT_EQ(m->config().n_ff_exp, shape.expert_ff()) << name;
    ThreadPool pool(2);
    // A token's logits do not depend on the batch: alone, or routed beside others.
    std::vector<std::vector<float>> together = RunBatch(*m, {Tokens(20, 3), Tokens(5, 4)}, 16, pool);
    std::vector<std::vector<float>> alone = RunBatch(*m, {Tokens(5, 4)}, 16, pool);
    EXPECT_EQ(together[1], alone[0]) << name;
    // More picks than one wave of experts takes (Model::ExpertsFfn): the same.
    std::vector<std::vector<float>> long_batch = RunBatch(*m, {Tokens(600, 3), Tokens(5, 4)}, 16, pool);
    EXPECT_EQ(long_batch[1], alone[0]) << name;
    EXPECT_EQ(long_batch[0], RunBatch(*m, {Tokens(600, 3)}, 16, pool)[0]) << name;
  }

  const ModelShape& shape = *FindModelShape("qwen3moe-tiny");
  const std::string good = TempPath("model_moe_good.gguf"), bad = TempPath("model_moe_bad.gguf");
  ASSERT_TRUE(GenerateRandomModel({.shape = &shape, .scheme = PureScheme(GgmlType::kF32), .out_path = good}).ok());
  auto error_with_key = [&](const std::string& key, uint32_t value) {
    EXPECT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo&) { return true; }, [&](GgufKeyValue& kv) {
      if (kv.key == key) kv.value = GgufValue(value);
    }).ok());
    StatusOr<std::unique_ptr<Model>> m = Model::Load(bad);
    return m.ok() ? std::string("loaded") : m.status().message();
  };
  EXPECT_NE(error_with_key("qwen3moe.expert_count", 0).find("'qwen3moe.expert_count' is 0"), std::string::npos);
  EXPECT_NE(error_with_key("qwen3moe.expert_count", 300).find("more than the 256 experts supported"),
            std::string::npos);
  EXPECT_NE(error_with_key("qwen3moe.expert_used_count", 9).find("'qwen3moe.expert_used_count' = 9 is more than "
                                                                 "expert_count 8"),
            std::string::npos);
  EXPECT_NE(error_with_key("qwen3moe.expert_used_count", 0).find("qwen3moe.expert_used_count"), std::string::npos);
  EXPECT_NE(error_with_key("qwen3moe.expert_count", 4).find("blk.0.ffn_gate_inp.weight: expected shape [192, 4]"),
            std::string::npos);
  ASSERT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo& t) { return t.name != "blk.1.ffn_down_exps.weight"; }).ok());
  StatusOr<std::unique_ptr<Model>> missing = Model::Load(bad);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tensor blk.1.ffn_down_exps.weight is missing"), std::string::npos)
      << missing.status().message();
  ASSERT_TRUE(RewriteWith(good, bad, [](GgufTensorInfo& t) {
                if (t.name == "blk.2.ffn_up_exps.weight") t.shape = {192, 64, 16};
                return true;
              }).ok());
  StatusOr<std::unique_ptr<Model>> shaped = Model::Load(bad);
  ASSERT_FALSE(shaped.ok());
  EXPECT_NE(shaped.status().message().find("blk.2.ffn_up_exps.weight: expected shape [192, 128, 8]"),
            std::string::npos)
      << shaped.status().message();
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

// Gemma 2 / 3 and Phi-3 load with their settings, a token's logits do not depend
// on the batch it is in (sliding windows and soft-caps included), and bad files
// are refused with the key or tensor named.
TEST(ModelTest, GemmaAndPhi3LoadComputeAloneAsInABatchAndRefuseBadFiles) {
  ThreadPool pool(2);
  for (const char* name : {"gemma2-tiny", "gemma3-tiny", "phi3-tiny"}) {
    const ModelShape& shape = *FindModelShape(name);
    auto m = Generate(shape, GgmlType::kQ8_0, std::string("model_") + name + ".gguf");
    ASSERT_NE(m, nullptr) << name;
    std::vector<std::vector<float>> together = RunBatch(*m, {Tokens(37, 3), Tokens(21, 4)}, 16, pool);
    std::vector<std::vector<float>> alone = RunBatch(*m, {Tokens(21, 4)}, 16, pool);
    EXPECT_EQ(together[1], alone[0]) << name;
    std::vector<std::vector<float>> small_blocks = RunBatch(*m, {Tokens(21, 4)}, 4, pool);
    for (size_t i = 0; i < alone[0].size(); ++i) ASSERT_NEAR(small_blocks[0][i], alone[0][i], 1e-4) << name;
  }
  auto gemma2 = Generate(*FindModelShape("gemma2-tiny"), GgmlType::kF32, "model_gemma2_cfg.gguf");
  ASSERT_NE(gemma2, nullptr);
  const ModelConfig& g2 = gemma2->config();
  EXPECT_FLOAT_EQ(g2.embd_scale, std::sqrt(128.0f));
  EXPECT_TRUE(g2.post_norms && g2.gelu_ffn && !g2.qk_norm && g2.rope_neox);
  EXPECT_FLOAT_EQ(g2.attn_softcap, 0.1f);
  EXPECT_FLOAT_EQ(g2.final_softcap, 1.5f);
  EXPECT_EQ(g2.sliding_window, 8);
  EXPECT_TRUE(g2.is_sliding(0) && !g2.is_sliding(1) && g2.is_sliding(2) && !g2.is_sliding(3));
  auto gemma3 = Generate(*FindModelShape("gemma3-tiny"), GgmlType::kF32, "model_gemma3_cfg.gguf");
  ASSERT_NE(gemma3, nullptr);
  const ModelConfig& g3 = gemma3->config();
  EXPECT_TRUE(g3.qk_norm);
  EXPECT_EQ(g3.attn_softcap, 0.0f);
  EXPECT_EQ(g3.final_softcap, 0.0f);
  EXPECT_TRUE(g3.is_sliding(0) && g3.is_sliding(1) && !g3.is_sliding(2) && g3.is_sliding(3));
  EXPECT_FLOAT_EQ(g3.rope_base_swa, 10000.0f);
  EXPECT_FLOAT_EQ(g3.rope_position_scale, 0.25f);
  EXPECT_FLOAT_EQ(g3.rope_position_scale_swa, 1.0f);

  // phi3's LongRoPE: the short factors up to the original context, the long ones above it.
  auto phi3 = Generate(*FindModelShape("phi3-tiny"), GgmlType::kF32, "model_phi3_cfg.gguf");
  ASSERT_NE(phi3, nullptr);
  EXPECT_EQ(phi3->config().rope_dim, 24);
  EXPECT_EQ(phi3->config().rope_original_context, 512);
  EXPECT_FLOAT_EQ(phi3->config().rope_attn_factor, 1.19f);
  const std::vector<float> long_factors = RunBatch(*phi3, {Tokens(30, 6)}, 16, pool)[0];
  phi3->SetContextLength(512);
  const std::vector<float> short_factors = RunBatch(*phi3, {Tokens(30, 6)}, 16, pool)[0];
  EXPECT_NE(short_factors, long_factors);
  phi3->SetContextLength(513);
  EXPECT_EQ(RunBatch(*phi3, {Tokens(30, 6)}, 16, pool)[0], long_factors);

  auto refused = [&](const char* shape_name, const std::function<bool(GgufTensorInfo&)>& tensor,
                     const std::function<void(GgufKeyValue&)>& key) {
    const ModelShape& shape = *FindModelShape(shape_name);
    const std::string good = TempPath("model_arch_good.gguf"), bad = TempPath("model_arch_bad.gguf");
    EXPECT_TRUE(GenerateRandomModel({.shape = &shape, .scheme = PureScheme(GgmlType::kF32), .out_path = good}).ok());
    EXPECT_TRUE(RewriteWith(good, bad, tensor, key).ok());
    StatusOr<std::unique_ptr<Model>> m = Model::Load(bad);
    std::filesystem::remove(good);
    std::filesystem::remove(bad);
    return m.ok() ? std::string("loaded") : m.status().message();
  };
  auto all = [](GgufTensorInfo&) { return true; };
  auto no_key = [](GgufKeyValue&) {};
  {  // A vision tower (llama.cpp's v.* and mm.* names) is counted and left unused.
    const ModelShape& shape = *FindModelShape("gemma3-tiny");
    const std::string good = TempPath("model_vision_good.gguf"), with = TempPath("model_vision.gguf");
    ASSERT_TRUE(GenerateRandomModel({.shape = &shape, .scheme = PureScheme(GgmlType::kF32), .out_path = good}).ok());
    ASSERT_TRUE(RewriteWith(good, with, all, nullptr,
                            {{"v.patch_embd.weight", {14, 14, 3, 8}}, {"v.blk.0.attn_q.weight", {8, 8}},
                             {"mm.input_projection.weight", {8, 128}}})
                    .ok());
    StatusOr<std::unique_ptr<Model>> m = Model::Load(with);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->num_vision_tensors(), 3);
    EXPECT_EQ(gemma3->num_vision_tensors(), 0);
    std::filesystem::remove(good);
    std::filesystem::remove(with);
  }
  EXPECT_NE(refused("gemma3-tiny", all, [](GgufKeyValue& kv) {
              if (kv.key == "gemma3.attention.sliding_window") kv.value = GgufValue(uint32_t{0});
            }).find("'gemma3.attention.sliding_window' = 0 is out of range"),
            std::string::npos);
  EXPECT_NE(refused("gemma2-tiny", all, [](GgufKeyValue& kv) {
              if (kv.key == "gemma2.attn_logit_softcapping") kv.value = GgufValue(-1.0f);
            }).find("'gemma2.attn_logit_softcapping' = -1"),
            std::string::npos);
  EXPECT_NE(refused("gemma2-tiny", [](GgufTensorInfo& t) { return t.name != "blk.3.post_ffw_norm.weight"; }, no_key)
                .find("tensor blk.3.post_ffw_norm.weight is missing"),
            std::string::npos);
  EXPECT_NE(refused("phi3-tiny",
                    [](GgufTensorInfo& t) {
                      if (t.name == "blk.1.attn_qkv.weight") t.shape = {128, 192};
                      return true;
                    },
                    no_key)
                .find("blk.1.attn_qkv.weight: expected shape [128, 256]"),
            std::string::npos);
  EXPECT_NE(refused("phi3-tiny",
                    [](GgufTensorInfo& t) {
                      if (t.name == "blk.0.ffn_up.weight") t.shape = {128, 256};
                      return true;
                    },
                    no_key)
                .find("blk.0.ffn_up.weight: expected shape [128, 512]"),
            std::string::npos);
  EXPECT_NE(refused("phi3-tiny", [](GgufTensorInfo& t) { return t.name != "rope_factors_long.weight"; }, no_key)
                .find("tensor rope_factors_long.weight is missing"),
            std::string::npos)
      << "a LongRoPE file has both tables";
}

}  // namespace
}  // namespace tachyon
