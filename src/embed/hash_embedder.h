// HashEmbedder: a model-free embedder by feature hashing. Each word of the
// text (FoldedWords) counts as a feature, and so does each character n-gram of
// the word with boundary marks ("<cat>": "<ca", "cat", "at>", ...); a feature
// adds +-1 (the sign from its hash) to one of `dimension` slots. Counts are
// damped (1 + log) and the vector normalized. Near-duplicate prompts (typos,
// inflections, reordered words) land close; it knows no synonyms. The default
// embedder when nothing is configured: no files, about a microsecond per word.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "embed/embedder.h"

namespace tachyon {

struct HashEmbedderOptions {
  int dimension = 1024;
  int min_ngram = 3;
  int max_ngram = 5;
};

class HashEmbedder : public Embedder {
 public:
  static StatusOr<std::unique_ptr<HashEmbedder>> Create(const HashEmbedderOptions& options = {});

  const std::string& id() const override { return id_; }
  int dimension() const override { return options_.dimension; }
  StatusOr<std::vector<float>> Embed(std::span<const std::string> texts) override;

  // One text into out [dimension] (normalized).
  void EmbedOne(std::string_view text, float* out) const;

 private:
  explicit HashEmbedder(const HashEmbedderOptions& options);
  HashEmbedderOptions options_;
  std::string id_;
};

}  // namespace tachyon
