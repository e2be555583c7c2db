// `tachyon run` end to end: the real binary against llama2.c's stories260K outputs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

std::string ModelsDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/models";
}

// Shell-quotes s for RunTachyon's command line.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(RunTest, GreedyTextMatchesLlama2c) {
  std::string dir = ModelsDir();
  if (!fs::exists(dir + "/stories260K.gguf")) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  std::ifstream in(dir + "/stories260K.reference.json");
  nlohmann::json reference = nlohmann::json::parse(in);
  for (const auto& c : reference["cases"]) {
    std::string prompt = c["prompt"];
    size_t n = c["sequence_token_ids"].size() - c["prompt_token_ids"].size();
    CommandResult r = RunTachyon("run --model " + dir + "/stories260K.gguf -p " + Quote(prompt) + " -n " +
                                 std::to_string(n) + " --temp 0 --threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string expected = c["stdout_text"];
    EXPECT_EQ(r.out, expected) << "prompt '" << prompt << "'";
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << "speed is reported on stderr";
  }
}

TEST(RunTest, PromptIdsAndPrintIds) {
  std::string dir = ModelsDir();
  if (!fs::exists(dir + "/stories260K.gguf")) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  std::ifstream in(dir + "/stories260K.reference.json");
  nlohmann::json reference = nlohmann::json::parse(in);
  const auto& c = reference["cases"][2];
  std::vector<int32_t> prompt = c["prompt_token_ids"], sequence = c["sequence_token_ids"];
  std::string ids;
  for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
  CommandResult r = RunTachyon("run --model " + dir + "/stories260K.gguf --prompt-ids " + ids +
                               " -n 20 --temp 0 --print-ids --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string expected;
  for (size_t i = prompt.size(); i < prompt.size() + 20; ++i) {
    expected += (i > prompt.size() ? " " : "") + std::to_string(sequence[i]);
  }
  EXPECT_EQ(r.out, expected + "\n");
}

TEST(RunTest, SeededSamplingRepeatsAndErrorsAreClear) {
  std::string path = ::testing::TempDir() + "/run_tiny_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_EQ(RunTachyon("model gen --shape tiny --type q4_0 --out " + path).exit_code, 0);
  std::string cmd = "run --model " + path + " -p 'Hello' -n 16 --temp 1 --seed 42 --print-ids --ignore-eos";
  CommandResult a = RunTachyon(cmd), b = RunTachyon(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out) << "same seed, same tokens";
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), ' '), 15) << a.out;
  CommandResult too_long = RunTachyon("run --model " + path + " -p 'Hi' -n 5000");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("exceeds the model's context length of 2048"), std::string::npos) << too_long.err;
  CommandResult bad_ids = RunTachyon("run --model " + path + " --prompt-ids 1,99999");
  EXPECT_EQ(bad_ids.exit_code, 1);
  EXPECT_NE(bad_ids.err.find("'99999' is not a token id"), std::string::npos) << bad_ids.err;
  CommandResult no_template = RunTachyon("run --model " + path + " -p Hi --chat -n 2");
  EXPECT_EQ(no_template.exit_code, 1);
  EXPECT_NE(no_template.err.find("--chat-template"), std::string::npos) << no_template.err;
  CommandResult chat = RunTachyon("run --model " + path + " -p Hi --chat --chat-template chatml -n 2 --temp 0");
  EXPECT_EQ(chat.exit_code, 0) << chat.err;
  CommandResult missing = RunTachyon("run --model /nonexistent.gguf -p Hi");
  EXPECT_EQ(missing.exit_code, 1);
  fs::remove(path);
}

// `run --speculative ngram` prints what `run` prints, and says what speculation did.
TEST(RunTest, SpeculativeNgramGivesTheSameText) {
  std::string dir = ModelsDir();
  if (!fs::exists(dir + "/stories260K.gguf")) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  const std::string cmd = "run --model " + dir + "/stories260K.gguf -p 'Once upon a time' -n 200";
  CommandResult plain = RunTachyon(cmd + " --temp 0"), spec = RunTachyon(cmd + " --temp 0 --speculative ngram");
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_NE(spec.err.find("speculative (ngram):"), std::string::npos) << spec.err;
  EXPECT_EQ(plain.err.find("speculative"), std::string::npos);
  CommandResult sampled = RunTachyon(cmd + " --temp 0.8 --seed 5 --speculative ngram --print-ids --ignore-eos");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_EQ(std::count(sampled.out.begin(), sampled.out.end(), ' ') + 1, 200) << sampled.out;
}

}  // namespace
}  // namespace tachyon::e2e
