#include "embed/pair_verifier.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

namespace tachyon {
namespace {

// Function words: aligned or not, they do not change what is asked. Question
// words, "if", "because" and "while" are left out on purpose: they do.
const std::unordered_set<std::string_view>& FunctionWords() {
  static const std::unordered_set<std::string_view> words = {
      "a",     "an",    "the",   "of",    "to",    "in",    "on",     "at",    "by",    "for",   "with",  "from",
      "and",   "or",    "but",   "is",    "are",   "was",   "were",   "be",    "been",  "being", "am",    "do",
      "does",  "did",   "doing", "have",  "has",   "had",   "having", "this",  "that",  "these", "those", "there",
      "here",  "it",    "its",   "they",  "them",  "their", "he",     "him",   "his",   "she",   "her",   "we",
      "us",    "our",   "you",   "your",  "i",     "me",    "my",     "mine",  "as",    "into",  "onto",  "over",
      "under", "up",    "down",  "out",   "off",   "about", "than",   "then",  "so",    "very",  "just",  "also",
      "too",   "can",   "could", "would", "should", "will", "shall",  "may",   "might", "must",  "some",  "any",
      "each",  "all",   "both",  "other", "such",  "own",   "same",   "s",     "t"};
  return words;
}

// Function words that are only glue: a difference in them is not even a light one.
bool IsGlue(std::string_view w) {
  static const std::unordered_set<std::string_view> glue = {"a",  "an",   "the",  "is",    "are", "was", "were",
                                                            "be", "been", "being", "am", "s",   "t"};
  return glue.count(w) != 0;
}

bool IsNegation(std::string_view w) {
  static const std::unordered_set<std::string_view> negations = {
      "no", "not", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot", "nowhere", "t"};
  // A typographic apostrophe is inside the word ("don\u2019t" is one word): its "n\u2019t" negates.
  constexpr std::string_view kNt = "n\xE2\x80\x99t";
  if (w.size() > kNt.size() && w.substr(w.size() - kNt.size()) == kNt) return true;
  return negations.count(w) != 0;
}

bool IsNumber(std::string_view w) {
  static const std::unordered_set<std::string_view> number_words = {
      "zero",     "one",     "two",       "three",    "four",    "five",   "six",    "seven",   "eight",
      "nine",     "ten",     "eleven",    "twelve",   "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
      "eighteen", "nineteen", "twenty",   "thirty",   "forty",   "fifty",  "sixty",  "seventy", "eighty",
      "ninety",   "hundred", "thousand",  "million",  "billion", "first",  "second", "third",   "half",
      "dozen"};
  if (std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; })) return !w.empty();
  return number_words.count(w) != 0;
}

struct Word {
  std::string lower;
  bool capitalized = false;
};

std::vector<Word> Words(std::string_view text) {
  std::vector<Word> out;
  size_t i = 0;
  while (i < text.size()) {
    auto in_word = [&](size_t k) {
      const unsigned char c = static_cast<unsigned char>(text[k]);
      return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    };
    if (!in_word(i)) {
      ++i;
      continue;
    }
    Word w;
    w.capitalized = text[i] >= 'A' && text[i] <= 'Z';
    while (i < text.size() && in_word(i)) {
      char c = text[i++];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      w.lower.push_back(c);
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::string_view Stem(std::string_view w) {
  for (std::string_view suffix : {"ing", "ed", "es", "s", "ly"}) {
    if (w.size() > suffix.size() + 2 && w.substr(w.size() - suffix.size()) == suffix) {
      return w.substr(0, w.size() - suffix.size());
    }
  }
  return w;
}

// At most one insertion, deletion or substitution apart (the words differ).
bool OneEditApart(std::string_view a, std::string_view b) {
  if (a.size() > b.size() + 1 || b.size() > a.size() + 1) return false;
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  auto tail = [](std::string_view s, size_t from) { return from <= s.size() ? s.substr(from) : std::string_view(); };
  return tail(a, i + 1) == tail(b, i + 1) || tail(a, i) == tail(b, i + 1) || tail(a, i + 1) == tail(b, i);
}

bool Aligned(std::string_view a, std::string_view b) {
  if (a == b || Stem(a) == Stem(b)) return true;
  return a.size() >= 5 && b.size() >= 5 && a.substr(0, 2) == b.substr(0, 2) && OneEditApart(a, b);
}

// For each word of x, the index of its first partner in y, or -1.
std::vector<int> Match(const std::vector<std::string_view>& x, const std::vector<std::string_view>& y) {
  std::vector<int> m(x.size(), -1);
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = 0; j < y.size(); ++j) {
      if (Aligned(x[i], y[j])) {
        m[i] = static_cast<int>(j);
        break;
      }
    }
  }
  return m;
}

}  // namespace

const std::array<const char*, kVerifierFeatures> kVerifierFeatureNames = {
    "min_coverage",     "max_unmatched",      "total_unmatched", "inversions",
    "numbers_differ",   "negation_differs",   "entities_differ", "length_difference",
    "all_matched",      "light_words_differ", "any_inversion",   "one_unmatched"};

PairAlignment AlignPair(std::string_view a, std::string_view b) {
  const std::vector<Word> wa = Words(a), wb = Words(b);
  const auto& function_words = FunctionWords();
  auto content = [&](const std::vector<Word>& ws) {
    std::vector<std::string_view> c;
    for (const Word& w : ws) {
      if (function_words.count(w.lower) == 0 && !IsNegation(w.lower)) c.push_back(w.lower);
    }
    return c;
  };
  auto set_of = [](const std::vector<Word>& ws, auto keep) {
    std::vector<std::string_view> s;
    for (size_t i = 0; i < ws.size(); ++i) {
      if (keep(ws[i], i)) s.push_back(ws[i].lower);
    }
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    return s;
  };
  auto symmetric_difference = [](const std::vector<std::string_view>& x, const std::vector<std::string_view>& y) {
    std::vector<std::string_view> d;
    std::set_symmetric_difference(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(d));
    return static_cast<int>(d.size());
  };

  PairAlignment out;
  const std::vector<std::string_view> ca = content(wa), cb = content(wb);
  out.content_a = static_cast<int>(ca.size());
  out.content_b = static_cast<int>(cb.size());
  const std::vector<int> ma = Match(ca, cb), mb = Match(cb, ca);
  out.unmatched_a = static_cast<int>(std::count(ma.begin(), ma.end(), -1));
  out.unmatched_b = static_cast<int>(std::count(mb.begin(), mb.end(), -1));
  std::vector<int> order;
  for (int j : ma) {
    if (j >= 0) order.push_back(j);
  }
  int64_t inverted = 0, all = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (size_t k = i + 1; k < order.size(); ++k) {
      ++all;
      inverted += order[i] > order[k];
    }
  }
  out.inversions = all > 0 ? static_cast<double>(inverted) / static_cast<double>(all) : 0.0;

