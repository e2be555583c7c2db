#include "model/model_quantize.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/ref/quantize.h"

namespace tachyon {

StatusOr<QuantizeResult> QuantizeModel(const std::string& in_path, const std::string& out_path,
                                       const QuantScheme& scheme, int num_threads) {
  if (in_path == out_path) return InvalidArgumentError("the output must be another file than the input");
  ASSIGN_OR_RETURN(GgufFile in, GgufFile::Open(in_path));
  const bool has_output = in.FindTensor("output.weight") != nullptr;
  int num_layers = 0, gqa = 1;
  if (auto arch = in.GetString("general.architecture"); arch.ok()) {
    if (auto n = in.GetUint(*arch + ".block_count"); n.ok()) num_layers = static_cast<int>(*n);
    auto heads = in.GetUint(*arch + ".attention.head_count");
    auto kv_heads = in.GetUint(*arch + ".attention.head_count_kv");
    if (heads.ok() && kv_heads.ok() && *kv_heads > 0) gqa = static_cast<int>(*heads / *kv_heads);
  }

  GgufWriter writer(in.alignment());
  for (const GgufKeyValue& kv : in.metadata()) {
    if (kv.key != "general.alignment") writer.SetMetadata(kv.key, kv.value);
  }
  writer.SetMetadata("general.file_type", GgufValue(scheme.file_type));
  writer.SetMetadata("general.quantization_version", GgufValue(uint32_t{2}));

  std::vector<GgmlType> targets;
  QuantizeResult result;
  for (const GgufTensorInfo& t : in.tensors()) {
    GgmlType target = t.type;
    // Only float or quantized weight matrices change; anything else is copied as is.
    if (t.shape.size() >= 2 && ref::CanQuantizeTo(t.type)) {
      const bool is_output = t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
      target = TensorTypeFor(scheme, {.name = t.name,
                                      .row_length = t.shape[0],
                                      .num_dims = static_cast<int>(t.shape.size()),
                                      .layer = LayerOfTensor(t.name),
                                      .num_layers = num_layers,
                                      .is_output = is_output,
                                      .gqa = gqa});
    } else if (t.shape.size() >= 2) {
      return UnimplementedError("tensor " + t.name + " has type " + GgmlTypeName(t.type) +
                                ", which Tachyon cannot read yet");
    }
    RETURN_IF_ERROR(writer.AddTensor(t.name, target, t.shape));
    targets.push_back(target);
  }
  RETURN_IF_ERROR(writer.Open(out_path));

  ThreadPool pool(num_threads);
  std::vector<uint8_t> chunk;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    ++result.num_tensors;
    if (targets[i] == t.type) {
      RETURN_IF_ERROR(writer.WriteTensorData(t.data, t.num_bytes));
      continue;
    }
    ++result.num_requantized;
    const int64_t ne0 = t.shape[0];
    const int64_t num_rows = t.num_elements() / ne0;
    const uint64_t in_row = *GgmlRowBytes(t.type, ne0), out_row = *GgmlRowBytes(targets[i], ne0);
    const int64_t rows_per_chunk = std::max<int64_t>(1, (16 << 20) / std::max<uint64_t>(out_row, 1));
    std::vector<std::vector<float>> scratch(pool.num_threads(), std::vector<float>(ne0));
    for (int64_t r0 = 0; r0 < num_rows; r0 += rows_per_chunk) {
      const int64_t r1 = std::min(num_rows, r0 + rows_per_chunk);
      chunk.resize((r1 - r0) * out_row);
      pool.ParallelFor(r1 - r0, [&](size_t begin, size_t end, int thread_idx) {
        float* row = scratch[thread_idx].data();
        for (size_t k = begin; k < end; ++k) {
          ref::DequantizeRow(t.type, t.data + (r0 + k) * in_row, row, ne0);
          ref::QuantizeRow(targets[i], row, chunk.data() + k * out_row, ne0);
        }
      });
      RETURN_IF_ERROR(writer.WriteTensorData(chunk.data(), chunk.size()));
    }
  }
  RETURN_IF_ERROR(writer.Close());
  result.input_bytes = in.file_size();
  struct stat st;
  if (::stat(out_path.c_str(), &st) == 0) result.output_bytes = static_cast<uint64_t>(st.st_size);
  return result;
}

}  // namespace tachyon
