// Every GGUF in ../shared/fixtures loads and its metadata reads.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

std::string FixturePath(const std::string& relative) {
  return testing_util::SharedDir() + "/fixtures/" + relative;
}

#define SKIP_WITHOUT_SHARED(path)                                                   \
  if (!fs::exists(path)) {                                                          \
    GTEST_SKIP() << path << " is absent (needs ../shared beside the checkout, or " \
                 << "TACHYON_SHARED_DIR)";                                          \
  }

TEST(GgufFixturesTest, EveryVocabFileLoads) {
  std::string dir = FixturePath("tokenizer");
  SKIP_WITHOUT_SHARED(dir);
  int num_files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    ++num_files;
    std::string path = entry.path().string();
    StatusOr<GgufFile> file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_TRUE(file->tensors().empty()) << path << ": vocab-only files have no tensors";
    StatusOr<std::string> model = file->GetString("tokenizer.ggml.model");
    ASSERT_TRUE(model.ok()) << path;
    EXPECT_TRUE(*model == "llama" || *model == "gpt2" || *model == "bert") << *model;
    StatusOr<const GgufArray*> tokens = file->GetArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << path;
    ASSERT_NE((*tokens)->get<std::string>(), nullptr) << path << ": tokens are strings";
    EXPECT_GT((*tokens)->size(), 256u);
    for (const char* parallel : {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
      if (const GgufValue* v = file->Find(parallel)) {
        EXPECT_EQ(v->AsArray()->size(), (*tokens)->size()) << path << " " << parallel;
      }
    }
    if (*model == "gpt2") {
      StatusOr<const GgufArray*> merges = file->GetArray("tokenizer.ggml.merges");
      ASSERT_TRUE(merges.ok()) << path;
      EXPECT_GT((*merges)->size(), 0u);
    }
  }
  EXPECT_GE(num_files, 12);
}

TEST(GgufFixturesTest, KnownVocabularies) {
  std::string bpe = FixturePath("tokenizer/ggml-vocab-llama-bpe.gguf");
  SKIP_WITHOUT_SHARED(bpe);
  StatusOr<GgufFile> file = GgufFile::Open(bpe);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*file->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*file->GetString("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ((*file->GetArray("tokenizer.ggml.tokens"))->size(), 128256u);
  EXPECT_EQ((*file->GetArray("tokenizer.ggml.merges"))->size(), 280147u);
  EXPECT_EQ(*file->GetUint("tokenizer.ggml.bos_token_id"), 128000u);
  EXPECT_EQ((*file->GetArray("tokenizer.ggml.tokens"))->get<std::string>()->at(128009),
            "<|eot_id|>");

  StatusOr<GgufFile> spm = GgufFile::Open(FixturePath("tokenizer/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(spm.ok());
  EXPECT_EQ(*spm->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ((*spm->GetArray("tokenizer.ggml.tokens"))->size(), 32000u);
  EXPECT_NE((*spm->GetArray("tokenizer.ggml.scores"))->get<float>(), nullptr);

  StatusOr<GgufFile> neox = GgufFile::Open(FixturePath("tokenizer/ggml-vocab-gpt-neox.gguf"));
  ASSERT_TRUE(neox.ok());
  EXPECT_EQ(neox->Find("tokenizer.ggml.pre"), nullptr) << "the README says it has none";

  StatusOr<GgufFile> bert = GgufFile::Open(FixturePath("tokenizer/ggml-vocab-bert-bge.gguf"));
  ASSERT_TRUE(bert.ok());
  EXPECT_EQ(*bert->GetString("tokenizer.ggml.model"), "bert");
}

TEST(GgufFixturesTest, ModelFilesHaveTheirTensors) {
  std::string dir = FixturePath("models");
  SKIP_WITHOUT_SHARED(dir);
  StatusOr<GgufFile> stories = GgufFile::Open(dir + "/stories260K.gguf");
  ASSERT_TRUE(stories.ok()) << stories.status().ToString();
  EXPECT_EQ(*stories->GetString("general.architecture"), "llama");
  EXPECT_EQ(*stories->GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*stories->GetUint("llama.block_count"), 5u);
  const GgufTensorInfo* embd = stories->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{64, 512}));

  struct Quant {
    const char* file;
    GgmlType type;
  };
  for (Quant q : {Quant{"llama-tiny-f32.gguf", GgmlType::kF32},
                  Quant{"llama-tiny-q8_0.gguf", GgmlType::kQ8_0},
                  Quant{"llama-tiny-q4_0.gguf", GgmlType::kQ4_0}}) {
    StatusOr<GgufFile> tiny = GgufFile::Open(dir + "/" + q.file);
    ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
    const GgufTensorInfo* wq = tiny->FindTensor("blk.0.attn_q.weight");
    ASSERT_NE(wq, nullptr);
    EXPECT_EQ(wq->type, q.type) << q.file;
    EXPECT_EQ(wq->shape, (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(tiny->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
    EXPECT_EQ(tiny->FindTensor("output.weight")->type, q.type);
    EXPECT_EQ(tiny->tensors().size(), 2u + 1u + 4u * 9u);
  }
}

}  // namespace
}  // namespace tachyon
