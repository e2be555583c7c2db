#include "embed/text_classifier.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace tachyon {
namespace {

constexpr char kMagic[] = "TACHYON-ROUTER-1";

bool StartsWithWord(const std::string& lower, const std::vector<std::string_view>& words) {
  for (std::string_view w : words) {
    if (lower.size() >= w.size() && lower.compare(0, w.size(), w) == 0 &&
        (lower.size() == w.size() || !std::isalpha(static_cast<unsigned char>(lower[w.size()])))) {
      return true;
    }
  }
  return false;
}

void Softmax(std::vector<float>& z) {
  const float top = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (float& v : z) {
    v = std::exp(v - top);
    sum += v;
  }
  for (float& v : z) v = static_cast<float>(v / sum);
}

// Binary writing and reading, little-endian as the machine is.
void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void PutString(std::string& out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out += s;
}
void PutFloats(std::string& out, const float* v, size_t n) {
  PutU32(out, static_cast<uint32_t>(n));
  out.append(reinterpret_cast<const char*>(v), n * sizeof(float));
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool U32(uint32_t* v) {
    if (pos_ + sizeof(uint32_t) > data_.size()) return false;
    std::memcpy(v, data_.data() + pos_, sizeof(uint32_t));
    pos_ += sizeof(uint32_t);
    return true;
  }
  bool String(std::string* s, uint32_t limit = 1 << 20) {
    uint32_t n = 0;
    if (!U32(&n) || n > limit || pos_ + n > data_.size()) return false;
    s->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Floats(std::vector<float>* v, uint32_t limit) {
    uint32_t n = 0;
    if (!U32(&n) || n > limit || pos_ + static_cast<size_t>(n) * sizeof(float) > data_.size()) return false;
    v->resize(n);
    std::memcpy(v->data(), data_.data() + pos_, static_cast<size_t>(n) * sizeof(float));
    pos_ += static_cast<size_t>(n) * sizeof(float);
    return std::all_of(v->begin(), v->end(), [](float x) { return std::isfinite(x); });
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

}  // namespace

const std::array<const char*, kSimpleTextFeatures> kSimpleTextFeatureNames = {
    "log_chars", "log_words", "digit_fraction", "code", "question_mark", "question_word", "imperative_verb",
    "log_sentences"};

StatusOr<std::vector<LabeledText>> ReadLabeledTexts(const std::string& path, const std::string& text_key,
                                                   const std::string& label_key) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::vector<LabeledText> out;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": " + why);
    };
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return bad("not a JSON object");
    if (!j.contains(text_key)) return bad("no '" + text_key + "'");
    const nlohmann::json& t = j[text_key];
    LabeledText e;
    if (t.is_string()) {
      e.text = t.get<std::string>();
    } else if (t.is_array() && !t.empty() && t[0].is_string()) {
      e.text = t[0].get<std::string>();
    } else {
      return bad("'" + text_key + "' must be a string or an array of strings");
    }
    if (j.contains("instances") && j["instances"].is_array() && !j["instances"].empty() &&
        j["instances"][0].is_object() && j["instances"][0].contains("input") && j["instances"][0]["input"].is_string() &&
        !j["instances"][0]["input"].get<std::string>().empty()) {
      e.text += "\n" + j["instances"][0]["input"].get<std::string>();
    }
    if (!j.contains(label_key)) return bad("no '" + label_key + "'");
    const nlohmann::json& l = j[label_key];
    if (l.is_string()) {
      e.label = l.get<std::string>();
    } else if (l.is_boolean() || l.is_number()) {
      e.label = l.dump();
    } else {
      return bad("'" + label_key + "' must be a string, a number or a boolean");
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return InvalidArgumentError(path + ": no examples");
  return out;
}

std::array<float, kSimpleTextFeatures> SimpleTextFeatures(const std::string& text) {
  std::string lower;
  lower.reserve(text.size());
  size_t digits = 0, words = 0, sentences = 0;
  bool in_word = false;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    lower.push_back(static_cast<char>(std::tolower(u)));
    digits += std::isdigit(u) != 0;
    const bool letter = std::isalnum(u) != 0 || u >= 0x80;
    if (letter && !in_word) ++words;
    in_word = letter;
    sentences += c == '.' || c == '?' || c == '!';
  }
  const size_t start = lower.find_first_not_of(" \t\r\n\"'");
  const std::string head = start == std::string::npos ? "" : lower.substr(start);
  static const std::vector<std::string_view> question_words = {
      "what", "why", "how", "who", "whom", "when", "where", "which", "is", "are", "can", "could", "do", "does",
      "did", "should", "would", "will"};
  static const std::vector<std::string_view> imperative_verbs = {
      "write", "compose", "create", "draft", "explain", "describe", "list", "summarize", "summarise", "classify",
      "extract", "translate", "rewrite", "give", "generate", "find", "identify", "tell", "make", "suggest",
      "design", "develop", "implement", "solve", "calculate", "compute", "imagine", "pretend", "convert",
      "provide", "edit", "evaluate", "compare", "name", "choose", "sort", "detect", "determine"};
  const bool code = text.find("```") != std::string::npos || text.find("def ") != std::string::npos ||
                    text.find("();") != std::string::npos || text.find("{\n") != std::string::npos;
  return {static_cast<float>(std::log1p(static_cast<double>(text.size()))),
          static_cast<float>(std::log1p(static_cast<double>(words))),
          text.empty() ? 0.0f : static_cast<float>(digits) / static_cast<float>(text.size()),
          code ? 1.0f : 0.0f,
          text.find('?') != std::string::npos ? 1.0f : 0.0f,
          StartsWithWord(head, question_words) ? 1.0f : 0.0f,
          StartsWithWord(head, imperative_verbs) ? 1.0f : 0.0f,
          static_cast<float>(std::log1p(static_cast<double>(sentences)))};
}

