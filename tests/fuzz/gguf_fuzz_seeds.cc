// Writes the seed corpus of gguf_reader_fuzz with the project's own GgufWriter:
// small valid files covering every metadata type, nested arrays, a vocabulary,
// tensors of several types and a non-default alignment.
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"

namespace tachyon {
namespace {

Status WriteSeed(const std::string& path, GgufWriter& writer) {
  RETURN_IF_ERROR(writer.Open(path));
  for (const GgufTensorInfo& t : writer.tensors()) {
    std::vector<uint8_t> bytes(t.num_bytes);
    std::iota(bytes.begin(), bytes.end(), uint8_t{1});
    RETURN_IF_ERROR(writer.WriteTensorData(bytes.data(), bytes.size()));
  }
  return writer.Close();
}

Status WriteSeeds(const std::string& dir) {
  {
    GgufWriter w;
    w.SetMetadata("general.architecture", "llama");
    w.SetMetadata("a.u8", GgufValue(uint8_t{1}));
    w.SetMetadata("a.i8", GgufValue(int8_t{-1}));
    w.SetMetadata("a.u16", GgufValue(uint16_t{2}));
    w.SetMetadata("a.i16", GgufValue(int16_t{-2}));
    w.SetMetadata("a.u32", GgufValue(uint32_t{3}));
    w.SetMetadata("a.i32", GgufValue(int32_t{-3}));
    w.SetMetadata("a.f32", GgufValue(0.5f));
    w.SetMetadata("a.bool", GgufValue(true));
    w.SetMetadata("a.str", GgufValue("text"));
    w.SetMetadata("a.u64", GgufValue(uint64_t{4}));
    w.SetMetadata("a.i64", GgufValue(int64_t{-4}));
    w.SetMetadata("a.f64", GgufValue(0.25));
    w.SetMetadata("a.arr", GgufValue(GgufArray(std::vector<GgufArray>{
                               GgufArray(std::vector<std::string>{"x", "y"}),
                               GgufArray(std::vector<bool>{true, false})})));
    RETURN_IF_ERROR(WriteSeed(dir + "/metadata.gguf", w));
  }
  {
    GgufWriter w;
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int i = 0; i < 40; ++i) {
      tokens.push_back("tok" + std::to_string(i));
      scores.push_back(-static_cast<float>(i));
      types.push_back(1);
    }
    w.SetMetadata("general.architecture", "llama");
    w.SetMetadata("llama.context_length", GgufValue(uint32_t{128}));
    w.SetMetadata("tokenizer.ggml.model", "llama");
    w.SetMetadata("tokenizer.ggml.tokens", GgufValue(GgufArray(tokens)));
    w.SetMetadata("tokenizer.ggml.scores", GgufValue(GgufArray(scores)));
    w.SetMetadata("tokenizer.ggml.token_type", GgufValue(GgufArray(types)));
    w.SetMetadata("tokenizer.ggml.merges", GgufValue(GgufArray(std::vector<std::string>{"t o"})));
    RETURN_IF_ERROR(WriteSeed(dir + "/vocab.gguf", w));
  }
  {
    GgufWriter w(64);
    w.SetMetadata("general.architecture", "llama");
    RETURN_IF_ERROR(w.AddTensor("token_embd.weight", GgmlType::kQ8_0, {32, 4}));
    RETURN_IF_ERROR(w.AddTensor("blk.0.attn_norm.weight", GgmlType::kF32, {32}));
    RETURN_IF_ERROR(w.AddTensor("blk.0.attn_q.weight", GgmlType::kQ4_K, {256, 1}));
    RETURN_IF_ERROR(w.AddTensor("blk.0.ffn_up.weight", GgmlType::kF16, {8, 2, 2}));
    RETURN_IF_ERROR(WriteSeed(dir + "/tensors.gguf", w));
  }
  {
    GgufWriter w;
    RETURN_IF_ERROR(WriteSeed(dir + "/empty.gguf", w));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds DIR\n");
    return 2;
  }
  tachyon::Status status = tachyon::WriteSeeds(argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
