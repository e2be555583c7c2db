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
  explicit SpmEncoder(const Vocab& vocab);
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

 private:
  const Vocab& vocab_;
  std::optional<TokenId> byte_tokens_[256];  // <0xNN>, or the byte itself as text
};

}  // namespace tachyon
