// MappedFile: a read-only memory map of a whole file (RAII, move-only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace tachyon {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to size() == 0 and data() == nullptr.
  static StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // Drops the resident pages wholly inside [p, p + n) (a part of the map): they
  // stop counting in the process's memory, and are read from the file again if
  // touched. For data that has been copied elsewhere (packed weights).
  void ReleasePages(const uint8_t* p, size_t n) const;

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tachyon
