// A batched decode step's attention, alone: S sequences of P cached positions
// each, one new token per sequence, over L layers (each its own K/V buffers, as
// the engine's KvBuffer holds them), blocks of every sequence scattered over the
// pool as a paged cache leaves them. Reports the K/V bytes read per second.
//   build/release/benchmarks/attention_decode [threads=2] [seqs=64] [positions=512] [layers=30]
//       [heads=9] [kv_heads=3] [head_dim=64] [type=f16|f32|q8_0] [steps=7]
// Prints the median of the steps in ms and GB/s of K/V (10^9 B/s); compare with
// bandwidth_probe's figure for the same threads. The default shape is
// smol-135m's (issue 41, goal 6's chat workload spends a quarter of its time in
// these calls).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"

namespace {

constexpr int kBlockSize = 16;

}  // namespace

int main(int argc, char** argv) {
  const auto arg = [&](int i, int64_t fallback) { return argc > i ? std::atoll(argv[i]) : fallback; };
  const int threads = static_cast<int>(arg(1, 2));
  const int64_t seqs = arg(2, 64), positions = arg(3, 512), layers = arg(4, 30);
  const int heads = static_cast<int>(arg(5, 9)), kv_heads = static_cast<int>(arg(6, 3)),
            head_dim = static_cast<int>(arg(7, 64));
  const std::string type_name = argc > 8 ? argv[8] : "f16";
  const int64_t steps = arg(9, 7);
  const tachyon::KvType type = type_name == "f32"    ? tachyon::KvType::kF32
                               : type_name == "q8_0" ? tachyon::KvType::kQ8_0
                                                     : tachyon::KvType::kF16;
  if (threads < 1 || seqs < 1 || positions < 1 || layers < 1 || kv_heads < 1 || heads % kv_heads != 0 ||
      head_dim < 8 || steps < 1 || (type_name != "f16" && type_name != "f32" && type_name != "q8_0") ||
      (type == tachyon::KvType::kQ8_0 && head_dim % 32 != 0)) {
    std::fprintf(stderr, "usage: attention_decode [threads] [seqs] [positions] [layers] [heads] [kv_heads] "
                         "[head_dim] [f16|f32|q8_0] [steps]\n(q8_0 needs a head_dim that is a multiple of 32)\n");
    return 2;
  }
  const int64_t kv_dim = static_cast<int64_t>(kv_heads) * head_dim;
  const int64_t blocks_per_seq = (positions + 1 + kBlockSize - 1) / kBlockSize;
  const int64_t num_blocks = seqs * blocks_per_seq;
  const int64_t row_bytes = tachyon::KvRowBytes(type, kv_dim);
  const tachyon::AttentionShape shape{heads, kv_heads, head_dim, kBlockSize};

  // Block tables: every sequence's blocks drawn from a shuffled pool.
  std::vector<int32_t> pool_order(num_blocks);
  std::iota(pool_order.begin(), pool_order.end(), 0);
  std::mt19937 rng(11);
  std::shuffle(pool_order.begin(), pool_order.end(), rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(kv_dim), v(kv_dim);
  std::vector<std::vector<uint8_t>> k_store(layers), v_store(layers);
  std::vector<tachyon::LayerKv> kv(layers);
  for (int64_t l = 0; l < layers; ++l) {
    k_store[l].assign(num_blocks * kBlockSize * row_bytes, 0);
    v_store[l].assign(num_blocks * kBlockSize * row_bytes, 0);
    kv[l] = {k_store[l].data(), v_store[l].data(), type};
    for (int64_t s = 0; s < seqs; ++s) {
      for (int64_t p = 0; p <= positions; ++p) {
        for (int64_t i = 0; i < kv_dim; ++i) k[i] = normal(rng), v[i] = normal(rng);
        const int64_t slot = pool_order[s * blocks_per_seq + p / kBlockSize] * int64_t{kBlockSize} + p % kBlockSize;
        tachyon::StoreKv(kv[l], shape, slot, k.data(), v.data());
      }
    }
  }
  std::vector<float> q(seqs * heads * head_dim), out(q.size());
  for (float& x : q) x = normal(rng);

  tachyon::ThreadPool pool(threads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::vector<double> ms;
  for (int64_t step = 0; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < layers; ++l) {
      // As Model::Attention splits a decode step: one item a (sequence, KV head).
      pool.ParallelFor(seqs * kv_heads, [&](size_t begin, size_t end, int) {
        for (size_t item = begin; item < end; ++item) {
          const int64_t s = static_cast<int64_t>(item) / kv_heads;
          const int kv_head = static_cast<int>(item % kv_heads);
          tachyon::AttendPagedRun(&q[s * heads * head_dim], heads * head_dim, 1, positions, kv[l],
                                  &pool_order[s * blocks_per_seq], shape, scale, kv_head,
                                  &out[s * heads * head_dim]);
        }
      });
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double bytes = 2.0 * static_cast<double>(layers * seqs * (positions + 1) * row_bytes);
  std::printf("attention_decode threads %d seqs %lld positions %lld layers %lld heads %d/%d dim %d %s: "
              "%.3f ms a step (best %.3f), %.1f GB/s of K/V\n",
              threads, static_cast<long long>(seqs), static_cast<long long>(positions), static_cast<long long>(layers),
              heads, kv_heads, head_dim, type_name.c_str(), ms[ms.size() / 2], ms[0], bytes / ms[ms.size() / 2] / 1e6);
  return 0;
}
