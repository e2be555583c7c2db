#include "gguf/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

namespace tachyon {

namespace {

std::string At(uint64_t offset) { return "at byte " + std::to_string(offset); }

// Smallest encoding of one value of each type, used to bound counts before
// anything is allocated: a count larger than remaining / min_size cannot be real.
uint64_t MinEncodedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString: return 8;   // length only
    case GgufValueType::kArray: return 12;   // element type + length
  }
  return 1;
}

}  // namespace

// Reads the GGUF layout with a bounds-checked cursor. Every Read* returns a
// DataLoss status, naming `what` and the byte offset, instead of reading past the end.
class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  Status Run(GgufFile* file);

 private:
  uint64_t remaining() const { return size_ - pos_; }

  Status Truncated(const std::string& what, uint64_t need) const {
    return DataLossError("file is truncated: " + what + " needs " + std::to_string(need) +
                         " bytes " + At(pos_) + ", only " + std::to_string(remaining()) +
                         " remain");
  }

  template <typename T>
  Status Read(T* out, const std::string& what) {
    if (remaining() < sizeof(T)) return Truncated(what, sizeof(T));
    std::memcpy(out, data_ + pos_, sizeof(T));  // unaligned-safe
    pos_ += sizeof(T);
    return Status::Ok();
  }

  // index >= 0 names an array element in errors ("what[index]"); labels are built only on error.
  Status ReadString(std::string* out, const std::string& what, uint64_t max_bytes,
                    int64_t index = -1);
  Status ReadValue(GgufValueType type, GgufValue* out, const std::string& what, int depth);
  Status ReadValueType(GgufValueType* out, const std::string& what);
  Status ReadArray(GgufArray* out, const std::string& what, int depth);
  template <typename T>
  Status ReadScalarArray(uint64_t count, GgufArray* out);
  Status ReadMetadata(GgufFile* file, uint64_t num_kv);
  Status ReadTensorInfos(GgufFile* file, uint64_t num_tensors);
  Status ReadAlignment(GgufFile* file);
  Status PlaceTensors(GgufFile* file);

  const uint8_t* data_;
  size_t size_;
  uint64_t pos_ = 0;
};

Status GgufParser::ReadString(std::string* out, const std::string& what, uint64_t max_bytes,
                              int64_t index) {
  uint64_t start = pos_;
  auto label = [&] { return index < 0 ? what : what + "[" + std::to_string(index) + "]"; };
  if (remaining() < sizeof(uint64_t)) return Truncated(label() + " length", sizeof(uint64_t));
  uint64_t length;
  std::memcpy(&length, data_ + pos_, sizeof(length));
  pos_ += sizeof(length);
  if (length > max_bytes) {
    return DataLossError(label() + ": length " + std::to_string(length) + " is over the limit of " +
                         std::to_string(max_bytes) + " bytes " + At(start));
  }
  if (length > remaining()) {
    return DataLossError(label() + ": string of " + std::to_string(length) +
                         " bytes runs past the end of the file " + At(start));
  }
  out->assign(reinterpret_cast<const char*>(data_ + pos_), length);
  pos_ += length;
  return Status::Ok();
}

Status GgufParser::ReadValueType(GgufValueType* out, const std::string& what) {
  uint64_t start = pos_;
  uint32_t raw = 0;
  RETURN_IF_ERROR(Read(&raw, what + " type"));
  if (raw >= kNumGgufValueTypes) {
    return DataLossError(what + ": unknown value type id " + std::to_string(raw) + " " + At(start));
  }
  *out = static_cast<GgufValueType>(raw);
  return Status::Ok();
}

Status GgufParser::ReadValue(GgufValueType type, GgufValue* out, const std::string& what,
                             int depth) {
  switch (type) {
#define TACHYON_GGUF_SCALAR(kType, CType)       \
  case GgufValueType::kType: {                  \
    CType v{};                                  \
    RETURN_IF_ERROR(Read(&v, what));            \
    *out = GgufValue(v);                        \
    return Status::Ok();                        \
  }
    TACHYON_GGUF_SCALAR(kUint8, uint8_t)
    TACHYON_GGUF_SCALAR(kInt8, int8_t)
    TACHYON_GGUF_SCALAR(kUint16, uint16_t)
    TACHYON_GGUF_SCALAR(kInt16, int16_t)
    TACHYON_GGUF_SCALAR(kUint32, uint32_t)
    TACHYON_GGUF_SCALAR(kInt32, int32_t)
    TACHYON_GGUF_SCALAR(kFloat32, float)
    TACHYON_GGUF_SCALAR(kUint64, uint64_t)
    TACHYON_GGUF_SCALAR(kInt64, int64_t)
    TACHYON_GGUF_SCALAR(kFloat64, double)
#undef TACHYON_GGUF_SCALAR
    case GgufValueType::kBool: {
      uint64_t start = pos_;
      uint8_t v = 0;
      RETURN_IF_ERROR(Read(&v, what));
      if (v > 1) {
        return DataLossError(what + ": bool has byte value " + std::to_string(v) +
                             " (must be 0 or 1) " + At(start));
      }
      *out = GgufValue(v == 1);
      return Status::Ok();
    }
    case GgufValueType::kString: {
      std::string s;
      RETURN_IF_ERROR(ReadString(&s, what, std::numeric_limits<uint64_t>::max()));
      *out = GgufValue(std::move(s));
      return Status::Ok();
    }
    case GgufValueType::kArray: {
      GgufArray array;
      RETURN_IF_ERROR(ReadArray(&array, what, depth));
      *out = GgufValue(std::move(array));
      return Status::Ok();
    }
  }
  return InternalError("unhandled GGUF value type");
}

