// A route's `prompt_cache`: how the gateway helps a hosted API's prompt cache
// (the provider's, not ours) find the prompt's stable prefix.
//
//   Anthropic  caches only up to cache_control breakpoints the request places:
//              "auto" places them (api/anthropic.h, PlaceCacheBreakpoints).
//   OpenAI     caches prefixes of 1,024 tokens and more by itself; requests that
//              share a prompt_cache_key are sent to the same cache: "auto" sets
//              one from the stable prefix (PromptCacheKey) unless the client did.
// Either way the request goes up serialized canonically (keys sorted, no
// whitespace), so the same content is the same bytes whatever the client's
// key order: a provider's prefix cache compares bytes.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tachyon {

struct PromptCacheOptions {
  bool automatic = false;     // "auto" (false: "off", the request goes up as it came)
  bool long_ttl = false;      // Anthropic: breakpoints of ttl "1h" instead of the default 5 minutes
  int64_t min_tokens = 1024;  // a prefix shorter than this (estimated) gets no breakpoint
  std::string scope;          // hashed into prompt_cache_key besides the prefix: the route
};

// A token count that errs low: bytes / 4 (English text and code run nearer 3.5
// bytes per token in the hosted models' tokenizers).
inline int64_t LowTokenEstimate(size_t bytes) { return static_cast<int64_t>(bytes / 4); }

// OpenAI: "tachyon-" and 16 hex digits of a hash of the scope, the tools and the
// system / developer messages (canonical bytes). Requests with the same stable
// prefix share it whatever their conversation.
std::string PromptCacheKey(const nlohmann::json& chat_body, const std::string& scope);

}  // namespace tachyon