std::vector<float> TextClassifier::Features(const float* embedding, const std::string& text) const {
  std::vector<float> x(embedding, embedding + dimension_);
  const std::array<float, kSimpleTextFeatures> simple = SimpleTextFeatures(text);
  for (int k = 0; k < kSimpleTextFeatures; ++k) x.push_back((simple[k] - mean_[k]) / scale_[k]);
  x.push_back(1.0f);
  return x;
}

std::vector<float> TextClassifier::Scores(const std::vector<float>& x) const {
  const size_t d = x.size();
  std::vector<float> z(labels_.size());
  for (size_t c = 0; c < labels_.size(); ++c) {
    double s = 0;
    for (size_t k = 0; k < d; ++k) s += static_cast<double>(weights_[c * d + k]) * x[k];
    z[c] = static_cast<float>(s);
  }
  Softmax(z);
  return z;
}

StatusOr<TextClassifier> TextClassifier::Train(const std::vector<LabeledText>& examples, Embedder& embedder,
                                               const std::string& embedder_spec, const ClassifierOptions& options) {
  if (examples.empty()) return InvalidArgumentError("no examples to train on");
  TextClassifier m;
  m.embedder_spec_ = embedder_spec;
  m.dimension_ = embedder.dimension();
  std::map<std::string, int> index;
  for (const LabeledText& e : examples) index.emplace(e.label, 0);
  if (index.size() < 2) return InvalidArgumentError("the examples have one label only: nothing to classify");
  for (auto& [label, i] : index) {
    i = static_cast<int>(m.labels_.size());
    m.labels_.push_back(label);
  }
  std::vector<std::string> texts;
  for (const LabeledText& e : examples) texts.push_back(e.text);
  ASSIGN_OR_RETURN(std::vector<float> embeddings, embedder.Embed(texts));
  // Standardize the simple features on the training set.
  const size_t n = examples.size();
  std::vector<std::array<float, kSimpleTextFeatures>> simple(n);
  for (size_t i = 0; i < n; ++i) simple[i] = SimpleTextFeatures(examples[i].text);
  for (int k = 0; k < kSimpleTextFeatures; ++k) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) sum += simple[i][k];
    const double mean = sum / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) sq += (simple[i][k] - mean) * (simple[i][k] - mean);
    m.mean_[k] = static_cast<float>(mean);
    m.scale_[k] = static_cast<float>(std::sqrt(sq / static_cast<double>(n)) + 1e-6);
  }
  std::vector<std::vector<float>> x(n);
  std::vector<int> y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = m.Features(&embeddings[i * static_cast<size_t>(m.dimension_)], examples[i].text);
    y[i] = index[examples[i].label];
  }
  // Full-batch Adam on the mean cross-entropy plus an L2 penalty (not on the bias).
  const size_t d = x[0].size(), c_count = m.labels_.size();
  m.weights_.assign(c_count * d, 0.0f);
  std::vector<double> first(m.weights_.size(), 0.0), second(m.weights_.size(), 0.0), grad(m.weights_.size());
  const double beta1 = 0.9, beta2 = 0.999, lr = options.learning_rate * 0.1;
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    std::fill(grad.begin(), grad.end(), 0.0);
    for (size_t i = 0; i < n; ++i) {
      const std::vector<float> p = m.Scores(x[i]);
      for (size_t c = 0; c < c_count; ++c) {
        const double e = p[c] - (static_cast<int>(c) == y[i] ? 1.0 : 0.0);
        if (e == 0) continue;
        double* g = &grad[c * d];
        for (size_t k = 0; k < d; ++k) g[k] += e * x[i][k];
      }
    }
    for (size_t j = 0; j < grad.size(); ++j) {
      const bool bias = j % d == d - 1;
      const double g = grad[j] / static_cast<double>(n) + (bias ? 0.0 : options.l2 * m.weights_[j]);
      first[j] = beta1 * first[j] + (1 - beta1) * g;
      second[j] = beta2 * second[j] + (1 - beta2) * g * g;
      const double mh = first[j] / (1 - std::pow(beta1, epoch)), vh = second[j] / (1 - std::pow(beta2, epoch));
      m.weights_[j] -= static_cast<float>(lr * mh / (std::sqrt(vh) + 1e-8));
    }
  }
  return m;
}

