#include "cli/embed_command.h"

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "embed/sts_eval.h"
#include "gateway/embedder_spec.h"

namespace tachyon::cli {
namespace {

struct EmbedFlags {
  std::string kind;  // "" : local with --model, else hash
  std::string model;
  std::string vectors, words;
  std::vector<std::string> corpus;
  int dimension = 0;
  double sif_a = 1e-3;
  int remove_components = 1;
  std::string url, api_key_env;
  std::string sts;
  int speed_runs = 200;
  size_t batch = 0;
  std::vector<std::string> texts;
  std::string jsonl;
  int threads = 1;
  std::string pooling;
  bool no_normalize = false;
  int64_t batch_tokens = 4096;
};

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

StatusOr<std::unique_ptr<Embedder>> MakeFlagsEmbedder(const EmbedFlags& flags, std::string* describe) {
  const std::string kind = !flags.kind.empty() ? flags.kind : !flags.model.empty() ? "local" : "hash";
  EmbedderSpecOptions options{.threads = flags.threads,
                              .normalize = !flags.no_normalize,
                              .max_batch_tokens = flags.batch_tokens,
                              .corpus = flags.corpus,
                              .words_path = flags.words,
                              .sif_a = flags.sif_a,
                              .remove_components = flags.remove_components,
                              .dimensions = flags.dimension};
  std::string spec;
  if (kind == "local") {
    if (flags.model.empty()) return InvalidArgumentError("--kind local needs --model FILE.gguf");
    spec = "local:" + flags.model;
    if (!flags.pooling.empty()) {
      StatusOr<Pooling> pooling = ParsePooling(flags.pooling);
      if (!pooling.ok()) return pooling.status().WithContext("--pooling");
      options.pooling = *pooling;
    }
  } else if (kind == "hash") {
    spec = flags.dimension > 0 ? "hash:" + std::to_string(flags.dimension) : "hash";
  } else if (kind == "words") {
    if (flags.vectors.empty()) return InvalidArgumentError("--kind words needs --vectors FILE");
    spec = "words:" + flags.vectors;
  } else if (kind == "remote") {
    if (flags.url.empty() || flags.model.empty()) {
      return InvalidArgumentError("--kind remote needs --url BASE_URL and --model NAME");
    }
    spec = "remote:" + flags.url + "#" + flags.model;
    if (!flags.api_key_env.empty()) {
      const char* key = std::getenv(flags.api_key_env.c_str());
      if (key == nullptr) return InvalidArgumentError("--api-key-env: " + flags.api_key_env + " is not set");
      options.api_key = key;
    }
  } else {
    return InvalidArgumentError("unknown --kind '" + kind + "' (local, hash, words, remote)");
  }
  return MakeEmbedder(spec, options, describe);
}

// --sts: Spearman on the pairs, then one short sentence embedded again and again.
int RunSts(const EmbedFlags& flags, Embedder& embedder, const std::string& describe) {
  StatusOr<std::vector<StsPair>> pairs = ReadStsPairs(flags.sts);
  if (!pairs.ok()) return Fail(pairs.status().message());
  const auto start = std::chrono::steady_clock::now();
  StatusOr<double> rho = EvaluateSts(embedder, *pairs);
  if (!rho.ok()) return Fail(rho.status().message());
  const double eval_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<std::string> one = {"A man is playing a guitar."};
  const auto speed_start = std::chrono::steady_clock::now();
  for (int i = 0; i < flags.speed_runs; ++i) {
    StatusOr<std::vector<float>> v = embedder.Embed(one);
    if (!v.ok()) return Fail(v.status().message());
  }
  const double per_second =
      flags.speed_runs / std::chrono::duration<double>(std::chrono::steady_clock::now() - speed_start).count();
  nlohmann::ordered_json out = {{"embedder", describe},
                                {"id", embedder.id()},
                                {"sts_file", flags.sts},
                                {"pairs", pairs->size()},
                                {"spearman", *rho},
                                {"eval_seconds", eval_seconds},
                                {"one_sentence_per_second", per_second}};
  std::cout << out.dump() << "\n";
  std::fprintf(stderr, "%s: Spearman %.4f on %zu pairs of %s; one short sentence: %.0f embeddings/s\n",
               describe.c_str(), *rho, pairs->size(), flags.sts.c_str(), per_second);
  return 0;
}

int Run(const EmbedFlags& flags) {
  std::string describe;
  StatusOr<std::unique_ptr<Embedder>> embedder = MakeFlagsEmbedder(flags, &describe);
  if (!embedder.ok()) return Fail(embedder.status().message());
  if (!flags.sts.empty()) return RunSts(flags, **embedder, describe);
  std::vector<std::string> texts = flags.texts;
  if (!flags.jsonl.empty()) {
    StatusOr<std::vector<std::string>> read = ReadJsonl(flags.jsonl);
    if (!read.ok()) return Fail(read.status().message());
    texts.insert(texts.end(), read->begin(), read->end());
  }
  if (texts.empty()) return Fail("nothing to embed: give texts, --jsonl FILE or --sts FILE");
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<float>> vectors = std::vector<float>();
  const size_t batch = flags.batch > 0 ? flags.batch : texts.size();
  for (size_t i = 0; i < texts.size(); i += batch) {
    StatusOr<std::vector<float>> part =
        (*embedder)->Embed(std::span<const std::string>(texts).subspan(i, std::min(batch, texts.size() - i)));
    if (!part.ok()) return Fail(part.status().message());
    vectors->insert(vectors->end(), part->begin(), part->end());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int dim = (*embedder)->dimension();
  for (size_t i = 0; i < texts.size(); ++i) {
    nlohmann::ordered_json out = {{"text", texts[i]},
                                  {"embedding", std::vector<float>(&(*vectors)[i * dim], &(*vectors)[(i + 1) * dim])}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::fprintf(stderr, "%s: %zu texts, dimension %d, in %.1f ms (%.1f texts/s)\n", describe.c_str(), texts.size(),
               dim, seconds * 1e3, texts.size() / seconds);
  return 0;
}

}  // namespace

void AddEmbedCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EmbedFlags>();
  CLI::App* cmd = app.add_subcommand(
      "embed",
      "Sentence embeddings, one JSON line {\"text\", \"embedding\"} per text, from a GGUF encoder (bert, "
      "nomic-bert), an OpenAI-compatible upstream, word vectors or n-gram hashing; or, with --sts, their Spearman "
      "correlation on an STS Benchmark file. E.g. tachyon embed --model bge-small.gguf \"a first sentence\" "
      "\"a second one\"");
  cmd->add_option("--kind", flags->kind,
                  "local (a GGUF --model), remote (--url, --model), words (--vectors, --corpus) or hash "
                  "(default: local with --model, else hash)");
  cmd->add_option("--model", flags->model, "GGUF embedding model (local), or the upstream's model name (remote)");
  cmd->add_option("--vectors", flags->vectors,
                  "words: word vectors (GloVe text, word2vec text or .bin, or raw float32 .f32 with --words)");
  cmd->add_option("--words", flags->words, "words: the words of a .f32 vectors file, one a line (default: "
                                           "the .f32 path with .vocab.txt)");
  cmd->add_option("--corpus", flags->corpus,
                  "words: text files, one text a line, for word frequencies and the common component (repeatable)");
  cmd->add_option("--sif-a", flags->sif_a, "words: a of the weight a / (a + p(w))")->capture_default_str();
  cmd->add_option("--remove-components", flags->remove_components,
                  "words: principal directions of the corpus removed")->capture_default_str();
  cmd->add_option("--dimension", flags->dimension, "hash: slots (default 1024); remote: dimensions asked for");
  cmd->add_option("--url", flags->url, "remote: the upstream's base URL, e.g. http://127.0.0.1:8000/v1");
  cmd->add_option("--api-key-env", flags->api_key_env, "remote: environment variable holding the upstream's key");
  cmd->add_option("--batch", flags->batch, "Texts per Embed call (default: all at once)");
  cmd->add_option("--sts", flags->sts,
                  "Evaluate instead: Spearman of cosine vs score on an STS Benchmark file (tab-separated: genre, "
                  "file, year, id, score, sentence 1, sentence 2), and embeddings/s for one short sentence");
  cmd->add_option("--speed-runs", flags->speed_runs, "With --sts: embeddings of the short sentence timed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("texts", flags->texts, "Texts to embed");
  cmd->add_option("--jsonl", flags->jsonl, "Also embed the {\"text\": ...} lines of this file, in one batch");
  cmd->add_option("--threads", flags->threads, "local: threads for the forward pass")->capture_default_str();
  cmd->add_option("--pooling", flags->pooling, "local: mean, cls or last (default: the model file's pooling_type)");
  cmd->add_flag("--no-normalize", flags->no_normalize, "local: the pooled vectors without L2 normalization");
  cmd->add_option("--batch-tokens", flags->batch_tokens, "local: most tokens in one forward pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace tachyon::cli
