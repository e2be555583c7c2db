// Writes the seed corpus of tokenizer_fuzz: the tokenizer conformance strings
// (from ../shared when present) and a few texts of our own.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tokenizer_fuzz_seeds DIR\n");
    return 2;
  }
  std::vector<std::string> seeds = {
      "Hello world", " leading space", "tabs\tand\nnewlines\r\n", "<|eot_id|><s></s>[INST]",
      "emoji 🦙🚀😶‍🌫️ and CJK 我想在apple工作", "Führer Cửa Việt", "3333333 12.5%",
      std::string("bad utf8 \xC3\x28 \xF0\x9F\x98 \xFF end"), "▁▁already▁escaped"};
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  std::string inp = std::string(env ? env : TACHYON_SHARED_DIR) +
                    "/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf.inp";
  if (std::ifstream in{inp, std::ios::binary}) {
    std::stringstream ss;
    ss << in.rdbuf();
    std::string all = ss.str(), separator = "\n__ggml_vocab_test__\n";
    for (size_t start = 0, found; (found = all.find(separator, start)) != std::string::npos;
         start = found + separator.size()) {
      seeds.push_back(all.substr(start, found - start));
    }
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream(std::string(argv[1]) + "/seed" + std::to_string(i), std::ios::binary) << seeds[i];
  }
  return 0;
}
