// ModelSummary: what `tachyon model info` reports about a GGUF file, read from
// its metadata and tensor table. Missing keys are left empty, never an error:
// info must describe any GGUF, including vocab-only files and unknown architectures.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "gguf/gguf_file.h"

namespace tachyon {

struct ModelSummary {
  std::string architecture;  // general.architecture
  std::string name;          // general.name
  std::optional<uint32_t> file_type;  // general.file_type (llama_ftype)
  int64_t num_parameters = 0;         // elements of all tensors
  uint64_t tensor_bytes = 0;
  // <arch>.* hyper-parameters, when present.
  std::optional<uint64_t> context_length, embedding_length, block_count, feed_forward_length,
      head_count, head_count_kv, rope_dimension_count;
  std::optional<double> rope_freq_base, rms_norm_eps;
  // Tokenizer.
  std::string tokenizer_model;  // tokenizer.ggml.model: llama (SPM), gpt2 (BPE), bert (WPM)
  std::string tokenizer_pre;    // tokenizer.ggml.pre
  int64_t vocab_size = 0;       // entries of tokenizer.ggml.tokens
  // Tensor count per type name ("Q4_0" -> 112).
  std::map<std::string, int64_t> tensors_by_type;
};

ModelSummary SummarizeModel(const GgufFile& file);

// "LLAMA_FTYPE" name of a general.file_type value ("Q4_K_M"), or "" if unknown.
std::string FileTypeName(uint32_t file_type);

}  // namespace tachyon
