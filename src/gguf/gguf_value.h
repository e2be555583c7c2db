// GgufValue: one metadata value of a GGUF file, scalar or array.
//
// The alternative index of each variant is the GGUF value type id (GGUF spec,
// gguf_metadata_value_type), so type() is just index(). A GgufArray stores its
// elements as one typed vector (std::vector<float> for a float32 array), so a
// tokenizer reads 128k scores without a copy per element, an empty array keeps
// its element type, and arrays may nest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace tachyon {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kNumGgufValueTypes = 13;

// "uint32", "string", "array", ...
const char* GgufValueTypeName(GgufValueType type);

namespace internal {
template <typename T, typename V>
struct IsVariantAlternative;
template <typename T, typename... Ts>
struct IsVariantAlternative<T, std::variant<Ts...>>
    : std::bool_constant<(std::is_same_v<T, Ts> || ...)> {};
}  // namespace internal

class GgufValue;

class GgufArray {
 public:
  using Storage =
      std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                   std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                   std::vector<float>, std::vector<bool>, std::vector<std::string>,
                   std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
                   std::vector<double>>;

  GgufArray() = default;  // an empty uint8 array
  template <typename T>
    requires internal::IsVariantAlternative<std::vector<T>, Storage>::value
  explicit GgufArray(std::vector<T> elements) : storage_(std::move(elements)) {}
  // An empty array of `element_type`.
  static GgufArray Empty(GgufValueType element_type);

  GgufValueType element_type() const { return static_cast<GgufValueType>(storage_.index()); }
  size_t size() const;
  bool empty() const { return size() == 0; }

  // The elements as a typed vector, or nullptr if the element type is not T.
  template <typename T>
  const std::vector<T>* get() const {
    return std::get_if<std::vector<T>>(&storage_);
  }
  const Storage& storage() const { return storage_; }

  // A copy of element i as a value (for display and generic code; use get<T>() in loops).
  GgufValue at(size_t i) const;

  bool operator==(const GgufArray& other) const;

 private:
  Storage storage_;
};

class GgufValue {
 public:
  using Variant = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;

  GgufValue() = default;
  // Only the exact alternative types convert, so GgufValue(uint32_t{5}) is a uint32.
  template <typename T>
    requires internal::IsVariantAlternative<std::decay_t<T>, Variant>::value
  GgufValue(T&& value) : value_(std::forward<T>(value)) {}  // NOLINT: implicit by design
  GgufValue(const char* s) : value_(std::string(s)) {}      // NOLINT: implicit by design

  GgufValueType type() const { return static_cast<GgufValueType>(value_.index()); }
  const Variant& variant() const { return value_; }

  // Any integer type whose value fits (bool is not an integer here).
  std::optional<uint64_t> AsUint() const;
  std::optional<int64_t> AsInt() const;
  // float32 or float64.
  std::optional<double> AsFloat() const;
  std::optional<bool> AsBool() const;
  const std::string* AsString() const { return std::get_if<std::string>(&value_); }
  const GgufArray* AsArray() const { return std::get_if<GgufArray>(&value_); }

  // Short display form: scalars as text, strings quoted (cut at 60 bytes),
  // arrays as "[string x 32000]" or their first few elements.
  std::string ToDisplayString() const;

  bool operator==(const GgufValue& other) const { return value_ == other.value_; }

 private:
  Variant value_;
};

}  // namespace tachyon
