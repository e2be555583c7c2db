// GgufWriter: writes GGUF v3 files (little-endian) that GgufFile and other GGUF
// readers load: metadata in insertion order, tensor infos, then each tensor's
// data at an offset aligned to `alignment`.
//
// Tensor data is streamed: declare every tensor with AddTensor, call Open, then
// write the data of each tensor in declaration order with WriteTensorData (in as
// many pieces as is convenient), then Close. So a model far larger than memory
// can be written piece by piece. The file appears under its name only when Close
// succeeds (it is written to "<path>.tmp" and renamed); on error nothing is left.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"

namespace tachyon {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Adds or replaces a metadata entry (a replaced key keeps its position).
  // "general.alignment" is written by the writer itself when alignment != 32.
  void SetMetadata(const std::string& key, GgufValue value);

  // Declares a tensor; shape[0] is the row length. Fails on a duplicate name, a
  // name over 64 bytes, more than 4 dimensions, or a row length that is not a
  // multiple of the type's block size.
  Status AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& shape);

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Writes header, metadata and tensor infos to "<path>.tmp".
  Status Open(const std::string& path);
  // Appends bytes to the current tensor; moves to the next tensor when one is full.
  Status WriteTensorData(const void* data, size_t num_bytes);
  // Checks that every tensor got all its bytes, flushes, renames to `path`.
  Status Close();

 private:
  Status Write(const void* data, size_t num_bytes);
  Status WriteString(const std::string& s);
  Status WriteValue(const GgufValue& value);
  Status WriteArray(const GgufArray& array);
  Status WritePadding();
  Status Fail(Status status);  // closes and removes the temporary file

  uint32_t alignment_;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  uint64_t data_bytes_ = 0;  // size of the data section so far (declared tensors)

  std::string path_;
  std::FILE* out_ = nullptr;
  uint64_t written_ = 0;        // bytes written to the file
  size_t current_tensor_ = 0;   // index of the tensor being written
  uint64_t current_written_ = 0;  // bytes of it written
};

}  // namespace tachyon
