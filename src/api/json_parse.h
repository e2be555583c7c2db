// ParseJson: nlohmann::json from text, read by simdjson when the text is small.
//
// nlohmann's own lexer costs about 100 instructions a byte: on a gateway's hot path
// the request body's parse was the largest single cost before the first upstream
// byte. simdjson reads the text (validating it, UTF-8 included) into its DOM, and
// the nlohmann value is built from that. The result is the value nlohmann's parser
// would give: any text simdjson refuses (invalid JSON, integers beyond 64 bits,
// nesting past its depth) is handed to nlohmann's parser, whose answer, value or
// discarded, stands.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"

namespace tachyon {

// Larger texts go to nlohmann directly: simdjson's buffers, kept per thread, stay small.
inline constexpr size_t kSimdJsonMaxBytes = 64 << 10;

// The parsed value, or a discarded one (is_discarded()) when `text` is not JSON
// or nests deeper than kMaxJsonDepth (JsonNestsDeeperThan tells the two apart).
// `repeated_keys`, when given, is set to whether some object in the text names a
// key twice (the value keeps the last; another reader of the same text may take the
// first), or may: texts that nlohmann reads are not checked and count as repeated.
nlohmann::json ParseJson(std::string_view text, bool* repeated_keys = nullptr);

// object[key] when `object` is an object and that member a string, else "": for
// untrusted JSON, where nlohmann's value() throws on a member of another type.
std::string StringField(const nlohmann::json& object, std::string_view key);
// object[key] when it is an integer, else `otherwise`.
int64_t IntField(const nlohmann::json& object, std::string_view key, int64_t otherwise = 0);

}  // namespace tachyon
