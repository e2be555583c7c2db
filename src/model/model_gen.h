// Random-weight GGUF models of real shapes (`tachyon model gen`), like vLLM's
// dummy weights: the way to test and benchmark without downloading a model.
//
// Matrices are drawn from N(0, 0.02^2), norm weights are 1 (1 + N(0, 0.1^2) for a
// shape with random_norms), biases N(0, 0.02^2).
// Every row has its own seeded generator (from seed, tensor index and row), so
// the file is byte-identical for the same seed whatever the thread count, and
// rows are generated, quantized and streamed to disk in chunks: the F32 model
// is never held in memory. Tensor names and metadata keys are llama.cpp's for
// the `llama` (with experts: Mixtral), `qwen2`, `qwen3` and `qwen3moe` architectures,
// so other GGUF engines load the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "model/model_shape.h"
#include "model/quant_scheme.h"

namespace tachyon {

struct ModelGenOptions {
  const ModelShape* shape = nullptr;
  QuantScheme scheme = {"f16", GgmlType::kF16, QuantMix::kPure, 1};  // types of the matrices; 1-D tensors stay F32
  uint64_t seed = 0;
  std::string vocab_path;  // GGUF whose tokenizer.* keys are copied; empty: built-in byte vocab
  std::string out_path;
  int num_threads = 1;
};

struct ModelGenResult {
  int64_t num_parameters = 0;
  int64_t vocab_size = 0;
  uint64_t file_bytes = 0;
};

// The tokenizer.* entries of a GGUF file (vocab-only or a whole model).
StatusOr<std::vector<GgufKeyValue>> LoadVocabMetadata(const std::string& path);

// A byte-level BPE vocabulary ("gpt2" model, no merges): tokens 0..255 are the
// 256 bytes in GPT-2's byte-to-unicode spelling, 256 is <s> (BOS), 257 </s> (EOS).
std::vector<GgufKeyValue> BuiltinByteVocab();

StatusOr<ModelGenResult> GenerateRandomModel(const ModelGenOptions& options);

}  // namespace tachyon
