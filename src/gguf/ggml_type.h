// The ggml tensor types a GGUF file can name, with the block layout of each.
//
// A tensor row of ne0 elements of type T takes ne0 / block_size(T) blocks of
// type_size(T) bytes; ne0 must be a multiple of block_size. Sizes follow the
// block structs of ggml (ggml-common.h) so that any real file's tensor table
// loads, even for types the engine cannot compute with yet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tachyon {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  // 4, 5: Q4_2, Q4_3, removed from ggml
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  // 31..33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8, removed from GGUF files
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  // 36..38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8, removed from GGUF files
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;     // as llama.cpp prints it: "F32", "Q4_K", "IQ2_XXS"
  int64_t block_size;   // elements per block
  int64_t type_size;    // bytes per block
  bool is_quantized;
};

// Traits of a type id, or nullptr for an id that is unknown or was removed.
const GgmlTypeTraits* FindGgmlTypeTraits(uint32_t type_id);

// Traits of a known type (CHECKs that it is known).
const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type);

inline const char* GgmlTypeName(GgmlType type) { return GetGgmlTypeTraits(type).name; }

// Why a type id cannot be read: "removed from ggml" or "unknown". Empty if known.
std::string DescribeUnknownGgmlType(uint32_t type_id);

// Parses a type name, case-insensitive ("q4_0", "F16", "bf16").
StatusOr<GgmlType> ParseGgmlType(std::string_view name);

// Bytes of a row of ne0 elements; nullopt if ne0 is not a multiple of the block size.
std::optional<uint64_t> GgmlRowBytes(GgmlType type, int64_t ne0);

}  // namespace tachyon