StatusOr<std::vector<TextClassifier::Prediction>> TextClassifier::Predict(const std::vector<std::string>& texts,
                                                                          Embedder& embedder) const {
  if (embedder.dimension() != dimension_) {
    return InvalidArgumentError("the embedder gives " + std::to_string(embedder.dimension()) +
                                " dimensions; the classifier was trained on " + std::to_string(dimension_) + " (" +
                                embedder_spec_ + ")");
  }
  std::vector<Prediction> out;
  if (texts.empty()) return out;
  ASSIGN_OR_RETURN(std::vector<float> embeddings, embedder.Embed(texts));
  for (size_t i = 0; i < texts.size(); ++i) {
    Prediction p;
    p.probabilities = Scores(Features(&embeddings[i * static_cast<size_t>(dimension_)], texts[i]));
    p.label = static_cast<int>(std::max_element(p.probabilities.begin(), p.probabilities.end()) -
                               p.probabilities.begin());
    p.probability = p.probabilities[p.label];
    out.push_back(std::move(p));
  }
  return out;
}

Status TextClassifier::Save(const std::string& path) const {
  std::string out(kMagic);
  PutString(out, embedder_spec_);
  PutU32(out, static_cast<uint32_t>(dimension_));
  PutU32(out, static_cast<uint32_t>(labels_.size()));
  for (const std::string& l : labels_) PutString(out, l);
  PutFloats(out, mean_.data(), mean_.size());
  PutFloats(out, scale_.data(), scale_.size());
  PutFloats(out, weights_.data(), weights_.size());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return UnavailableError(path + ": cannot write");
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return UnavailableError(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return UnavailableError(path + ": cannot rename into place");
  return Status::Ok();
}

StatusOr<TextClassifier> TextClassifier::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  auto bad = [&](const std::string& why) { return InvalidArgumentError(path + ": not a router model: " + why); };
  if (data.compare(0, std::strlen(kMagic), kMagic) != 0) return bad("no TACHYON-ROUTER-1 header");
  const std::string body = data.substr(std::strlen(kMagic));
  Reader r(body);
  TextClassifier m;
  uint32_t dimension = 0, count = 0;
  if (!r.String(&m.embedder_spec_) || !r.U32(&dimension) || dimension == 0 || dimension > (1 << 16) ||
      !r.U32(&count) || count < 2 || count > 4096) {
    return bad("header fields");
  }
  m.dimension_ = static_cast<int>(dimension);
  for (uint32_t i = 0; i < count; ++i) {
    std::string label;
    if (!r.String(&label, 4096)) return bad("labels");
    m.labels_.push_back(std::move(label));
  }
  std::vector<float> mean, scale;
  if (!r.Floats(&mean, kSimpleTextFeatures) || !r.Floats(&scale, kSimpleTextFeatures) ||
      mean.size() != kSimpleTextFeatures || scale.size() != kSimpleTextFeatures) {
    return bad("feature scaling");
  }
  if (std::any_of(scale.begin(), scale.end(), [](float s) { return !(s > 0); })) return bad("a scale <= 0");
  std::copy(mean.begin(), mean.end(), m.mean_.begin());
  std::copy(scale.begin(), scale.end(), m.scale_.begin());
  const size_t want = static_cast<size_t>(count) * (dimension + kSimpleTextFeatures + 1);
  if (!r.Floats(&m.weights_, static_cast<uint32_t>(want)) || m.weights_.size() != want) return bad("weights");
  if (!r.done()) return bad("trailing bytes");
  return m;
}