template <typename T>
Status GgufParser::ReadScalarArray(uint64_t count, GgufArray* out) {
  // The caller checked count * sizeof(T) <= remaining().
  std::vector<T> elements(count);
  if (count > 0) std::memcpy(elements.data(), data_ + pos_, count * sizeof(T));
  pos_ += count * sizeof(T);
  *out = GgufArray(std::move(elements));
  return Status::Ok();
}

Status GgufParser::ReadArray(GgufArray* out, const std::string& what, int depth) {
  uint64_t start = pos_;
  if (depth >= kGgufMaxArrayNesting) {
    return DataLossError(what + ": arrays nested deeper than " +
                         std::to_string(kGgufMaxArrayNesting) + " levels " + At(start));
  }
  GgufValueType element_type = GgufValueType::kUint8;
  RETURN_IF_ERROR(ReadValueType(&element_type, what + " element"));
  uint64_t count = 0;
  RETURN_IF_ERROR(Read(&count, what + " array length"));
  uint64_t min_size = MinEncodedSize(element_type);
  if (count > remaining() / min_size) {
    return DataLossError(what + ": array of " + std::to_string(count) + " " +
                         GgufValueTypeName(element_type) + " values cannot fit in the " +
                         std::to_string(remaining()) + " bytes that remain " + At(start));
  }
  switch (element_type) {
    case GgufValueType::kUint8: return ReadScalarArray<uint8_t>(count, out);
    case GgufValueType::kInt8: return ReadScalarArray<int8_t>(count, out);
    case GgufValueType::kUint16: return ReadScalarArray<uint16_t>(count, out);
    case GgufValueType::kInt16: return ReadScalarArray<int16_t>(count, out);
    case GgufValueType::kUint32: return ReadScalarArray<uint32_t>(count, out);
    case GgufValueType::kInt32: return ReadScalarArray<int32_t>(count, out);
    case GgufValueType::kFloat32: return ReadScalarArray<float>(count, out);
    case GgufValueType::kUint64: return ReadScalarArray<uint64_t>(count, out);
    case GgufValueType::kInt64: return ReadScalarArray<int64_t>(count, out);
    case GgufValueType::kFloat64: return ReadScalarArray<double>(count, out);
    case GgufValueType::kBool: {
      std::vector<bool> elements(count);
      for (uint64_t i = 0; i < count; ++i) {
        uint8_t byte = data_[pos_ + i];
        if (byte > 1) {
          return DataLossError(what + "[" + std::to_string(i) + "]: bool has byte value " +
                               std::to_string(byte) + " (must be 0 or 1) " + At(pos_ + i));
        }
        elements[i] = byte == 1;
      }
      pos_ += count;
      *out = GgufArray(std::move(elements));
      return Status::Ok();
    }
    // Strings and arrays grow as they are read, not by the claimed count: an element
    // in memory is larger than its smallest encoding, so sizing by the count would let
    // a file claim several times its own size (nested, once per level).
    case GgufValueType::kString: {
      std::vector<std::string> elements;
      for (uint64_t i = 0; i < count; ++i) {
        RETURN_IF_ERROR(ReadString(&elements.emplace_back(), what, std::numeric_limits<uint64_t>::max(),
                                   static_cast<int64_t>(i)));
      }
      *out = GgufArray(std::move(elements));
      return Status::Ok();
    }
    case GgufValueType::kArray: {
      std::vector<GgufArray> elements;
      for (uint64_t i = 0; i < count; ++i) {
        RETURN_IF_ERROR(ReadArray(&elements.emplace_back(), what + "[" + std::to_string(i) + "]", depth + 1));
      }
      *out = GgufArray(std::move(elements));
      return Status::Ok();
    }
  }
  return InternalError("unhandled GGUF array element type");
}

