#include "model/model_summary.h"

namespace tachyon {

ModelSummary SummarizeModel(const GgufFile& file) {
  ModelSummary s;
  if (auto v = file.GetString("general.architecture"); v.ok()) s.architecture = *v;
  if (auto v = file.GetString("general.name"); v.ok()) s.name = *v;
  if (auto v = file.GetUint("general.file_type"); v.ok()) s.file_type = static_cast<uint32_t>(*v);
  for (const GgufTensorInfo& t : file.tensors()) {
    s.num_parameters += t.num_elements();
    s.tensor_bytes += t.num_bytes;
    s.tensors_by_type[GgmlTypeName(t.type)]++;
  }
  auto uint_key = [&](const std::string& suffix) -> std::optional<uint64_t> {
    auto v = file.GetUint(s.architecture + "." + suffix);
    return v.ok() ? std::optional<uint64_t>(*v) : std::nullopt;
  };
  auto float_key = [&](const std::string& suffix) -> std::optional<double> {
    auto v = file.GetFloat(s.architecture + "." + suffix);
    return v.ok() ? std::optional<double>(*v) : std::nullopt;
  };
  if (!s.architecture.empty()) {
    s.context_length = uint_key("context_length");
    s.embedding_length = uint_key("embedding_length");
    s.block_count = uint_key("block_count");
    s.feed_forward_length = uint_key("feed_forward_length");
    s.head_count = uint_key("attention.head_count");
    s.head_count_kv = uint_key("attention.head_count_kv");
    s.rope_dimension_count = uint_key("rope.dimension_count");
    s.rope_freq_base = float_key("rope.freq_base");
    s.rms_norm_eps = float_key("attention.layer_norm_rms_epsilon");
  }
  if (auto v = file.GetString("tokenizer.ggml.model"); v.ok()) s.tokenizer_model = *v;
  if (auto v = file.GetString("tokenizer.ggml.pre"); v.ok()) s.tokenizer_pre = *v;
  if (auto v = file.GetArray("tokenizer.ggml.tokens"); v.ok()) {
    s.vocab_size = static_cast<int64_t>((*v)->size());
  }
  return s;
}

std::string FileTypeName(uint32_t file_type) {
  // llama_ftype values (llama.h).
  switch (file_type) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 19: return "IQ2_XXS";
    case 20: return "IQ2_XS";
    case 21: return "Q2_K_S";
    case 22: return "IQ3_XS";
    case 23: return "IQ3_XXS";
    case 24: return "IQ1_S";
    case 25: return "IQ4_NL";
    case 26: return "IQ3_S";
    case 27: return "IQ3_M";
    case 28: return "IQ2_S";
    case 29: return "IQ2_M";
    case 30: return "IQ4_XS";
    case 31: return "IQ1_M";
    case 32: return "BF16";
    case 36: return "TQ1_0";
    case 37: return "TQ2_0";
    case 38: return "MXFP4_MOE";
    default: return "";
  }
}

}  // namespace tachyon
