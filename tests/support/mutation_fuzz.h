// MutationFuzz: a small mutation fuzzer for code the libFuzzer build cannot reach
// (the Beast coroutine layers do not compile with clang 14 and libstdc++ 12, and
// libFuzzer needs clang's coverage). It has no coverage guidance: it mutates the
// seeds (bit flips, interesting bytes, dictionary tokens, erased / duplicated /
// spliced ranges, truncation), keeps the inputs the target calls interesting as new
// parents, and runs for a bounded time. Runs under whatever the build has (ASan +
// UBSan in the asan preset). TACHYON_MUTATION_FUZZ_SECONDS overrides the time.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tachyon::testing {

struct MutationFuzzOptions {
  double seconds = 10;
  size_t max_len = 65536;
  uint64_t seed = 1;
  std::vector<std::string> dictionary;  // tokens worth inserting ("{", "\"stream\":true", "\r\n")
  size_t max_pool = 512;                // interesting inputs kept as parents
};

// target(input) returns true when the input is interesting (it went deeper: it
// parsed, it was answered 200...). Returns the number of inputs run.
inline int64_t MutationFuzz(std::vector<std::string> seeds, const MutationFuzzOptions& options,
                            const std::function<bool(const std::string&)>& target) {
  double seconds = options.seconds;
  if (const char* env = std::getenv("TACHYON_MUTATION_FUZZ_SECONDS")) seconds = std::atof(env);
  std::mt19937_64 rng(options.seed);
  auto below = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static const char kInteresting[] = {0, '\xff', '"', '{', '}', '[', ']', ',', ':', '\\', '\n', '\r', ' ',
                                      '0', '-', '9', '=', '\x80', '\xc3', '\t'};
  std::vector<std::string> pool = seeds;
  if (pool.empty()) pool.emplace_back();
  for (const std::string& s : seeds) target(s);
  int64_t runs = static_cast<int64_t>(seeds.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    std::string input = pool[below(pool.size())];
    const int steps = 1 + static_cast<int>(below(4));
    for (int step = 0; step < steps; ++step) {
      switch (below(8)) {
        case 0:
          if (!input.empty()) input[below(input.size())] ^= static_cast<char>(1 << below(8));
          break;
        case 1:
          if (!input.empty()) input[below(input.size())] = kInteresting[below(sizeof(kInteresting))];
          break;
        case 2:
          if (!options.dictionary.empty()) {
            input.insert(below(input.size() + 1), options.dictionary[below(options.dictionary.size())]);
          }
          break;
        case 3: {
          const size_t at = below(input.size() + 1);
          input.erase(at, 1 + below(16));
          break;
        }
        case 4: {
          const size_t at = below(input.size() + 1);
          const std::string piece = input.substr(at, 1 + below(64));
          input.insert(below(input.size() + 1), piece);
          break;
        }
        case 5: {
          const std::string& other = pool[below(pool.size())];
          input = input.substr(0, below(input.size() + 1)) + other.substr(below(other.size() + 1));
          break;
        }
        case 6:
          input.resize(below(input.size() + 1));
          break;
        case 7:
          input.insert(below(input.size() + 1), 1, static_cast<char>(rng()));
          break;
      }
    }
    if (input.size() > options.max_len) input.resize(options.max_len);
    ++runs;
    if (target(input)) {
      if (pool.size() < options.max_pool) {
        pool.push_back(std::move(input));
      } else {
        pool[below(pool.size())] = std::move(input);
      }
    }
  }
  return runs;
}

}  // namespace tachyon::testing