  auto numbers = [](const Word& w, size_t) { return IsNumber(w.lower); };
  out.numbers_differ = set_of(wa, numbers) != set_of(wb, numbers);
  auto negated = [](const std::vector<Word>& ws) {
    return std::any_of(ws.begin(), ws.end(), [](const Word& w) { return IsNegation(w.lower); });
  };
  out.negation_differs = negated(wa) != negated(wb);
  auto entity = [&](const Word& w, size_t i) { return i > 0 && w.capitalized && function_words.count(w.lower) == 0; };
  out.entities_differ = set_of(wa, entity) != set_of(wb, entity);
  auto light = [&](const Word& w, size_t) { return function_words.count(w.lower) != 0 && !IsGlue(w.lower); };
  out.light_words_differ = symmetric_difference(set_of(wa, light), set_of(wb, light));
  return out;
}

std::array<double, kVerifierFeatures> VerifierFeatures(const PairAlignment& p) {
  const double coverage_a = 1.0 - static_cast<double>(p.unmatched_a) / std::max(1, p.content_a);
  const double coverage_b = 1.0 - static_cast<double>(p.unmatched_b) / std::max(1, p.content_b);
  const int max_unmatched = std::max(p.unmatched_a, p.unmatched_b);
  return {std::min(coverage_a, coverage_b),
          static_cast<double>(max_unmatched),
          static_cast<double>(p.unmatched_a + p.unmatched_b),
          p.inversions,
          p.numbers_differ ? 1.0 : 0.0,
          p.negation_differs ? 1.0 : 0.0,
          p.entities_differ ? 1.0 : 0.0,
          static_cast<double>(std::abs(p.content_a - p.content_b)) / std::max(1, p.content_a + p.content_b),
          max_unmatched == 0 ? 1.0 : 0.0,
          static_cast<double>(p.light_words_differ),
          p.inversions > 0 ? 1.0 : 0.0,
          max_unmatched == 1 ? 1.0 : 0.0};
}

