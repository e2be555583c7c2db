// Tokenizer: text <-> token ids with a model's own vocabulary, matching the
// reference implementations token for token.
//
//   ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(file));
//   std::vector<TokenId> ids = tok->Encode("Hello", {.add_special = true});
//   std::string text = tok->Decode(ids);
//
// Encode first splits the text around special tokens: user-defined tokens
// always, control tokens only with parse_special (as llama.cpp does); the text
// between them goes to the vocabulary's encoder (SPM, BPE or WPM).
// A Tokenizer is immutable after construction and safe to share between threads.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

namespace tachyon {

class SpmEncoder;
class BpeEncoder;
class WpmEncoder;

struct EncodeOptions {
  bool add_special = true;     // BOS/EOS (CLS/SEP for WordPiece) as the vocabulary asks
  bool parse_special = false;  // match control tokens such as <|eot_id|> in the text
  // With parse_special: byte ranges [begin, end) of the text where control
  // tokens are not matched (a chat message's content: its "<|im_end|>" is text).
  // Sorted, not overlapping.
  std::span<const std::pair<size_t, size_t>> literal_ranges;
};

struct DecodeOptions {
  bool special = false;  // render control tokens' text (otherwise they decode to "")
  // SentencePiece adds a space before the text; drop it from the first piece.
  bool strip_leading_space = true;
};

class Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  static StatusOr<std::unique_ptr<Tokenizer>> FromVocab(Vocab vocab);
  ~Tokenizer();

  const Vocab& vocab() const { return vocab_; }

  std::vector<TokenId> Encode(std::string_view text, EncodeOptions options = {}) const;

  // The bytes one token contributes to decoded text (may be part of a UTF-8
  // character: byte tokens and byte-level BPE pieces split characters).
  std::string TokenToPiece(TokenId id, bool special = false) const;
  std::string Decode(std::span<const TokenId> ids, DecodeOptions options = {}) const;

  // Whether Decode(Encode(x)) == x for valid UTF-8 x without special-token
  // text: byte-level BPE always, SentencePiece when x has no U+2581 (its own
  // spelling of a space); not WordPiece, which lower-cases and normalizes.
  bool IsLossless() const;

  // The most bytes of text one token stands for: a text of n bytes encodes to at
  // least n / max_token_bytes() tokens, so a length check can come before encoding.
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  explicit Tokenizer(Vocab vocab);

  struct Fragment {
    bool is_token;
    TokenId token;
    size_t begin, end;  // raw text bytes when !is_token
  };
  std::vector<Fragment> Partition(std::string_view text, const EncodeOptions& options) const;

  // The special tokens' texts as a byte trie, so that finding them all costs one walk
  // per text position (bounded by the longest special) whatever their number.
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    std::vector<int32_t> specials;                       // indices into vocab_.special_tokens()
  };
  void BuildSpecialTrie();

  Vocab vocab_;
  std::vector<TrieNode> special_trie_;
  std::array<bool, 256> special_first_byte_{};  // bytes a special token can start with
  size_t max_token_bytes_ = 1;
  std::unique_ptr<SpmEncoder> spm_;
  std::unique_ptr<BpeEncoder> bpe_;
  std::unique_ptr<WpmEncoder> wpm_;
};

}  // namespace tachyon
