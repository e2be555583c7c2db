// SpmEncoder: SentencePiece-style encoding (tokenizer.ggml.model = "llama"), as
// Llama 2, Mistral and Phi-3 use it.
//
// The text (spaces already escaped to U+2581) starts as one symbol per UTF-8
// character; the adjacent pair whose concatenation is the highest-scoring token
// merges first (ties: leftmost), until no pair forms a token. A symbol that is
// not a token falls back to its bytes as <0xNN> tokens.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tachyon {

class SpmEncoder {
 public:
  // allow_word_split = false forces whole-text merging (the differential test's reference).
  explicit SpmEncoder(const Vocab& vocab, bool allow_word_split = true);
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

  // True when no token has U+2581 after another character: then no merge can
  // cross the start of a word, and words are encoded one at a time with the
  // same result (and far smaller queues) as the whole text at once.
  bool splits_at_word_starts() const { return split_at_word_starts_; }

 private:
  void EncodeRun(std::string_view text, std::vector<TokenId>* out) const;

  const Vocab& vocab_;
  bool split_at_word_starts_ = false;
  std::optional<TokenId> byte_tokens_[256];  // <0xNN>, or the byte itself as text
};

}  // namespace tachyon
