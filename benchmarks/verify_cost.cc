// What verifying a speculative proposal costs: one target forward pass of n
// tokens per sequence (the last token and n - 1 proposed ones, every position's
// logits), for B sequences at once, against the pass of one token each.
// Decode is bandwidth-bound at small B, so n positions cost far less than n
// steps; as B grows the pass becomes compute-bound and the ratio climbs toward n:
// where it passes what acceptance can give back, speculation stops paying (the
// engine's --speculative-max-batch).
//
//   build/release/benchmarks/verify_cost MODEL.gguf [threads=2] [rounds=9] [batches=1,4,8,16] [context=256]
//
// Every round times each (B, n) once, in an order rotated per round; the table
// gives the median of the rounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"

namespace tachyon {
namespace {

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [threads=2] [rounds=9] [batches=1,4,8,16] [context=256]\n", argv[0]);
    return 2;
  }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 9;
  std::vector<int> batches;
  {
    std::stringstream ss(argc > 4 ? argv[4] : "1,4,8,16");
    std::string item;
    while (std::getline(ss, item, ',')) batches.push_back(std::atoi(item.c_str()));
  }
  const int64_t context = argc > 5 ? std::atoll(argv[5]) : 256;
  const std::vector<int> lengths = {1, 2, 4, 5, 8};

  auto loaded = Model::Load(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const Model& model = **loaded;
  const ModelConfig& c = model.config();
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  constexpr int kBlockSize = 16;
  const int64_t blocks_per_seq = (context + 8 + kBlockSize - 1) / kBlockSize;
  KvBuffer kv(c, kBlockSize, blocks_per_seq * max_batch, KvType::kF16);
  std::vector<std::vector<int32_t>> tables(max_batch);
  for (int s = 0; s < max_batch; ++s) {
    for (int64_t b = 0; b < blocks_per_seq; ++b) tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + b));
  }
  ThreadPool pool(threads);
  auto token = [&](int64_t i) { return TokenId(static_cast<int32_t>((i * 7919 + 13) % c.n_vocab)); };
  // Each sequence's context first: `context` tokens.
  for (int s = 0; s < max_batch; ++s) {
    ForwardBatch batch;
    for (int64_t p = 0; p < context; ++p) {
      batch.tokens.push_back(token(p + s * 101));
      batch.positions.push_back(p);
      batch.sequence_index.push_back(0);
    }
    batch.sequences.push_back({tables[s].data(), static_cast<int64_t>(tables[s].size())});
    batch.logit_tokens.push_back(static_cast<int32_t>(context - 1));
    model.Forward(batch, kv, pool);
  }
  // B sequences, n tokens each at positions context .. context + n - 1, all logits.
  auto step = [&](int b, int n) {
    ForwardBatch batch;
    for (int s = 0; s < b; ++s) {
      for (int i = 0; i < n; ++i) {
        batch.tokens.push_back(token(context + i + s));
        batch.positions.push_back(context + i);
        batch.sequence_index.push_back(s);
        batch.logit_tokens.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
      }
      batch.sequences.push_back({tables[s].data(), static_cast<int64_t>(tables[s].size())});
    }
    const auto start = std::chrono::steady_clock::now();
    model.Forward(batch, kv, pool);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::pair<int, int>> cells;
  for (int b : batches) {
    for (int n : lengths) cells.push_back({b, n});
  }
  for (const auto& [b, n] : cells) step(b, n);  // warm-up
  std::vector<std::vector<double>> times(cells.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < cells.size(); ++i) {
      const size_t k = (i + r * 3) % cells.size();
      times[k].push_back(step(cells[k].first, cells[k].second));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("%s, %d threads, context %lld, median of %d rounds\n\n", argv[1], threads,
              static_cast<long long>(context), rounds);
  std::printf("| sequences | tokens each | ms per pass | x one token each |\n|---|---|---|---|\n");
  for (size_t i = 0; i < cells.size(); ++i) {
    double one = 0;
    for (size_t j = 0; j < cells.size(); ++j) {
      if (cells[j].first == cells[i].first && cells[j].second == 1) one = median(times[j]);
    }
    std::printf("| %d | %d | %.2f | %.2fx |\n", cells[i].first, cells[i].second, median(times[i]),
                median(times[i]) / one);
  }
  return 0;
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) { return tachyon::Main(argc, argv); }
