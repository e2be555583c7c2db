#include "embed/pair_verifier.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "embed/calibration.h"
#include "embed/hash_embedder.h"
#include "gguf/gguf_test_util.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;
using testing_util::SharedDir;

TEST(PairVerifierTest, AlignsContentWordsWithStemsAndTypos) {
  const PairAlignment same = AlignPair("A man is slicing a tomato.", "The man sliced the tomatos");
  EXPECT_EQ(same.content_a, 3);  // man, slicing, tomato
  EXPECT_EQ(same.unmatched_a, 0);
  EXPECT_EQ(same.unmatched_b, 0);
  EXPECT_EQ(same.inversions, 0);
  const PairAlignment typo = AlignPair("He spread shreded cheese", "He spread shredded cheese");
  EXPECT_EQ(typo.unmatched_a + typo.unmatched_b, 0);
  // One letter apart but different words: the first two letters differ.
  const PairAlignment walk = AlignPair("The man is walking.", "The man is talking.");
  EXPECT_EQ(walk.unmatched_a, 1);
  EXPECT_EQ(walk.unmatched_b, 1);
  const PairAlignment gender = AlignPair("A man is playing a guitar.", "A woman is playing a guitar.");
  EXPECT_EQ(gender.unmatched_a, 1);
  const PairAlignment swapped = AlignPair("dog bites man in park", "man bites dog in park");
  EXPECT_GT(swapped.inversions, 0);
  // Question words are not function words: why and how ask different things.
  EXPECT_EQ(AlignPair("Why did the transaction take place?", "How did the transaction take place?").unmatched_a, 1);
}

TEST(PairVerifierTest, GuardsRejectNumbersNegationAndNames) {
  EXPECT_EQ(GuardRejection(AlignPair("Book the 3 pm train", "Book the 5 pm train")), "numbers");
  EXPECT_EQ(GuardRejection(AlignPair("I have two cats", "I have three cats")), "numbers");
  EXPECT_EQ(GuardRejection(AlignPair("Is the store open?", "Is the store not open?")), "negation");
  EXPECT_EQ(GuardRejection(AlignPair("I can't log in", "I can log in")), "negation");
  EXPECT_EQ(GuardRejection(AlignPair("What is the capital of France?", "What is the capital of Spain?")),
            "entities");
  EXPECT_EQ(GuardRejection(AlignPair("What is the capital of France?", "what's the capital of France")), "");
  EXPECT_EQ(GuardRejection(AlignPair("", "")), "");
}

// Issue 31's four wrong hits: each pair's cosine (hash embedder) was above 0.93,
// and with the guards on every hit (the default) none is served.
TEST(PairVerifierTest, GuardsOnEveryHitRefuseOtherNumbersAndNegations) {
  const HitOptions all{.threshold = 0.93, .band = 0.03, .guards_on_hits = true};
  const std::pair<const char*, const char*> pairs[] = {
      {"How many days are in 3 weeks?", "How many days are in 4 weeks?"},
      {"Send the statement to account 9921", "Send the statement to account 9927"},
      {"Transfer 1500 dollars to my savings", "Transfer 9500 dollars to my savings"},
      {"Should I take ibuprofen with warfarin?", "Should I not take ibuprofen with warfarin?"},
      {"Should I take ibuprofen with warfarin?", "Shouldn't I take ibuprofen with warfarin?"},
      {"Should I take ibuprofen with warfarin?", "Shouldn\u2019t I take ibuprofen with warfarin?"},
      {"Book a table at Nopa tonight", "Book a table at Zuni tonight"},
  };
  for (const auto& [cached, asked] : pairs) {
    const HitDecision d = DecideHit(0.99, cached, asked, nullptr, all);
    EXPECT_FALSE(d.hit) << cached << " / " << asked;
    EXPECT_FALSE(d.rejected_by.empty());
  }
  EXPECT_EQ(DecideHit(0.99, pairs[0].first, pairs[0].second, nullptr, all).rejected_by, "numbers");
  EXPECT_EQ(DecideHit(0.99, pairs[3].first, pairs[3].second, nullptr, all).rejected_by, "negation");
  // The same words, reworded, still hit.
  EXPECT_TRUE(DecideHit(0.99, "How many days are in 3 weeks?", "how many days in 3 weeks", nullptr, all).hit);
}

