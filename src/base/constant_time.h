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

// "Bearer KEY" carries `key` (compared in constant time). The scheme is
// case-insensitive and followed by one or more spaces (RFC 7235 section 2.1,
// RFC 6750 section 2.1): "bearer KEY" and "BEARER  KEY" carry it too.
inline bool BearerMatches(std::string_view header, std::string_view key) {
  constexpr std::string_view kBearer = "bearer";
  if (header.size() <= kBearer.size() || header[kBearer.size()] != ' ') return false;
  for (size_t i = 0; i < kBearer.size(); ++i) {
    const char c = header[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kBearer[i]) return false;
  }
  size_t start = kBearer.size();
  while (start < header.size() && header[start] == ' ') ++start;
  return ConstantTimeEquals(header.substr(start), key);
}

}  // namespace tachyon
