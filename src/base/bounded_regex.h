// BoundedRegex: a PCRE2 pattern compiled once, matched with bounded work. A
// pattern that would backtrack without end on a hostile text stops at its match
// limit: Search says no match, ReplaceAll says it could not finish (its caller
// decides what is safe then; the capture redacts the whole value).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tachyon {

class BoundedRegex {
 public:
  static StatusOr<std::shared_ptr<BoundedRegex>> Compile(const std::string& pattern);
  ~BoundedRegex();
  BoundedRegex(const BoundedRegex&) = delete;
  BoundedRegex& operator=(const BoundedRegex&) = delete;

  // Safe from several threads.
  bool Search(std::string_view text) const;
  // The text with every match replaced by `replacement` (taken literally);
  // nullopt when the match limit was hit or the text is not valid UTF-8.
  std::optional<std::string> ReplaceAll(std::string_view text, std::string_view replacement) const;
  const std::string& pattern() const { return pattern_; }

 private:
  BoundedRegex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

}  // namespace tachyon
