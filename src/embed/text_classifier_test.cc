#include "embed/text_classifier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "embed/hash_embedder.h"
#include "gguf/gguf_test_util.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;
using testing_util::SharedDir;

std::vector<LabeledText> Topics() {
  std::vector<LabeledText> out;
  const std::vector<std::string> code = {"python function", "javascript bug", "compile the c++ code",
                                         "sort an array in java", "write a sql query", "fix this rust error"};
  const std::vector<std::string> food = {"bake a chocolate cake", "recipe for pasta sauce", "grill the salmon",
                                         "cook rice in a pot", "make a vegetable soup", "roast a chicken"};
  // The same openings on both sides: only the topic tells the classes apart.
  for (const std::string opening : {"", "please ", "can you "}) {
    for (const std::string& t : code) out.push_back({opening + t, "code"});
    for (const std::string& t : food) out.push_back({opening + t, "food"});
  }
  return out;
}

TEST(TextClassifierTest, LearnsTopicsSavesAndLoads) {
  auto embedder = *HashEmbedder::Create({});
  StatusOr<TextClassifier> m = TextClassifier::Train(Topics(), *embedder, "hash");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->labels(), (std::vector<std::string>{"code", "food"}));
  StatusOr<std::vector<TextClassifier::Prediction>> p =
      m->Predict({"fix the python function", "a chocolate cake recipe"}, *embedder);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(m->labels()[(*p)[0].label], "code");
  EXPECT_EQ(m->labels()[(*p)[1].label], "food");
  EXPECT_GT((*p)[0].probability, 0.5f);

  const std::string path = (fs::temp_directory_path() / "tachyon_router_test.bin").string();
  ASSERT_TRUE(m->Save(path).ok());
  StatusOr<TextClassifier> loaded = TextClassifier::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->embedder_spec(), "hash");
  StatusOr<std::vector<TextClassifier::Prediction>> again =
      loaded->Predict({"fix the python function", "a chocolate cake recipe"}, *embedder);
  EXPECT_FLOAT_EQ((*again)[0].probability, (*p)[0].probability);
  // A cut or foreign file is refused with a reason.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(TextClassifier::Load(path).status().message().find("not a router model"), std::string::npos);
  std::ofstream(path, std::ios::binary) << "GGUF...";
  EXPECT_FALSE(TextClassifier::Load(path).ok());
  fs::remove(path);
  // Another embedder's dimension is refused.
  auto small = *HashEmbedder::Create({.dimension = 64});
  EXPECT_FALSE(m->Predict({"x"}, *small).ok());
  EXPECT_FALSE(TextClassifier::Train({{"a", "x"}, {"b", "x"}}, *embedder, "hash").ok()) << "one label";
}

TEST(TextClassifierTest, EvaluateCountsBothErrorDirections) {
  const ClassifierReport r = Evaluate({"small", "large"}, {0, 0, 0, 1, 1}, {0, 1, 0, 1, 0});
  EXPECT_DOUBLE_EQ(r.accuracy, 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(r.majority_accuracy, 3.0 / 5.0);
  EXPECT_EQ(r.confusion[0][1], 1);  // a small task sent large
  EXPECT_EQ(r.confusion[1][0], 1);  // a large task sent small
  EXPECT_DOUBLE_EQ(r.precision[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.recall[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.recall[1], 1.0 / 2.0);
}

TEST(TextClassifierTest, SimpleFeaturesAndExampleFiles) {
  const auto f = SimpleTextFeatures("Write a function that returns 42?");
  EXPECT_EQ(f[6], 1.0f);  // imperative verb
  EXPECT_EQ(f[4], 1.0f);  // question mark
  EXPECT_EQ(SimpleTextFeatures("What is 2+2")[5], 1.0f);
  EXPECT_EQ(SimpleTextFeatures("```\ncode\n```")[3], 1.0f);
  const std::string path = (fs::temp_directory_path() / "tachyon_router_examples.jsonl").string();
  std::ofstream(path) << R"({"text": "a", "label": "x"})" "\n"
                      << R"({"turns": ["first", "second"], "category": "y", "text": "b", "label": true})" "\n";
  StatusOr<std::vector<LabeledText>> e = ReadLabeledTexts(path);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)[1].label, "true");
  e = ReadLabeledTexts(path, "turns", "category");
  EXPECT_FALSE(e.ok()) << "line 1 has no turns";
  std::ofstream(path) << R"({"turns": ["first", "second"], "category": "y"})" "\n";
  e = ReadLabeledTexts(path, "turns", "category");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)[0].text, "first");
  fs::remove(path);
}

// MT-Bench's 8 categories, 10 questions each: cross-validated accuracy well over the majority class's 0.125.
TEST(TextClassifierTest, CrossValidatedOnMtBench) {
  const std::string path = SharedDir() + "/data/prompts/mt_bench/question.jsonl";
  if (!fs::exists(path)) GTEST_SKIP() << "../shared/data is absent";
  StatusOr<std::vector<LabeledText>> e = ReadLabeledTexts(path, "turns", "category");
  ASSERT_TRUE(e.ok());
  auto embedder = *HashEmbedder::Create({});
  StatusOr<ClassifierReport> r = CrossValidate(*e, *embedder, "hash", 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->examples, 80);
  EXPECT_DOUBLE_EQ(r->majority_accuracy, 0.125);
  EXPECT_GT(r->accuracy, 0.45);
}

}  // namespace
}  // namespace tachyon
