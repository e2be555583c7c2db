#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <queue>

#include "tokenizer/symbols.h"
#include "tokenizer/unicode.h"

namespace tachyon {
namespace {

constexpr uint64_t kEmptyKey = ~uint64_t{0};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t Slot(uint64_t key, uint64_t mask) { return (key * 0x9E3779B97F4A7C15ull >> 20) & mask; }

struct Bigram {
  int32_t rank;
  int left, right;
  size_t size;  // bytes of the merged text, to spot pairs made stale by other
                // merges
  bool operator<(const Bigram &other) const {
    // priority_queue pops the largest: lowest rank, then leftmost.
    return rank > other.rank || (rank == other.rank && left > other.left);
  }
};

}  // namespace

BpeEncoder::BpeEncoder(const Vocab &vocab, std::unique_ptr<PreTokenizer> pre_tokenizer, Options options)
    : vocab_(vocab),
      pre_tokenizer_(std::move(pre_tokenizer)),
      options_{options.cache_words, std::min(options.scan_symbols, kMaxScanSymbols)} {
  for (int b = 0; b < 256; ++b) {
    std::optional<TokenId> id = vocab.Find(ByteToUnicode(static_cast<uint8_t>(b)));
    byte_ids_[b] = id ? id->value() : -1;
  }
  const int32_t num_merges = vocab.num_merges();
  size_t capacity = 16;
  while (capacity < static_cast<size_t>(num_merges) * 2) capacity *= 2;
  merge_keys_.assign(capacity, kEmptyKey);
  merge_values_.assign(capacity, Merge{});
  merge_mask_ = capacity - 1;
  std::string joined;
  for (int32_t rank = 0; rank < num_merges; ++rank) {
    const auto [left_text, right_text] = vocab.merge(rank);
    std::optional<TokenId> left = vocab.Find(left_text);
    std::optional<TokenId> right = vocab.Find(right_text);
    if (!left || !right) continue;  // found by text (RankByText) when it applies
    const uint64_t key = PairKey(left->value(), right->value());
    uint64_t slot = Slot(key, merge_mask_);
    while (merge_keys_[slot] != kEmptyKey && merge_keys_[slot] != key) slot = (slot + 1) & merge_mask_;
    if (merge_keys_[slot] == key) continue;  // a repeated merge: the first (lowest) rank counts
    joined.assign(left_text).append(right_text);
    std::optional<TokenId> merged = vocab.Find(joined);
    merge_keys_[slot] = key;
    merge_values_[slot] = {rank, merged ? merged->value() : -1};
  }
}

BpeEncoder::Merge BpeEncoder::Find(int32_t left, int32_t right) const {
  const uint64_t key = PairKey(left, right);
  for (uint64_t slot = Slot(key, merge_mask_);; slot = (slot + 1) & merge_mask_) {
    if (merge_keys_[slot] == key) return merge_values_[slot];
    if (merge_keys_[slot] == kEmptyKey) return Merge{};
  }
}

int32_t BpeEncoder::RankByText(std::string_view left, std::string_view right) const {
  return vocab_.MergeRank(left, right);
}

void BpeEncoder::EncodeWord(std::string_view raw, std::string_view mapped, std::vector<TokenId> *out) const {
  if (raw.empty()) return;
  if (pre_tokenizer_->ignore_merges()) {
    if (std::optional<TokenId> id = vocab_.Find(mapped)) {
      out->push_back(*id);
      return;
    }
  }
  // One symbol per byte (its one-character spelling in `mapped`).
  std::vector<Symbol> symbols(raw.size());
  for (size_t i = 0, offset = 0; i < raw.size(); ++i) {
    const size_t size = ByteToUnicode(static_cast<uint8_t>(raw[i])).size();
    const int index = static_cast<int>(i);
    symbols[i] = {offset, size, index - 1, i + 1 < raw.size() ? index + 1 : -1,
                  byte_ids_[static_cast<uint8_t>(raw[i])]};
    offset += size;
  }
  // The merge of symbols (left, right): by id, or by text when a side is not a
  // token.
  auto merge_of = [&](int left, int right) -> Merge {
    const Symbol &l = symbols[left];
    const Symbol &r = symbols[right];
    if (l.id >= 0 && r.id >= 0) return Find(l.id, r.id);
    const int32_t rank = RankByText(mapped.substr(l.begin, l.size), mapped.substr(r.begin, r.size));
    return {rank, -1};
  };
  // After a merge, the merged symbol's id: from the table, or by text.
  auto merged_id = [&](int left, const Merge &m) -> int32_t {
    if (m.merged >= 0) return m.merged;
    const Symbol &s = symbols[left];
    std::optional<TokenId> id = vocab_.Find(mapped.substr(s.begin, s.size));
    return id ? id->value() : -1;
  };

  if (symbols.size() <= options_.scan_symbols) {
    // Short words: the rank of each symbol's pair with its successor, kept up
    // to date; each round merges the lowest (leftmost on ties).
    std::array<Merge, kMaxScanSymbols> pair;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) pair[i] = merge_of(static_cast<int>(i), static_cast<int>(i) + 1);
    pair[symbols.size() - 1] = Merge{};
    while (true) {
      int best = -1;
      for (int i = 0; i != -1; i = symbols[i].next) {
        if (pair[i].rank >= 0 && (best < 0 || pair[i].rank < pair[best].rank)) best = i;
      }
      if (best < 0) break;
      const Merge m = pair[best];
      MergeWithNext(&symbols, best);
      symbols[best].id = merged_id(best, m);
      pair[best] = symbols[best].next >= 0 ? merge_of(best, symbols[best].next) : Merge{};
      if (symbols[best].prev >= 0) pair[symbols[best].prev] = merge_of(symbols[best].prev, best);
    }
  } else {
    std::priority_queue<Bigram> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const Merge m = merge_of(left, right);
      if (m.rank >= 0) queue.push({m.rank, left, right, symbols[left].size + symbols[right].size});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      Bigram bigram = queue.top();
      queue.pop();
      Symbol &left = symbols[bigram.left];
      Symbol &right = symbols[bigram.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
      const Merge m = merge_of(bigram.left, bigram.right);
      MergeWithNext(&symbols, bigram.left);
      left.id = merged_id(bigram.left, m);
      try_add(left.prev, bigram.left);
      try_add(bigram.left, left.next);
    }
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const Symbol &s = symbols[i];
    if (s.id >= 0) {
      out->push_back(TokenId(s.id));
      continue;
    }
    // Not a token: each byte of its spelling that is a token on its own.
    for (char c : mapped.substr(s.begin, s.size)) {
      if (std::optional<TokenId> id = vocab_.Find(std::string_view(&c, 1))) out->push_back(*id);
    }
  }
}

