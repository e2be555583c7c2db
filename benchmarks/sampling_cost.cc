// What sampling costs beside a decode step (issue 41, goal 4): the model's own
// logit rows from real decode steps, then the sampler on each row under common
// settings, against the step's time; and, for the record, the algorithm the
// sampler had before (every finite logit sorted, then top-k / top-p / min-p as
// prefixes), written out here as it was, on the same rows.
//
//   build/release/benchmarks/sampling_cost MODEL.gguf [steps=24] [threads=2]
//
// A random-weight model's rows are nearly flat (the worst case for top-p: its
// set is most of the vocabulary); rows at temperature 0.3 stand for a peaked
// distribution. Prints, per setting, the median number of tokens kept, the median
// microseconds per token of the sampler now and of the full sort, and each as a
// share of the median decode step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "percentile.h"
#include "engine/sampler.h"
#include "model/kv_buffer.h"
#include "model/model.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The sampler before this change, for comparison: all finite logits sorted.
// Its candidate buffer is kept from call to call, as the sampler's was.
int32_t FullSortSample(const std::vector<float>& logits, const SamplingParams& p, std::mt19937_64& rng) {
  static std::vector<std::pair<float, int32_t>> c;
  c.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) c.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + p.top_k, c.end(), by_logit);
    c.resize(p.top_k);
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  const float max = c[0].first;
  double sum = 0;
  for (auto& x : c) sum += (x.first = std::exp((x.first - max) / p.temperature));
  for (auto& x : c) x.first = static_cast<float>(x.first / sum);
  if (p.top_p < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    while (n < c.size()) {
      cumulative += c[n++].first;
      if (cumulative >= p.top_p) break;
    }
    c.resize(std::max<size_t>(1, n));
  }
  if (p.min_p > 0) {
    const float floor = p.min_p * c[0].first;
    size_t n = 1;
    while (n < c.size() && c[n].first >= floor) ++n;
    c.resize(n);
  }
  double total = 0;
  for (const auto& x : c) total += x.first;
  double r = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (const auto& x : c) {
    if ((r -= x.first) < 0) return x.second;
  }
  return c.back().second;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sampling_cost MODEL.gguf [steps=24] [threads=2]\n");
    return 2;
  }
  const int steps = std::max(1, argc > 2 ? std::atoi(argv[2]) : 24);
  const int threads = std::max(1, argc > 3 ? std::atoi(argv[3]) : 2);
  StatusOr<std::unique_ptr<Model>> model = Model::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "sampling_cost: %s\n", model.status().ToString().c_str());
    return 1;
  }
  const Model& m = **model;
  const int64_t vocab = m.config().n_vocab;
  ThreadPool pool(threads);
  const int block_size = 16, prompt = 16;
  const int64_t num_blocks = (prompt + steps + block_size) / block_size + 1;
  KvBuffer kv(m.config(), block_size, num_blocks);
  std::vector<int32_t> table(num_blocks);
  for (int64_t b = 0; b < num_blocks; ++b) table[b] = static_cast<int32_t>(b);
  std::vector<TokenId> tokens;
  for (int i = 0; i < prompt; ++i) tokens.push_back(TokenId((i * 7919 + 13) % vocab));
  std::vector<float> row = m.Forward(ForwardBatch::OneSequence(tokens, 0, table.data(), num_blocks), kv, pool);
  std::vector<std::vector<float>> rows;
  std::vector<double> step_us;
  for (int s = 0; s < steps; ++s) {
    const TokenId next = Sampler::Argmax(row);
    const auto t0 = Clock::now();
    row = m.Forward(ForwardBatch::OneSequence({next}, prompt + s, table.data(), num_blocks), kv, pool);
    step_us.push_back(Micros(Clock::now() - t0));
    rows.push_back(row);
  }
  const double step = Percentile(step_us, 0.5);
  std::printf("model %s: vocabulary %lld, %d threads, decode step median %.0f us (%d steps)\n", argv[1],
              static_cast<long long>(vocab), threads, step, steps);
  std::printf("| setting | tokens kept | sampler us/token | share of a step | full sort us/token | share of a step |\n");
  std::printf("|---|---|---|---|---|---|\n");
  struct Setting {
    const char* name;
    SamplingParams params;
  };
  const Setting settings[] = {
      {"temperature 1 (all tokens)", {.temperature = 1.0f}},
      {"temperature 0.7, top-p 0.95", {.temperature = 0.7f, .top_p = 0.95f}},
      {"temperature 0.7, top-k 40", {.temperature = 0.7f, .top_k = 40}},
      {"temperature 1, min-p 0.05", {.temperature = 1.0f, .min_p = 0.05f}},
      {"temperature 0.3, top-p 0.9 (peaked)", {.temperature = 0.3f, .top_p = 0.9f}},
      {"temperature 0.3, top-k 50, top-p 0.9", {.temperature = 0.3f, .top_k = 50, .top_p = 0.9f}},
  };
  for (const Setting& setting : settings) {
    Sampler sampler(setting.params);
    std::mt19937_64 rng(1);
    std::vector<double> now_us, sort_us;
    int64_t checksum = 0;
    for (int rep = 0; rep < 3; ++rep) {
      for (const std::vector<float>& r : rows) {
        std::vector<float> copy = r;
        auto t0 = Clock::now();
        checksum += sampler.Sample(copy, {}).value();
        now_us.push_back(Micros(Clock::now() - t0));
        t0 = Clock::now();
        checksum += FullSortSample(r, setting.params, rng);
        sort_us.push_back(Micros(Clock::now() - t0));
      }
    }
    std::vector<double> kept;
    for (const std::vector<float>& r : rows) {
      std::vector<float> copy = r;
      kept.push_back(static_cast<double>(sampler.ProcessedDistribution(copy, {}).size()));
    }
    const double now = Percentile(now_us, 0.5), sorted = Percentile(sort_us, 0.5);
    std::printf("| %s | %.0f | %.0f | %.2f%% | %.0f | %.2f%% |\n", setting.name, Percentile(kept, 0.5), now, 100 * now / step,
                sorted, 100 * sorted / step);
    if (checksum == -1) std::printf("\n");  // keeps the draws from being optimized away
  }
  return 0;
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) { return tachyon::Main(argc, argv); }