TEST(PairVerifierTest, DecisionNeedsThresholdVerifierAndGuardsInTheBand) {
  const PairVerifier verifier;
  const HitOptions plain{.threshold = 0.9};
  EXPECT_TRUE(DecideHit(0.95, "a", "b", nullptr, plain).hit);
  EXPECT_EQ(DecideHit(0.85, "a", "b", nullptr, plain).rejected_by, "similarity");
  // The band: under the threshold, a hit only when the guards pass.
  const HitOptions band{.threshold = 0.9, .band = 0.1};
  EXPECT_TRUE(DecideHit(0.85, "reset my password", "reset my password please", nullptr, band).hit);
  EXPECT_EQ(DecideHit(0.85, "the 3 pm train", "the 5 pm train", nullptr, band).rejected_by, "numbers");
  EXPECT_EQ(DecideHit(0.75, "x", "x", nullptr, band).rejected_by, "similarity");
  // Over the threshold the guards only run when asked.
  EXPECT_TRUE(DecideHit(0.95, "the 3 pm train", "the 5 pm train", nullptr, band).hit);
  HitOptions all = band;
  all.guards_on_hits = true;
  EXPECT_EQ(DecideHit(0.95, "the 3 pm train", "the 5 pm train", nullptr, all).rejected_by, "numbers");
  // The verifier consents to a reworded question and refuses a different one.
  const HitOptions verified{.threshold = 0.5, .verifier_min = 0.9};
  const HitDecision same = DecideHit(0.9, "How do I reset my password?", "how do i reset my password", &verifier, verified);
  EXPECT_TRUE(same.hit) << same.verifier_score;
  const HitDecision other =
      DecideHit(0.9, "How do I reset my password?", "How do I change my email address?", &verifier, verified);
  EXPECT_FALSE(other.hit);
  EXPECT_EQ(other.rejected_by, "verifier");
  EXPECT_LT(other.verifier_score, same.verifier_score);
}

TEST(PairVerifierTest, FitLearnsWhichAlignmentsAreParaphrasesAndRoundTrips) {
  std::vector<PairAlignment> pairs;
  std::vector<char> labels;
  for (int i = 0; i < 200; ++i) {
    PairAlignment p;
    p.content_a = p.content_b = 5;
    const bool positive = i % 2 == 0;
    p.unmatched_a = p.unmatched_b = positive ? (i % 7 == 0 ? 1 : 0) : 2 + i % 3;
    pairs.push_back(p);
    labels.push_back(positive);
  }
  const VerifierWeights w = FitVerifier(pairs, labels);
  const PairVerifier v(w);
  PairAlignment aligned, unaligned;
  aligned.content_a = aligned.content_b = unaligned.content_a = unaligned.content_b = 5;
  unaligned.unmatched_a = unaligned.unmatched_b = 3;
  EXPECT_GT(v.Score(aligned), 0.8);
  EXPECT_LT(v.Score(unaligned), 0.2);

  const std::string path = (fs::temp_directory_path() / "tachyon_verifier_test.json").string();
  ASSERT_TRUE(WriteVerifierWeights(w, path).ok());
  StatusOr<VerifierWeights> read = ReadVerifierWeights(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_NEAR(PairVerifier(*read).Score(aligned), v.Score(aligned), 1e-12);
  fs::remove(path);
  EXPECT_FALSE(ReadVerifierWeights("/nonexistent/weights.json").ok());
}

// The built-in weights are what fit-verifier gives on STS-B train, and on dev
// (held out) the verifier at 0.9 over the hash embedder keeps precision >= 0.95
// with more recall than the cosine alone at its calibrated threshold.
TEST(PairVerifierTest, BuiltInWeightsReproduceAndHoldOutOnStsDev) {
  const std::string train = SharedDir() + "/data/similarity/stsb/sts-train.csv";
  const std::string dev = SharedDir() + "/data/similarity/stsb/sts-dev.csv";
  if (!fs::exists(train) || !fs::exists(dev)) GTEST_SKIP() << "../shared/data is absent";
  StatusOr<std::vector<LabeledPair>> train_pairs = ReadLabeledPairs(train);
  ASSERT_TRUE(train_pairs.ok());
  std::vector<PairAlignment> alignments;
  std::vector<char> labels;
  for (const LabeledPair& p : *train_pairs) {
    alignments.push_back(AlignPair(p.a, p.b));
    labels.push_back(p.paraphrase);
  }
  const VerifierWeights fitted = FitVerifier(alignments, labels);
  const VerifierWeights& built_in = DefaultVerifierWeights();
  for (int k = 0; k < kVerifierFeatures; ++k) {
    EXPECT_NEAR(fitted.weight[k], built_in.weight[k], 1e-6) << kVerifierFeatureNames[k];
    EXPECT_NEAR(fitted.mean[k], built_in.mean[k], 1e-6) << kVerifierFeatureNames[k];
  }

  StatusOr<std::vector<LabeledPair>> dev_pairs = ReadLabeledPairs(dev);
  ASSERT_TRUE(dev_pairs.ok());
  auto embedder = *HashEmbedder::Create({});
  StatusOr<std::vector<float>> cosines = PairCosines(*embedder, *dev_pairs);
  ASSERT_TRUE(cosines.ok());
  const PairVerifier verifier;
  const HitOptions options{.threshold = 0.6386, .verifier_min = 0.9};
  std::vector<float> hits;
  for (size_t i = 0; i < dev_pairs->size(); ++i) {
    hits.push_back(DecideHit((*cosines)[i], (*dev_pairs)[i].a, (*dev_pairs)[i].b, &verifier, options).hit ? 1 : 0);
  }
  const ThresholdQuality with_verifier = EvaluateThreshold(hits, *dev_pairs, 0.5);
  const ThresholdQuality cosine_only = EvaluateThreshold(*cosines, *dev_pairs, 0.9442);
  EXPECT_GE(with_verifier.precision, 0.95);
  EXPECT_GT(with_verifier.recall, 2 * cosine_only.recall);
}

}  // namespace
}  // namespace tachyon
