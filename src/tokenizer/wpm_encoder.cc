#include "tokenizer/wpm_encoder.h"

#include <utf8proc.h>

#include "tokenizer/unicode.h"

namespace tachyon {
namespace {

// BERT's max_input_chars_per_word: a longer word is [UNK] whole.
constexpr size_t kMaxWordChars = 100;

// BERT's whitespace: space, tab, newline, carriage return and the space
// separators (Zs); the line and paragraph separators too (Zl, Zp), as Hugging
// Face's BertPreTokenizer has them. \v, \f and U+0085 are control characters
// (Cc), dropped as BERT drops them, not separators.
bool IsWhitespace(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return true;
  utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool IsCased(uint32_t cp) {
  utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

bool IsControl(uint32_t cp) {
  utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
         c == UTF8PROC_CATEGORY_CS || c == UTF8PROC_CATEGORY_CN;
}

bool IsPunctuation(uint32_t cp) {
  utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool IsSymbol(uint32_t cp) {
  utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c >= UTF8PROC_CATEGORY_SM && c <= UTF8PROC_CATEGORY_SO;
}

// CJK ideograph blocks, as BERT's BasicTokenizer defines them.
bool IsChineseChar(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::vector<uint32_t> NfdCodePoints(std::string_view text) {
  std::string valid = SanitizeUtf8(text);
  utf8proc_uint8_t* nfd = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                                    static_cast<utf8proc_ssize_t>(valid.size()), &nfd,
                                    static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_STABLE));
  std::vector<uint32_t> cps;
  std::string_view decomposed = n >= 0 ? std::string_view(reinterpret_cast<char*>(nfd), n)
                                       : std::string_view(valid);
  for (size_t offset = 0; offset < decomposed.size();) cps.push_back(DecodeUtf8(decomposed, &offset));
  std::free(nfd);
  return cps;
}

// Python's str.lower(), which BERT applies, turns a capital sigma that ends a
// word into the final form: after a cased letter and before none (marks skipped).
bool IsFinalSigma(const std::vector<uint32_t>& cps, size_t i) {
  auto mark = [](uint32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_MN; };
  size_t before = i;
  while (before > 0 && mark(cps[before - 1])) --before;
  if (before == 0 || !IsCased(cps[before - 1])) return false;
  size_t after = i + 1;
  while (after < cps.size() && mark(cps[after])) ++after;
  return after == cps.size() || !IsCased(cps[after]);
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::vector<std::string> WpmEncoder::SplitWords(std::string_view text) {
  std::vector<std::string> words(1);
  const std::vector<uint32_t> cps = NfdCodePoints(text);
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t cp = cps[i];
    if (IsWhitespace(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == kReplacementChar || IsControl(cp)) continue;
    // Accents are stripped (after NFD they are separate nonspacing marks), as
    // uncased BERT tokenizers do.
    if (utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_MN) continue;
    std::string lower;
    const uint32_t lowered = cp == 0x03A3 && IsFinalSigma(cps, i)
                                 ? 0x03C2
                                 : static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
    AppendUtf8(lowered, &lower);
    if (IsPunctuation(cp) || (cp < 0x7F && IsSymbol(cp)) || IsChineseChar(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = lower;
      words.emplace_back();
    } else {
      words.back() += lower;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void WpmEncoder::Encode(std::string_view text, std::vector<TokenId>* out) const {
  const size_t max_len = vocab_.max_token_bytes();
  for (const std::string& word : SplitWords(text)) {
    const size_t start_size = out->size();
    if (CountCodePoints(word) > kMaxWordChars) {  // BERT's max_input_chars_per_word
      if (vocab_.unk()) out->push_back(*vocab_.unk());
      continue;
    }
    const std::string marked = "\xe2\x96\x81" + word;  // U+2581 marks the word start
    for (size_t i = 0; i < marked.size();) {
      size_t matched = 0;
      for (size_t j = std::min(marked.size(), i + max_len); j > i; --j) {
        if (std::optional<TokenId> id = vocab_.Find(std::string_view(marked).substr(i, j - i))) {
          out->push_back(*id);
          matched = j - i;
          break;
        }
      }
      if (matched == 0) {
        out->resize(start_size);  // one unmatched position: the whole word is unknown
        break;
      }
      i += matched;
    }
    if (out->size() == start_size && vocab_.unk()) out->push_back(*vocab_.unk());
  }
}

}  // namespace tachyon