Status GgufParser::ReadMetadata(GgufFile* file, uint64_t num_kv) {
  // Smallest key/value: 8-byte key length, 1-byte key, 4-byte type, 1-byte value.
  if (num_kv > remaining() / 14) {
    return DataLossError("header claims " + std::to_string(num_kv) +
                         " metadata entries, more than the " + std::to_string(remaining()) +
                         " remaining bytes can hold");
  }
  file->metadata_.reserve(num_kv);
  for (uint64_t i = 0; i < num_kv; ++i) {
    uint64_t start = pos_;
    std::string label = "metadata entry " + std::to_string(i);
    GgufKeyValue kv;
    RETURN_IF_ERROR(ReadString(&kv.key, label + " key", 65535));
    if (kv.key.empty()) return DataLossError(label + ": empty key " + At(start));
    label += " ('" + kv.key + "')";
    if (file->metadata_index_.count(kv.key)) {
      return DataLossError(label + ": duplicate key " + At(start));
    }
    GgufValueType type = GgufValueType::kUint8;
    RETURN_IF_ERROR(ReadValueType(&type, label));
    RETURN_IF_ERROR(ReadValue(type, &kv.value, label, 0));
    file->metadata_index_.emplace(kv.key, file->metadata_.size());
    file->metadata_.push_back(std::move(kv));
  }
  return Status::Ok();
}

Status GgufParser::ReadTensorInfos(GgufFile* file, uint64_t num_tensors) {
  // Smallest tensor info: name length 8 + 1 byte name + n_dims 4 + one dim 8 + type 4 + offset 8.
  if (num_tensors > remaining() / 33) {
    return DataLossError("header claims " + std::to_string(num_tensors) +
                         " tensors, more than the " + std::to_string(remaining()) +
                         " remaining bytes can describe");
  }
  file->tensors_.reserve(num_tensors);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    uint64_t start = pos_;
    std::string label = "tensor " + std::to_string(i);
    GgufTensorInfo info;
    RETURN_IF_ERROR(ReadString(&info.name, label + " name", kGgufMaxTensorNameBytes));
    if (info.name.empty()) return DataLossError(label + ": empty name " + At(start));
    label = "tensor '" + info.name + "'";
    if (file->tensor_index_.count(info.name)) {
      return DataLossError(label + ": duplicate tensor name " + At(start));
    }
    uint32_t num_dims = 0;
    RETURN_IF_ERROR(Read(&num_dims, label + " dimension count"));
    if (num_dims == 0 || num_dims > kGgufMaxDims) {
      return DataLossError(label + ": " + std::to_string(num_dims) +
                           " dimensions (must be 1 to " + std::to_string(kGgufMaxDims) + ")");
    }
    int64_t num_elements = 1;
    for (uint32_t d = 0; d < num_dims; ++d) {
      uint64_t dim = 0;
      RETURN_IF_ERROR(Read(&dim, label + " dimension " + std::to_string(d)));
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLossError(label + ": dimension " + std::to_string(d) + " = " +
                             std::to_string(dim) + " is out of range");
      }
      int64_t ne = static_cast<int64_t>(dim);
      if (ne != 0 && num_elements > std::numeric_limits<int64_t>::max() / ne) {
        return DataLossError(label + ": element count overflows 64 bits");
      }
      num_elements *= ne;
      info.shape.push_back(ne);
    }
    uint32_t type_id = 0;
    RETURN_IF_ERROR(Read(&type_id, label + " type"));
    const GgmlTypeTraits* traits = FindGgmlTypeTraits(type_id);
    if (traits == nullptr) {
      return DataLossError(label + ": " + DescribeUnknownGgmlType(type_id));
    }
    info.type = static_cast<GgmlType>(type_id);
    if (info.shape[0] % traits->block_size != 0) {
      return DataLossError(label + ": row length " + std::to_string(info.shape[0]) +
                           " is not a multiple of the " + traits->name + " block size " +
                           std::to_string(traits->block_size));
    }
    // num_elements fits int64 and type_size <= 292, block_size >= 1: the product fits uint64.
    info.num_bytes = static_cast<uint64_t>(num_elements / traits->block_size) *
                     static_cast<uint64_t>(traits->type_size);
    RETURN_IF_ERROR(Read(&info.offset, label + " offset"));
    file->tensor_index_.emplace(info.name, file->tensors_.size());
    file->tensors_.push_back(std::move(info));
  }
  return Status::Ok();
}

Status GgufParser::ReadAlignment(GgufFile* file) {
  const GgufValue* value = file->Find("general.alignment");
  if (value == nullptr) return Status::Ok();
  std::optional<uint64_t> alignment = value->AsUint();
  if (!alignment) {
    return DataLossError(std::string("general.alignment has type ") +
                         GgufValueTypeName(value->type()) + ", expected uint32");
  }
  if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0 || *alignment > (1u << 30)) {
    return DataLossError("general.alignment = " + std::to_string(*alignment) +
                         " is not a power of two between 1 and 2^30");
  }
  file->alignment_ = static_cast<uint32_t>(*alignment);
  return Status::Ok();
}

