// BpeEncoder: byte-level BPE (tokenizer.ggml.model = "gpt2"), as GPT-2, Llama 3,
// Qwen2, DeepSeek, Falcon, StarCoder and MPT use it.
//
// The pre-tokenizer splits the text into words; each word's bytes are spelled
// with GPT-2's byte-to-unicode mapping and start as one symbol per character;
// the adjacent pair with the lowest merge rank merges first (ties: leftmost),
// until no pair has a rank. With ignore_merges (Llama 3) a word that is already
// a token is emitted whole.
#pragma once

#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace tachyon {

class BpeEncoder {
 public:
  BpeEncoder(const Vocab& vocab, std::unique_ptr<PreTokenizer> pre_tokenizer);
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

  const PreTokenizer& pre_tokenizer() const { return *pre_tokenizer_; }

 private:
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;
  // Rank of merging symbols (left, right); ids are -1 for texts that are not tokens.
  int32_t Rank(std::string_view left, int32_t left_id, std::string_view right, int32_t right_id) const;

  const Vocab& vocab_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  // (left id << 32 | right id) -> rank, for merges of two tokens: the fast path.
  std::unordered_map<uint64_t, int32_t> pair_ranks_;
};

}  // namespace tachyon
