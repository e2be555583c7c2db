#include "embed/sts_eval.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

namespace tachyon {
namespace {

std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

StatusOr<std::vector<StsPair>> ReadStsPairs(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::vector<StsPair> pairs;
  size_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> fields;
    for (size_t start = 0;;) {
      const size_t tab = line.find('\t', start);
      fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (fields.size() < 7) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": " + std::to_string(fields.size()) +
                                  " tab-separated fields, expected at least 7 (genre, file, year, id, score, "
                                  "sentence 1, sentence 2)");
    }
    char* end = nullptr;
    const double score = std::strtod(fields[4].c_str(), &end);
    if (end == fields[4].c_str()) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": score '" + fields[4] +
                                  "' is not a number");
    }
    pairs.push_back({score, fields[5], fields[6]});
  }
  if (pairs.empty()) return InvalidArgumentError(path + ": no sentence pairs");
  return pairs;
}

double SpearmanCorrelation(const std::vector<double>& x, const std::vector<double>& y) {
  const std::vector<double> rx = Ranks(x), ry = Ranks(y);
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / n, my = std::accumulate(ry.begin(), ry.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

StatusOr<double> EvaluateSts(Embedder& embedder, const std::vector<StsPair>& pairs) {
  constexpr size_t kBatch = 64;
  std::vector<double> scores, cosines;
  for (size_t start = 0; start < pairs.size(); start += kBatch) {
    std::vector<std::string> texts;
    const size_t end = std::min(pairs.size(), start + kBatch);
    for (size_t i = start; i < end; ++i) {
      texts.push_back(pairs[i].a);
      texts.push_back(pairs[i].b);
    }
    ASSIGN_OR_RETURN(std::vector<float> v, embedder.Embed(texts));
    const int dim = embedder.dimension();
    if (v.size() != texts.size() * static_cast<size_t>(dim)) {
      return InternalError("the embedder returned " + std::to_string(v.size()) + " numbers for " +
                           std::to_string(texts.size()) + " texts of dimension " + std::to_string(dim));
    }
    for (size_t i = start; i < end; ++i) {
      const size_t k = 2 * (i - start);
      scores.push_back(pairs[i].score);
      cosines.push_back(Dot(&v[k * dim], &v[(k + 1) * dim], dim));
    }
  }
  return SpearmanCorrelation(scores, cosines);
}

}  // namespace tachyon
