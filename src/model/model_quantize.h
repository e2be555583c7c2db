// QuantizeModel: rewrites a GGUF model with its weight matrices in another
// type (`tachyon model quantize`). Metadata is copied (general.file_type and
// general.quantization_version updated); 1-D tensors stay F32; rows are
// dequantized from any type Tachyon reads and requantized chunk by chunk on
// the thread pool, so memory stays small whatever the model size.
#pragma once

#include <string>

#include "base/status.h"
#include "model/quant_scheme.h"

namespace tachyon {

struct QuantizeResult {
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  int num_tensors = 0;
  int num_requantized = 0;
};

StatusOr<QuantizeResult> QuantizeModel(const std::string& in_path, const std::string& out_path,
                                       const QuantScheme& scheme, int num_threads);

}  // namespace tachyon
