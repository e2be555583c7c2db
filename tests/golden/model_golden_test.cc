// The forward pass against independent implementations (../shared/fixtures/models,
// see its README): llama2.c on the trained stories260K model, llama.cpp on
// random-weight llama-tiny models in F32, Q8_0 and Q4_0; and llama.cpp on the tiny
// test shapes of the other architectures (tests/golden/arch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/model_gen.h"
#include "model/quant_scheme.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

std::string ModelsDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/models";
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> data(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(data.data()), data.size() * sizeof(float));
  return data;
}

int32_t Argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);  // lowest id on ties
  }
  return best;
}

// One sequence fed through the model: a prompt in one batch, then one token at a time.
class Runner {
 public:
  Runner(const Model& model, int64_t max_positions)
      : model_(model),
        kv_(model.config(), kBlockSize, (max_positions + kBlockSize - 1) / kBlockSize),
        pool_(2) {
    for (int32_t b = 0; b < kv_.num_blocks(); ++b) table_.push_back(b);
  }

  // Feeds tokens at positions [next, next + n); returns logits of every fed token.
  std::vector<float> Feed(const std::vector<int32_t>& tokens) {
    ForwardBatch batch;
    for (size_t i = 0; i < tokens.size(); ++i) {
      batch.tokens.push_back(TokenId(tokens[i]));
      batch.positions.push_back(next_ + static_cast<int64_t>(i));
      batch.sequence_index.push_back(0);
      batch.logit_tokens.push_back(static_cast<int32_t>(i));
    }
    batch.sequences.push_back({table_.data(), static_cast<int64_t>(table_.size())});
    next_ += static_cast<int64_t>(tokens.size());
    return model_.Forward(batch, kv_, pool_);
  }

 private:
  static constexpr int kBlockSize = 16;
  const Model& model_;
  KvBuffer kv_;
  ThreadPool pool_;
  std::vector<int32_t> table_;
  int64_t next_ = 0;
};

struct Diff {
  float max_abs = 0;
  double sum_sq = 0;
  int64_t count = 0;
  void Add(float a, float b) {
    float d = std::fabs(a - b);
    max_abs = std::max(max_abs, d);
    sum_sq += static_cast<double>(d) * d;
    ++count;
  }
  double rms() const { return count ? std::sqrt(sum_sq / count) : 0; }
};

