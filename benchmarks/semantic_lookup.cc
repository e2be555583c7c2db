// Semantic cache lookup latency at a given number of entries: SemanticCache::Search
// (lock, HNSW or flat search in the scope, candidates' TTL check) over unit
// vectors of one embedder's dimension, all in one scope (the largest partition
// a lookup can meet). Queries are stored vectors with noise added (near
// duplicates: what a hit looks like) and fresh random vectors (misses).
//
//   semantic_lookup [--entries 10000,100000,1000000] [--dim 384] [--queries 5000] [--noise 0.3]
//
// Prints, per size: build time, p50 / p99 / max of a lookup in microseconds
// for both kinds of query, and the recall of the near duplicates (the noisy
// copy finds its original first).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "percentile.h"

#include "embed/embedder.h"
#include "gateway/cache/semantic_cache.h"

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {10000, 100000, 1000000};
  int dim = 384, queries = 5000;
  double noise = 0.3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--entries") {
      sizes.clear();
      std::stringstream ss(value);
      for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoull(item));
    } else if (flag == "--dim") {
      dim = std::stoi(value);
    } else if (flag == "--queries") {
      queries = std::stoi(value);
    } else if (flag == "--noise") {
      noise = std::stod(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::printf("%10s %9s | %28s | %28s | %s\n", "entries", "build_s", "near-duplicate p50/p99/max us",
              "random p50/p99/max us", "recall@1");
  for (size_t n : sizes) {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal;
    auto random_unit = [&](std::vector<float>& v) {
      v.resize(static_cast<size_t>(dim));
      for (float& x : v) x = normal(rng);
      tachyon::NormalizeRows(v.data(), 1, dim);
    };
    tachyon::SemanticCache cache(n + 1, SIZE_MAX);
    std::vector<std::vector<float>> kept;  // a sample of stored vectors, to query near them
    const size_t stride = std::max<size_t>(1, n / static_cast<size_t>(queries));
    const Clock::time_point build = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      tachyon::SemanticEntry e;
      e.key = std::to_string(i);
      e.route = "bench";
      e.scope = "one scope";
      e.embedder = "bench";
      e.question = e.key;
      random_unit(e.vector);
      e.answer.text = "answer";
      if (i % stride == 0 && kept.size() < static_cast<size_t>(queries)) kept.push_back(e.vector);
      cache.Put(std::move(e), 1e9);
    }
    const double build_s = std::chrono::duration<double>(Clock::now() - build).count();
    std::vector<double> near_us, random_us;
    int found = 0;
    std::vector<float> q;
    for (size_t k = 0; k < kept.size(); ++k) {
      // The original plus noise of norm `noise`, renormalized.
      random_unit(q);
      for (int d = 0; d < dim; ++d) q[d] = kept[k][d] + static_cast<float>(noise) * q[d];
      tachyon::NormalizeRows(q.data(), 1, dim);
      Clock::time_point t = Clock::now();
      auto top = cache.Search("bench", "one scope", q, 4, Clock::now());
      near_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      if (!top.empty() && top[0].entry->key == std::to_string(k * stride)) ++found;
      random_unit(q);
      t = Clock::now();
      top = cache.Search("bench", "one scope", q, 4, Clock::now());
      random_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
    }
    std::printf("%10zu %9.1f | %8.1f %8.1f %10.1f | %8.1f %8.1f %10.1f | %.4f\n", n, build_s,
                Percentile(near_us, 0.5), Percentile(near_us, 0.99), Percentile(near_us, 1.0),
                Percentile(random_us, 0.5), Percentile(random_us, 0.99), Percentile(random_us, 1.0),
                static_cast<double>(found) / static_cast<double>(kept.size()));
    std::fflush(stdout);
  }
  return 0;
}
