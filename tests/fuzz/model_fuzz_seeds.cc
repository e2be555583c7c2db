// Writes the seed corpus of model_load_fuzz: whole models of a micro llama, qwen2,
// qwen3, qwen3moe, Mixtral-style llama, gemma2, gemma3 and phi3 shape (a few tens
// of KB each, the built-in byte vocabulary), in F32 and F16; the qwen3 and gemma3
// ones with heads wider than n_embd / n_head (attention.key_length), the mixtures
// with their expert keys, the gemmas with windows and soft-caps, phi3 with LongRoPE
// keys and tables and a partial rotary.
#include <cstdio>
#include <string>

#include "model/model_gen.h"

int main(int argc, char** argv) {
  using namespace tachyon;
  if (argc != 2) {
    std::fprintf(stderr, "usage: model_fuzz_seeds DIR\n");
    return 2;
  }
  int n = 0;
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3moe", "mixtral", "gemma2", "gemma3", "phi3"}) {
    const std::string a = arch;
    ModelShape shape{.name = "micro", .description = "fuzz seed", .architecture = a == "mixtral" ? "llama" : a,
                     .n_embd = 32, .n_layer = 1, .n_head = 2, .n_head_kv = 1, .n_ff = 64, .context_length = 64};
    shape.qkv_bias = a == "qwen2";
    if (a == "qwen3" || a == "qwen3moe" || a == "gemma3") shape.key_length = 32;
    if (a == "gemma2" || a == "gemma3") {
      shape.sliding_window = 4;
      shape.swa_period = 2;
      shape.attn_softcap = a == "gemma2" ? 50.0f : 0.0f;
      shape.final_softcap = 30.0f;
      shape.rope_theta_swa = 10000.0f;
    }
    if (a == "phi3") {
      shape.rope_dim = 12;
      shape.rope_original_context = 16;
      shape.rope_attn_factor = 1.2f;
    }
    if (a == "qwen3moe" || a == "mixtral") {
      shape.n_expert = 4;
      shape.n_expert_used = 2;
      shape.n_ff_exp = a == "qwen3moe" ? 32 : 0;
    }
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
      const std::string path = std::string(argv[1]) + "/seed" + std::to_string(n++) + ".gguf";
      StatusOr<ModelGenResult> r = GenerateRandomModel({.shape = &shape, .scheme = PureScheme(type), .out_path = path});
      if (!r.ok()) {
        std::fprintf(stderr, "model_fuzz_seeds: %s\n", r.status().ToString().c_str());
        return 1;
      }
    }
  }
  return 0;
}
