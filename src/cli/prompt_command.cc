#include "cli/prompt_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "cli/format.h"
#include "gateway/embedder_spec.h"
#include "gateway/trim/prompt_audit.h"
#include "gateway/trim/prompt_trimmer.h"
#include "model/kv_buffer.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

struct AuditFlags {
  std::string file, model, embedder = "hash", write;
  double near_threshold = 0.8;
  int64_t min_words = 5;
  double prefill_tps = 0;
  int64_t measure_tokens = 512;
  int threads = ThreadPool::PhysicalCores();
  bool json = false;
};

// The audited text: the file as it is, or a request JSON's system messages
// (every message's text when it has none, or its prompt).
struct AuditInput {
  std::string text;
  std::string what;            // "text" or "the system prompt of a request (2 messages)"
  std::optional<nlohmann::json> request;
};

StatusOr<AuditInput> ReadInput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  AuditInput input{.text = buffer.str(), .what = "text"};
  nlohmann::json body = nlohmann::json::parse(input.text, nullptr, false);
  if (!body.is_object()) return input;  // not JSON: a prompt as text
  if (body.contains("prompt") && body["prompt"].is_string()) {
    input.text = body["prompt"].get<std::string>();
    input.what = "the prompt of a completions request";
    input.request = std::move(body);
    return input;
  }
  if (!body.contains("messages") || !body["messages"].is_array()) {
    return InvalidArgumentError(path + ": a JSON file must be a request with \"messages\" or \"prompt\"");
  }
  auto texts = [&](bool system_only) {
    std::string out;
    int n = 0;
    for (const nlohmann::json& m : body["messages"]) {
      const std::string role = m.value("role", "");
      if (system_only && role != "system" && role != "developer") continue;
      if (!m.contains("content") || !m["content"].is_string()) continue;
      out += (out.empty() ? "" : "\n\n") + m["content"].get<std::string>();
      ++n;
    }
    return std::pair{out, n};
  };
  auto [text, n] = texts(true);
  input.what = "the system prompt of a request (" + std::to_string(n) + (n == 1 ? " message)" : " messages)");
  if (n == 0) {
    std::tie(text, n) = texts(false);
    input.what = "the messages of a request with no system prompt (" + std::to_string(n) + ")";
  }
  input.text = std::move(text);
  input.request = std::move(body);
  return input;
}

// Prefill tokens per second of the model on the audited prompt's first tokens.
struct PrefillSpeed {
  double tokens_per_second = 0;
  int64_t tokens = 0;
};

StatusOr<PrefillSpeed> MeasurePrefill(const std::string& model_path, const std::string& text, int64_t max_tokens,
                                      int threads) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(model_path));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::FromGguf(model->file()));
  std::vector<TokenId> tokens = tokenizer->Encode(text, {.add_special = true});
  const int64_t limit = std::min<int64_t>(max_tokens, model->config().context_length);
  if (static_cast<int64_t>(tokens.size()) > limit) tokens.resize(limit);
  if (tokens.empty()) return InvalidArgumentError("the prompt has no tokens to time a prefill with");
  constexpr int kBlockSize = 16;
  KvBuffer kv(model->config(), kBlockSize, (static_cast<int64_t>(tokens.size()) + kBlockSize - 1) / kBlockSize);
  std::vector<int32_t> blocks(kv.num_blocks());
  for (int32_t b = 0; b < kv.num_blocks(); ++b) blocks[b] = b;
  ThreadPool pool(threads);
  const ForwardBatch batch =
      ForwardBatch::OneSequence(tokens, 0, blocks.data(), static_cast<int64_t>(blocks.size()));
  double best = 1e300;
  for (int run = 0; run < 2; ++run) {  // the better of two: the first pays for page faults
    const auto start = std::chrono::steady_clock::now();
    model->Forward(batch, kv, pool);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return PrefillSpeed{static_cast<double>(tokens.size()) / best, static_cast<int64_t>(tokens.size())};
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string Quote(const std::string& s) {
  std::string cut = s.size() > 100 ? s.substr(0, 100) + "..." : s;
  return "\"" + cut + "\"";
}

nlohmann::ordered_json PairsJson(const std::vector<AuditPair>& pairs) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const AuditPair& p : pairs) {
    out.push_back({{"cosine", p.cosine}, {"line_a", p.line_a}, {"a", p.a}, {"line_b", p.line_b}, {"b", p.b}});
  }
  return out;
}

