// Small hand-built vocabularies for tokenizer unit tests (no fixtures needed).
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tachyon::testing_util {

struct VocabSpec {
  std::string model;  // llama, gpt2, bert
  std::string pre;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::vector<std::pair<std::string, GgufValue>> extra;
};

// Writes the vocabulary as a vocab-only GGUF and opens it (the real load path).
inline StatusOr<GgufFile> WriteVocab(const VocabSpec& spec, const std::string& name) {
  // ctest runs test cases as parallel processes, several of which write the same
  // vocabulary: the pid keeps their files apart (a shared name made one rename fail).
  std::string path = ::testing::TempDir() + "/vocab_" + name + "_" + std::to_string(::getpid()) + ".gguf";
  GgufWriter writer;
  writer.SetMetadata("general.architecture", "llama");
  writer.SetMetadata("tokenizer.ggml.model", GgufValue(spec.model));
  if (!spec.pre.empty()) writer.SetMetadata("tokenizer.ggml.pre", GgufValue(spec.pre));
  writer.SetMetadata("tokenizer.ggml.tokens", GgufValue(GgufArray(spec.tokens)));
  if (!spec.scores.empty()) writer.SetMetadata("tokenizer.ggml.scores", GgufValue(GgufArray(spec.scores)));
  if (!spec.types.empty()) writer.SetMetadata("tokenizer.ggml.token_type", GgufValue(GgufArray(spec.types)));
  if (spec.model == "gpt2") writer.SetMetadata("tokenizer.ggml.merges", GgufValue(GgufArray(spec.merges)));
  for (const auto& [key, value] : spec.extra) writer.SetMetadata(key, value);
  RETURN_IF_ERROR(writer.Open(path));
  RETURN_IF_ERROR(writer.Close());
  StatusOr<GgufFile> file = GgufFile::Open(path);
  std::remove(path.c_str());  // the mapping stays valid
  return file;
}

inline std::unique_ptr<Tokenizer> MakeTokenizer(const VocabSpec& spec, const std::string& name) {
  StatusOr<GgufFile> file = WriteVocab(spec, name);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

// SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens (ids 3..258), then `pieces`.
inline VocabSpec SpmSpec(const std::vector<std::pair<std::string, float>>& pieces) {
  VocabSpec spec{.model = "llama"};
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    spec.tokens.push_back(hex);
    spec.types.push_back(6);
  }
  for (const auto& [piece, score] : pieces) {
    spec.tokens.push_back(piece);
    spec.types.push_back(1);
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) spec.scores[259 + i] = pieces[i].second;
  return spec;
}

// Byte-level BPE vocabulary: the 256 byte spellings (id = byte), then `pieces`, then `<|eos|>`.
inline VocabSpec BpeSpec(const std::vector<std::string>& pieces, const std::vector<std::string>& merges) {
  VocabSpec spec{.model = "gpt2", .pre = "gpt-2"};
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
    spec.types.push_back(1);
  }
  for (const std::string& p : pieces) {
    spec.tokens.push_back(p);
    spec.types.push_back(1);
  }
  spec.tokens.push_back("<|eos|>");
  spec.types.push_back(3);
  spec.merges = merges;
  return spec;
}

inline std::vector<int32_t> Values(const std::vector<TokenId>& ids) {
  std::vector<int32_t> out;
  for (TokenId id : ids) out.push_back(id.value());
  return out;
}

}  // namespace tachyon::testing_util
