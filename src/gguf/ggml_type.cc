#include "gguf/ggml_type.h"

#include <array>
#include <cctype>

namespace tachyon {
namespace {

constexpr int kNumTypeIds = 40;

// Indexed by type id; name == nullptr marks an id with no type.
// Block sizes and byte sizes from ggml-common.h (QK_K = 256).
constexpr std::array<GgmlTypeTraits, kNumTypeIds> kTraits = [] {
  std::array<GgmlTypeTraits, kNumTypeIds> t{};
  t[0] = {"F32", 1, 4, false};
  t[1] = {"F16", 1, 2, false};
  t[2] = {"Q4_0", 32, 2 + 16, true};
  t[3] = {"Q4_1", 32, 2 + 2 + 16, true};
  t[6] = {"Q5_0", 32, 2 + 4 + 16, true};
  t[7] = {"Q5_1", 32, 2 + 2 + 4 + 16, true};
  t[8] = {"Q8_0", 32, 2 + 32, true};
  t[9] = {"Q8_1", 32, 2 + 2 + 32, true};
  t[10] = {"Q2_K", 256, 16 + 64 + 2 + 2, true};
  t[11] = {"Q3_K", 256, 32 + 64 + 12 + 2, true};
  t[12] = {"Q4_K", 256, 2 + 2 + 12 + 128, true};
  t[13] = {"Q5_K", 256, 2 + 2 + 12 + 32 + 128, true};
  t[14] = {"Q6_K", 256, 128 + 64 + 16 + 2, true};
  t[15] = {"Q8_K", 256, 4 + 256 + 32, true};
  t[16] = {"IQ2_XXS", 256, 2 + 64, true};
  t[17] = {"IQ2_XS", 256, 2 + 64 + 8, true};
  t[18] = {"IQ3_XXS", 256, 2 + 96, true};
  t[19] = {"IQ1_S", 256, 2 + 32 + 16, true};
  t[20] = {"IQ4_NL", 32, 2 + 16, true};
  t[21] = {"IQ3_S", 256, 2 + 64 + 8 + 32 + 4, true};
  t[22] = {"IQ2_S", 256, 2 + 64 + 8 + 8, true};
  t[23] = {"IQ4_XS", 256, 2 + 2 + 4 + 128, true};
  t[24] = {"I8", 1, 1, false};
  t[25] = {"I16", 1, 2, false};
  t[26] = {"I32", 1, 4, false};
  t[27] = {"I64", 1, 8, false};
  t[28] = {"F64", 1, 8, false};
  t[29] = {"IQ1_M", 256, 32 + 16 + 8, true};
  t[30] = {"BF16", 1, 2, false};
  t[34] = {"TQ1_0", 256, 48 + 4 + 2, true};
  t[35] = {"TQ2_0", 256, 64 + 2, true};
  t[39] = {"MXFP4", 32, 1 + 16, true};
  return t;
}();

}  // namespace

const GgmlTypeTraits* FindGgmlTypeTraits(uint32_t type_id) {
  if (type_id >= kNumTypeIds || kTraits[type_id].name == nullptr) return nullptr;
  return &kTraits[type_id];
}

const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type) {
  const GgmlTypeTraits* traits = FindGgmlTypeTraits(static_cast<uint32_t>(type));
  CHECK(traits != nullptr) << "no traits for ggml type id " << static_cast<uint32_t>(type);
  return *traits;
}

std::string DescribeUnknownGgmlType(uint32_t type_id) {
  if (FindGgmlTypeTraits(type_id) != nullptr) return "";
  switch (type_id) {
    case 4: return "ggml type id 4 (Q4_2) was removed from ggml";
    case 5: return "ggml type id 5 (Q4_3) was removed from ggml";
    case 31: case 32: case 33:
      return "ggml type id " + std::to_string(type_id) +
             " (Q4_0_4_4/Q4_0_4_8/Q4_0_8_8, repacked at load time) was removed from GGUF files";
    case 36: case 37: case 38:
      return "ggml type id " + std::to_string(type_id) +
             " (IQ4_NL_4_4/4_8/8_8, repacked at load time) was removed from GGUF files";
    default: return "unknown ggml type id " + std::to_string(type_id);
  }
}

StatusOr<GgmlType> ParseGgmlType(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string known;
  for (uint32_t id = 0; id < kNumTypeIds; ++id) {
    if (kTraits[id].name == nullptr) continue;
    if (upper == kTraits[id].name) return static_cast<GgmlType>(id);
    known += known.empty() ? "" : ", ";
    known += kTraits[id].name;
  }
  return InvalidArgumentError("unknown tensor type '" + std::string(name) + "' (known: " + known + ")");
}

std::optional<uint64_t> GgmlRowBytes(GgmlType type, int64_t ne0) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  if (ne0 < 0 || ne0 % traits.block_size != 0) return std::nullopt;
  return static_cast<uint64_t>(ne0 / traits.block_size) * static_cast<uint64_t>(traits.type_size);
}

}  // namespace tachyon
