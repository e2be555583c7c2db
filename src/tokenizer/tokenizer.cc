#include "tokenizer/tokenizer.h"

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

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
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

std::vector<Tokenizer::Fragment> Tokenizer::Partition(std::string_view text, const EncodeOptions& options) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({false, TokenId(), 0, text.size()});
  std::vector<Fragment> next;
  // Whether [begin, end) touches a literal range (where control tokens are text).
  auto in_literal = [&](size_t begin, size_t end) {
    for (const auto& [lo, hi] : options.literal_ranges) {
      if (begin < hi && lo < end) return true;
    }
    return false;
  };
  for (TokenId special : vocab_.special_tokens()) {
    const TokenData& data = vocab_.token(special);
    const bool control = data.type != TokenType::kUserDefined;
    if (!options.parse_special && control) continue;
    const std::string& needle = data.text;
    next.clear();
    bool changed = false;
    for (const Fragment& f : fragments) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      size_t position = f.begin;
      for (size_t from = position;;) {
        size_t found = text.substr(0, f.end).find(needle, from);
        if (found == std::string_view::npos) break;
        if (control && in_literal(found, found + needle.size())) {  // a message's text, not markup
          from = found + 1;
          continue;
        }
        if (found > position) next.push_back({false, TokenId(), position, found});
        next.push_back({true, special, 0, 0});
        position = from = found + needle.size();
        changed = true;
      }
      if (position < f.end) next.push_back({false, TokenId(), position, f.end});
    }
    if (changed) fragments.swap(next);
  }
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
