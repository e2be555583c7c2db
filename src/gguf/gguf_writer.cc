#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstring>

namespace tachyon {

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0)
      << "alignment must be a power of two, got " << alignment;
}

GgufWriter::~GgufWriter() {
  if (out_ != nullptr) {
    std::fclose(out_);
    std::remove((path_ + ".tmp").c_str());
  }
}

void GgufWriter::SetMetadata(const std::string& key, GgufValue value) {
  auto it = metadata_index_.find(key);
  if (it != metadata_index_.end()) {
    metadata_[it->second].value = std::move(value);
    return;
  }
  metadata_index_.emplace(key, metadata_.size());
  metadata_.push_back({key, std::move(value)});
}

Status GgufWriter::AddTensor(const std::string& name, GgmlType type,
                             const std::vector<int64_t>& shape) {
  CHECK(out_ == nullptr) << "AddTensor after Open";
  if (name.empty() || name.size() > kGgufMaxTensorNameBytes) {
    return InvalidArgumentError("tensor name '" + name + "' must be 1 to " +
                                std::to_string(kGgufMaxTensorNameBytes) + " bytes");
  }
  if (tensor_index_.count(name)) return InvalidArgumentError("duplicate tensor '" + name + "'");
  if (shape.empty() || shape.size() > static_cast<size_t>(kGgufMaxDims)) {
    return InvalidArgumentError("tensor '" + name + "' must have 1 to 4 dimensions");
  }
  GgufTensorInfo info{.name = name, .type = type, .shape = shape};
  for (int64_t ne : shape) {
    if (ne < 0) return InvalidArgumentError("tensor '" + name + "' has a negative dimension");
  }
  std::optional<uint64_t> row_bytes = GgmlRowBytes(type, shape[0]);
  if (!row_bytes) {
    return InvalidArgumentError("tensor '" + name + "': row length " + std::to_string(shape[0]) +
                                " is not a multiple of the " + GgmlTypeName(type) +
                                " block size " +
                                std::to_string(GetGgmlTypeTraits(type).block_size));
  }
  info.num_bytes = *row_bytes;
  for (size_t d = 1; d < shape.size(); ++d) info.num_bytes *= static_cast<uint64_t>(shape[d]);
  info.offset = (data_bytes_ + alignment_ - 1) / alignment_ * alignment_;
  data_bytes_ = info.offset + info.num_bytes;
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back(std::move(info));
  return Status::Ok();
}

Status GgufWriter::Write(const void* data, size_t num_bytes) {
  if (num_bytes == 0) return Status::Ok();
  if (std::fwrite(data, 1, num_bytes, out_) != num_bytes) {
    return Fail(UnavailableError(path_ + ": write failed: " + std::strerror(errno)));
  }
  written_ += num_bytes;
  return Status::Ok();
}

Status GgufWriter::WriteString(const std::string& s) {
  uint64_t length = s.size();
  RETURN_IF_ERROR(Write(&length, sizeof(length)));
  return Write(s.data(), s.size());
}

Status GgufWriter::WriteArray(const GgufArray& array) {
  uint32_t element_type = static_cast<uint32_t>(array.element_type());
  uint64_t count = array.size();
  RETURN_IF_ERROR(Write(&element_type, sizeof(element_type)));
  RETURN_IF_ERROR(Write(&count, sizeof(count)));
  return std::visit(
      [this](const auto& elements) -> Status {
        using T = typename std::decay_t<decltype(elements)>::value_type;
        if constexpr (std::is_same_v<T, bool>) {
          for (bool b : elements) {
            uint8_t byte = b ? 1 : 0;
            RETURN_IF_ERROR(Write(&byte, 1));
          }
        } else if constexpr (std::is_same_v<T, std::string>) {
          for (const std::string& s : elements) RETURN_IF_ERROR(WriteString(s));
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          for (const GgufArray& a : elements) RETURN_IF_ERROR(WriteArray(a));
        } else {
          RETURN_IF_ERROR(Write(elements.data(), elements.size() * sizeof(T)));
        }
        return Status::Ok();
      },
      array.storage());
}

Status GgufWriter::WriteValue(const GgufValue& value) {
  uint32_t type = static_cast<uint32_t>(value.type());
  RETURN_IF_ERROR(Write(&type, sizeof(type)));
  return std::visit(
      [this](const auto& v) -> Status {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return WriteString(v);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          return WriteArray(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          uint8_t byte = v ? 1 : 0;
          return Write(&byte, 1);
        } else {
          return Write(&v, sizeof(v));
        }
      },
      value.variant());
}