void PrintText(const AuditFlags& flags, const AuditInput& input, const AuditReport& r, const std::string& tokenizer,
               const std::optional<PrefillSpeed>& speed) {
  std::printf("%s: %s\n", flags.file.c_str(), input.what.c_str());
  std::printf("tokenizer: %s%s\n", tokenizer.c_str(), flags.model.empty() ? " (--model FILE.gguf for a model's)" : "");
  std::printf("tokens: %lld in %zu sections\n\n", static_cast<long long>(r.tokens), r.sections.size());
  std::printf("  %4s %11s %7s  %s\n", "#", "lines", "tokens", "section");
  for (size_t k = 0; k < r.sections.size(); ++k) {
    const AuditSection& s = r.sections[k];
    const std::string lines = std::to_string(s.first_line) + "-" + std::to_string(s.last_line);
    std::printf("  %4zu %11s %7lld  %s\n", k + 1, lines.c_str(), static_cast<long long>(s.tokens), s.title.c_str());
  }
  std::printf("\nexact duplicates (removed by --write and by a route's trim.duplicates): %zu\n", r.duplicates.size());
  for (const AuditDuplicate& d : r.duplicates) {
    std::string lines;
    for (size_t l : d.lines) lines += (lines.empty() ? "" : ", ") + std::to_string(l);
    std::printf("  %zux, %lld tokens each, lines %s: %s\n", d.lines.size(), static_cast<long long>(d.tokens_each),
                lines.c_str(), Quote(d.text).c_str());
  }
  std::printf("\nnear duplicates (cosine >= %.2f, %s; for you to merge): %zu\n", flags.near_threshold,
              flags.embedder.c_str(), r.near_duplicates.size());
  for (const AuditPair& p : r.near_duplicates) {
    std::printf("  %.3f  line %zu: %s\n         line %zu: %s\n", p.cosine, p.line_a, Quote(p.a).c_str(), p.line_b,
                Quote(p.b).c_str());
  }
  std::printf("\ncontradictions (one says not what the other says): %zu\n", r.contradictions.size());
  for (const AuditPair& p : r.contradictions) {
    std::printf("  line %zu: %s\n  line %zu: %s\n", p.line_a, Quote(p.a).c_str(), p.line_b, Quote(p.b).c_str());
  }
  std::printf("\nrepeated examples: %zu\n", r.repeated_examples.size());
  for (const AuditRepeatedExample& e : r.repeated_examples) {
    const AuditSection& s = r.sections[e.section];
    const AuditSection& t = r.sections[e.earlier];
    std::printf("  lines %zu-%zu repeat lines %zu-%zu (cosine %.3f): %s\n", s.first_line, s.last_line, t.first_line,
                t.last_line, e.cosine, s.title.c_str());
  }
  const double share = r.tokens > 0 ? 100.0 * r.removable_tokens / r.tokens : 0;
  std::printf("\nremovable: %lld of %lld tokens (%.1f%%): duplicates %lld, whitespace %lld; "
              "near duplicates to review: %lld more\n",
              static_cast<long long>(r.removable_tokens), static_cast<long long>(r.tokens), share,
              static_cast<long long>(r.duplicate_tokens), static_cast<long long>(r.whitespace_tokens),
              static_cast<long long>(r.review_tokens));
  if (speed) {
    std::printf("prefill saved: %.1f ms per request at %.1f tokens/s (%s)\n",
                1e3 * r.removable_tokens / speed->tokens_per_second, speed->tokens_per_second,
                speed->tokens > 0 ? ("measured on " + std::to_string(speed->tokens) + " tokens of this prompt").c_str()
                                  : "--prefill-tps");
  } else {
    std::printf("prefill saved: --model FILE.gguf (measured) or --prefill-tps N gives it in milliseconds\n");
  }
}

