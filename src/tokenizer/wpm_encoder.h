// WpmEncoder: WordPiece (tokenizer.ggml.model = "bert"), for BERT-family
// embedding models.
//
// The text is NFD-normalized, lower-cased and stripped of accents (nonspacing
// marks), as uncased BERT does; whitespace separates words, and
// each punctuation mark, ASCII symbol and CJK ideograph is a word of its own;
// control characters are dropped. Each word, with a leading U+2581 (the GGUF
// spelling of a word start; continuation pieces have no "##"), is matched
// greedily longest-first against the vocabulary; a word with an unmatched
// position becomes [UNK]. This is llama.cpp's reading of BERT's tokenizer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tachyon {

class WpmEncoder {
 public:
  explicit WpmEncoder(const Vocab& vocab) : vocab_(vocab) {}
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

  // The words Encode matches (exposed for tests).
  static std::vector<std::string> SplitWords(std::string_view text);

 private:
  const Vocab& vocab_;
};

}  // namespace tachyon
