// libFuzzer target: GgufFile::Parse on arbitrary bytes must return a Status,
// never crash, read out of bounds (ASan) or hit undefined behaviour (UBSan).
// When a file parses, every tensor byte and every metadata value is read, as
// `tachyon model info` and the model loader would.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf_file.h"
#include "model/model_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tachyon::StatusOr<tachyon::GgufFile> file = tachyon::GgufFile::Parse(data, size);
  if (!file.ok()) return 0;
  uint8_t sink = 0;
  for (const tachyon::GgufTensorInfo& tensor : file->tensors()) {
    for (uint64_t i = 0; i < tensor.num_bytes; i += 64) sink ^= tensor.data[i];
    if (tensor.num_bytes > 0) sink ^= tensor.data[tensor.num_bytes - 1];
  }
  for (const tachyon::GgufKeyValue& kv : file->metadata()) {
    sink ^= static_cast<uint8_t>(kv.value.ToDisplayString().size());
  }
  tachyon::ModelSummary summary = tachyon::SummarizeModel(*file);
  sink ^= static_cast<uint8_t>(summary.num_parameters);
  // Keep the reads from being optimized away.
  asm volatile("" : : "r"(sink));
  return 0;
}
