#include "model/quant_scheme.h"

#include <cctype>

#include "base/check.h"

namespace tachyon {
namespace {

// llama.cpp's rule for the layers that get more bits in Q4_K_M and Q5_K_M.
bool UseMoreBits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A row length the type's blocks do not divide: llama.cpp's fallback type, and F16
// when that does not fit either.
GgmlType WithFallback(GgmlType type, int64_t row_length) {
  if (row_length % GetGgmlTypeTraits(type).block_size != 0) {
    switch (type) {
      case GgmlType::kQ2_K: case GgmlType::kQ3_K: case GgmlType::kIQ4_XS: type = GgmlType::kIQ4_NL; break;
      case GgmlType::kQ4_K: type = GgmlType::kQ5_0; break;
      case GgmlType::kQ5_K: type = GgmlType::kQ5_1; break;
      case GgmlType::kQ6_K: type = GgmlType::kQ8_0; break;
      default: break;
    }
  }
  if (row_length % GetGgmlTypeTraits(type).block_size != 0) type = GgmlType::kF16;
  return type;
}

struct Known {
  const char* name;
  GgmlType base;
  QuantMix mix;
  uint32_t file_type;  // llama.cpp's llama_ftype
};

constexpr Known kSchemes[] = {
    {"f32", GgmlType::kF32, QuantMix::kPure, 0},        {"f16", GgmlType::kF16, QuantMix::kPure, 1},
    {"bf16", GgmlType::kBF16, QuantMix::kPure, 32},     {"q8_0", GgmlType::kQ8_0, QuantMix::kPure, 7},
    {"q4_0", GgmlType::kQ4_0, QuantMix::kPure, 2},      {"q4_1", GgmlType::kQ4_1, QuantMix::kPure, 3},
    {"q5_0", GgmlType::kQ5_0, QuantMix::kPure, 8},      {"q5_1", GgmlType::kQ5_1, QuantMix::kPure, 9},
    {"iq4_nl", GgmlType::kIQ4_NL, QuantMix::kPure, 25}, {"iq4_xs", GgmlType::kIQ4_XS, QuantMix::kPure, 30},
    {"q4_k", GgmlType::kQ4_K, QuantMix::kPure, 14},     {"q2_k", GgmlType::kQ2_K, QuantMix::kQ2_K, 10},
    {"q3_k_s", GgmlType::kQ3_K, QuantMix::kQ3_K_S, 11}, {"q3_k_m", GgmlType::kQ3_K, QuantMix::kQ3_K_M, 12},
    {"q3_k_l", GgmlType::kQ3_K, QuantMix::kQ3_K_L, 13}, {"q4_k_s", GgmlType::kQ4_K, QuantMix::kQ4_K_S, 14},
    {"q4_k_m", GgmlType::kQ4_K, QuantMix::kQ4_K_M, 15}, {"q5_k_s", GgmlType::kQ5_K, QuantMix::kQ5_K_S, 16},
    {"q5_k_m", GgmlType::kQ5_K, QuantMix::kQ5_K_M, 17}, {"q6_k", GgmlType::kQ6_K, QuantMix::kQ6_K, 18},
};

// The type of a matrix under a mix, before the fallback (llama_tensor_get_type).
GgmlType MixType(QuantMix mix, GgmlType type, const TensorRole& role) {
  using M = QuantMix;
  const int i = role.layer, n = role.num_layers;
  if (role.is_output) return type == GgmlType::kQ8_0 ? type : GgmlType::kQ6_K;
  if (EndsWith(role.name, "attn_v.weight")) {
    switch (mix) {
      case M::kQ2_K: return role.gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
      case M::kQ3_K_M: return i < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      case M::kQ3_K_L: return GgmlType::kQ5_K;
      case M::kQ4_K_M: case M::kQ5_K_M: return UseMoreBits(i, n) ? GgmlType::kQ6_K : type;
      case M::kQ4_K_S: return i < 4 ? GgmlType::kQ5_K : type;
      default: return type;
    }
  }
  if (EndsWith(role.name, "ffn_down.weight")) {
    switch (mix) {
      case M::kQ2_K: return GgmlType::kQ3_K;
      case M::kQ3_K_M: return i < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      case M::kQ3_K_L: return GgmlType::kQ5_K;
      case M::kQ4_K_M: case M::kQ5_K_M: return UseMoreBits(i, n) ? GgmlType::kQ6_K : type;
      case M::kQ4_K_S: return i < n / 8 ? GgmlType::kQ5_K : type;
      default: return type;
    }
  }
  if (EndsWith(role.name, "attn_output.weight")) {
    switch (mix) {
      case M::kQ2_K: return GgmlType::kQ3_K;
      case M::kQ3_K_M: return GgmlType::kQ4_K;
      case M::kQ3_K_L: return GgmlType::kQ5_K;
      default: return type;
    }
  }
  return type;
}

}  // namespace

StatusOr<QuantScheme> ParseQuantScheme(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string names;
  for (const Known& k : kSchemes) {
    if (lower == k.name) return QuantScheme{k.name, k.base, k.mix, k.file_type};
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  }
  return InvalidArgumentError("unknown type '" + std::string(name) + "' (" + names + ")");
}

QuantScheme PureScheme(GgmlType type) {
  for (const Known& k : kSchemes) {
    if (k.base == type && (k.mix == QuantMix::kPure || k.mix == QuantMix::kQ6_K)) {
      return QuantScheme{k.name, k.base, k.mix, k.file_type};
    }
  }
  CHECK(false) << "no pure scheme for " << GgmlTypeName(type);
  return {};
}

int LayerOfTensor(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) layer = layer * 10 + (name[i++] - '0');
  return layer;
}

GgmlType TensorTypeFor(const QuantScheme& scheme, const TensorRole& role) {
  if (role.num_dims < 2) return GgmlType::kF32;
  // Encoder tables added to every token as floats (llama.cpp adds a view of
  // token_types' first row with ggml_add, which takes no quantized operand).
  if (role.name == "token_types.weight" || role.name == "position_embd.weight") return GgmlType::kF32;
  GgmlType type = scheme.base;
  if (scheme.mix != QuantMix::kPure) {
    type = MixType(scheme.mix, type, role);
    // An output matrix whose rows are not a multiple of 256 is Q8_0 (llama.cpp).
    if (role.is_output && role.row_length % 256 != 0) type = GgmlType::kQ8_0;
  }
  return WithFallback(type, role.row_length);
}

}  // namespace tachyon
