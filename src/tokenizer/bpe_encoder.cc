#include "tokenizer/bpe_encoder.h"

#include <queue>

#include "tokenizer/symbols.h"
#include "tokenizer/unicode.h"

namespace tachyon {
namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Bigram {
  int32_t rank;
  int left, right;
  size_t size;  // bytes of the merged text, to spot pairs made stale by other merges
  bool operator<(const Bigram& other) const {
    // priority_queue pops the largest: lowest rank, then leftmost.
    return rank > other.rank || (rank == other.rank && left > other.left);
  }
};

}  // namespace

BpeEncoder::BpeEncoder(const Vocab& vocab, std::unique_ptr<PreTokenizer> pre_tokenizer)
    : vocab_(vocab), pre_tokenizer_(std::move(pre_tokenizer)) {
  const auto& merges = vocab.merges();
  pair_ranks_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    std::optional<TokenId> left = vocab.Find(merges[rank].first);
    std::optional<TokenId> right = vocab.Find(merges[rank].second);
    if (left && right) pair_ranks_.emplace(PairKey(left->value(), right->value()), rank);
  }
}

int32_t BpeEncoder::Rank(std::string_view left, int32_t left_id, std::string_view right,
                         int32_t right_id) const {
  if (left_id >= 0 && right_id >= 0) {
    auto it = pair_ranks_.find(PairKey(left_id, right_id));
    return it == pair_ranks_.end() ? -1 : it->second;
  }
  return vocab_.MergeRank(left, right);  // a side that is not a token: look up by text
}

void BpeEncoder::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (pre_tokenizer_->ignore_merges()) {
    if (std::optional<TokenId> id = vocab_.Find(word)) {
      out->push_back(*id);
      return;
    }
  }
  std::vector<Symbol> symbols = CharacterSymbols(word);
  for (Symbol& s : symbols) {
    std::optional<TokenId> id = vocab_.Find(word.substr(s.begin, s.size));
    s.id = id ? id->value() : -1;
  }
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    int32_t rank = Rank(word.substr(l.begin, l.size), l.id, word.substr(r.begin, r.size), r.id);
    if (rank >= 0) queue.push({rank, left, right, l.size + r.size});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
    MergeWithNext(&symbols, bigram.left);
    std::optional<TokenId> merged = vocab_.Find(word.substr(left.begin, left.size));
    left.id = merged ? merged->value() : -1;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out->push_back(TokenId(s.id));
      continue;
    }
    // Not a token: each byte of its spelling that is a token on its own.
    for (char c : word.substr(s.begin, s.size)) {
      if (std::optional<TokenId> id = vocab_.Find(std::string_view(&c, 1))) out->push_back(*id);
    }
  }
}

void BpeEncoder::Encode(std::string_view text, std::vector<TokenId>* out) const {
  std::string valid = SanitizeUtf8(text);
  std::string word;
  for (auto [begin, end] : pre_tokenizer_->Split(valid)) {
    word.clear();
    for (size_t i = begin; i < end; ++i) word += ByteToUnicode(static_cast<uint8_t>(valid[i]));
    EncodeWord(word, out);
  }
}

}  // namespace tachyon
