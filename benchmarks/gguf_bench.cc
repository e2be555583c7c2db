// GGUF parsing and reference quantization throughput, and Gemma 2's final
// soft-cap over a 256,000-token vocabulary (the C library's tanh, then AVX2's).
//   build/release/benchmarks/gguf_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ref/ops.h"
#include "kernels/x86/ops_avx2.h"
#include "kernels/ref/quantize.h"

namespace tachyon {
namespace {

std::string SharedDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return env != nullptr ? env : TACHYON_SHARED_DIR;
}

// Parsing the Llama 3 vocabulary (128256 tokens, 280147 merges, 7.8 MB): the
// metadata work every model load of a Llama 3 GGUF does.
void BM_ParseLlama3Vocab(benchmark::State& state) {
  std::string path = SharedDir() + "/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("needs ../shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf");
    return;
  }
  StatusOr<MappedFile> mapped = MappedFile::Open(path);
  for (auto _ : state) {
    StatusOr<GgufFile> file = GgufFile::Parse(mapped->data(), mapped->size());
    benchmark::DoNotOptimize(file.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * mapped->size());
}
BENCHMARK(BM_ParseLlama3Vocab)->Unit(benchmark::kMillisecond);

void BM_QuantizeRow(benchmark::State& state) {
  GgmlType type = static_cast<GgmlType>(state.range(0));
  const int64_t n = 4096;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> out(*GgmlRowBytes(type, n));
  for (auto _ : state) {
    ref::QuantizeRow(type, x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  state.SetLabel(GgmlTypeName(type));
}
BENCHMARK(BM_QuantizeRow)
    ->Arg(static_cast<int>(GgmlType::kF16))
    ->Arg(static_cast<int>(GgmlType::kBF16))
    ->Arg(static_cast<int>(GgmlType::kQ8_0))
    ->Arg(static_cast<int>(GgmlType::kQ4_0));

// x = tanh(x / 30) * 30 over one decode step's logits (Gemma 2's vocabulary);
// arg 0: the reference (tanhf), 1: the AVX2 version.
void BM_FinalSoftCap(benchmark::State& state) {
  const bool simd = state.range(0) == 1;
  if (simd && !CpuHasAvx2()) {
    state.SkipWithError("no AVX2");
    return;
  }
  const int64_t n = 256000;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 8.0f);
  std::vector<float> logits(n);
  for (float& v : logits) v = normal(rng);
  std::vector<float> x(n);
  for (auto _ : state) {
    x = logits;
    simd ? avx2::SoftCap(x.data(), n, 30.0f) : ref::SoftCap(x.data(), n, 30.0f);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  state.SetLabel(simd ? "avx2" : "tanhf");
}
BENCHMARK(BM_FinalSoftCap)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tachyon

BENCHMARK_MAIN();