std::string_view GuardRejection(const PairAlignment& p) {
  if (p.numbers_differ) return "numbers";
  if (p.negation_differs) return "negation";
  if (p.entities_differ) return "entities";
  return "";
}

double PairVerifier::Score(const PairAlignment& alignment) const {
  const std::array<double, kVerifierFeatures> x = VerifierFeatures(alignment);
  double z = weights_.bias;
  for (int i = 0; i < kVerifierFeatures; ++i) {
    z += weights_.weight[i] * (x[i] - weights_.mean[i]) / weights_.scale[i];
  }
  return 1.0 / (1.0 + std::exp(-z));
}

VerifierWeights FitVerifier(const std::vector<PairAlignment>& pairs, const std::vector<char>& labels, double l2) {
  constexpr int d = kVerifierFeatures;
  constexpr int n_params = d + 1;  // the bias last, not penalized
  VerifierWeights w;
  const size_t n = pairs.size();
  std::vector<std::array<double, d>> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = VerifierFeatures(pairs[i]);
  for (int k = 0; k < d; ++k) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) sum += x[i][k];
    w.mean[k] = n > 0 ? sum / static_cast<double>(n) : 0.0;
    for (size_t i = 0; i < n; ++i) sq += (x[i][k] - w.mean[k]) * (x[i][k] - w.mean[k]);
    w.scale[k] = (n > 0 ? std::sqrt(sq / static_cast<double>(n)) : 0.0) + 1e-9;
    for (size_t i = 0; i < n; ++i) x[i][k] = (x[i][k] - w.mean[k]) / w.scale[k];
  }
  std::array<double, n_params> theta{};
  for (int iteration = 0; iteration < 25; ++iteration) {
    std::array<double, n_params> g{};
    std::array<std::array<double, n_params + 1>, n_params> h{};  // [H | g]
    for (int k = 0; k < d; ++k) {
      g[k] = l2 * theta[k];
      h[k][k] = l2;
    }
    h[d][d] = 1e-9;
    for (size_t i = 0; i < n; ++i) {
      std::array<double, n_params> xi;
      std::copy(x[i].begin(), x[i].end(), xi.begin());
      xi[d] = 1.0;
      double z = 0;
      for (int k = 0; k < n_params; ++k) z += theta[k] * xi[k];
      const double p = 1.0 / (1.0 + std::exp(-z));
      const double e = p - (labels[i] ? 1.0 : 0.0), v = p * (1.0 - p);
      for (int k = 0; k < n_params; ++k) {
        g[k] += e * xi[k];
        for (int m = 0; m < n_params; ++m) h[k][m] += v * xi[k] * xi[m];
      }
    }
    for (int k = 0; k < n_params; ++k) h[k][n_params] = g[k];
    // Gauss-Jordan with partial pivoting: the step H^-1 g.
    for (int c = 0; c < n_params; ++c) {
      int pivot = c;
      for (int r = c + 1; r < n_params; ++r) {
        if (std::fabs(h[r][c]) > std::fabs(h[pivot][c])) pivot = r;
      }
      std::swap(h[c], h[pivot]);
      if (std::fabs(h[c][c]) < 1e-15) continue;
      for (int r = 0; r < n_params; ++r) {
        if (r == c) continue;
        const double f = h[r][c] / h[c][c];
        for (int k = c; k <= n_params; ++k) h[r][k] -= f * h[c][k];
      }
    }
    double largest = 0;
    for (int k = 0; k < n_params; ++k) {
      const double step = std::fabs(h[k][k]) < 1e-15 ? 0.0 : h[k][n_params] / h[k][k];
      theta[k] -= step;
      largest = std::max(largest, std::fabs(step));
    }
    if (largest < 1e-10) break;
  }
  std::copy(theta.begin(), theta.begin() + d, w.weight.begin());
  w.bias = theta[d];
  return w;
}

