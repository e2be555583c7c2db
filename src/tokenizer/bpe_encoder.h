// BpeEncoder: byte-level BPE (tokenizer.ggml.model = "gpt2"), as GPT-2, Llama
// 3, Qwen2, DeepSeek, Falcon, StarCoder and MPT use it.
//
// The pre-tokenizer splits the text into words; each word's bytes are spelled
// with GPT-2's byte-to-unicode mapping and start as one symbol per character;
// the adjacent pair with the lowest merge rank merges first (ties: leftmost),
// until no pair has a rank. With ignore_merges (Llama 3) a word that is already
// a token is emitted whole.
//
// Speed: merges of two tokens are looked up by id in an open-addressing table
// that also holds the merged token's id, so a word of tokens never touches a
// string; and words seen before come from a bounded cache (a word's tokens
// depend on its bytes alone), shared by the threads that encode with it.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace tachyon {

class BpeEncoder {
 public:
  // The longest word (bytes) the cache keeps, and the most symbols a word may
  // have to merge by scanning (longer ones use a heap).
  static constexpr size_t kCacheMaxWordBytes = 48;
  static constexpr size_t kMaxScanSymbols = 24;
  struct Options {
    size_t cache_words = 1 << 16;           // words the cache holds at most; 0: no cache
    size_t scan_symbols = kMaxScanSymbols;  // at most kMaxScanSymbols; 0: always the heap
  };

  BpeEncoder(const Vocab &vocab, std::unique_ptr<PreTokenizer> pre_tokenizer, Options options);
  BpeEncoder(const Vocab &vocab, std::unique_ptr<PreTokenizer> pre_tokenizer)
      : BpeEncoder(vocab, std::move(pre_tokenizer), Options{}) {}
  void Encode(std::string_view text, std::vector<TokenId> *out) const;

  const PreTokenizer &pre_tokenizer() const { return *pre_tokenizer_; }

 private:
  struct Merge {
    int32_t rank = -1;
    int32_t merged = -1;  // the merged token's id, -1 when the merged text is not a token
  };
  // Merge of (left id, right id), or rank -1.
  Merge Find(int32_t left, int32_t right) const;
  // `raw`: the word's bytes; `mapped`: the same spelled with ByteToUnicode.
  void EncodeWord(std::string_view raw, std::string_view mapped, std::vector<TokenId> *out) const;
  // Rank of merging symbols (left, right) by text, for a side that is not a
  // token.
  int32_t RankByText(std::string_view left, std::string_view right) const;

  const Vocab &vocab_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  const Options options_;
  std::array<int32_t, 256> byte_ids_;  // the token of each byte's one-character spelling, or -1
  // Open addressing, linear probing: key (left id << 32 | right id), empty =
  // ~0.
  std::vector<uint64_t> merge_keys_;
  std::vector<Merge> merge_values_;
  uint64_t merge_mask_ = 0;

  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> words;
  };
  static constexpr size_t kCacheShards = 16;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace tachyon
