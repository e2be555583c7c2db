// WordsEmbedder: a model-free sentence embedder from word vectors, with smooth
// inverse frequency weighting and common component removal (SIF; Arora, Liang
// and Ma, "A Simple but Tough-to-Beat Baseline for Sentence Embeddings", ICLR
// 2017):
//
//   v(s) = 1/|s| sum over words w of s:  a / (a + p(w)) * vec(w)
//   v(s) -= u u^T v(s)        u: first principal direction of the corpus' v(s)
//
// p(w) is the word's frequency in a corpus the user names (one text a line);
// a word the corpus lacks counts as seen once. Without a corpus, frequencies
// follow Zipf's law over the order of the vectors file (most frequent first,
// as GloVe and word2vec files are) and no component is removed. Words are
// FoldedWords (lower-case, accents stripped); words without a vector are skipped.
//
// Vector files: GloVe text ("word v1 ... vD" a line), word2vec text (a first
// line "N D", then as GloVe) and binary (.bin: "N D\n", then "word " and D
// little-endian float32 each), or raw float32 rows ([N][D], .f32) beside a
// words file of one word a line (default: the .f32 path with .vocab.txt).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "embed/embedder.h"

namespace tachyon {

struct WordsEmbedderOptions {
  std::string vectors_path;
  std::string words_path;             // for .f32 vectors; "" for the default
  std::vector<std::string> corpus;    // files of one text a line: frequencies and the common component
  double sif_a = 1e-3;                // a in a / (a + p(w))
  int remove_components = 1;          // principal directions removed (with a corpus)
  size_t max_words = 0;               // keep the first N vectors of the file; 0: all
};

class WordsEmbedder : public Embedder {
 public:
  static StatusOr<std::unique_ptr<WordsEmbedder>> Create(const WordsEmbedderOptions& options);

  const std::string& id() const override { return id_; }
  int dimension() const override { return dim_; }
  StatusOr<std::vector<float>> Embed(std::span<const std::string> texts) override;

  void EmbedOne(std::string_view text, float* out) const;
  size_t num_words() const { return words_.size(); }

 private:
  WordsEmbedder() = default;
  Status LoadVectors(const WordsEmbedderOptions& options);
  Status Fit(const WordsEmbedderOptions& options);
  // The weighted average, before the common components are removed.
  void Average(std::string_view text, float* out) const;

  std::unordered_map<std::string, int32_t> words_;
  std::vector<float> vectors_;  // [num_words, dim]
  std::vector<float> weights_;  // [num_words] a / (a + p(w))
  std::vector<std::vector<float>> components_;  // unit directions removed
  int dim_ = 0;
  std::string id_;
};

}  // namespace tachyon
