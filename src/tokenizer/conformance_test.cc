// Conformance with the reference tokenizers: every .inp/.out pair and every
// ggml-prompts line in ../shared/fixtures/tokenizer must give exactly the ids
// the reference gave (add_special = false, parse_special = false).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

std::string TokenizerDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/tokenizer";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> SplitOn(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t found = text.find(separator, start);
    if (found == std::string::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, found - start));
    start = found + separator.size();
  }
}

std::vector<int32_t> ParseIds(const std::string& line, char separator) {
  std::vector<int32_t> ids;
  std::stringstream ss(line);
  std::string item;
  while (std::getline(ss, item, separator)) {
    if (!item.empty()) ids.push_back(std::stoi(item));
  }
  return ids;
}

std::vector<int32_t> Values(const std::vector<TokenId>& ids) {
  std::vector<int32_t> out;
  for (TokenId id : ids) out.push_back(id.value());
  return out;
}

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  StatusOr<GgufFile> file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << path << ": " << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

class VocabConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabConformanceTest, EveryPairMatchesExactly) {
  std::string gguf = TokenizerDir() + "/ggml-vocab-" + GetParam() + ".gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << gguf << " is absent (needs ../shared)";
  std::unique_ptr<Tokenizer> tokenizer = Load(gguf);
  ASSERT_NE(tokenizer, nullptr);
  std::vector<std::string> inputs = SplitOn(ReadAll(gguf + ".inp"), "\n__ggml_vocab_test__\n");
  std::vector<std::string> outputs = SplitOn(ReadAll(gguf + ".out"), "\n");
  // Both files end with their separator: drop the empty tail of each.
  ASSERT_FALSE(inputs.empty());
  inputs.pop_back();
  outputs.pop_back();
  ASSERT_EQ(inputs.size(), outputs.size());
  int num_mismatches = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> expected = ParseIds(outputs[i], ' ');
    std::vector<TokenId> ids = tokenizer->Encode(inputs[i], {.add_special = false});
    EXPECT_EQ(Values(ids), expected) << GetParam() << " input " << i << ": '" << inputs[i] << "'";
    if (Values(ids) != expected) ++num_mismatches;
    if (tokenizer->IsLossless()) {
      EXPECT_EQ(tokenizer->Decode(ids), inputs[i]) << GetParam() << " round trip of input " << i;
    }
  }
  EXPECT_EQ(num_mismatches, 0) << "of " << inputs.size();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VocabConformanceTest,
                         ::testing::Values("bert-bge", "deepseek-coder", "deepseek-llm", "falcon",
                                           "gpt-2", "llama-bpe", "llama-spm", "mpt", "phi-3",
                                           "refact", "starcoder"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// ggml-prompts/<name>.txt: lines "text => id,id,..." from the models' HF tokenizers.
struct PromptSet {
  std::string prompts;
  std::string vocab;
  int expected_matches;  // of 100, as the fixture README measured for llama.cpp
};

class PromptConformanceTest : public ::testing::TestWithParam<PromptSet> {};

TEST_P(PromptConformanceTest, MatchesTheReference) {
  const PromptSet& set = GetParam();
  std::string prompts = TokenizerDir() + "/ggml-prompts/" + set.prompts + ".txt";
  std::string gguf = TokenizerDir() + "/ggml-vocab-" + set.vocab + ".gguf";
  if (!fs::exists(prompts) || !fs::exists(gguf)) GTEST_SKIP() << prompts << " is absent";
  std::unique_ptr<Tokenizer> tokenizer = Load(gguf);
  ASSERT_NE(tokenizer, nullptr);
  std::ifstream in(prompts);
  std::string line;
  int num_lines = 0, num_matches = 0;
  while (std::getline(in, line)) {
    size_t arrow = line.rfind(" => ");
    if (arrow == std::string::npos) continue;
    ++num_lines;
    std::vector<int32_t> expected = ParseIds(line.substr(arrow + 4), ',');
    std::vector<int32_t> actual = Values(tokenizer->Encode(line.substr(0, arrow), {.add_special = false}));
    if (actual == expected) ++num_matches;
  }
  EXPECT_EQ(num_lines, 100);
  EXPECT_GE(num_matches, set.expected_matches) << set.prompts;
  std::printf("%s with %s: %d of %d lines match\n", set.prompts.c_str(), set.vocab.c_str(), num_matches, num_lines);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PromptConformanceTest,
                         ::testing::Values(PromptSet{"gpt-2", "gpt-2", 100},
                                           PromptSet{"gpt-j", "gpt-2", 100},
                                           PromptSet{"gpt-neox", "gpt-neox", 89},
                                           PromptSet{"dolly-v2", "gpt-neox", 89}),
                         [](const auto& info) {
                           std::string name = info.param.prompts;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tachyon
