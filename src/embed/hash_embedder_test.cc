#include "embed/hash_embedder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "embed/text_words.h"

namespace tachyon {
namespace {

TEST(TextWordsTest, FoldsCaseAndAccentsAndSplitsOnPunctuation) {
  EXPECT_EQ(FoldedWords("Héllo, WORLD! naïve café-au-lait 42x"),
            (std::vector<std::string>{"hello", "world", "naive", "cafe", "au", "lait", "42x"}));
  EXPECT_EQ(FoldedWords("don't stop"), (std::vector<std::string>{"don", "'t", "stop"}));
  EXPECT_EQ(FoldedWords("  ' '' \xff"), std::vector<std::string>{});
}

TEST(HashEmbedderTest, UnitVectorsWhereNearDuplicatesAreCloserThanUnrelatedTexts) {
  auto embedder = *HashEmbedder::Create({.dimension = 512});
  EXPECT_EQ(embedder->id(), "hash:d512:n3-5");
  std::vector<std::string> texts = {"How do I reset my password?", "how do i reset my pasword",
                                    "What is the capital of France?", ""};
  std::vector<float> v = *embedder->Embed(texts);
  ASSERT_EQ(v.size(), 4u * 512);
  auto cos = [&](int a, int b) { return Dot(&v[a * 512], &v[b * 512], 512); };
  EXPECT_NEAR(cos(0, 0), 1.0f, 1e-5f);
  EXPECT_GT(cos(0, 1), 0.8f);
  EXPECT_LT(cos(0, 2), 0.3f);
  EXPECT_GT(cos(0, 1), cos(0, 2) + 0.5f);
  EXPECT_EQ(cos(3, 3), 0.0f);  // nothing to hash: the zero vector
  // Deterministic: the same text gives the same vector.
  std::vector<float> again = *embedder->Embed(std::vector<std::string>{texts[1]});
  EXPECT_EQ(std::vector<float>(v.begin() + 512, v.begin() + 1024), again);
}

TEST(HashEmbedderTest, RefusesBadSettings) {
  EXPECT_FALSE(HashEmbedder::Create({.dimension = 4}).ok());
  EXPECT_FALSE(HashEmbedder::Create({.dimension = 64, .min_ngram = 4, .max_ngram = 3}).ok());
}

}  // namespace
}  // namespace tachyon
