#include "model/quant_scheme.h"

#include <cctype>

namespace tachyon {
namespace {

// llama.cpp's rule for the layers that get more bits in Q4_K_M.
bool UseMoreBits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A row length the type's blocks do not divide: k-quants fall back to a
// 32-block type, and anything that still does not fit to F16 (as llama.cpp).
GgmlType WithFallback(GgmlType type, int64_t row_length) {
  if ((type == GgmlType::kQ4_K || type == GgmlType::kQ6_K) && row_length % 256 != 0) {
    type = type == GgmlType::kQ6_K ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
  }
  if (row_length % GetGgmlTypeTraits(type).block_size != 0) type = GgmlType::kF16;
  return type;
}

}  // namespace

StatusOr<QuantScheme> ParseQuantScheme(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Known {
    const char* name;
    GgmlType base;
    bool k_mix;
    uint32_t file_type;
  };
  // file_type values are llama.cpp's llama_ftype.
  for (Known k : {Known{"f32", GgmlType::kF32, false, 0}, Known{"f16", GgmlType::kF16, false, 1},
                  Known{"bf16", GgmlType::kBF16, false, 32}, Known{"q8_0", GgmlType::kQ8_0, false, 7},
                  Known{"q4_0", GgmlType::kQ4_0, false, 2}, Known{"q4_k", GgmlType::kQ4_K, false, 14},
                  Known{"q6_k", GgmlType::kQ6_K, false, 18}, Known{"q4_k_m", GgmlType::kQ4_K, true, 15}}) {
    if (lower == k.name) return QuantScheme{k.name, k.base, k.k_mix, k.file_type};
  }
  return InvalidArgumentError("unknown type '" + std::string(name) +
                              "' (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m)");
}

QuantScheme PureScheme(GgmlType type) {
  std::string name = GgmlTypeName(type);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  StatusOr<QuantScheme> scheme = ParseQuantScheme(name);
  CHECK(scheme.ok() && !scheme->k_mix) << "no pure scheme for " << name;
  return *scheme;
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
  if (scheme.k_mix) {
    if (role.is_output) {
      type = GgmlType::kQ6_K;
    } else if ((EndsWith(role.name, "attn_v.weight") || EndsWith(role.name, "ffn_down.weight")) &&
               role.layer >= 0 && UseMoreBits(role.layer, role.num_layers)) {
      type = GgmlType::kQ6_K;
    }
  }
  return WithFallback(type, role.row_length);
}

}  // namespace tachyon
