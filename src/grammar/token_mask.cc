#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

namespace tachyon {
namespace {

// The cache is dropped whole when it grows past this (a pathological schema
// or a long answer with many distinct counters), and refilled as needed.
constexpr size_t kMaxCacheBytes = size_t{32} << 20;

void SetBit(std::vector<uint64_t>* bits, int32_t id) { (*bits)[id >> 6] |= uint64_t{1} << (id & 63); }

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocab_size_(static_cast<int32_t>(token_bytes.size())), token_bytes_(token_bytes) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (!token_bytes[i].empty()) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return token_bytes[a] < token_bytes[b] || (token_bytes[a] == token_bytes[b] && a < b);
  });
  std::vector<int32_t> path;  // open nodes, one per depth
  std::vector<int32_t> owner; // per token in tokens_: its node
  const std::string* prev = nullptr;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      end_[path.back()] = static_cast<int32_t>(byte_.size());
      path.pop_back();
    }
  };
  for (int32_t id : ids) {
    const std::string& s = token_bytes[id];
    size_t common = 0;
    if (prev != nullptr) {
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    }
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<uint16_t>(std::min<size_t>(d + 1, 65535)));
      end_.push_back(-1);
    }
    tokens_.push_back(id);
    owner.push_back(path.back());
    max_depth_ = std::max<int32_t>(max_depth_, static_cast<int32_t>(s.size()));
    prev = &s;
  }
  close_to(0);
  // Tokens are in the order their nodes were made, so each node's are contiguous.
  token_begin_.assign(byte_.size() + 1, 0);
  for (int32_t node : owner) ++token_begin_[node + 1];
  std::partial_sum(token_begin_.begin(), token_begin_.end(), token_begin_.begin());
}

void TokenTrie::Prefixes(std::string_view text, std::vector<uint64_t>* bits) const {
  bits->assign((static_cast<size_t>(vocab_size_) + 63) / 64, 0);
  int32_t i = 0, end = num_nodes();
  for (size_t d = 0; d < text.size() && i < end;) {
    if (byte_[i] != static_cast<uint8_t>(text[d])) {
      i = end_[i];  // the next sibling
      continue;
    }
    for (const int32_t* id = tokens_begin(i); id != tokens_end(i); ++id) SetBit(bits, *id);
    end = end_[i];
    ++i;  // the first child
    ++d;
  }
}

GrammarMasker::GrammarMasker(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), trie_(std::move(trie)) {
  states_.resize(trie_->max_depth() + 1);
}

void GrammarMasker::Walk(const MatchState& start, int32_t begin, int32_t end, int32_t base_depth,
                         std::vector<uint64_t>* bits, Entry* record) {
  const TokenTrie& t = *trie_;
  states_[base_depth] = start;
  int32_t i = begin;
  while (i < end) {
    const int32_t d = t.depth(i);
    MatchExits exits;
    MatchStep(*grammar_, states_[d - 1], t.byte(i), &states_[d], &exits);
    const bool alive = !states_[d].empty();
    if (record != nullptr) {
      if (exits.ended_before) record->exits_before.push_back(i);
      if (exits.ended_after && t.end(i) > i + 1) record->exits_after.push_back(i);
    }
    if (alive || exits.ended_after) {
      for (const int32_t* id = t.tokens_begin(i); id != t.tokens_end(i); ++id) SetBit(bits, *id);
    }
    i = alive ? i + 1 : t.end(i);
  }
}

