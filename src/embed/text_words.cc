#include "embed/text_words.h"

#include <utf8proc.h>

#include <cstdlib>

#include "tokenizer/unicode.h"

namespace tachyon {

std::vector<std::string> FoldedWords(std::string_view text) {
  const std::string valid = SanitizeUtf8(text);
  utf8proc_uint8_t* folded = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(valid.data()), static_cast<utf8proc_ssize_t>(valid.size()), &folded,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_DECOMPOSE | UTF8PROC_CASEFOLD |
                                     UTF8PROC_STRIPMARK));
  const std::string_view s = n >= 0 ? std::string_view(reinterpret_cast<char*>(folded), n) : std::string_view(valid);
  std::vector<std::string> words;
  std::string word;
  for (size_t offset = 0; offset < s.size();) {
    const uint32_t cp = DecodeUtf8(s, &offset);
    const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    const bool letter = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
    const bool digit = c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
    if (letter || digit) {
      AppendUtf8(cp, &word);
      continue;
    }
    const bool apostrophe = cp == '\'' || cp == 0x2019;
    if (apostrophe && !word.empty() && offset < s.size()) {
      words.push_back(std::move(word));
      word = "'";
      continue;
    }
    if (!word.empty() && word != "'") words.push_back(std::move(word));
    word.clear();
  }
  if (!word.empty() && word != "'") words.push_back(std::move(word));
  std::free(folded);
  return words;
}

}  // namespace tachyon
