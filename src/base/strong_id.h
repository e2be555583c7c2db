// StrongId<Tag>: an integer id that does not mix with other ids or plain ints.
//   using TokenId = StrongId<struct TokenIdTag>;
//   TokenId t{42}; t.value() == 42; TokenId == int does not compile.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace tachyon {

template <typename Tag, typename T = int32_t>
class StrongId {
 public:
  using ValueType = T;
  constexpr StrongId() = default;
  constexpr explicit StrongId(T value) : value_(value) {}
  constexpr T value() const { return value_; }
  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  T value_ = 0;
};

// A token of a model's vocabulary: an index into tokenizer.ggml.tokens.
using TokenId = StrongId<struct TokenIdTag>;
// A sequence (one request's state) in the engine.
using SeqId = StrongId<struct SeqIdTag, int64_t>;

}  // namespace tachyon

template <typename Tag, typename T>
struct std::hash<tachyon::StrongId<Tag, T>> {
  size_t operator()(const tachyon::StrongId<Tag, T>& id) const noexcept {
    return std::hash<T>()(id.value());
  }
};
