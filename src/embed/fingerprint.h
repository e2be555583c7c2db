// Fingerprint: a short stable hash (16 hex digits, XXH3-64) of what an
// embedder was made from, for its id(): the same files and settings give the
// same id, so stored vectors are never compared across different embedders.
#pragma once

#include <xxhash.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace tachyon {

class Fingerprint {
 public:
  Fingerprint() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~Fingerprint() { XXH3_freeState(state_); }
  Fingerprint(const Fingerprint&) = delete;
  Fingerprint& operator=(const Fingerprint&) = delete;

  void AddBytes(const void* data, size_t n) { XXH3_64bits_update(state_, data, n); }
  // A string and a terminator, so that ("ab", "c") and ("a", "bc") differ.
  void Add(std::string_view s) {
    AddBytes(s.data(), s.size());
    AddBytes("", 1);
  }
  std::string Hex() const {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(state_)));
    return hex;
  }

 private:
  XXH3_state_t* state_;
};

}  // namespace tachyon
