// PreTokenizer: splits text into the words a byte-level BPE tokenizer merges
// within, by the regular expressions of the model's tokenizer.ggml.pre.
//
// Each expression splits every piece left by the previous one into its matches
// and the text between them (both kept), as llama.cpp's unicode_regex_split
// does. Expressions run on PCRE2 (UTF + Unicode properties, JIT-compiled).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tachyon {

class PreTokenizer {
 public:
  // The expressions for a tokenizer.ggml.pre name ("" or unknown names are an
  // error, except "default", which is llama.cpp's fallback set).
  static StatusOr<std::unique_ptr<PreTokenizer>> ForName(const std::string& pre);
  // Custom expressions (for tests and new models).
  static StatusOr<std::unique_ptr<PreTokenizer>> FromExpressions(
      const std::vector<std::string>& expressions);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits valid UTF-8 `text` (see SanitizeUtf8) into words, as [begin, end)
  // byte ranges that cover the text in order.
  std::vector<std::pair<size_t, size_t>> Split(std::string_view text) const;

  // Whether words already in the vocabulary skip merging (Llama 3's ignore_merges).
  bool ignore_merges() const { return ignore_merges_; }

  // The names ForName knows.
  static std::vector<std::string> KnownNames();

 private:
  PreTokenizer() = default;
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> expressions_;
  bool ignore_merges_ = false;
};

}  // namespace tachyon
