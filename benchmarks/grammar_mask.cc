// What constrained decoding costs per token: the mask of one step (the
// GrammarMasker's lookup and exit walks, then -inf written into a logit row of
// the vocabulary's size) along sampled answers under the test schemas and
// json_object, for a vocabulary read from a GGUF.
//
//   build/release/benchmarks/grammar_mask VOCAB.gguf [answers=40] [seed=1]
//
// Answers are drawn uniformly from the allowed tokens (a random walk: long
// strings, every frame visited), each step timed. "cold" is the first answer
// of a schema (the cache filling), "warm" the rest. Prints per schema the
// mean, p50 and p99 microseconds per token, and the trie build time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "grammar/json_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "tests/support/test_schemas.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf [answers=40] [seed=1]\n", argv[0]);
    return 2;
  }
  const int answers = argc > 2 ? std::atoi(argv[2]) : 40;
  const uint32_t seed = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 1;
  auto file = GgufFile::Open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 1;
  }
  auto tok = Tokenizer::FromGguf(*file);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const Vocab& vocab = (*tok)->vocab();
  std::vector<std::string> bytes(vocab.size());
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.token(TokenId(id)).type;
    if (type != TokenType::kControl && type != TokenType::kUnknown && type != TokenType::kUnused) {
      bytes[id] = (*tok)->TokenToPiece(TokenId(id));
    }
  }
  const auto t0 = Clock::now();
  auto trie = std::make_shared<const TokenTrie>(bytes);
  std::printf("vocabulary %d tokens, trie %d nodes built in %.1f ms\n", vocab.size(), trie->num_nodes(),
              Micros(Clock::now() - t0) / 1000);
  std::printf("%-12s %8s %8s | %9s %9s %9s | %9s %9s %9s\n", "grammar", "answers", "tokens", "cold mean", "cold p50",
              "cold p99", "warm mean", "warm p50", "warm p99");

  std::vector<std::pair<std::string, std::shared_ptr<const JsonGrammar>>> grammars = {
      {"json_object", AnyJsonObjectGrammar()}};
  for (size_t i = 0; i < testing::TestSchemas().size(); ++i) {
    grammars.emplace_back("schema " + std::to_string(i + 1),
                          *CompileJsonSchema(nlohmann::ordered_json::parse(testing::TestSchemas()[i])));
  }
  std::mt19937 rng(seed);
  std::vector<float> row(vocab.size());
  std::vector<uint64_t> bits;
  for (const auto& [name, grammar] : grammars) {
    GrammarMasker masker(grammar, trie);
    std::vector<double> cold, warm;
    int64_t tokens = 0;
    for (int a = 0; a < answers; ++a) {
      GrammarMatcher m(grammar);
      std::string rest;
      for (int step = 0; step < 400 && !m.IsFinished(); ++step) {
        const auto start = Clock::now();
        // As the engine does: close near the end (here: after 300 tokens).
        const bool closing = step >= 300 && m.Shortest(&rest);
        if (closing) {
          trie->Prefixes(rest, &bits);
        } else {
          masker.FillMask(m.state(), &bits);
        }
        for (size_t w = 0; w < bits.size(); ++w) {
          if (bits[w] == ~uint64_t{0}) continue;
          for (int b = 0; b < 64 && w * 64 + b < row.size(); ++b) {
            if (!(bits[w] >> b & 1)) row[w * 64 + b] = -INFINITY;
          }
        }
        (a == 0 ? cold : warm).push_back(Micros(Clock::now() - start));
        std::vector<int32_t> allowed;
        for (size_t w = 0; w < bits.size(); ++w) {
          for (uint64_t x = bits[w]; x != 0; x &= x - 1) allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(x)));
        }
        if (allowed.empty()) break;
        m.Feed(bytes[allowed[rng() % allowed.size()]]);
        ++tokens;
      }
    }
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return v.empty() ? 0 : s / v.size();
    };
    std::printf("%-12s %8d %8lld | %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f\n", name.c_str(), answers,
                static_cast<long long>(tokens), mean(cold), Percentile(cold, 0.5), Percentile(cold, 0.99), mean(warm),
                Percentile(warm, 0.5), Percentile(warm, 0.99));
  }
  return 0;
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) { return tachyon::Main(argc, argv); }
