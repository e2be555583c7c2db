#include "model/tensor_binding.h"

namespace tachyon {
namespace {

std::string Shape(std::initializer_list<int64_t> dims) {
  std::string out = "[";
  for (int64_t d : dims) out += (out.size() > 1 ? ", " : "") + std::to_string(d);
  return out + "]";
}

}  // namespace

Status BindMatrix(const GgufFile& file, const std::string& name, int64_t rows, int64_t cols, WeightMatrix* out) {
  const GgufTensorInfo* t = file.FindTensor(name);
  if (t == nullptr) return InvalidArgumentError("tensor " + name + " is missing");
  if (t->shape != std::vector<int64_t>{cols, rows}) {
    return InvalidArgumentError("tensor " + name + ": expected shape " + Shape({cols, rows}) + ", file has " +
                                t->ShapeString());
  }
  if (!IsMatMulType(t->type)) {
    std::string computed;
    for (uint32_t id = 0; id < 64; ++id) {
      if (FindGgmlTypeTraits(id) != nullptr && IsMatMulType(static_cast<GgmlType>(id))) {
        computed += (computed.empty() ? "" : ", ") + std::string(FindGgmlTypeTraits(id)->name);
      }
    }
    return UnimplementedError("tensor " + name + " has type " + GgmlTypeName(t->type) +
                              ", which Tachyon cannot compute with yet (" + computed + ")");
  }
  *out = {t->type, t->data, rows, cols};
  return Status::Ok();
}

Status BindMatrixRows(const GgufFile& file, const std::string& name, int64_t total_rows, int64_t cols,
                      int64_t first_row, int64_t rows, WeightMatrix* out) {
  WeightMatrix whole;
  RETURN_IF_ERROR(BindMatrix(file, name, total_rows, cols, &whole));
  const uint64_t row_bytes = *GgmlRowBytes(whole.type, cols);
  *out = {whole.type, whole.data + first_row * row_bytes, rows, cols};
  return Status::Ok();
}

Status BindExperts(const GgufFile& file, const std::string& name, int64_t n_expert, int64_t rows, int64_t cols,
                   std::vector<WeightMatrix>* out) {
  const GgufTensorInfo* t = file.FindTensor(name);
  if (t == nullptr) return InvalidArgumentError("tensor " + name + " is missing");
  if (t->shape != std::vector<int64_t>{cols, rows, n_expert}) {
    return InvalidArgumentError("tensor " + name + ": expected shape " + Shape({cols, rows, n_expert}) +
                                ", file has " + t->ShapeString());
  }
  if (!IsMatMulType(t->type)) {
    return UnimplementedError("tensor " + name + " has type " + GgmlTypeName(t->type) +
                              ", which Tachyon cannot compute with yet");
  }
  const uint64_t slice = *GgmlRowBytes(t->type, cols) * static_cast<uint64_t>(rows);
  out->clear();
  for (int64_t e = 0; e < n_expert; ++e) out->push_back({t->type, t->data + e * slice, rows, cols});
  return Status::Ok();
}

Status BindVector(const GgufFile& file, const std::string& name, int64_t n, const float** out, bool optional) {
  const GgufTensorInfo* t = file.FindTensor(name);
  if (t == nullptr) return optional ? Status::Ok() : InvalidArgumentError("tensor " + name + " is missing");
  if (t->shape != std::vector<int64_t>{n}) {
    return InvalidArgumentError("tensor " + name + ": expected shape " + Shape({n}) + ", file has " +
                                t->ShapeString());
  }
  if (t->type != GgmlType::kF32) {
    return UnimplementedError("tensor " + name + " has type " + GgmlTypeName(t->type) + ", expected F32");
  }
  if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0) {
    return InvalidArgumentError("tensor " + name + " is not 4-byte aligned in the file");
  }
  *out = reinterpret_cast<const float*>(t->data);
  return Status::Ok();
}

Status ReadSizeKey(const GgufFile& file, const std::string& key, int64_t* out) {
  ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key));
  if (v == 0 || v > (1ull << 31)) {
    return InvalidArgumentError("metadata key '" + key + "' = " + std::to_string(v) + " is out of range");
  }
  *out = static_cast<int64_t>(v);
  return Status::Ok();
}

StatusOr<TransformerSizes> ReadTransformerSizes(const GgufFile& file, const std::string& architecture) {
  const std::string a = architecture + ".";
  TransformerSizes t;
  RETURN_IF_ERROR(ReadSizeKey(file, a + "embedding_length", &t.n_embd));
  RETURN_IF_ERROR(ReadSizeKey(file, a + "block_count", &t.n_layer));
  RETURN_IF_ERROR(ReadSizeKey(file, a + "attention.head_count", &t.n_head));
  RETURN_IF_ERROR(ReadSizeKey(file, a + "feed_forward_length", &t.n_ff));
  RETURN_IF_ERROR(ReadSizeKey(file, a + "context_length", &t.context_length));
  // Sizes are checked against each other and against the file before anything is sized
  // by them: a head needs at least one dimension, and every layer has tensors of its own.
  if (t.n_head > t.n_embd) {
    return InvalidArgumentError(std::to_string(t.n_head) + " attention heads do not fit in embedding_length " +
                                std::to_string(t.n_embd));
  }
  if (static_cast<uint64_t>(t.n_layer) > file.tensors().size()) {
    return InvalidArgumentError(a + "block_count " + std::to_string(t.n_layer) + " is more than the file's " +
                                std::to_string(file.tensors().size()) + " tensors");
  }
  return t;
}

}  // namespace tachyon
