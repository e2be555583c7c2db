#include "base/bounded_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace tachyon {
namespace {

// Backtracking steps one match may take; a plain pattern needs a few per byte.
constexpr uint32_t kMatchLimit = 1000000;
constexpr uint32_t kDepthLimit = 10000;

// One match context per thread, with the limits set.
pcre2_match_context* LimitedContext() {
  struct Context {
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    Context() {
      pcre2_set_match_limit(context, kMatchLimit);
      pcre2_set_depth_limit(context, kDepthLimit);
    }
    ~Context() { pcre2_match_context_free(context); }
  };
  thread_local Context context;
  return context.context;
}

}  // namespace

StatusOr<std::shared_ptr<BoundedRegex>> BoundedRegex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return InvalidArgumentError("regular expression at offset " + std::to_string(offset) + ": " +
                                reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // interpreted when JIT is unavailable
  std::shared_ptr<BoundedRegex> regex(new BoundedRegex());
  regex->pattern_ = pattern;
  regex->code_ = code;
  return regex;
}

BoundedRegex::~BoundedRegex() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool BoundedRegex::Search(std::string_view text) const {
  pcre2_code* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  // Invalid UTF-8 (not from a parsed JSON body) is an error code: no match.
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, data,
                             LimitedContext());
  pcre2_match_data_free(data);
  return rc >= 0;
}

std::optional<std::string> BoundedRegex::ReplaceAll(std::string_view text, std::string_view replacement) const {
  pcre2_code* code = static_cast<pcre2_code*>(code_);
  const uint32_t options = PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH;
  std::string out(text.size() + 64, '\0');
  for (int pass = 0; pass < 2; ++pass) {
    PCRE2_SIZE length = out.size();
    const int rc = pcre2_substitute(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, options, nullptr,
                                    LimitedContext(), reinterpret_cast<PCRE2_SPTR>(replacement.data()),
                                    replacement.size(), reinterpret_cast<PCRE2_UCHAR*>(out.data()), &length);
    if (rc >= 0) {
      out.resize(length);
      return out;
    }
    if (rc != PCRE2_ERROR_NOMEMORY) return std::nullopt;
    out.assign(length, '\0');  // the length it needs, including its terminating zero
  }
  return std::nullopt;
}

}  // namespace tachyon
