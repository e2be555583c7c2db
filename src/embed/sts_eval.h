// Semantic textual similarity evaluation of an Embedder: the Spearman rank
// correlation between human similarity scores of sentence pairs and the cosine
// of their embeddings (how STS Benchmark results are reported).
#pragma once

#include <string>
#include <vector>

#include "embed/embedder.h"

namespace tachyon {

struct StsPair {
  double score = 0;  // 0..5
  std::string a, b;
};

// STS Benchmark's tab-separated files: genre, file, year, id, score, sentence 1,
// sentence 2 (some rows carry more columns after those; they are ignored).
StatusOr<std::vector<StsPair>> ReadStsPairs(const std::string& path);

// Spearman's rho: Pearson's correlation of the ranks, ties given their mean rank.
double SpearmanCorrelation(const std::vector<double>& x, const std::vector<double>& y);

// Embeds every sentence (in batches) and returns rho of score vs cosine.
StatusOr<double> EvaluateSts(Embedder& embedder, const std::vector<StsPair>& pairs);

}  // namespace tachyon