Status GgufParser::PlaceTensors(GgufFile* file) {
  uint64_t alignment = file->alignment_;
  uint64_t data_offset = (pos_ + alignment - 1) / alignment * alignment;
  file->data_offset_ = data_offset;
  uint64_t data_size = data_offset <= size_ ? size_ - data_offset : 0;
  for (GgufTensorInfo& info : file->tensors_) {
    std::string label = "tensor '" + info.name + "'";
    if (info.offset % alignment != 0) {
      return DataLossError(label + ": data offset " + std::to_string(info.offset) +
                           " is not a multiple of the alignment " + std::to_string(alignment));
    }
    if (info.offset > data_size || info.num_bytes > data_size - info.offset) {
      return DataLossError(label + ": data [" + std::to_string(info.offset) + ", +" +
                           std::to_string(info.num_bytes) + ") runs past the end of the data " +
                           "section (" + std::to_string(data_size) + " bytes)");
    }
    info.data = data_ + data_offset + info.offset;
  }
  // No two tensors may share bytes.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& info : file->tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* prev = by_offset[i - 1];
    if (prev->num_bytes > 0 && prev->offset + prev->num_bytes > by_offset[i]->offset) {
      return DataLossError("tensors '" + prev->name + "' and '" + by_offset[i]->name +
                           "' overlap: [" + std::to_string(prev->offset) + ", +" +
                           std::to_string(prev->num_bytes) + ") and offset " +
                           std::to_string(by_offset[i]->offset));
    }
  }
  return Status::Ok();
}

Status GgufParser::Run(GgufFile* file) {
  if (size_ == 0) return DataLossError("file is empty");
  uint32_t magic = 0;
  RETURN_IF_ERROR(Read(&magic, "magic"));
  if (magic != kGgufMagic) {
    return DataLossError("not a GGUF file: the first 4 bytes are not \"GGUF\"");
  }
  uint32_t version = 0;
  RETURN_IF_ERROR(Read(&version, "version"));
  if ((version & 0xFFFF) == 0 && version != 0) {
    return UnimplementedError("big-endian GGUF files are not supported (version field " +
                              std::to_string(version) + " reads as byte-swapped)");
  }
  if (version == 1) {
    return UnimplementedError("GGUF version 1 is not supported (versions 2 and 3 are)");
  }
  if (version != 2 && version != 3) {
    return UnimplementedError("unknown GGUF version " + std::to_string(version) +
                              " (versions 2 and 3 are supported)");
  }
  file->version_ = version;
  uint64_t num_tensors = 0, num_kv = 0;
  RETURN_IF_ERROR(Read(&num_tensors, "tensor count"));
  RETURN_IF_ERROR(Read(&num_kv, "metadata count"));
  RETURN_IF_ERROR(ReadMetadata(file, num_kv));
  RETURN_IF_ERROR(ReadAlignment(file));
  RETURN_IF_ERROR(ReadTensorInfos(file, num_tensors));
  return PlaceTensors(file);
}

int64_t GgufTensorInfo::num_elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::string GgufTensorInfo::ShapeString() const {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

StatusOr<GgufFile> GgufFile::Parse(const uint8_t* data, size_t size) {
  GgufFile file;
  file.base_ = data;
  file.size_ = size;
  GgufParser parser(data, size);
  RETURN_IF_ERROR(parser.Run(&file));
  return file;
}

StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  StatusOr<MappedFile> mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  StatusOr<GgufFile> file = Parse(mapping->data(), mapping->size());
  if (!file.ok()) return file.status().WithContext(path);
  file->mapping_ = std::move(mapping).value();  // the mapped address does not move
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

namespace {

Status Missing(std::string_view key) {
  return NotFoundError("metadata key '" + std::string(key) + "' is missing");
}

Status WrongType(std::string_view key, const GgufValue& value, const char* expected) {
  return InvalidArgumentError("metadata key '" + std::string(key) + "' is a " +
                              GgufValueTypeName(value.type()) + ", expected " + expected);
}

}  // namespace

StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) return Missing(key);
  if (auto v = value->AsUint()) return *v;
  return WrongType(key, *value, "an unsigned integer");
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) return Missing(key);
  if (auto v = value->AsFloat()) return *v;
  return WrongType(key, *value, "a float");
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) return Missing(key);
  if (auto v = value->AsBool()) return *v;
  return WrongType(key, *value, "a bool");
}

StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) return Missing(key);
  if (const std::string* v = value->AsString()) return *v;
  return WrongType(key, *value, "a string");
}

StatusOr<const GgufArray*> GgufFile::GetArray(std::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) return Missing(key);
  if (const GgufArray* v = value->AsArray()) return v;
  return WrongType(key, *value, "an array");
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tachyon
