// Comparisons whose time does not depend on where two secrets differ, for API
// keys: a `!=` that stops at the first wrong byte lets a client find a key byte
// by byte from response times. Only the length may show.
#pragma once

#include <cstddef>
#include <string_view>

namespace tachyon {

inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;  // volatile: no early exit may be compiled in
  for (size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// "Bearer KEY" carries `key` (compared in constant time).
inline bool BearerMatches(std::string_view header, std::string_view key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (header.substr(0, kBearer.size()) != kBearer) return false;
  return ConstantTimeEquals(header.substr(kBearer.size()), key);
}

}  // namespace tachyon
