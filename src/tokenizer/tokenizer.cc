#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <map>

#include "tokenizer/bpe_encoder.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wpm_encoder.h"

namespace tachyon {

namespace {

constexpr std::string_view kSpmSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// Byte-level BPE spelling -> bytes. A code point outside the mapping is kept as is.
std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    size_t start = offset;
    int byte = UnicodeToByte(DecodeUtf8(text, &offset));
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(text.substr(start, offset - start));
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  BuildSpecialTrie();
  for (int32_t i = 0; i < vocab_.size(); ++i) {
    max_token_bytes_ = std::max(max_token_bytes_, vocab_.token(TokenId(i)).text.size());
  }
}

void Tokenizer::BuildSpecialTrie() {
  special_trie_.assign(1, TrieNode{});
  const std::vector<TokenId>& specials = vocab_.special_tokens();
  for (size_t index = 0; index < specials.size(); ++index) {
    int32_t node = 0;
    for (char c : vocab_.token(specials[index]).text) {
      const uint8_t byte = static_cast<uint8_t>(c);
      auto& children = special_trie_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), byte,
                                 [](const std::pair<uint8_t, int32_t>& child, uint8_t b) { return child.first < b; });
      if (it != children.end() && it->first == byte) {
        node = it->second;
      } else {
        const int32_t next = static_cast<int32_t>(special_trie_.size());
        children.insert(it, {byte, next});
        special_trie_.emplace_back();
        node = next;
      }
    }
    special_trie_[node].specials.push_back(static_cast<int32_t>(index));
    const std::string& text = vocab_.token(specials[index]).text;
    if (!text.empty()) special_first_byte_[static_cast<uint8_t>(text[0])] = true;
  }
}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(file));
  return FromVocab(std::move(vocab));
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(Vocab vocab) {
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  switch (t->vocab_.kind()) {
    case VocabKind::kSpm:
      t->spm_ = std::make_unique<SpmEncoder>(t->vocab_);
      break;
    case VocabKind::kBpe: {
      ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> pre, PreTokenizer::ForName(t->vocab_.pre()));
      t->bpe_ = std::make_unique<BpeEncoder>(t->vocab_, std::move(pre));
      break;
    }
    case VocabKind::kWpm:
      t->wpm_ = std::make_unique<WpmEncoder>(t->vocab_);
      break;
  }
  return t;
}

bool Tokenizer::IsLossless() const { return vocab_.kind() != VocabKind::kWpm; }

