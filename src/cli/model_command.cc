#include "cli/model_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "cli/format.h"
#include "gguf/gguf_file.h"
#include "model/model_compare.h"
#include "model/model_gen.h"
#include "model/model_quantize.h"
#include "model/model_shape.h"
#include "model/model_summary.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "tachyon: error: %s\n", status.message().c_str());
  return 1;
}

// ---- model gen -------------------------------------------------------------

struct GenFlags {
  std::string shape;
  std::string type = "f16";
  uint64_t seed = 0;
  std::string vocab;
  std::string out;
  int threads = ThreadPool::PhysicalCores();
  bool list = false;
};

void PrintShapes() {
  std::printf("%-12s %-10s %5s %6s %6s %4s %6s %8s  %s\n", "shape", "arch", "dim", "layers",
              "heads", "kv", "ffn", "context", "mirrors");
  for (const ModelShape& s : BuiltinModelShapes()) {
    std::printf("%-12s %-6s %5lld %6lld %6lld %4lld %6lld %8lld  %s\n", s.name.c_str(),
                s.architecture.c_str(), static_cast<long long>(s.n_embd),
                static_cast<long long>(s.n_layer), static_cast<long long>(s.n_head),
                static_cast<long long>(s.n_head_kv), static_cast<long long>(s.n_ff),
                static_cast<long long>(s.context_length), s.description.c_str());
  }
}

int RunGen(const GenFlags& flags) {
  if (flags.list) {
    PrintShapes();
    return 0;
  }
  if (flags.shape.empty() || flags.out.empty()) {
    return Fail(InvalidArgumentError("model gen needs --shape and --out (see --list for shapes)"));
  }
  const ModelShape* shape = FindModelShape(flags.shape);
  if (shape == nullptr) {
    std::string known;
    for (const ModelShape& s : BuiltinModelShapes()) known += (known.empty() ? "" : ", ") + s.name;
    return Fail(InvalidArgumentError("unknown shape '" + flags.shape + "' (known: " + known + ")"));
  }
  StatusOr<QuantScheme> scheme = ParseQuantScheme(flags.type);
  if (!scheme.ok()) return Fail(scheme.status());
  auto start = std::chrono::steady_clock::now();
  StatusOr<ModelGenResult> result = GenerateRandomModel({.shape = shape,
                                                         .scheme = *scheme,
                                                         .seed = flags.seed,
                                                         .vocab_path = flags.vocab,
                                                         .out_path = flags.out,
                                                         .num_threads = flags.threads});
  if (!result.ok()) return Fail(result.status());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: shape %s, %s, %s parameters, vocab %lld, %s in %.1f s\n",
              flags.out.c_str(), shape->name.c_str(), scheme->name.c_str(),
              FormatCount(result->num_parameters).c_str(),
              static_cast<long long>(result->vocab_size), FormatBytes(result->file_bytes).c_str(),
              seconds);
  return 0;
}

// ---- model quantize --------------------------------------------------------

struct QuantizeFlags {
  std::string in, out, type;
  int threads = ThreadPool::PhysicalCores();
};

int RunQuantize(const QuantizeFlags& flags) {
  StatusOr<QuantScheme> scheme = ParseQuantScheme(flags.type);
  if (!scheme.ok()) return Fail(scheme.status());
  auto start = std::chrono::steady_clock::now();
  StatusOr<QuantizeResult> result = QuantizeModel(flags.in, flags.out, *scheme, flags.threads);
  if (!result.ok()) return Fail(result.status());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %s, %d of %d tensors requantized, %s -> %s in %.1f s\n", flags.out.c_str(),
              scheme->name.c_str(), result->num_requantized, result->num_tensors,
              FormatBytes(result->input_bytes).c_str(), FormatBytes(result->output_bytes).c_str(), seconds);
  return 0;
}

// ---- model compare ---------------------------------------------------------

struct CompareFlags {
  std::string reference, model, text_file;
  int tokens = 256;
  int threads = ThreadPool::PhysicalCores();
  bool json = false;
};

// The text compared on when no --text is given: plain narrative prose.
constexpr const char* kCompareText =
    "The lighthouse keeper walked the narrow stairs every evening, counting the steps as his father had. "
    "At the top he wiped the salt from the glass, trimmed the wick and waited for the first ship. "
    "Some nights the sea was quiet and the beam swept over nothing but water; on others the wind pulled "
    "at the door and he wrote in his log by the light of a small lamp. In spring a girl from the village "
    "brought him bread and news: a new boat in the harbour, a wedding, the price of fish. He listened, "
    "asked what the weather had been inland, and sent her home before the tide turned. ";