void BpeEncoder::Encode(std::string_view text, std::vector<TokenId> *out) const {
  std::string valid = SanitizeUtf8(text);
  std::string mapped;
  for (auto [begin, end] : pre_tokenizer_->Split(valid)) {
    const std::string_view raw(valid.data() + begin, end - begin);
    const bool cacheable = options_.cache_words > 0 && raw.size() <= kCacheMaxWordBytes;
    CacheShard *shard = nullptr;
    if (cacheable) {
      shard = &cache_[std::hash<std::string_view>()(raw) % kCacheShards];
      std::lock_guard<std::mutex> lock(shard->mutex);
      if (auto it = shard->words.find(raw); it != shard->words.end()) {
        out->insert(out->end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    mapped.clear();
    for (char c : raw) mapped += ByteToUnicode(static_cast<uint8_t>(c));
    const size_t first = out->size();
    EncodeWord(raw, mapped, out);
    if (cacheable) {
      std::lock_guard<std::mutex> lock(shard->mutex);
      // Bounded: a full shard starts over (the words that matter come back at
      // once).
      if (shard->words.size() >= std::max<size_t>(1, options_.cache_words / kCacheShards)) shard->words.clear();
      shard->words.emplace(std::string(raw), std::vector<TokenId>(out->begin() + first, out->end()));
    }
  }
}

}  // namespace tachyon
