// Symbols: the doubly linked list of text pieces that SPM and BPE merge.
//
// Invariant: live symbols (size > 0) tile the text in order along next links
// from symbol 0; a symbol merged into its left neighbour has size 0 and is
// unlinked.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace tachyon {

struct Symbol {
  size_t begin;  // byte offset in the text
  size_t size;   // bytes; 0 once merged into its left neighbour
  int prev, next;
  int32_t id = -1;  // token id of the symbol's text where the encoder tracks it, or -1
};

// One symbol per UTF-8 character (by lead byte; a truncated tail is its own symbol).
inline std::vector<Symbol> CharacterSymbols(std::string_view text) {
  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < text.size();) {
    size_t size = std::min<size_t>(Utf8SequenceLength(static_cast<uint8_t>(text[offset])),
                                   text.size() - offset);
    int index = static_cast<int>(symbols.size());
    symbols.push_back({offset, size, index - 1, offset + size < text.size() ? index + 1 : -1});
    offset += size;
  }
  return symbols;
}

// Merges symbol `left` with the symbol after it.
inline void MergeWithNext(std::vector<Symbol>* symbols, int left) {
  Symbol& l = (*symbols)[left];
  Symbol& r = (*symbols)[l.next];
  l.size += r.size;
  r.size = 0;
  l.next = r.next;
  if (r.next >= 0) (*symbols)[r.next].prev = left;
}

}  // namespace tachyon