int RunCompare(const CompareFlags& flags) {
  if (flags.tokens < 2) return cli::Fail("--tokens must be at least 2");
  StatusOr<std::unique_ptr<Model>> reference = Model::Load(flags.reference);
  if (!reference.ok()) return Fail(reference.status());
  StatusOr<std::unique_ptr<Model>> model = Model::Load(flags.model);
  if (!model.ok()) return Fail(model.status());
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf((*reference)->file());
  if (!tokenizer.ok()) return cli::Fail(flags.reference + ": " + tokenizer.status().message());
  std::string text;
  if (!flags.text_file.empty()) {
    std::ifstream in(flags.text_file, std::ios::binary);
    if (!in) return cli::Fail("cannot read " + flags.text_file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  } else {
    while (text.size() < static_cast<size_t>(flags.tokens) * 8) text += kCompareText;
  }
  std::vector<TokenId> ids = (*tokenizer)->Encode(text, {.add_special = true});
  const int64_t limit = std::min<int64_t>(flags.tokens, std::min((*reference)->config().context_length,
                                                                 (*model)->config().context_length));
  if (static_cast<int64_t>(ids.size()) > limit) ids.resize(limit);
  StatusOr<ModelComparison> c = CompareModels(**reference, **model, ids, flags.threads);
  if (!c.ok()) return Fail(c.status());
  if (flags.json) {
    nlohmann::json out = {{"reference", flags.reference}, {"model", flags.model},
                          {"positions", c->positions},     {"mean_kl", c->mean_kl},
                          {"median_kl", c->median_kl},     {"p99_kl", c->p99_kl},
                          {"max_kl", c->max_kl},           {"top1_agreement", c->top1_agreement},
                          {"rms_logit_error", c->rms_logit_error}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("%s vs %s over %lld positions\n", flags.model.c_str(), flags.reference.c_str(),
              static_cast<long long>(c->positions));
  std::printf("KL divergence (nats): mean %.6f, median %.6f, p99 %.6f, max %.6f\n", c->mean_kl, c->median_kl,
              c->p99_kl, c->max_kl);
  std::printf("same top token: %.2f%%; RMS logit error %.4f of the reference's\n", 100 * c->top1_agreement,
              c->rms_logit_error);
  return 0;
}

// ---- model info ------------------------------------------------------------

struct InfoFlags {
  std::string path;
  bool json = false;
  bool no_tensors = false;
};

std::string TokenizerKind(const std::string& model) {
  if (model == "llama") return "llama (SentencePiece)";
  if (model == "gpt2") return "gpt2 (byte-level BPE)";
  if (model == "bert") return "bert (WordPiece)";
  return model;
}

nlohmann::json ValueToJson(const GgufValue& value) {
  return std::visit(
      [](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, GgufArray>) {
          nlohmann::json out = nlohmann::json::array();
          for (size_t i = 0; i < v.size(); ++i) out.push_back(ValueToJson(v.at(i)));
          return out;
        } else {
          return v;
        }
      },
      value.variant());
}

// Arrays longer than this are summarized in `--json` (type and length only).
constexpr size_t kMaxJsonArray = 64;

nlohmann::json MetadataToJson(const GgufValue& value) {
  nlohmann::json entry = {{"type", GgufValueTypeName(value.type())}};
  if (const GgufArray* array = value.AsArray()) {
    entry["element_type"] = GgufValueTypeName(array->element_type());
    entry["length"] = array->size();
    if (array->size() <= kMaxJsonArray) entry["value"] = ValueToJson(value);
  } else {
    entry["value"] = ValueToJson(value);
  }
  return entry;
}

void PrintInfoJson(const InfoFlags& flags, const GgufFile& file, const ModelSummary& s) {
  nlohmann::json out;
  out["path"] = flags.path;
  out["gguf_version"] = file.version();
  out["alignment"] = file.alignment();
  out["file_bytes"] = file.file_size();
  out["architecture"] = s.architecture;
  out["name"] = s.name;
  if (s.file_type) {
    out["file_type"] = *s.file_type;
    out["file_type_name"] = FileTypeName(*s.file_type);
  }
  out["parameters"] = s.num_parameters;
  out["tensor_bytes"] = s.tensor_bytes;
  auto opt = [&](const char* key, const auto& v) {
    if (v) out[key] = *v;
  };
  opt("context_length", s.context_length);
  opt("embedding_length", s.embedding_length);
  opt("block_count", s.block_count);
  opt("feed_forward_length", s.feed_forward_length);
  opt("head_count", s.head_count);
  opt("head_count_kv", s.head_count_kv);
  opt("rope_dimension_count", s.rope_dimension_count);
  opt("rope_freq_base", s.rope_freq_base);
  opt("rms_norm_eps", s.rms_norm_eps);
  out["tokenizer"] = {{"model", s.tokenizer_model}, {"pre", s.tokenizer_pre},
                      {"vocab_size", s.vocab_size}};
  out["tensors_by_type"] = s.tensors_by_type;
  nlohmann::json metadata = nlohmann::json::object();
  for (const GgufKeyValue& kv : file.metadata()) metadata[kv.key] = MetadataToJson(kv.value);
  out["metadata"] = metadata;
  if (!flags.no_tensors) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const GgufTensorInfo& t : file.tensors()) {
      tensors.push_back({{"name", t.name},
                         {"type", GgmlTypeName(t.type)},
                         {"shape", t.shape},
                         {"elements", t.num_elements()},
                         {"bytes", t.num_bytes},
                         {"offset", file.data_offset() + t.offset}});
    }
    out["tensors"] = tensors;
  }
  // Strings in a GGUF need not be valid UTF-8; replace bad bytes rather than fail.
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintInfoText(const InfoFlags& flags, const GgufFile& file, const ModelSummary& s) {
  auto row = [](const char* label, const std::string& value) {
    std::printf("%-16s %s\n", label, value.c_str());
  };
  auto num = [](const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : "-"; };
  row("file:", flags.path + " (GGUF v" + std::to_string(file.version()) + ", " +
                   FormatBytes(file.file_size()) + ", alignment " +
                   std::to_string(file.alignment()) + ")");
  row("architecture:", s.architecture.empty() ? "-" : s.architecture);
  if (!s.name.empty()) row("name:", s.name);
  if (s.file_type) {
    std::string name = FileTypeName(*s.file_type);
    row("file type:", (name.empty() ? "unknown" : name) + " (" + std::to_string(*s.file_type) + ")");
  }
  row("parameters:", FormatCount(s.num_parameters) + " (" + std::to_string(s.num_parameters) + ")");
  row("context length:", num(s.context_length));
  row("embedding:", num(s.embedding_length));
  row("layers:", num(s.block_count));
  std::string heads = num(s.head_count);
  if (s.head_count_kv) heads += " (" + std::to_string(*s.head_count_kv) + " KV)";
  if (s.embedding_length && s.head_count && *s.head_count > 0) {
    heads += ", head dim " + std::to_string(s.rope_dimension_count.value_or(
                                 *s.embedding_length / *s.head_count));
  }
  row("heads:", heads);
  row("feed-forward:", num(s.feed_forward_length));
  if (s.rope_freq_base) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", *s.rope_freq_base);
    row("rope base:", buf);
  }
  std::string tokenizer = s.tokenizer_model.empty()
                              ? "-"
                              : TokenizerKind(s.tokenizer_model) + ", " +
                                    std::to_string(s.vocab_size) + " tokens";
  if (!s.tokenizer_pre.empty()) tokenizer += ", pre-tokenizer " + s.tokenizer_pre;
  row("tokenizer:", tokenizer);
  std::string by_type;
  for (const auto& [type, count] : s.tensors_by_type) {
    by_type += (by_type.empty() ? "" : ", ") + type + " x" + std::to_string(count);
  }
  row("tensors:", std::to_string(file.tensors().size()) + " (" + FormatBytes(s.tensor_bytes) +
                      (by_type.empty() ? "" : "; " + by_type) + ")");

  std::printf("\nmetadata (%zu keys):\n", file.metadata().size());
  for (const GgufKeyValue& kv : file.metadata()) {
    std::string type = GgufValueTypeName(kv.value.type());
    if (const GgufArray* a = kv.value.AsArray()) {
      type += "<" + std::string(GgufValueTypeName(a->element_type())) + ">";
    }
    std::printf("  %-44s %-15s %s\n", kv.key.c_str(), type.c_str(),
                kv.value.ToDisplayString().c_str());
  }
  if (flags.no_tensors || file.tensors().empty()) return;
  std::printf("\n  %-40s %-7s %-22s %12s\n", "tensor", "type", "shape", "bytes");
  for (const GgufTensorInfo& t : file.tensors()) {
    std::printf("  %-40s %-7s %-22s %12s\n", t.name.c_str(), GgmlTypeName(t.type),
                t.ShapeString().c_str(), FormatBytes(t.num_bytes).c_str());
  }
}

