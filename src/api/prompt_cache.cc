#include "api/prompt_cache.h"

#include <cstdio>

#include <xxhash.h>

namespace tachyon {

std::string PromptCacheKey(const nlohmann::json& body, const std::string& scope) {
  std::string prefix = scope;
  prefix += '\x1f';
  if (body.contains("tools")) prefix += body["tools"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  prefix += '\x1f';
  if (body.contains("messages") && body["messages"].is_array()) {
    for (const auto& m : body["messages"]) {
      if (!m.is_object() || !m.contains("role")) continue;
      if (m["role"] != "system" && m["role"] != "developer") continue;
      prefix += m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  char out[32];
  std::snprintf(out, sizeof(out), "tachyon-%016llx",
                static_cast<unsigned long long>(XXH3_64bits(prefix.data(), prefix.size())));
  return out;
}

}  // namespace tachyon