ClassifierReport Evaluate(const std::vector<std::string>& labels, const std::vector<int>& truth,
                          const std::vector<int>& predicted) {
  ClassifierReport r;
  r.labels = labels;
  const size_t c = labels.size();
  r.confusion.assign(c, std::vector<int64_t>(c, 0));
  r.support.assign(c, 0);
  int64_t correct = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    ++r.confusion[truth[i]][predicted[i]];
    ++r.support[truth[i]];
    correct += truth[i] == predicted[i];
  }
  r.examples = static_cast<int64_t>(truth.size());
  r.accuracy = truth.empty() ? 0.0 : static_cast<double>(correct) / static_cast<double>(truth.size());
  const int64_t majority = r.support.empty() ? 0 : *std::max_element(r.support.begin(), r.support.end());
  r.majority_accuracy = truth.empty() ? 0.0 : static_cast<double>(majority) / static_cast<double>(truth.size());
  for (size_t k = 0; k < c; ++k) {
    int64_t predicted_k = 0;
    for (size_t t = 0; t < c; ++t) predicted_k += r.confusion[t][k];
    r.precision.push_back(predicted_k > 0 ? static_cast<double>(r.confusion[k][k]) / static_cast<double>(predicted_k)
                                          : 0.0);
    r.recall.push_back(r.support[k] > 0 ? static_cast<double>(r.confusion[k][k]) / static_cast<double>(r.support[k])
                                        : 0.0);
  }
  return r;
}

StatusOr<ClassifierReport> CrossValidate(const std::vector<LabeledText>& examples, Embedder& embedder,
                                         const std::string& embedder_spec, int folds,
                                         const ClassifierOptions& options) {
  if (folds < 2) return InvalidArgumentError("cross-validation needs at least 2 folds");
  std::map<std::string, std::vector<size_t>> by_label;
  for (size_t i = 0; i < examples.size(); ++i) by_label[examples[i].label].push_back(i);
  std::vector<std::string> labels;
  std::map<std::string, int> index;
  for (const auto& [label, rows] : by_label) {
    index[label] = static_cast<int>(labels.size());
    labels.push_back(label);
  }
  // Stratified: each label's examples shuffled (seeded) and dealt to the folds in turn.
  std::vector<int> fold(examples.size());
  std::mt19937_64 rng(options.seed);
  for (auto& [label, rows] : by_label) {
    std::shuffle(rows.begin(), rows.end(), rng);
    for (size_t k = 0; k < rows.size(); ++k) fold[rows[k]] = static_cast<int>(k % static_cast<size_t>(folds));
  }
  std::vector<int> truth(examples.size()), predicted(examples.size());
  for (int f = 0; f < folds; ++f) {
    std::vector<LabeledText> train;
    std::vector<size_t> test;
    for (size_t i = 0; i < examples.size(); ++i) {
      if (fold[i] == f) {
        test.push_back(i);
      } else {
        train.push_back(examples[i]);
      }
    }
    if (test.empty()) continue;
    ASSIGN_OR_RETURN(TextClassifier m, TextClassifier::Train(train, embedder, embedder_spec, options));
    std::vector<std::string> texts;
    for (size_t i : test) texts.push_back(examples[i].text);
    ASSIGN_OR_RETURN(std::vector<TextClassifier::Prediction> p, m.Predict(texts, embedder));
    for (size_t k = 0; k < test.size(); ++k) {
      truth[test[k]] = index[examples[test[k]].label];
      // The fold's model may lack a rare label: its labels are mapped back by name.
      predicted[test[k]] = index[m.labels()[p[k].label]];
    }
  }
  return Evaluate(labels, truth, predicted);
}

}  // namespace tachyon
