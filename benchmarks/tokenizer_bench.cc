// Tokenizer encode throughput (MB/s of input text, one thread) on a few MB of
// real text: English prose (STS-B sentences, MT-Bench questions), code (this
// project's own sources), CJK (the ggml-prompts Chinese, Japanese and Korean
// sets) and emoji/multilingual lines (the tokenizer fixtures), and all mixed.
//   build/release/benchmarks/tokenizer_bench
//   build/release/benchmarks/tokenizer_bench --write-corpora DIR   (DIR/NAME.txt for
//       each corpus, for benchmarks/tokenizer_compare.sh to feed other tokenizers)
// Needs ../shared (or TACHYON_SHARED_DIR); each benchmark says so if absent.
#include <benchmark/benchmark.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;

std::string SharedDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return env != nullptr ? env : TACHYON_SHARED_DIR;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Repeats `text` until it has at least `bytes` bytes.
std::string RepeatTo(const std::string& text, size_t bytes) {
  std::string out;
  while (!text.empty() && out.size() < bytes) out += text;
  return out;
}

std::string ProseOnce() {
  std::string out;
  std::ifstream sts(SharedDir() + "/data/similarity/stsb/sts-train.csv");
  std::string line;
  while (std::getline(sts, line)) {
    // genre, file, year, id, score, sentence 1, sentence 2 (tab-separated)
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, '\t')) fields.push_back(field);
    if (fields.size() >= 7) out += fields[5] + " " + fields[6] + "\n";
  }
  return out;
}

std::string CodeOnce() {
  std::string out;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(TACHYON_SOURCE_DIR) / "src")) {
    auto ext = entry.path().extension();
    if (ext == ".cc" || ext == ".h") out += ReadAll(entry.path());
  }
  return out;
}

std::string CjkOnce() {
  std::string out;
  for (const char* name : {"gpt-2-chinese", "gpt-neox-japanese", "polyglot-ko"}) {
    std::ifstream in(SharedDir() + "/fixtures/tokenizer/ggml-prompts/" + name + ".txt");
    std::string line;
    while (std::getline(in, line)) {
      size_t arrow = line.rfind(" => ");
      if (arrow != std::string::npos) out += line.substr(0, arrow) + "\n";
    }
  }
  return out;
}

std::string EmojiMultilingualOnce() {
  std::string inp = ReadAll(SharedDir() + "/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf.inp");
  std::string out;
  size_t start = 0;
  const std::string separator = "\n__ggml_vocab_test__\n";
  while (true) {
    size_t found = inp.find(separator, start);
    if (found == std::string::npos) break;
    out += inp.substr(start, found - start) + "\n";
    start = found + separator.size();
  }
  return out + "🦙🚀✅😶‍🌫️ 👩‍👩‍👧‍👦 🇯🇵 déjà vu — naïve café\n";
}

const std::map<std::string, std::string>& Corpora() {
  static const std::map<std::string, std::string> corpora = [] {
    std::map<std::string, std::string> c;
    const std::string prose = ProseOnce(), code = CodeOnce(), cjk = CjkOnce(), emoji = EmojiMultilingualOnce();
    c["prose"] = RepeatTo(prose, 1500000);
    c["code"] = RepeatTo(code, 800000);
    c["cjk"] = RepeatTo(cjk, 400000);
    c["emoji"] = RepeatTo(emoji, 300000);
    c["mixed"] = c["prose"] + c["code"] + c["cjk"] + c["emoji"];
    // Each source once: no text repeats, so a word cache helps only as much as
    // words recur in real text.
    c["mixed-once"] = prose + code + cjk + emoji;
    return c;
  }();
  return corpora;
}

void BM_Encode(benchmark::State& state, const std::string& vocab, const std::string& corpus) {
  std::string path = SharedDir() + "/fixtures/tokenizer/ggml-vocab-" + vocab + ".gguf";
  if (!fs::exists(path)) {
    state.SkipWithError(("needs " + path).c_str());
    return;
  }
  StatusOr<GgufFile> file = GgufFile::Open(path);
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) {
    state.SkipWithError(tokenizer.status().ToString().c_str());
    return;
  }
  const std::string& text = Corpora().at(corpus);
  size_t num_tokens = 0;
  for (auto _ : state) {
    std::vector<TokenId> ids = (*tokenizer)->Encode(text, {.add_special = false});
    num_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * text.size());
  state.counters["MB"] = text.size() / 1e6;
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / std::max<size_t>(1, num_tokens);
}

void BM_Load(benchmark::State& state, const std::string& vocab) {
  std::string path = SharedDir() + "/fixtures/tokenizer/ggml-vocab-" + vocab + ".gguf";
  if (!fs::exists(path)) {
    state.SkipWithError(("needs " + path).c_str());
    return;
  }
  StatusOr<GgufFile> file = GgufFile::Open(path);
  for (auto _ : state) {
    StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*file);
    benchmark::DoNotOptimize(tokenizer.ok());
  }
}

const int kRegistered = [] {
  for (const char* vocab : {"llama-bpe", "llama-spm"}) {
    for (const char* corpus : {"prose", "code", "cjk", "emoji", "mixed", "mixed-once"}) {
      benchmark::RegisterBenchmark((std::string("BM_Encode/") + vocab + "/" + corpus).c_str(),
                                   BM_Encode, std::string(vocab), std::string(corpus))
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
    benchmark::RegisterBenchmark((std::string("BM_Load/") + vocab).c_str(), BM_Load,
                                 std::string(vocab))
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}();

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-corpora") {
    for (const auto& [name, text] : tachyon::Corpora()) {
      std::ofstream out(std::filesystem::path(argv[2]) / (name + ".txt"), std::ios::binary);
      out << text;
      if (!out) {
        std::fprintf(stderr, "cannot write %s/%s.txt\n", argv[2], name.c_str());
        return 1;
      }
    }
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