int RunAudit(const AuditFlags& flags) {
  StatusOr<AuditInput> input = ReadInput(flags.file);
  if (!input.ok()) return Fail(input.status().message());
  StatusOr<std::shared_ptr<const TokenCounter>> counter = TokenCounter::ForModel(flags.model);
  if (!counter.ok()) return Fail("--model: " + counter.status().message());
  StatusOr<std::unique_ptr<Embedder>> embedder = MakeEmbedder(flags.embedder);
  if (!embedder.ok()) return Fail("--embedder: " + embedder.status().message());
  const AuditOptions options{.min_words = flags.min_words, .near_threshold = flags.near_threshold};
  StatusOr<AuditReport> report = AuditPrompt(input->text, **counter, **embedder, options);
  if (!report.ok()) return Fail(report.status().message());

  std::optional<PrefillSpeed> speed;
  if (flags.prefill_tps > 0) {
    speed = PrefillSpeed{flags.prefill_tps, 0};
  } else if (!flags.model.empty()) {
    StatusOr<PrefillSpeed> measured = MeasurePrefill(flags.model, input->text, flags.measure_tokens, flags.threads);
    if (measured.ok()) {
      speed = *measured;
    } else {  // a vocab-only file counts tokens but cannot be timed
      std::fprintf(stderr, "tachyon: prefill not timed (%s); --prefill-tps N gives the saving\n",
                   measured.status().message().c_str());
    }
  }

  if (!flags.write.empty()) {
    if (SameFile(flags.write, flags.file)) return Fail("--write must name another file than the one audited");
    std::string out = report->trimmed;
    if (input->request) {  // a request: its messages through the trimmer's same two steps
      nlohmann::json body = *input->request;
      if (body.contains("prompt")) {
        body["prompt"] = report->trimmed;
      } else if (StatusOr<TrimmedTokens> t = TrimChatBody(body, {.whitespace = true, .duplicates = true,
                                                                  .min_duplicate_words = flags.min_words},
                                                            **counter);
                 !t.ok()) {
        return Fail(t.status().message());
      }
      out = body.dump(2);
    }
    std::ofstream file(flags.write, std::ios::binary | std::ios::trunc);
    file << out << (out.empty() || out.back() == '\n' ? "" : "\n");
    if (!file) return Fail("cannot write '" + flags.write + "'");
  }

  const AuditReport& r = *report;
  if (!flags.json) {
    PrintText(flags, *input, r, (*counter)->description(), speed);
    if (!flags.write.empty()) std::printf("trimmed prompt written to %s\n", flags.write.c_str());
    return 0;
  }
  nlohmann::ordered_json sections = nlohmann::ordered_json::array();
  for (const AuditSection& s : r.sections) {
    sections.push_back({{"first_line", s.first_line}, {"last_line", s.last_line}, {"title", s.title},
                        {"tokens", s.tokens}, {"example", s.example}});
  }
  nlohmann::ordered_json duplicates = nlohmann::ordered_json::array();
  for (const AuditDuplicate& d : r.duplicates) {
    duplicates.push_back({{"text", d.text}, {"count", d.lines.size()}, {"lines", d.lines},
                          {"tokens_each", d.tokens_each}});
  }
  nlohmann::ordered_json examples = nlohmann::ordered_json::array();
  for (const AuditRepeatedExample& e : r.repeated_examples) {
    examples.push_back({{"section", e.section + 1}, {"repeats_section", e.earlier + 1}, {"cosine", e.cosine}});
  }
  nlohmann::ordered_json out = {{"file", flags.file},
                                {"input", input->what},
                                {"tokenizer", (*counter)->description()},
                                {"tokens", r.tokens},
                                {"removable_tokens", r.removable_tokens},
                                {"duplicate_tokens", r.duplicate_tokens},
                                {"whitespace_tokens", r.whitespace_tokens},
                                {"review_tokens", r.review_tokens},
                                {"duplicates", duplicates},
                                {"near_duplicates", PairsJson(r.near_duplicates)},
                                {"contradictions", PairsJson(r.contradictions)},
                                {"repeated_examples", examples},
                                {"sections", sections}};
  if (speed) {
    out["prefill_tokens_per_second"] = speed->tokens_per_second;
    out["prefill_ms_saved"] = 1e3 * r.removable_tokens / speed->tokens_per_second;
  }
  if (!flags.write.empty()) out["written"] = flags.write;
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

void AddPromptCommand(CLI::App& app, int* exit_code) {
  CLI::App* prompt = app.add_subcommand("prompt", "Look at a system prompt the way the trimmer does");
  prompt->require_subcommand(1);
  auto flags = std::make_shared<AuditFlags>();
  CLI::App* audit = prompt->add_subcommand(
      "audit", "Tokens per section, instructions repeated word for word or nearly, instructions that contradict by "
               "negation, repeated examples, the tokens the trimmer would remove and the prefill time that saves, "
               "e.g. tachyon prompt audit system.txt --model m.gguf --write trimmed.txt");
  audit->add_option("file", flags->file, "A system prompt as text, or a request JSON (its system messages)")
      ->required();
  audit->add_option("--model", flags->model,
                    "GGUF file whose tokenizer counts, and whose prefill speed is measured on the prompt "
                    "(default: the built-in byte-level tokenizer, 1 token per byte)");
  audit->add_option("--embedder", flags->embedder,
                    "For near duplicates: hash, hash:DIM, words:VECTORS, local:MODEL.gguf or remote:BASE_URL#MODEL")
      ->capture_default_str();
  audit->add_option("--near-threshold", flags->near_threshold, "Cosine at which two instructions are near duplicates")
      ->capture_default_str();
  audit->add_option("--min-words", flags->min_words, "Shorter instructions are never duplicates")
      ->capture_default_str();
  audit->add_option("--prefill-tps", flags->prefill_tps,
                    "Prefill tokens per second to estimate the time saved with (instead of measuring with --model)");
  audit->add_option("--measure-tokens", flags->measure_tokens, "Tokens of the prompt the prefill is timed on")
      ->capture_default_str();
  audit->add_option("--threads", flags->threads, "Threads for the timed prefill")->capture_default_str();
  audit->add_option("--write", flags->write,
                    "Write the trimmed prompt (whitespace and exact duplicates removed) to this file, for review; "
                    "never the audited file itself");
  audit->add_flag("--json", flags->json,
                  "One JSON object: tokens, removable_tokens, duplicates, near_duplicates, contradictions, ...");
  audit->callback([flags, exit_code] { *exit_code = RunAudit(*flags); });
}

}  // namespace tachyon::cli
