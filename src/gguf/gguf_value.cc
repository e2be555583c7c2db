#include "gguf/gguf_value.h"

#include <cstdio>
#include <limits>

namespace tachyon {

const char* GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "invalid";
}

namespace {

template <size_t I = 0>
GgufArray::Storage EmptyStorage(size_t index) {
  if constexpr (I < std::variant_size_v<GgufArray::Storage>) {
    if (index == I) return GgufArray::Storage(std::in_place_index<I>);
    return EmptyStorage<I + 1>(index);
  } else {
    return GgufArray::Storage();
  }
}

}  // namespace

GgufArray GgufArray::Empty(GgufValueType element_type) {
  GgufArray array;
  array.storage_ = EmptyStorage(static_cast<size_t>(element_type));
  return array;
}

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, storage_);
}

GgufValue GgufArray::at(size_t i) const {
  return std::visit(
      [i](const auto& v) -> GgufValue {
        using T = typename std::decay_t<decltype(v)>::value_type;
        return GgufValue(static_cast<T>(v.at(i)));
      },
      storage_);
}

bool GgufArray::operator==(const GgufArray& other) const { return storage_ == other.storage_; }

std::optional<uint64_t> GgufValue::AsUint() const {
  return std::visit(
      [](const auto& v) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_signed_v<T>) {
            if (v < 0) return std::nullopt;
          }
          return static_cast<uint64_t>(v);
        }
        return std::nullopt;
      },
      value_);
}

std::optional<int64_t> GgufValue::AsInt() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(v);
        }
        return std::nullopt;
      },
      value_);
}

std::optional<double> GgufValue::AsFloat() const {
  if (const float* f = std::get_if<float>(&value_)) return *f;
  if (const double* d = std::get_if<double>(&value_)) return *d;
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (const bool* b = std::get_if<bool>(&value_)) return *b;
  return std::nullopt;
}

namespace {

std::string QuoteShort(const std::string& s, size_t max_bytes) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (n++ == max_bytes) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string GgufValue::ToDisplayString() const {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return QuoteShort(v, 60);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          if (v.size() > 8 || v.element_type() == GgufValueType::kArray) {
            std::string summary = "[";
            summary += GgufValueTypeName(v.element_type());
            summary += " x " + std::to_string(v.size()) + "]";
            return summary;
          }
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) {
            if (i > 0) out += ", ";
            out += v.at(i).ToDisplayString();
          }
          return out + "]";
        } else if constexpr (std::is_floating_point_v<T>) {
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
          return buf;
        } else {
          return std::to_string(v);
        }
      },
      value_);
}

}  // namespace tachyon