const GrammarMasker::Entry& GrammarMasker::Lookup(const Key& key) {
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++stats_.hits;
    return it->second;
  }
  ++stats_.misses;
  if (cache_bytes_ > kMaxCacheBytes) {
    cache_.clear();
    cache_bytes_ = 0;
  }
  MatchState start;
  start.frames = {SentinelFrame(), key};
  start.ends = {2};
  const size_t words = (static_cast<size_t>(trie_->vocab_size()) + 63) / 64;
  scratch_bits_.assign(words, 0);
  Entry entry;
  Walk(start, 0, trie_->num_nodes(), 0, &scratch_bits_, &entry);
  size_t count = 0;
  for (uint64_t w : scratch_bits_) count += static_cast<size_t>(__builtin_popcountll(w));
  if (count * 32 > static_cast<size_t>(trie_->vocab_size())) {
    entry.bits = scratch_bits_;
  } else {
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t m = scratch_bits_[w]; m != 0; m &= m - 1) {
        entry.tokens.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(m)));
      }
    }
  }
  cache_bytes_ += entry.bytes() + sizeof(Entry) + 64;
  return cache_.emplace(key, std::move(entry)).first->second;
}

bool GrammarMasker::KeepWithinBudget(const MatchState& state, int64_t budget, std::vector<uint64_t>* bits) {
  constexpr int64_t kMaxChecked = 8192;
  int64_t count = 0;
  for (uint64_t w : *bits) count += __builtin_popcountll(w);
  if (count > kMaxChecked) return false;
  // A walk of the trie from `state` that enters only subtrees holding an
  // allowed token (prefixes shared, buffers reused), measuring at each one.
  const TokenTrie& t = *trie_;
  auto allowed = [&](int32_t id) { return ((*bits)[id >> 6] >> (id & 63)) & 1; };
  scratch_bits_.assign(bits->size(), 0);
  bool any = false;
  states_[0] = state;
  for (int32_t i = 0; i < t.num_nodes();) {
    bool wanted = false;  // some allowed token in this subtree
    for (const int32_t* id = t.tokens_begin(i); id != t.tokens_end(t.end(i) - 1) && !wanted; ++id) wanted = allowed(*id);
    if (!wanted) {
      i = t.end(i);
      continue;
    }
    const int32_t d = t.depth(i);
    MatchStep(*grammar_, states_[d - 1], t.byte(i), &states_[d], nullptr);
    if (states_[d].empty()) {
      i = t.end(i);
      continue;
    }
    bool fits = false, measured = false;
    for (const int32_t* id = t.tokens_begin(i); id != t.tokens_end(i); ++id) {
      if (!allowed(*id)) continue;
      if (!measured) {
        fits = ShortestCompletion(*grammar_, states_[d], &rest_) && static_cast<int64_t>(rest_.size()) <= budget;
        measured = true;
      }
      if (fits) {
        SetBit(&scratch_bits_, *id);
        any = true;
      }
    }
    ++i;
  }
  if (!any) return false;
  bits->swap(scratch_bits_);
  return true;
}

void GrammarMasker::FillMask(const MatchState& state, std::vector<uint64_t>* bits) {
  const size_t words = (static_cast<size_t>(trie_->vocab_size()) + 63) / 64;
  bits->assign(words, 0);
  for (size_t s = 0; s < state.num_stacks(); ++s) {
    const size_t b = state.begin_of(s), e = state.ends[s];
    const Entry& entry = Lookup(state.frames[e - 1]);
    if (!entry.bits.empty()) {
      for (size_t w = 0; w < words; ++w) (*bits)[w] |= entry.bits[w];
    } else {
      for (int32_t id : entry.tokens) SetBit(bits, id);
    }
    if (entry.exits_before.empty() && entry.exits_after.empty()) continue;
    // The container decides the rest: walk from each exit with the real stack below the top.
    parent_.frames.assign(state.frames.begin() + b, state.frames.begin() + e - 1);
    parent_.ends = {static_cast<uint32_t>(e - b - 1)};
    const TokenTrie& t = *trie_;
    for (int32_t i : entry.exits_before) Walk(parent_, i, t.end(i), t.depth(i) - 1, bits, nullptr);
    for (int32_t i : entry.exits_after) Walk(parent_, i + 1, t.end(i), t.depth(i), bits, nullptr);
  }
}

}  // namespace tachyon
