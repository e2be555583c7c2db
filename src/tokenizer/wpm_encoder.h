// WpmEncoder: WordPiece (tokenizer.ggml.model = "bert"), for BERT-family
// embedding models, following the rules of BERT's own tokenizer
// (google-research/bert tokenization.py, which Hugging Face's BertTokenizer
// reproduces):
//
// - control characters (Cc, Cf, Co, Cs, Cn: \v, \f and U+0085 among them),
//   U+0000 and U+FFFD are dropped; whitespace (space, \t, \n, \r, Zs, and Zl/Zp
//   as Hugging Face has them) separates words;
// - the text is NFD-normalized, lower-cased (a word-final capital sigma becomes
//   the final form, as Python's str.lower() does) and stripped of nonspacing
//   marks (Mn): "café" composed or decomposed is "cafe"; a Hangul syllable
//   decomposes into its conjoining jamo; Arabic harakat, Hebrew points and
//   Devanagari viramas are dropped;
// - each punctuation mark, ASCII symbol and CJK ideograph is a word of its own;
// - each word, with a leading U+2581 (the GGUF spelling of a word start;
//   continuation pieces have no "##"), is matched greedily longest-first
//   against the vocabulary; a word with an unmatched position, or of more than
//   100 characters, becomes [UNK].
//
// llama.cpp differs on text outside ASCII (docs/embeddings.md lists where and
// why): its NFD keeps only the first code point of a decomposition and it
// strips no marks, so decomposed accents, harakat and Hangul come out otherwise.
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
