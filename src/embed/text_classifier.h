// TextClassifier: the router's task classifier. Multinomial logistic
// regression over an embedder's unit vector of the text plus a few simple
// features (length, digits, code fences, question words, imperative verbs),
// fitted in seconds on one core; saved to one file with the embedder's SPEC,
// so a route loads it whole.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "embed/embedder.h"

namespace tachyon {

struct LabeledText {
  std::string text;
  std::string label;
};

// JSON lines; `text_key` names the text (a string, or an array whose first
// string is taken: MT-Bench's "turns"), `label_key` the label (a string, a
// number or a boolean, as written). A self-instruct line's first instance input
// is appended to its instruction.
StatusOr<std::vector<LabeledText>> ReadLabeledTexts(const std::string& path, const std::string& text_key = "text",
                                                   const std::string& label_key = "label");

constexpr int kSimpleTextFeatures = 8;
extern const std::array<const char*, kSimpleTextFeatures> kSimpleTextFeatureNames;
std::array<float, kSimpleTextFeatures> SimpleTextFeatures(const std::string& text);

struct ClassifierOptions {
  double l2 = 1e-3;
  int epochs = 300;
  double learning_rate = 0.5;
  uint64_t seed = 1;
};

class TextClassifier {
 public:
  // Fits on the examples (embedded with `embedder`, which `embedder_spec` names for the file).
  static StatusOr<TextClassifier> Train(const std::vector<LabeledText>& examples, Embedder& embedder,
                                        const std::string& embedder_spec, const ClassifierOptions& options = {});
  static StatusOr<TextClassifier> Load(const std::string& path);
  Status Save(const std::string& path) const;

  struct Prediction {
    int label = 0;
    float probability = 0;
    std::vector<float> probabilities;  // by class
  };
  // Texts through `embedder` (the one the classifier was trained with: its SPEC is embedder_spec()).
  StatusOr<std::vector<Prediction>> Predict(const std::vector<std::string>& texts, Embedder& embedder) const;

  const std::vector<std::string>& labels() const { return labels_; }
  const std::string& embedder_spec() const { return embedder_spec_; }
  int dimension() const { return dimension_; }

 private:
  // Rows: [embedding (dimension_) | simple features standardized], then a bias.
  std::vector<float> Features(const float* embedding, const std::string& text) const;
  std::vector<float> Scores(const std::vector<float>& x) const;

  std::string embedder_spec_;
  int dimension_ = 0;
  std::vector<std::string> labels_;
  std::array<float, kSimpleTextFeatures> mean_{}, scale_{};
  std::vector<float> weights_;  // [labels][dimension_ + kSimpleTextFeatures + 1]
};

// Accuracy, per-class precision and recall, and the confusion matrix (rows: true, columns: predicted).
struct ClassifierReport {
  std::vector<std::string> labels;
  double accuracy = 0;
  double majority_accuracy = 0;  // always answering the most frequent true label
  std::vector<double> precision, recall;
  std::vector<int64_t> support;
  std::vector<std::vector<int64_t>> confusion;
  int64_t examples = 0;
};
ClassifierReport Evaluate(const std::vector<std::string>& labels, const std::vector<int>& truth,
                          const std::vector<int>& predicted);

// K-fold cross-validation (stratified by label, seeded): every example predicted by a model not trained on it.
StatusOr<ClassifierReport> CrossValidate(const std::vector<LabeledText>& examples, Embedder& embedder,
                                         const std::string& embedder_spec, int folds,
                                         const ClassifierOptions& options = {});

}  // namespace tachyon