Status WriteVerifierWeights(const VerifierWeights& w, const std::string& path) {
  nlohmann::json features = nlohmann::json::array();
  for (int k = 0; k < kVerifierFeatures; ++k) {
    features.push_back({{"name", kVerifierFeatureNames[k]}, {"mean", w.mean[k]}, {"scale", w.scale[k]},
                        {"weight", w.weight[k]}});
  }
  std::ofstream out(path);
  if (!out) return UnavailableError(path + ": cannot write");
  out << nlohmann::json{{"kind", "tachyon-pair-verifier"}, {"source", w.source}, {"bias", w.bias},
                        {"features", features}}
             .dump(2)
      << "\n";
  return out ? Status::Ok() : UnavailableError(path + ": write failed");
}

StatusOr<VerifierWeights> ReadVerifierWeights(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  auto bad = [&](const std::string& why) { return InvalidArgumentError(path + ": not verifier weights: " + why); };
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "tachyon-pair-verifier") return bad("kind");
  if (!j.contains("bias") || !j["bias"].is_number() || !j.contains("features") || !j["features"].is_array() ||
      j["features"].size() != kVerifierFeatures) {
    return bad("expected bias and " + std::to_string(kVerifierFeatures) + " features");
  }
  VerifierWeights w;
  w.bias = j["bias"].get<double>();
  w.source = j.value("source", path);
  for (int k = 0; k < kVerifierFeatures; ++k) {
    const nlohmann::json& f = j["features"][k];
    if (!f.is_object() || f.value("name", "") != kVerifierFeatureNames[k]) {
      return bad(std::string("feature ") + std::to_string(k) + " should be " + kVerifierFeatureNames[k]);
    }
    for (const char* key : {"mean", "scale", "weight"}) {
      if (!f.contains(key) || !f[key].is_number()) return bad(std::string(kVerifierFeatureNames[k]) + "." + key);
    }
    w.mean[k] = f["mean"].get<double>();
    w.scale[k] = f["scale"].get<double>();
    w.weight[k] = f["weight"].get<double>();
    if (!(w.scale[k] > 0)) return bad(std::string(kVerifierFeatureNames[k]) + ".scale must be > 0");
  }
  return w;
}

HitDecision DecideHit(double cosine, std::string_view cached, std::string_view asked, const PairVerifier* verifier,
                      const HitOptions& options) {
  HitDecision d;
  const bool in_band = cosine < options.threshold;
  if (in_band && (options.band <= 0 || cosine < options.threshold - options.band)) {
    d.rejected_by = "similarity";
    return d;
  }
  const bool check_guards = in_band || options.guards_on_hits;
  const bool verify = verifier != nullptr && options.verifier_min > 0;
  if (!check_guards && !verify) {
    d.hit = true;
    return d;
  }
  const PairAlignment alignment = AlignPair(cached, asked);
  if (check_guards) {
    d.rejected_by = GuardRejection(alignment);
    if (!d.rejected_by.empty()) return d;
  }
  if (verify) {
    d.verifier_score = verifier->Score(alignment);
    if (d.verifier_score < options.verifier_min) {
      d.rejected_by = "verifier";
      return d;
    }
  }
  d.hit = true;
  return d;
}

const VerifierWeights& DefaultVerifierWeights() {
  // Printed by: tachyon cache fit-verifier --pairs ../shared/data/similarity/stsb/sts-train.csv --cpp
  static const VerifierWeights w = [] {
    VerifierWeights v;
    v.source = "built in (STS Benchmark train, paraphrase = score >= 4)";
    v.mean = {0.492345946, 3.60532266, 5.92572621, 0.0380632535, 0.218646721, 0.0346147156, 0.411723778, 0.096794886, 0.0175682727, 1.49156375, 0.150113063, 0.132196904};
    v.scale = {0.227252916, 2.18493861, 3.72748147, 0.119223775, 0.41332836, 0.182801908, 0.492145618, 0.0896382144, 0.131375906, 1.51049214, 0.357182211, 0.338704714};
    v.weight = {1.92983762, -0.803631515, 0.920144032, 0.0862450797, -0.470285603, -0.184155449, -0.0979541453, 0.413492764, -0.00330023596, -0.195530821, -0.047241474, -0.188597944};
    v.bias = -1.75694002;
    return v;
  }();
  return w;
}

}  // namespace tachyon