int RunInfo(const InfoFlags& flags) {
  StatusOr<GgufFile> file = GgufFile::Open(flags.path);
  if (!file.ok()) return Fail(file.status());
  ModelSummary summary = SummarizeModel(*file);
  if (flags.json) {
    PrintInfoJson(flags, *file, summary);
  } else {
    PrintInfoText(flags, *file, summary);
  }
  return 0;
}

}  // namespace

void AddModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* model = app.add_subcommand("model", "Make and inspect GGUF model files");
  model->require_subcommand(1);

  auto gen_flags = std::make_shared<GenFlags>();
  CLI::App* gen = model->add_subcommand(
      "gen",
      "Write a random-weight model of a real shape (N(0, 0.02^2) weights, norms 1), "
      "e.g. tachyon model gen --shape llama-1b --type q4_0 --out /tmp/m.gguf");
  gen->add_option("--shape", gen_flags->shape, "Model shape (see --list)");
  gen->add_option("--type", gen_flags->type,
                  "Weight type of the matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, "
                  "iq4_xs, q4_k, or one of llama.cpp's k-quant mixes q2_k, q3_k_s, q3_k_m, q3_k_l, "
                  "q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k; norms stay f32")
      ->capture_default_str();
  gen->add_option("--seed", gen_flags->seed, "Seed; the same seed writes a byte-identical file")
      ->capture_default_str();
  gen->add_option("--vocab", gen_flags->vocab,
                  "GGUF file (vocab-only or a model) whose tokenizer to copy; the vocabulary "
                  "size follows it. Default: a built-in byte-level vocabulary (258 tokens)");
  gen->add_option("--out", gen_flags->out, "Output GGUF path");
  gen->add_option("--threads", gen_flags->threads, "Worker threads")->capture_default_str();
  gen->add_flag("--list", gen_flags->list, "List the shapes and exit");
  gen->callback([gen_flags, exit_code] { *exit_code = RunGen(*gen_flags); });

  auto quantize_flags = std::make_shared<QuantizeFlags>();
  CLI::App* quantize = model->add_subcommand(
      "quantize", "Rewrite a GGUF model with its weight matrices in another type, "
                  "e.g. tachyon model quantize in.gguf out.gguf --type q4_k_m");
  quantize->add_option("in", quantize_flags->in, "Input GGUF model")->required();
  quantize->add_option("out", quantize_flags->out, "Output GGUF path")->required();
  quantize->add_option("--type", quantize_flags->type,
                       "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q4_k (every matrix "
                       "that type), or a k-quant mix as llama.cpp mixes it: q2_k, q3_k_s, q3_k_m, q3_k_l, "
                       "q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k")
      ->required();
  quantize->add_option("--threads", quantize_flags->threads, "Worker threads")->capture_default_str();
  quantize->callback([quantize_flags, exit_code] { *exit_code = RunQuantize(*quantize_flags); });

  auto compare_flags = std::make_shared<CompareFlags>();
  CLI::App* compare = model->add_subcommand(
      "compare", "How far a model's next-token distributions are from a reference's (KL divergence, same top "
                 "token), e.g. tachyon model compare m-f16.gguf m-q4_k_m.gguf");
  compare->add_option("reference", compare_flags->reference, "Reference GGUF model (e.g. the F16 file)")->required();
  compare->add_option("model", compare_flags->model, "GGUF model to compare (same vocabulary)")->required();
  compare->add_option("--text", compare_flags->text_file,
                      "Text file to run (tokenized by the reference); default: a built-in passage");
  compare->add_option("--tokens", compare_flags->tokens, "Positions compared (at most the context length)")
      ->capture_default_str();
  compare->add_option("--threads", compare_flags->threads, "Worker threads")->capture_default_str();
  compare->add_flag("--json", compare_flags->json, "Print JSON for scripts");
  compare->callback([compare_flags, exit_code] { *exit_code = RunCompare(*compare_flags); });

  auto info_flags = std::make_shared<InfoFlags>();
  CLI::App* info = model->add_subcommand(
      "info", "Print a GGUF file's architecture, parameter count, tokenizer, metadata and tensors");
  info->add_option("file", info_flags->path, "GGUF file")->required();
  info->add_flag("--json", info_flags->json, "Print JSON for scripts");
  info->add_flag("--no-tensors", info_flags->no_tensors, "Leave out the tensor table");
  info->callback([info_flags, exit_code] { *exit_code = RunInfo(*info_flags); });
}

}  // namespace tachyon::cli
