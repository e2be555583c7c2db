// Test helpers: hand-built GGUF bytes (for corrupt-file cases) and temp files.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tachyon::testing_util {

// Appends little-endian GGUF primitives to a byte vector.
class ByteBuilder {
 public:
  ByteBuilder& U8(uint8_t v) { return Raw(&v, 1); }
  ByteBuilder& U32(uint32_t v) { return Raw(&v, 4); }
  ByteBuilder& U64(uint64_t v) { return Raw(&v, 8); }
  ByteBuilder& F32(float v) { return Raw(&v, 4); }
  ByteBuilder& Str(const std::string& s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  ByteBuilder& Raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  ByteBuilder& PadTo(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  // Header: magic, version, tensor count, metadata count.
  ByteBuilder& Header(uint64_t num_tensors, uint64_t num_kv, uint32_t version = 3) {
    return Raw("GGUF", 4).U32(version).U64(num_tensors).U64(num_kv);
  }
  // Tensor info with one dimension list.
  ByteBuilder& Tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                      uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

inline std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline std::string SharedDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return env != nullptr ? env : TACHYON_SHARED_DIR;
}

}  // namespace tachyon::testing_util
