#include "embed/words_embedder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "embed/hash_embedder.h"
#include "embed/sts_eval.h"
#include "gguf/gguf_test_util.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

using testing_util::SharedDir;

class WordsEmbedderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tachyon_words_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  fs::path dir_;
};

// Three words on three axes; "cat" and "kitten" share one.
constexpr char kGlove[] = "the 0 0 1\ncat 1 0 0\nkitten 0.9 0.1 0\ncar 0 1 0\n";

TEST_F(WordsEmbedderTest, EveryFileFormatGivesTheSameVectors) {
  const std::string glove = Write("v.txt", kGlove);
  const std::string w2v_text = Write("v.vec", std::string("4 3\n") + kGlove);
  std::string bin = "4 3\n";
  std::string f32, words;
  const std::vector<std::pair<std::string, std::vector<float>>> rows = {
      {"the", {0, 0, 1}}, {"cat", {1, 0, 0}}, {"kitten", {0.9f, 0.1f, 0}}, {"car", {0, 1, 0}}};
  for (const auto& [word, v] : rows) {
    bin += word + " " + std::string(reinterpret_cast<const char*>(v.data()), 12) + "\n";
    f32 += std::string(reinterpret_cast<const char*>(v.data()), 12);
    words += word + "\n";
  }
  const std::string w2v_bin = Write("v.bin", bin);
  const std::string raw = Write("v.f32", f32);
  Write("v.vocab.txt", words);
  std::vector<std::vector<float>> results;
  for (const std::string& path : {glove, w2v_text, w2v_bin, raw}) {
    StatusOr<std::unique_ptr<WordsEmbedder>> e = WordsEmbedder::Create({.vectors_path = path});
    ASSERT_TRUE(e.ok()) << path << ": " << e.status().message();
    EXPECT_EQ((*e)->dimension(), 3);
    EXPECT_EQ((*e)->num_words(), 4u);
    results.push_back(*(*e)->Embed(std::vector<std::string>{"The CAT!", "a kitten", "car"}));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    ASSERT_EQ(results[i].size(), results[0].size());
    for (size_t k = 0; k < results[0].size(); ++k) EXPECT_NEAR(results[i][k], results[0][k], 1e-6f) << i;
  }
  const std::vector<float>& v = results[0];
  EXPECT_GT(Dot(&v[0], &v[3], 3), Dot(&v[0], &v[6], 3));  // cat is nearer kitten than car
  EXPECT_FALSE(WordsEmbedder::Create({.vectors_path = Write("bad.txt", "a 1 2\nb 1\n")}).ok());
  EXPECT_FALSE(WordsEmbedder::Create({.vectors_path = (dir_ / "none.txt").string()}).ok());
}

// The corpus sets the frequencies (frequent words weigh less) and the common
// direction removed: a word in every corpus line stops counting.
TEST_F(WordsEmbedderTest, CorpusWeightsAndCommonComponent) {
  const std::string glove = Write("v.txt", kGlove);
  const std::string corpus = Write("corpus.txt", "the cat\nthe car\nthe the kitten\nthe\n");
  auto e = std::move(WordsEmbedder::Create({.vectors_path = glove, .corpus = {corpus}})).value();
  std::vector<float> v = *e->Embed(std::vector<std::string>{"the cat", "cat"});
  auto plain = std::move(WordsEmbedder::Create({.vectors_path = glove, .sif_a = 1e9, .remove_components = 0})).value();
  std::vector<float> p = *plain->Embed(std::vector<std::string>{"the cat", "cat"});
  EXPECT_NEAR(Dot(&p[0], &p[3], 3), std::sqrt(0.5f), 1e-6f);  // a plain average: "the" counts as much as "cat"
  EXPECT_GT(Dot(&v[0], &v[3], 3), Dot(&p[0], &p[3], 3) + 0.2f);  // weighted: "the" counts far less
  EXPECT_NE(e->id(), plain->id());
}

TEST(StsEvalTest, SpearmanWithTies) {
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
  // Ties get the mean rank: ranks (1.5, 1.5, 3) vs (1, 2, 3).
  EXPECT_NEAR(SpearmanCorrelation({5, 5, 7}, {1, 2, 3}), 0.8660254037844386, 1e-12);
}

// STS Benchmark dev (../shared): the model-free embedders beat the plain average
// of word vectors that the data's README names (Spearman 0.477 on test).
TEST(StsEvalTest, ModelFreeEmbeddersOnStsBenchmarkDev) {
  const std::string dev = SharedDir() + "/data/similarity/stsb/sts-dev.csv";
  const std::string train = SharedDir() + "/data/similarity/stsb/sts-train.csv";
  const std::string vectors = SharedDir() + "/data/embeddings/glove-100d/glove.6B.100d.top20k.f32";
  if (!fs::exists(dev) || !fs::exists(vectors)) GTEST_SKIP() << "../shared/data is absent";
  StatusOr<std::vector<StsPair>> pairs = ReadStsPairs(dev);
  ASSERT_TRUE(pairs.ok()) << pairs.status().message();
  EXPECT_EQ(pairs->size(), 1500u);
  auto hash = std::move(HashEmbedder::Create()).value();
  const double hash_rho = *EvaluateSts(*hash, *pairs);
  // The corpus: both sentences of every training pair, one a line.
  const fs::path corpus = fs::temp_directory_path() / ("tachyon_sts_corpus_" + std::to_string(::getpid()));
  {
    StatusOr<std::vector<StsPair>> train_pairs = ReadStsPairs(train);
    ASSERT_TRUE(train_pairs.ok()) << train_pairs.status().message();
    std::ofstream out(corpus);
    for (const StsPair& p : *train_pairs) out << p.a << "\n" << p.b << "\n";
  }
  auto words = std::move(WordsEmbedder::Create({.vectors_path = vectors, .corpus = {corpus.string()}})).value();
  const double words_rho = *EvaluateSts(*words, *pairs);
  fs::remove(corpus);
  std::printf("STS-B dev Spearman: hash %.4f, words (SIF + common component) %.4f\n", hash_rho, words_rho);
  EXPECT_GT(hash_rho, 0.70);
  EXPECT_GT(words_rho, 0.69);
}

}  // namespace
}  // namespace tachyon
