// GgufFile: a parsed GGUF file (v2 or v3, little-endian) whose tensors are
// zero-copy views into the mapped file.
//
// Every count, length, offset and shape in the file is untrusted: parsing checks
// each one against the bytes that remain before reading or allocating, and a bad
// file yields a Status that names what is wrong and where (byte offset, key or
// tensor name). See docs/gguf.md for the layout and the checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace tachyon {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;              // GGML_MAX_DIMS
inline constexpr size_t kGgufMaxTensorNameBytes = 64;
inline constexpr int kGgufMaxArrayNesting = 8;

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // ne[0] first: shape[0] is the row length (fastest-varying), as GGUF stores it.
  std::vector<int64_t> shape;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t num_bytes = 0;
  const uint8_t* data = nullptr;  // view into the file; valid while the GgufFile lives

  int64_t num_elements() const;
  // "[2048, 32000]"
  std::string ShapeString() const;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

class GgufFile {
 public:
  // Maps and parses the file at `path`; errors are prefixed with the path.
  static StatusOr<GgufFile> Open(const std::string& path);
  // Parses `size` bytes at `data`, which must outlive the result (no copy is made).
  static StatusOr<GgufFile> Parse(const uint8_t* data, size_t size);

  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  size_t file_size() const { return size_; }

  // In file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed access with errors a user can act on:
  //   NOT_FOUND "metadata key 'llama.block_count' is missing"
  //   INVALID_ARGUMENT "metadata key 'llama.block_count' is a string, expected an unsigned integer"
  StatusOr<uint64_t> GetUint(std::string_view key) const;
  StatusOr<double> GetFloat(std::string_view key) const;
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<const GgufArray*> GetArray(std::string_view key) const;

  // Drops the resident pages of bytes [p, p + n) of a mapped file (a no-op for a
  // file parsed from a caller's buffer): see MappedFile::ReleasePages.
  void ReleasePages(const uint8_t* p, size_t n) const { mapping_.ReleasePages(p, n); }

  // In file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  MappedFile mapping_;  // empty when parsed from a caller's buffer
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tachyon
