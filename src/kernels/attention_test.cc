#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

namespace tachyon {
namespace {

// softmax(q k^T * scale) v over all positions, in doubles; keys/values [positions, kv_dim].
std::vector<double> DenseReference(const std::vector<float>& q, const std::vector<float>& keys,
                                   const std::vector<float>& values, int64_t num_positions, int n_heads,
                                   int n_kv_heads, int head_dim, float scale) {
  const int kv_dim = n_kv_heads * head_dim;
  std::vector<double> expected(n_heads * head_dim, 0.0);
  for (int h = 0; h < n_heads; ++h) {
    int kvh = h / (n_heads / n_kv_heads);
    std::vector<double> s(num_positions);
    double max = -1e30, sum = 0;
    for (int64_t p = 0; p < num_positions; ++p) {
      double d = 0;
      for (int i = 0; i < head_dim; ++i) d += q[h * head_dim + i] * keys[p * kv_dim + kvh * head_dim + i];
      s[p] = d * scale;
      max = std::max(max, s[p]);
    }
    for (int64_t p = 0; p < num_positions; ++p) sum += (s[p] = std::exp(s[p] - max));
    for (int64_t p = 0; p < num_positions; ++p) {
      for (int i = 0; i < head_dim; ++i) {
        expected[h * head_dim + i] += s[p] / sum * values[p * kv_dim + kvh * head_dim + i];
      }
    }
  }
  return expected;
}

// Paged online-softmax attention equals a dense softmax over all positions,
// whatever the block size and the order of the blocks in memory.
TEST(AttentionTest, PagedOnlineSoftmaxEqualsDenseAttention) {
  const int n_heads = 4, n_kv_heads = 2, head_dim = 32;
  const int64_t num_positions = 37;
  const int kv_dim = n_kv_heads * head_dim;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(n_heads * head_dim), keys(num_positions * kv_dim), values(num_positions * kv_dim);
  for (float& x : q) x = normal(rng);
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = normal(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  const std::vector<double> expected = DenseReference(q, keys, values, num_positions, n_heads, n_kv_heads, head_dim, scale);

  for (int block_size : {1, 4, 16, 64}) {
    const int64_t num_blocks = (num_positions + block_size - 1) / block_size;
    // Blocks stored in reverse order in the pool: the table maps logical -> physical.
    std::vector<int32_t> table(num_blocks);
    for (int64_t b = 0; b < num_blocks; ++b) table[b] = static_cast<int32_t>(num_blocks - 1 - b);
    const AttentionShape shape{n_heads, n_kv_heads, head_dim, block_size};
    const auto store = [&](const LayerKv& kv) {
      for (int64_t p = 0; p < num_positions; ++p) {
        StoreKv(kv, shape, table[p / block_size] * block_size + p % block_size, &keys[p * kv_dim], &values[p * kv_dim]);
      }
    };
    std::vector<float> k_pool(num_blocks * block_size * kv_dim), v_pool(k_pool.size());
    store({k_pool.data(), v_pool.data(), KvType::kF32});
    std::vector<float> out(n_heads * head_dim);
    AttendPaged(q.data(), {k_pool.data(), v_pool.data(), KvType::kF32}, table.data(), num_positions, shape, scale,
                out.data());
    for (int i = 0; i < n_heads * head_dim; ++i) {
      EXPECT_NEAR(out[i], expected[i], 1e-5) << "block size " << block_size << " element " << i;
    }
    // The same through an F16 cache: K and V rounded to half precision (relative 2^-11).
    std::vector<uint16_t> k16(k_pool.size()), v16(v_pool.size());
    LayerKv half{k16.data(), v16.data(), KvType::kF16};
    store(half);
    AttendPaged(q.data(), half, table.data(), num_positions, shape, scale, out.data());
    for (int i = 0; i < n_heads * head_dim; ++i) {
      EXPECT_NEAR(out[i], expected[i], 5e-3) << "F16 cache, block size " << block_size << " element " << i;
    }
    // And through a Q8_0 cache (rows of 32-element blocks; relative error ~1%).
    const int64_t q8_row = KvRowBytes(KvType::kQ8_0, kv_dim);
    std::vector<uint8_t> k8(num_blocks * block_size * q8_row), v8(k8.size());
    LayerKv q8{k8.data(), v8.data(), KvType::kQ8_0};
    store(q8);
    AttendPaged(q.data(), q8, table.data(), num_positions, shape, scale, out.data());
    for (int i = 0; i < n_heads * head_dim; ++i) {
      EXPECT_NEAR(out[i], expected[i], 5e-2) << "Q8_0 cache, block size " << block_size << " element " << i;
    }
  }
}

// Dense (bidirectional) attention over strided rows, as a fused QKV
// projection lays them out, equals the reference over several key tiles.
TEST(AttentionTest, DenseAttentionOverFusedRowsEqualsReference) {
  const int n_heads = 4, head_dim = 32, width = n_heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t num_keys : {int64_t{1}, int64_t{5}, int64_t{kDenseTile}, int64_t{2 * kDenseTile + 7}}) {
    // Rows of [q | k | v], each `width` wide.
    std::vector<float> fused(num_keys * 3 * width);
    for (float& x : fused) x = normal(rng) * 2.0f;
    std::vector<float> keys(num_keys * width), values(num_keys * width);
    for (int64_t j = 0; j < num_keys; ++j) {
      std::copy_n(&fused[j * 3 * width + width], width, &keys[j * width]);
      std::copy_n(&fused[j * 3 * width + 2 * width], width, &values[j * width]);
    }
    for (int64_t i = 0; i < num_keys; ++i) {
      std::vector<float> q(&fused[i * 3 * width], &fused[i * 3 * width] + width), out(width);
      AttendDense(q.data(), fused.data() + width, fused.data() + 2 * width, 3 * width, num_keys,
                  {n_heads, n_heads, head_dim, 0}, scale, out.data());
      const std::vector<double> expected = DenseReference(q, keys, values, num_keys, n_heads, n_heads, head_dim, scale);
      for (int d = 0; d < width; ++d) {
        ASSERT_NEAR(out[d], expected[d], 1e-5) << num_keys << " keys, query " << i << " element " << d;
      }
    }
  }
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

// A run of queries (causal: each sees the positions up to its own) equals the
// dense reference per query, for every cache type, block size and head grouping;
// and a query's output is the same, bit for bit, whatever run it is computed in
// (alone, or at any place in a longer run, with the block's unused slots holding
// garbage), which is what lets the engine split batches any way.
TEST(AttentionTest, RunOfQueriesEqualsReferenceAndDoesNotDependOnTheRun) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Head dims of 64 and 40 (a multiple of 8, not of 16); runs of 1 to 4 rows take
  // the AVX2 kernel's few-rows form, longer ones its row lanes.
  for (auto [n_heads, n_kv_heads, head_dim] :
       {std::tuple{4, 2, 64}, std::tuple{9, 3, 64}, std::tuple{3, 3, 64}, std::tuple{8, 1, 64}, std::tuple{8, 2, 40}}) {
    for (int block_size : {1, 5, 16}) {
      for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
        if (type == KvType::kQ8_0 && head_dim % 32 != 0) continue;  // Q8_0 rows are blocks of 32
        const int64_t num_positions = 43;
        const int kv_dim = n_kv_heads * head_dim, q_dim = n_heads * head_dim;
        std::vector<float> q(num_positions * q_dim), keys(num_positions * kv_dim), values(keys.size());
        for (float& x : q) x = normal(rng);
        for (float& x : keys) x = normal(rng);
        for (float& x : values) x = normal(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        const int64_t num_blocks = (num_positions + block_size - 1) / block_size;
        std::vector<int32_t> table(num_blocks);
        for (int64_t b = 0; b < num_blocks; ++b) table[b] = static_cast<int32_t>(num_blocks - 1 - b);
        // Slots past the sequence hold NaN: they must never reach a result.
        const int64_t slots = num_blocks * block_size;
        const int64_t row_bytes = KvRowBytes(type, kv_dim);
        std::vector<uint8_t> k_pool(slots * row_bytes, 0xff), v_pool(k_pool.size(), 0xff);
        const LayerKv kv{k_pool.data(), v_pool.data(), type};
        const AttentionShape shape{n_heads, n_kv_heads, head_dim, block_size};
        for (int64_t p = 0; p < num_positions; ++p) {
          StoreKv(kv, shape, table[p / block_size] * block_size + p % block_size, &keys[p * kv_dim],
                  &values[p * kv_dim]);
        }
        // The reference takes the keys and values given (F32 holds them exactly).
        const std::vector<float>& k_seen = keys;
        const std::vector<float>& v_seen = values;
        const double tolerance = type == KvType::kF32 ? 1e-5 : type == KvType::kF16 ? 5e-3 : 5e-2;
        auto run = [&](int64_t first, int count) {
          std::vector<float> out(count * q_dim, -1.0f);
          for (int g = 0; g < n_kv_heads; ++g) {
            AttendPagedRun(&q[first * q_dim], q_dim, count, first, kv, table.data(), shape, scale, g, out.data());
          }
          return out;
        };
        const std::vector<float> whole = run(0, static_cast<int>(num_positions));
        for (int64_t p = 0; p < num_positions; p += 7) {
          const std::vector<float> qp(q.begin() + p * q_dim, q.begin() + (p + 1) * q_dim);
          const std::vector<double> expected =
              DenseReference(qp, k_seen, v_seen, p + 1, n_heads, n_kv_heads, head_dim, scale);
          for (int i = 0; i < q_dim; ++i) {
            ASSERT_NEAR(whole[p * q_dim + i], expected[i], tolerance)
                << "heads " << n_heads << "/" << n_kv_heads << " block " << block_size << " position " << p;
          }
        }
        // The same queries in other runs: alone, and in runs that start and end elsewhere.
        for (auto [first, count] : {std::pair<int64_t, int>{0, 1}, {12, 1}, {42, 1}, {3, 17}, {20, 23}, {40, 3}}) {
          const std::vector<float> part = run(first, count);
          for (int t = 0; t < count; ++t) {
            for (int i = 0; i < q_dim; ++i) {
              ASSERT_EQ(part[t * q_dim + i], whole[(first + t) * q_dim + i])
                  << "position " << first + t << " in the run [" << first << ", +" << count << ")";
            }
          }
        }
      }
    }
  }
}

// A sliding window and soft-capping (Gemma): the run kernel (AVX2 where the CPU
// has it) and the per-token online softmax both equal a dense reference over the
// window's keys with capped scores, for windows under, across and over a block;
// blocks wholly before a run's first window hold NaN and are never read.
TEST(AttentionTest, SlidingWindowAndSoftCapEqualTheReference) {
  const int head_dim = 32, n_heads = 4, n_kv_heads = 2, kv_dim = n_kv_heads * head_dim, q_dim = n_heads * head_dim;
  const int64_t num_positions = 40;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(num_positions * q_dim), keys(num_positions * kv_dim), values(keys.size());
  for (float& x : q) x = normal(rng);
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = normal(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int block_size : {4, 16}) {
    for (int64_t window : {1, 3, 8, 21, 64}) {
      for (float softcap : {0.0f, 0.7f}) {
        AttentionShape shape{n_heads, n_kv_heads, head_dim, block_size};
        shape.window = window;
        shape.softcap = softcap;
        // The reference: dense, double, over [first visible, p].
        auto reference = [&](int64_t p) {
          std::vector<double> out(q_dim, 0.0);
          const int64_t first = FirstVisiblePosition(shape, p);
          for (int h = 0; h < n_heads; ++h) {
            const int g = h / (n_heads / n_kv_heads);
            std::vector<double> s;
            for (int64_t j = first; j <= p; ++j) {
              double d = 0;
              for (int i = 0; i < head_dim; ++i) d += q[p * q_dim + h * head_dim + i] * keys[j * kv_dim + g * head_dim + i];
              d *= scale;
              s.push_back(softcap > 0 ? softcap * std::tanh(d / softcap) : d);
            }
            const double max = *std::max_element(s.begin(), s.end());
            double sum = 0;
            for (double& x : s) sum += (x = std::exp(x - max));
            for (int64_t j = first; j <= p; ++j) {
              for (int i = 0; i < head_dim; ++i) {
                out[h * head_dim + i] += s[j - first] / sum * values[j * kv_dim + g * head_dim + i];
              }
            }
          }
          return out;
        };
        const int64_t num_blocks = (num_positions + block_size - 1) / block_size;
        std::vector<int32_t> table(num_blocks);
        for (int64_t b = 0; b < num_blocks; ++b) table[b] = static_cast<int32_t>(num_blocks - 1 - b);
        for (auto [first, count] : {std::pair<int64_t, int>{0, 40}, {25, 15}, {39, 1}, {17, 1}, {9, 6}}) {
          std::vector<float> k_pool(num_blocks * block_size * kv_dim), v_pool(k_pool.size());
          const LayerKv kv{k_pool.data(), v_pool.data(), KvType::kF32};
          for (int64_t p = 0; p < num_positions; ++p) {
            StoreKv(kv, shape, table[p / block_size] * block_size + p % block_size, &keys[p * kv_dim],
                    &values[p * kv_dim]);
          }
          for (int64_t b = 0; b < FirstVisiblePosition(shape, first) / block_size; ++b) {
            std::fill_n(&k_pool[table[b] * block_size * kv_dim], block_size * kv_dim, NAN);
            std::fill_n(&v_pool[table[b] * block_size * kv_dim], block_size * kv_dim, NAN);
          }
          std::vector<float> run(count * q_dim);
          for (int g = 0; g < n_kv_heads; ++g) {
            AttendPagedRun(&q[first * q_dim], q_dim, count, first, kv, table.data(), shape, scale, g, run.data());
          }
          for (int t = 0; t < count; ++t) {
            const int64_t p = first + t;
            const std::vector<double> expected = reference(p);
            std::vector<float> one(q_dim);
            AttendPaged(&q[p * q_dim], kv, table.data(), p + 1, shape, scale, one.data());
            for (int i = 0; i < q_dim; ++i) {
              ASSERT_NEAR(run[t * q_dim + i], expected[i], 1e-5)
                  << "run: block " << block_size << " window " << window << " cap " << softcap << " position " << p;
              ASSERT_NEAR(one[i], expected[i], 1e-5)
                  << "one token: block " << block_size << " window " << window << " cap " << softcap << " position " << p;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tachyon