Status GgufWriter::WritePadding() {
  static const uint8_t kZeros[256] = {};
  uint64_t padded = (written_ + alignment_ - 1) / alignment_ * alignment_;
  while (written_ < padded) {
    RETURN_IF_ERROR(Write(kZeros, std::min<uint64_t>(sizeof(kZeros), padded - written_)));
  }
  return Status::Ok();
}

Status GgufWriter::Fail(Status status) {
  if (out_ != nullptr) {
    std::fclose(out_);
    out_ = nullptr;
    std::remove((path_ + ".tmp").c_str());
  }
  return status;
}

Status GgufWriter::Open(const std::string& path) {
  CHECK(out_ == nullptr) << "GgufWriter::Open called twice";
  path_ = path;
  out_ = std::fopen((path + ".tmp").c_str(), "wb");
  if (out_ == nullptr) {
    return UnavailableError(path + ".tmp: cannot create: " + std::strerror(errno));
  }
  if (alignment_ != kGgufDefaultAlignment) SetMetadata("general.alignment", GgufValue(alignment_));
  uint32_t magic = kGgufMagic, version = 3;
  uint64_t num_tensors = tensors_.size(), num_kv = metadata_.size();
  RETURN_IF_ERROR(Write(&magic, sizeof(magic)));
  RETURN_IF_ERROR(Write(&version, sizeof(version)));
  RETURN_IF_ERROR(Write(&num_tensors, sizeof(num_tensors)));
  RETURN_IF_ERROR(Write(&num_kv, sizeof(num_kv)));
  for (const GgufKeyValue& kv : metadata_) {
    RETURN_IF_ERROR(WriteString(kv.key));
    RETURN_IF_ERROR(WriteValue(kv.value));
  }
  for (const GgufTensorInfo& info : tensors_) {
    RETURN_IF_ERROR(WriteString(info.name));
    uint32_t num_dims = static_cast<uint32_t>(info.shape.size());
    RETURN_IF_ERROR(Write(&num_dims, sizeof(num_dims)));
    for (int64_t ne : info.shape) {
      uint64_t dim = static_cast<uint64_t>(ne);
      RETURN_IF_ERROR(Write(&dim, sizeof(dim)));
    }
    uint32_t type = static_cast<uint32_t>(info.type);
    RETURN_IF_ERROR(Write(&type, sizeof(type)));
    RETURN_IF_ERROR(Write(&info.offset, sizeof(info.offset)));
  }
  RETURN_IF_ERROR(WritePadding());
  // Skip empty tensors at the front so current_tensor_ names one that takes bytes.
  while (current_tensor_ < tensors_.size() && tensors_[current_tensor_].num_bytes == 0) {
    ++current_tensor_;
  }
  return Status::Ok();
}

Status GgufWriter::WriteTensorData(const void* data, size_t num_bytes) {
  CHECK(out_ != nullptr) << "WriteTensorData before Open";
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  while (num_bytes > 0) {
    if (current_tensor_ >= tensors_.size()) {
      return Fail(InvalidArgumentError("more tensor data written than the tensors declare"));
    }
    const GgufTensorInfo& info = tensors_[current_tensor_];
    uint64_t n = std::min<uint64_t>(num_bytes, info.num_bytes - current_written_);
    RETURN_IF_ERROR(Write(bytes, n));
    bytes += n;
    num_bytes -= n;
    current_written_ += n;
    if (current_written_ == info.num_bytes) {
      current_written_ = 0;
      do {
        ++current_tensor_;
      } while (current_tensor_ < tensors_.size() && tensors_[current_tensor_].num_bytes == 0);
      if (current_tensor_ < tensors_.size()) RETURN_IF_ERROR(WritePadding());
    }
  }
  return Status::Ok();
}

Status GgufWriter::Close() {
  CHECK(out_ != nullptr) << "Close before Open";
  if (current_tensor_ < tensors_.size()) {
    return Fail(FailedPreconditionError(
        "tensor '" + tensors_[current_tensor_].name + "' got " + std::to_string(current_written_) +
        " of its " + std::to_string(tensors_[current_tensor_].num_bytes) + " bytes"));
  }
  if (std::fflush(out_) != 0 || std::ferror(out_)) {
    return Fail(UnavailableError(path_ + ": write failed: " + std::strerror(errno)));
  }
  std::fclose(out_);
  out_ = nullptr;
  if (std::rename((path_ + ".tmp").c_str(), path_.c_str()) != 0) {
    std::string error = std::strerror(errno);
    std::remove((path_ + ".tmp").c_str());
    return UnavailableError(path_ + ": rename failed: " + error);
  }
  return Status::Ok();
}

}  // namespace tachyon
