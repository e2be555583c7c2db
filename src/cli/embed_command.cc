#include "cli/embed_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "embed/local_embedder.h"

namespace tachyon::cli {
namespace {

struct EmbedFlags {
  std::string model;
  std::vector<std::string> texts;
  std::string jsonl;
  int threads = 1;
  std::string pooling;
  bool no_normalize = false;
  int64_t batch_tokens = 4096;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tachyon: error: %s\n", message.c_str());
  return 1;
}

StatusOr<std::vector<std::string>> ReadJsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::vector<std::string> texts;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object() || !object.contains("text") || !object["text"].is_string()) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) +
                                  ": expected a JSON object with a string \"text\"");
    }
    texts.push_back(object["text"].get<std::string>());
  }
  return texts;
}

int Run(const EmbedFlags& flags) {
  std::vector<std::string> texts = flags.texts;
  if (!flags.jsonl.empty()) {
    StatusOr<std::vector<std::string>> read = ReadJsonl(flags.jsonl);
    if (!read.ok()) return Fail(read.status().message());
    texts.insert(texts.end(), read->begin(), read->end());
  }
  if (texts.empty()) return Fail("nothing to embed: give texts or --jsonl FILE");
  LocalEmbedderOptions options{.model_path = flags.model,
                               .normalize = !flags.no_normalize,
                               .threads = flags.threads,
                               .max_batch_tokens = flags.batch_tokens};
  if (!flags.pooling.empty()) {
    StatusOr<Pooling> pooling = ParsePooling(flags.pooling);
    if (!pooling.ok()) return Fail("--pooling: " + pooling.status().message());
    options.pooling = *pooling;
  }
  StatusOr<std::unique_ptr<LocalEmbedder>> embedder = LocalEmbedder::Create(options);
  if (!embedder.ok()) return Fail(embedder.status().message());
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<float>> vectors = (*embedder)->Embed(texts);
  if (!vectors.ok()) return Fail(vectors.status().message());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int dim = (*embedder)->dimension();
  for (size_t i = 0; i < texts.size(); ++i) {
    nlohmann::ordered_json out = {{"text", texts[i]},
                          {"embedding", std::vector<float>(&(*vectors)[i * dim], &(*vectors)[(i + 1) * dim])}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::fprintf(stderr, "%s: %zu texts, dimension %d, in %.1f ms (%.1f texts/s)\n",
               (*embedder)->Describe().c_str(), texts.size(), dim, seconds * 1e3, texts.size() / seconds);
  return 0;
}

}  // namespace

void AddEmbedCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EmbedFlags>();
  CLI::App* cmd = app.add_subcommand(
      "embed",
      "Sentence embeddings from a GGUF encoder (bert, nomic-bert), one JSON line {\"text\", \"embedding\"} per "
      "text, e.g. tachyon embed --model bge-small.gguf \"a first sentence\" \"a second one\"");
  cmd->add_option("--model", flags->model, "GGUF embedding model (architecture bert or nomic-bert)")->required();
  cmd->add_option("texts", flags->texts, "Texts to embed");
  cmd->add_option("--jsonl", flags->jsonl, "Also embed the {\"text\": ...} lines of this file, in one batch");
  cmd->add_option("--threads", flags->threads, "Threads for the forward pass")->capture_default_str();
  cmd->add_option("--pooling", flags->pooling, "mean, cls or last (default: the model file's pooling_type)");
  cmd->add_flag("--no-normalize", flags->no_normalize, "Print the pooled vectors without L2 normalization");
  cmd->add_option("--batch-tokens", flags->batch_tokens, "Most tokens in one forward pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace tachyon::cli
