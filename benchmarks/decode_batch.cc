// Batched decode, decode phase only (issue 41, goal 3): N sequences' prompts
// are prefilled before the clock starts, then each timed step is one
// Model::Forward over one new token of every sequence (the engine's decode batch,
// without scheduling or sampling). Prints, per N, the median step time, output
// tokens/s (N / step) and its multiple of one sequence's, and the step time per
// sequence: while a step stays bound by reading the weights it costs about the
// same for 1 or N sequences; where the step time starts to grow with N, the
// matrix tiles have turned compute-bound.
//
//   build/release/benchmarks/decode_batch MODEL.gguf [steps=16] [threads=2] [N...]
//   (default N: 1 4 16 64; prompts of 32 tokens)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "percentile.h"
#include "model/kv_buffer.h"
#include "model/model.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: decode_batch MODEL.gguf [steps=16] [threads=2] [N...]\n");
    return 2;
  }
  const int steps = std::max(1, argc > 2 ? std::atoi(argv[2]) : 16);
  const int threads = std::max(1, argc > 3 ? std::atoi(argv[3]) : 2);
  std::vector<int> sizes;
  for (int i = 4; i < argc; ++i) sizes.push_back(std::max(1, std::atoi(argv[i])));
  if (sizes.empty()) sizes = {1, 4, 16, 64};
  StatusOr<std::unique_ptr<Model>> loaded = Model::Load(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "decode_batch: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const Model& model = **loaded;
  const int64_t vocab = model.config().n_vocab;
  ThreadPool pool(threads);
  constexpr int kBlock = 16, kPrompt = 32;
  std::printf("model %s, %d threads, prompts of %d tokens, %d timed steps\n", argv[1], threads, kPrompt, steps);
  std::printf("| sequences | step ms (median) | output tok/s | x one sequence | ms per sequence |\n");
  std::printf("|---|---|---|---|---|\n");
  double one = 0;
  for (int n : sizes) {
    const int64_t blocks_each = (kPrompt + steps + 1 + kBlock - 1) / kBlock;
    KvBuffer kv(model.config(), kBlock, blocks_each * n);
    std::vector<std::vector<int32_t>> tables(n);
    for (int s = 0; s < n; ++s) {
      for (int64_t b = 0; b < blocks_each; ++b) tables[s].push_back(static_cast<int32_t>(s * blocks_each + b));
    }
    auto batch_of = [&](const std::vector<std::vector<TokenId>>& tokens, int64_t first_position) {
      ForwardBatch batch;
      for (int s = 0; s < n; ++s) {
        batch.sequences.push_back({tables[s].data(), blocks_each});
        for (size_t i = 0; i < tokens[s].size(); ++i) {
          batch.tokens.push_back(tokens[s][i]);
          batch.positions.push_back(first_position + static_cast<int64_t>(i));
          batch.sequence_index.push_back(s);
        }
        batch.logit_tokens.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
      }
      return batch;
    };
    // Prefill, one sequence at a time (not timed).
    std::vector<std::vector<TokenId>> prompts(n);
    for (int s = 0; s < n; ++s) {
      for (int i = 0; i < kPrompt; ++i) prompts[s].push_back(TokenId((s * 1009 + i * 7919 + 13) % vocab));
      ForwardBatch one_seq = ForwardBatch::OneSequence(prompts[s], 0, tables[s].data(), blocks_each);
      model.Forward(one_seq, kv, pool);
    }
    std::vector<double> ms;
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<TokenId>> next(n);
      for (int s = 0; s < n; ++s) next[s] = {TokenId((s * 31 + step * 17 + 5) % vocab)};
      const ForwardBatch batch = batch_of(next, kPrompt + step);
      const auto t0 = Clock::now();
      model.Forward(batch, kv, pool);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    const double step_ms = Percentile(ms, 0.5), tok_s = n / step_ms * 1000;
    if (n == sizes.front()) one = tok_s / n;
    std::printf("| %d | %.2f | %.1f | %.2fx | %.3f |\n", n, step_ms, tok_s, tok_s / one, step_ms / n);
  }
  return 0;
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) { return tachyon::Main(argc, argv); }
