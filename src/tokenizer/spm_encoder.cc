#include "tokenizer/spm_encoder.h"

#include <cstdio>
#include <queue>

#include "tokenizer/symbols.h"

namespace tachyon {

namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581

// Whether `text` has U+2581 right after a character that is not U+2581.
bool HasSpaceAfterOther(std::string_view text) {
  for (size_t pos = text.find(kSpace, 1); pos != std::string_view::npos;
       pos = text.find(kSpace, pos + 1)) {
    if (pos < kSpace.size() || text.substr(pos - kSpace.size(), kSpace.size()) != kSpace) return true;
  }
  return false;
}

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab, bool allow_word_split) : vocab_(vocab) {
  split_at_word_starts_ = allow_word_split;
  for (int32_t i = 0; i < vocab.size() && split_at_word_starts_; ++i) {
    if (HasSpaceAfterOther(vocab.token(TokenId(i)).text)) split_at_word_starts_ = false;
  }
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    byte_tokens_[b] = vocab.Find(hex);
    if (!byte_tokens_[b]) byte_tokens_[b] = vocab.Find(std::string(1, static_cast<char>(b)));
  }
}

namespace {

struct Bigram {
  float score;
  int left, right;
  size_t size;  // bytes of the merged text, to spot pairs made stale by other merges
  bool operator<(const Bigram& other) const {
    // priority_queue pops the largest: highest score, then leftmost.
    return score < other.score || (score == other.score && left > other.left);
  }
};

}  // namespace

void SpmEncoder::Encode(std::string_view text, std::vector<TokenId>* out) const {
  if (!split_at_word_starts_) {
    EncodeRun(text, out);
    return;
  }
  // Cut before each U+2581 that follows another character.
  size_t start = 0;
  for (size_t pos = text.find(kSpace, 1); pos != std::string_view::npos;
       pos = text.find(kSpace, pos + 1)) {
    if (pos >= start + kSpace.size() && text.substr(pos - kSpace.size(), kSpace.size()) == kSpace) {
      continue;  // inside a run of spaces
    }
    if (pos > start) EncodeRun(text.substr(start, pos - start), out);
    start = pos;
  }
  EncodeRun(text.substr(start), out);
}

void SpmEncoder::EncodeRun(std::string_view text, std::vector<TokenId>* out) const {
  std::vector<Symbol> symbols = CharacterSymbols(text);
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string_view merged = text.substr(symbols[left].begin, symbols[left].size + symbols[right].size);
    std::optional<TokenId> id = vocab_.Find(merged);
    if (!id) return;
    queue.push({vocab_.token(*id).score, left, right, merged.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
    MergeWithNext(&symbols, bigram.left);
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    std::string_view piece = text.substr(symbols[i].begin, symbols[i].size);
    if (std::optional<TokenId> id = vocab_.Find(piece)) {
      out->push_back(*id);
      continue;
    }
    for (char c : piece) {  // byte fallback
      std::optional<TokenId> byte = byte_tokens_[static_cast<uint8_t>(c)];
      if (byte) {
        out->push_back(*byte);
      } else if (vocab_.unk()) {
        out->push_back(*vocab_.unk());
      }
    }
  }
}

}  // namespace tachyon
