// What the front doors that translate another API into the chat request
// (api/messages_front.h, api/responses_front.h) share while they read a body: a
// refusal thrown from deep in the reading and caught at its entry as the 400 it
// answers, and a member read that never throws on untrusted JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/openai.h"

namespace tachyon::front_door {

struct Invalid {
  ApiError error;
};

// A 400 invalid_request_error naming the field (param) and, when given, a code.
[[noreturn]] inline void Refuse(const std::string& message, const std::string& param = "",
                                const std::string& code = "") {
  throw Invalid{ApiError{400, message, "invalid_request_error", param, code}};
}

inline void Require(bool ok, const std::string& message, const std::string& param = "") {
  if (!ok) Refuse(message, param);
}

// object[key], or null when `object` is not an object or has no such member.
inline const nlohmann::json& Field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

}  // namespace tachyon::front_door