// Splits the text into special tokens and the text between them. Specials are taken in
// priority order (vocab_.special_tokens(): longest first), each left to right, where no
// earlier one was taken; control tokens inside a literal range are text. All candidate
// matches come from one trie walk per position, so the cost is linear in the text
// (times the longest special), not #specials x #fragments.
std::vector<Tokenizer::Fragment> Tokenizer::Partition(std::string_view text, const EncodeOptions& options) const {
  const std::vector<TokenId>& specials = vocab_.special_tokens();
  const auto& literal = options.literal_ranges;
  // Whether [begin, end) touches a literal range (sorted, disjoint): the first range
  // ending after `begin` is the only one that can.
  auto in_literal = [&](size_t begin, size_t end) {
    auto it = std::upper_bound(literal.begin(), literal.end(), begin,
                               [](size_t b, const std::pair<size_t, size_t>& r) { return b < r.second; });
    return it != literal.end() && it->first < end;
  };
  struct Candidate {
    int32_t priority;
    size_t begin, end;
  };
  std::vector<Candidate> candidates;
  for (size_t pos = 0; pos < text.size() && special_trie_.size() > 1; ++pos) {
    if (!special_first_byte_[static_cast<uint8_t>(text[pos])]) continue;
    int32_t node = 0;
    for (size_t p = pos; p < text.size(); ++p) {
      const auto& children = special_trie_[node].children;
      const uint8_t byte = static_cast<uint8_t>(text[p]);
      auto it = std::lower_bound(children.begin(), children.end(), byte,
                                 [](const std::pair<uint8_t, int32_t>& child, uint8_t b) { return child.first < b; });
      if (it == children.end() || it->first != byte) break;
      node = it->second;
      for (int32_t index : special_trie_[node].specials) {
        const bool control = vocab_.token(specials[index]).type != TokenType::kUserDefined;
        if (control && (!options.parse_special || in_literal(pos, p + 1))) continue;  // text, not markup
        candidates.push_back({index, pos, p + 1});
      }
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.begin < b.begin;
  });
  std::map<size_t, std::pair<size_t, TokenId>> taken;  // begin -> (end, token)
  for (const Candidate& c : candidates) {
    auto next = taken.lower_bound(c.begin);
    if (next != taken.end() && next->first < c.end) continue;
    if (next != taken.begin() && std::prev(next)->second.first > c.begin) continue;
    taken.emplace_hint(next, c.begin, std::make_pair(c.end, specials[c.priority]));
  }
  std::vector<Fragment> fragments;
  size_t position = 0;
  for (const auto& [begin, token] : taken) {
    if (begin > position) fragments.push_back({false, TokenId(), position, begin});
    fragments.push_back({true, token.second, 0, 0});
    position = token.first;
  }
  if (position < text.size()) fragments.push_back({false, TokenId(), position, text.size()});
  return fragments;
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, EncodeOptions options) const {
  std::vector<TokenId> out;
  const bool add_bos = options.add_special && vocab_.add_bos() && vocab_.bos();
  const bool add_eos = options.add_special && vocab_.add_eos() && vocab_.eos();
  if (vocab_.kind() == VocabKind::kWpm) {
    if (options.add_special && vocab_.cls()) out.push_back(*vocab_.cls());
  } else if (add_bos) {
    out.push_back(*vocab_.bos());
  }
  bool previous_is_special = true;  // SentencePiece prefixes a space at the start and after specials
  for (const Fragment& f : Partition(text, options)) {
    if (f.is_token) {
      out.push_back(f.token);
      previous_is_special = true;
      continue;
    }
    std::string_view raw = text.substr(f.begin, f.end - f.begin);
    switch (vocab_.kind()) {
      case VocabKind::kSpm: {
        std::string escaped;
        if (vocab_.add_space_prefix() && previous_is_special) escaped = kSpmSpace;
        escaped += EscapeSpaces(raw);
        spm_->Encode(escaped, &out);
        break;
      }
      case VocabKind::kBpe: bpe_->Encode(raw, &out); break;
      case VocabKind::kWpm: wpm_->Encode(raw, &out); break;
    }
    previous_is_special = false;
  }
  if (vocab_.kind() == VocabKind::kWpm) {
    if (options.add_special && vocab_.sep()) out.push_back(*vocab_.sep());
  } else if (add_eos) {
    out.push_back(*vocab_.eos());
  }
  return out;
}

std::string Tokenizer::TokenToPiece(TokenId id, bool special) const {
  if (!vocab_.IsValid(id)) return "";
  const TokenData& t = vocab_.token(id);
  switch (t.type) {
    case TokenType::kControl:
      return special ? t.text : "";
    case TokenType::kUnknown:
      return vocab_.kind() == VocabKind::kBpe ? t.text : "\xe2\x96\x85";  // U+2585, as llama.cpp
    case TokenType::kByte:
      if (std::optional<uint8_t> byte = ByteTokenValue(t.text)) return std::string(1, static_cast<char>(*byte));
      return t.text;
    case TokenType::kUserDefined:
      return vocab_.kind() == VocabKind::kBpe ? t.text : UnescapeSpaces(t.text);
    default:
      switch (vocab_.kind()) {
        case VocabKind::kSpm:
        case VocabKind::kWpm: return UnescapeSpaces(t.text);
        case VocabKind::kBpe: return DecodeByteLevel(t.text);
      }
  }
  return "";
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, DecodeOptions options) const {
  std::string out;
  bool strip = options.strip_leading_space && vocab_.add_space_prefix();
  for (TokenId id : ids) {
    std::string piece = TokenToPiece(id, options.special);
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

}  // namespace tachyon
