// Token masks for constrained decoding: which tokens of a vocabulary may come
// next in a grammar, computed per step for every sequence that has one.
//
// TokenTrie holds the vocabulary's byte strings as a trie flattened in
// preorder; walking it with a MatchState drops a whole subtree at the first
// byte the grammar refuses, so a mask costs the live part of the trie only.
//
// GrammarMasker caches, per top frame, what that frame
// accepts on its own: the tokens that stay inside it, and the trie nodes
// where it ends and its container has to decide ("exits"). A step then costs a
// lookup plus a short walk from each exit with the real container below (the
// container after a value takes few bytes: whitespace, ',', '}' or ']'). The
// vocabulary is fixed per model and a grammar's frames recur (every string
// of a node, every item of an array), so after the first answers nearly every
// step is a cache hit. (XGrammar splits context-independent and -dependent
// tokens the same way; this is our own, smaller take on it.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/json_grammar.h"
#include "grammar/matcher.h"

namespace tachyon {

class TokenTrie {
 public:
  // token_bytes[id]: the bytes token `id` adds to the text; "" for a token a
  // grammar never produces (control tokens, unknown).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  int32_t vocab_size() const { return vocab_size_; }
  const std::string& bytes(int32_t id) const { return token_bytes_[id]; }
  int32_t num_nodes() const { return static_cast<int32_t>(byte_.size()); }
  int32_t max_depth() const { return max_depth_; }

  // Node i (preorder): its byte, depth (1 for a first byte), the end of its
  // subtree, and the tokens whose bytes end there.
  uint8_t byte(int32_t i) const { return byte_[i]; }
  int32_t depth(int32_t i) const { return depth_[i]; }
  int32_t end(int32_t i) const { return end_[i]; }
  const int32_t* tokens_begin(int32_t i) const { return tokens_.data() + token_begin_[i]; }
  const int32_t* tokens_end(int32_t i) const { return tokens_.data() + token_begin_[i + 1]; }
  // Sets in `bits` (vocab_size bits, cleared first) the tokens whose bytes are a
  // non-empty prefix of `text`.
  void Prefixes(std::string_view text, std::vector<uint64_t>* bits) const;

 private:
  int32_t vocab_size_ = 0;
  int32_t max_depth_ = 0;
  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int32_t> end_;
  std::vector<int32_t> token_begin_;  // num_nodes + 1 offsets into tokens_
  std::vector<int32_t> tokens_;
};

struct MaskStats {
  int64_t hits = 0, misses = 0;  // cache lookups per stack and step
};

// Not thread-safe: one engine thread uses it.
class GrammarMasker {
 public:
  GrammarMasker(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie);

  // bits (vocab_size bits, resized and cleared here): the tokens that keep
  // `state` alive. End-of-generation is the caller's (allowed when complete).
  void FillMask(const MatchState& state, std::vector<uint64_t>* bits);

  // Clears from `bits` (a FillMask of `state`) the tokens after which the
  // shortest completion is longer than `budget` bytes. False, leaving `bits`
  // as they are, when more tokens are allowed than it checks (8192) or none
  // would be left.
  bool KeepWithinBudget(const MatchState& state, int64_t budget, std::vector<uint64_t>* bits);

  const std::shared_ptr<const JsonGrammar>& grammar() const { return grammar_; }
  const TokenTrie& trie() const { return *trie_; }
  const MaskStats& stats() const { return stats_; }

 private:
  using Key = Frame;  // the top frame
  struct Entry {
    std::vector<int32_t> tokens;  // accepted tokens, when few
    std::vector<uint64_t> bits;   // accepted tokens, when many
    std::vector<int32_t> exits_before, exits_after;  // trie nodes where the frame ends
    size_t bytes() const { return (tokens.size() + exits_before.size() + exits_after.size()) * 4 + bits.size() * 8; }
  };

  const Entry& Lookup(const Key& key);
  // Walks trie nodes [begin, end) (whole subtrees at depth base_depth + 1)
  // from `start`; accepted tokens go to `bits`, and with `record` the exits too.
  void Walk(const MatchState& start, int32_t begin, int32_t end, int32_t base_depth, std::vector<uint64_t>* bits,
            Entry* record);

  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<Key, Entry, FrameHash> cache_;
  size_t cache_bytes_ = 0;
  std::vector<MatchState> states_;  // per trie depth, reused
  MatchState parent_;
  std::vector<uint64_t> scratch_bits_;
  std::string rest_;
  MaskStats stats_;
};

}  // namespace tachyon