TEST(GoldenTest, Stories260KMatchesLlama2c) {
  std::string dir = ModelsDir();
  if (!fs::exists(dir + "/stories260K.gguf")) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  auto model = Model::Load(dir + "/stories260K.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int64_t n_vocab = (*model)->config().n_vocab;
  nlohmann::json reference = ReadJson(dir + "/stories260K.reference.json");
  int num_generated = 0;
  for (const auto& c : reference["cases"]) {
    std::vector<int32_t> expected = c["sequence_token_ids"];
    std::vector<int32_t> prompt = c["prompt_token_ids"];
    Runner runner(**model, 512);
    // llama2.c runs one token at a time; so does this, to compare its logits at positions 0..2.
    std::vector<int32_t> sequence = {prompt[0]};
    Diff diff;
    while (sequence.size() < expected.size()) {
      std::vector<float> logits = runner.Feed({sequence.back()});
      int64_t pos = static_cast<int64_t>(sequence.size()) - 1;
      for (const auto& first : c["logits_first_positions"]) {
        if (first["pos"] != pos) continue;
        std::vector<float> ref_logits = first["logits"];
        for (int64_t i = 0; i < n_vocab; ++i) diff.Add(logits[i], ref_logits[i]);
      }
      int32_t next = sequence.size() < prompt.size() ? prompt[sequence.size()]
                                                    : Argmax(logits.data(), n_vocab);
      if (sequence.size() >= prompt.size()) ++num_generated;
      sequence.push_back(next);
    }
    EXPECT_EQ(sequence, expected) << "prompt '" << c["prompt"] << "'";
    std::printf("stories260K vs llama2.c, prompt '%s': %zu ids, logits max diff %.3g\n",
                c["prompt"].get<std::string>().c_str(), sequence.size(), diff.max_abs);
    EXPECT_LE(diff.max_abs, 1e-3f) << "README tolerance for stories260K";
    EXPECT_GT(diff.count, 0);
  }
  EXPECT_GE(num_generated, 480);
}

struct TinyCase {
  std::string stem;      // llama-tiny-f32, stories260K, ...
  float max_abs;         // README tolerances
  double max_rms;
  bool exact_greedy;     // free-running greedy must match (F32) or only teacher-forced argmax
};

// Names the case in test listings (instead of its bytes).
void PrintTo(const TinyCase& c, std::ostream* os) { *os << c.stem; }

class LlamaCppGoldenTest : public ::testing::TestWithParam<TinyCase> {};

// The model against a fixture's reference logits (refs: its index, files under dir).
void CompareWithReference(const Model& model, const nlohmann::json& refs, const std::string& dir,
                          const TinyCase& tc) {
  const int64_t n_vocab = model.config().n_vocab;
  ASSERT_EQ(n_vocab, refs["n_vocab"]);
  const float tie_margin = 2 * tc.max_abs;
  for (const auto& p : refs["prompts"]) {
    const std::string name = p["name"];
    std::vector<int32_t> prompt = p["prompt_ids"];
    std::vector<int32_t> greedy = p["greedy_ids"];
    std::vector<float> margins = p["greedy_top2_margin"];
    std::vector<float> ref_prompt = ReadF32(dir + "/" + p["logits_file"].get<std::string>());
    std::vector<float> ref_steps = ReadF32(dir + "/" + p["step_logits_file"].get<std::string>());
    const int64_t first_row = p["logits_positions"][0];

    // 1. The whole prompt in one batch.
    Runner runner(model, static_cast<int64_t>(prompt.size() + greedy.size()));
    std::vector<float> logits = runner.Feed(prompt);
    Diff prompt_diff;
    int prompt_argmax_mismatch = 0;
    const int64_t num_rows = static_cast<int64_t>(ref_prompt.size()) / n_vocab;
    ASSERT_GT(num_rows, 0) << dir << "/" << p["logits_file"];
    for (int64_t r = 0; r < num_rows; ++r) {
      const float* ours = &logits[(first_row + r) * n_vocab];
      const float* theirs = &ref_prompt[r * n_vocab];
      for (int64_t i = 0; i < n_vocab; ++i) prompt_diff.Add(ours[i], theirs[i]);
      if (Argmax(ours, n_vocab) != Argmax(theirs, n_vocab)) ++prompt_argmax_mismatch;
    }
    EXPECT_LE(prompt_diff.max_abs, tc.max_abs) << tc.stem << " " << name << " prompt logits";
    EXPECT_LE(prompt_diff.rms(), tc.max_rms) << tc.stem << " " << name << " prompt logits rms";

    // 2. Teacher forcing: step k feeds greedy_ids[k-1] and compares row k.
    Diff step_diff;
    const float* last_prompt_row = &logits[(prompt.size() - 1) * n_vocab];
    std::vector<float> row(last_prompt_row, last_prompt_row + n_vocab);
    for (size_t k = 0; k < greedy.size(); ++k) {
      if (k > 0) row = runner.Feed({greedy[k - 1]});
      const float* theirs = &ref_steps[k * n_vocab];
      for (int64_t i = 0; i < n_vocab; ++i) step_diff.Add(row[i], theirs[i]);
      int32_t ours = Argmax(row.data(), n_vocab);
      // Where the reference itself is a near tie either of its top two is right.
      float clear_margin = tc.exact_greedy ? tie_margin : 0.1f;
      if (margins[k] > clear_margin) {
        EXPECT_EQ(ours, greedy[k]) << tc.stem << " " << name << " step " << k << " margin " << margins[k];
      }
    }
    std::printf("%s %s: prompt max %.3g rms %.3g (argmax differs on %d of %lld rows); steps max %.3g rms %.3g\n",
                tc.stem.c_str(), name.c_str(), prompt_diff.max_abs, prompt_diff.rms(), prompt_argmax_mismatch,
                static_cast<long long>(num_rows), step_diff.max_abs, step_diff.rms());
    EXPECT_LE(step_diff.max_abs, tc.max_abs) << tc.stem << " " << name << " step logits";
    EXPECT_LE(step_diff.rms(), tc.max_rms) << tc.stem << " " << name << " step logits rms";

    // 3. Free-running greedy (F32 only; quantized runs may diverge legitimately).
    if (tc.exact_greedy) {
      Runner free_runner(model, static_cast<int64_t>(prompt.size() + greedy.size()));
      std::vector<float> l = free_runner.Feed(prompt);
      std::vector<float> current(l.end() - n_vocab, l.end());
      for (size_t k = 0; k < greedy.size(); ++k) {
        int32_t ours = Argmax(current.data(), n_vocab);
        if (ours != greedy[k]) {
          ASSERT_LT(margins[k], tie_margin) << tc.stem << " " << name << " free-running step " << k;
          ours = greedy[k];  // a near tie in the reference: continue as it did
        }
        current = free_runner.Feed({ours});
      }
    }
  }
}

TEST_P(LlamaCppGoldenTest, PromptAndStepLogits) {
  const TinyCase& tc = GetParam();
  std::string dir = ModelsDir();
  nlohmann::json refs_path = dir + "/" + tc.stem + ".refs.json";
  if (!fs::exists(refs_path.get<std::string>())) GTEST_SKIP() << refs_path << " is absent (needs ../shared)";
  nlohmann::json refs = ReadJson(refs_path);
  auto model = Model::Load(dir + "/" + refs["model_file"].get<std::string>());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CompareWithReference(**model, refs, dir, tc);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LlamaCppGoldenTest,
    ::testing::Values(TinyCase{"llama-tiny-f32", 1e-4f, 1e-4, true},
                      TinyCase{"stories260K", 1e-3f, 1e-3, true},
                      TinyCase{"llama-tiny-q8_0", 0.05f, 0.01, false},
                      TinyCase{"llama-tiny-q4_0", 0.05f, 0.01, false}),
    [](const auto& info) {
      std::string name = info.param.stem;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// The architectures beyond llama (tests/golden/arch, README.md there): each
// fixture names the random model it was made from (shape, type, seed), which
// the test writes again with model gen, and holds llama.cpp's logits for it.
class ArchGoldenTest : public ::testing::TestWithParam<TinyCase> {};

TEST_P(ArchGoldenTest, PromptAndStepLogits) {
  const TinyCase& tc = GetParam();
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/tests/golden/arch";
  const nlohmann::json refs = ReadJson(dir + "/" + tc.stem + ".refs.json");
  const ModelShape* shape = FindModelShape(refs["gen"]["shape"]);
  ASSERT_NE(shape, nullptr) << refs["gen"];
  StatusOr<QuantScheme> scheme = ParseQuantScheme(refs["gen"]["type"].get<std::string>());
  ASSERT_TRUE(scheme.ok()) << scheme.status().ToString();
  const std::string path = ::testing::TempDir() + "/arch_golden_" + tc.stem + ".gguf";
  ModelGenOptions options{.shape = shape, .scheme = *scheme, .seed = refs["gen"]["seed"], .out_path = path};
  StatusOr<ModelGenResult> written = GenerateRandomModel(options);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CompareWithReference(**model, refs, dir, tc);
  fs::remove(path);
}

std::string CaseName(const ::testing::TestParamInfo<TinyCase>& info) {
  std::string name = info.param.stem;
  for (char& ch : name) {
    if (ch == '-' || ch == '.') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArchGoldenTest,
                         ::testing::Values(TinyCase{"qwen3-tiny-f32", 1e-4f, 1e-4, true},
                                           TinyCase{"qwen3-tiny-q8_0", 0.05f, 0.01, false},
                                           TinyCase{"qwen3moe-tiny-f32", 1e-4f, 1e-4, true},
                                           TinyCase{"qwen3moe-tiny-q8_0", 0.05f, 0.01, false},
                                           TinyCase{"mixtral-tiny-f32", 1e-4f, 1e-4, true},
                                           TinyCase{"mixtral-tiny-q8_0", 0.05f, 0.01, false},
                                           // Gemma's GeGLU rounds its input to F16 (as llama.cpp's table
                                           // does): a last-bit difference in a gate can round to the
                                           // neighbouring F16, 2^-11 apart, hence stories260K's 1e-3.
                                           TinyCase{"gemma2-tiny-f32", 1e-3f, 1e-4, true},
                                           TinyCase{"gemma2-tiny-q8_0", 0.05f, 0.01, false},
                                           TinyCase{"gemma3-tiny-f32", 1e-3f, 1e-4, true},
                                           TinyCase{"gemma3-tiny-q8_0", 0.05f, 0.01, false},
                                           TinyCase{"phi3-tiny-f32", 1e-4f, 1e-4, true},
                                           TinyCase{"phi3-tiny-q8_0", 0.05f, 0.01, false}),
                         CaseName);

}  // namespace
}  // namespace tachyon
