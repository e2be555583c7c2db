// Writes the seed corpus of model_load_fuzz: whole models of a micro llama and
// qwen2 shape (a few tens of KB each, the built-in byte vocabulary), in F32 and F16.
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
  for (const char* arch : {"llama", "qwen2"}) {
    ModelShape shape{.name = "micro", .description = "fuzz seed", .architecture = arch, .n_embd = 32,
                     .n_layer = 1, .n_head = 2, .n_head_kv = 1, .n_ff = 64, .context_length = 64};
    shape.qkv_bias = std::string(arch) == "qwen2";
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
