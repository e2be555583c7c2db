#include "cli/run_command.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "base/thread_pool.h"
#include "cli/format.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

struct RunFlags {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  int n = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  int threads = ThreadPool::PhysicalCores();
  bool chat = false;
  std::string chat_template;
  std::string system;
  bool print_ids = false;
  bool ignore_eos = false;
  std::string speculative = "off";
  int num_speculative_tokens = 4;
  std::string kv_cache_dtype = "f32";
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

StatusOr<std::vector<TokenId>> ParsePromptIds(const std::string& text, int64_t n_vocab) {
  std::vector<TokenId> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    long value = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || value < 0 || value >= n_vocab) {
      return InvalidArgumentError("--prompt-ids: '" + item + "' is not a token id of this model (0.." +
                                  std::to_string(n_vocab - 1) + ")");
    }
    ids.push_back(TokenId(static_cast<int32_t>(value)));
  }
  if (ids.empty()) return InvalidArgumentError("--prompt-ids is empty");
  return ids;
}

StatusOr<std::vector<TokenId>> PromptTokens(const RunFlags& flags, const Model& model, const Tokenizer& tok) {
  if (!flags.prompt_ids.empty()) return ParsePromptIds(flags.prompt_ids, model.config().n_vocab);
  if (!flags.chat) {
    std::vector<TokenId> ids = tok.Encode(flags.prompt, {.add_special = true});
    if (ids.empty()) return InvalidArgumentError("the prompt is empty and the model adds no BOS; pass -p");
    return ids;
  }
  ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::ForModel(model.file(), flags.chat_template));
  std::vector<ChatMessage> messages;
  if (!flags.system.empty()) messages.push_back({"system", flags.system});
  messages.push_back({"user", flags.prompt});
  std::vector<std::pair<size_t, size_t>> content;  // the prompt's text: control tokens off there
  ASSIGN_OR_RETURN(std::string text, chat.Render(messages, true, &content));
  return tok.Encode(text, {.add_special = true, .parse_special = true, .literal_ranges = content});
}

int Run(const RunFlags& flags) {
  if (flags.n < 0) return Fail("-n must be >= 0");
  StatusOr<std::unique_ptr<Model>> model = Model::Load(flags.model);
  if (!model.ok()) return Fail(model.status().message());
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return Fail(flags.model + ": " + tokenizer.status().message());
  const Model& m = **model;
  const Tokenizer& tok = **tokenizer;
  const ModelConfig& c = m.config();

  StatusOr<std::vector<TokenId>> prompt = PromptTokens(flags, m, tok);
  if (!prompt.ok()) return Fail(prompt.status().message());
  const int64_t total = static_cast<int64_t>(prompt->size()) + flags.n;
  if (total > c.context_length) {
    return Fail("the prompt (" + std::to_string(prompt->size()) + " tokens) plus -n " + std::to_string(flags.n) +
                " exceeds the model's context length of " + std::to_string(c.context_length));
  }
  if (flags.num_speculative_tokens < 1 || flags.num_speculative_tokens > 32) {
    return Fail("--num-speculative-tokens must be from 1 to 32");
  }
  StatusOr<KvType> kv_type = ParseKvType(flags.kv_cache_dtype, c);
  if (!kv_type.ok()) return Fail("--kv-cache-dtype: " + kv_type.status().message());

  // One request on the engine: the same decode loop as `serve` (speculative decoding included).
  constexpr int kBlockSize = 16;
  const int64_t num_prompt = static_cast<int64_t>(prompt->size());
  const int64_t max_model_len = total + 1;
  EngineOptions options{
      .kv = {.num_blocks = static_cast<int>((max_model_len + kBlockSize - 1) / kBlockSize),
             .block_size = kBlockSize,
             .enable_prefix_caching = false},
      .scheduler = {.max_num_batched_tokens = std::max<int64_t>(num_prompt, 1 + flags.num_speculative_tokens),
                    .max_num_seqs = 1,
                    .max_model_len = max_model_len},
      .num_threads = flags.threads,
      .kv_type = *kv_type};
  StatusOr<SpeculativeOptions> speculative =
      ParseSpeculativeMode(flags.speculative, {.num_tokens = flags.num_speculative_tokens});
  if (!speculative.ok()) return Fail(speculative.status().message());
  options.speculative = *speculative;
  StatusOr<std::unique_ptr<Proposer>> proposer = MakeProposer(options, tok.vocab());
  if (!proposer.ok()) return Fail(proposer.status().message());
  Engine engine(m, &tok.vocab(), options, std::move(proposer).value());
  Status added = engine.Add({.id = SeqId(1),
                             .prompt = *prompt,
                             .sampling = {.temperature = flags.temperature,
                                          .top_k = flags.top_k,
                                          .top_p = flags.top_p,
                                          .min_p = flags.min_p,
                                          .repetition_penalty = flags.repeat_penalty,
                                          .seed = flags.seed},
                             .max_tokens = std::max(1, flags.n),
                             .ignore_eos = flags.ignore_eos});
  if (!added.ok()) return Fail(added.message());

  // Text generated right after a lone BOS drops SentencePiece's leading space, as llama2.c does.
  const bool after_bos_only = prompt->size() == 1 && tok.vocab().bos() && (*prompt)[0] == *tok.vocab().bos();
  StreamingDetokenizer detok(tok, /*special=*/false, /*strip_leading_space=*/after_bos_only);
  if (!flags.print_ids && flags.prompt_ids.empty() && !flags.chat) {
    std::fputs(flags.prompt.c_str(), stdout);
    std::fflush(stdout);
  }

  std::vector<TokenId> generated;
  auto start = std::chrono::steady_clock::now();
  double prompt_seconds = -1;
  int64_t num_forwards = 0;  // after the prompt's
  while (engine.HasWork()) {
    std::vector<RequestOutput> outputs = engine.Step();
    if (prompt_seconds < 0) {
      prompt_seconds = Seconds(start);
      start = std::chrono::steady_clock::now();
    } else {
      ++num_forwards;
    }
    for (const RequestOutput& out : outputs) {
      for (TokenId next : out.new_tokens) {
        // The end-of-generation token that stopped it is not text.
        if (static_cast<int>(generated.size()) == flags.n ||
            (out.finish_reason == FinishReason::kStop && tok.vocab().IsEndOfGeneration(next))) {
          break;
        }
        generated.push_back(next);
        if (!flags.print_ids) std::fputs(detok.Add(next).c_str(), stdout);
      }
      if (!flags.print_ids) std::fflush(stdout);
    }
  }
  const double gen_seconds = Seconds(start);
  if (flags.print_ids) {
    for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? " " : "", generated[i].value());
    std::printf("\n");
  } else {
    std::fputs(detok.Flush().c_str(), stdout);
    std::printf("\n");
  }
  std::fflush(stdout);
  // Tokens after the first (which the prompt's pass gives) over the time they took.
  const size_t num_later = generated.empty() ? 0 : generated.size() - 1;
  std::fprintf(stderr, "\nprompt: %lld tokens in %.1f ms (%.1f tokens/s)\n", static_cast<long long>(num_prompt),
               prompt_seconds * 1e3, num_prompt / std::max(prompt_seconds, 1e-9));
  std::fprintf(stderr, "generation: %zu tokens in %.1f ms (%.1f tokens/s, %.2f ms/token), %d threads\n",
               generated.size(), gen_seconds * 1e3, num_later / std::max(gen_seconds, 1e-9),
               num_later ? gen_seconds * 1e3 / num_later : 0.0, flags.threads);
  if (engine.speculates()) {
    const SpeculativeStats& s = engine.speculative_stats();
    std::fprintf(stderr,
                 "speculative (%s): %lld forward passes for %zu tokens; %lld proposed, %lld accepted (%.1f%%), "
                 "%.2f tokens per verifying pass\n",
                 flags.speculative.c_str(), static_cast<long long>(num_forwards), num_later,
                 static_cast<long long>(s.num_draft_tokens), static_cast<long long>(s.num_accepted_tokens),
                 s.num_draft_tokens ? 100.0 * s.num_accepted_tokens / s.num_draft_tokens : 0.0,
                 s.num_drafts ? static_cast<double>(s.num_emitted_tokens) / s.num_drafts : 0.0);
  }
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Generate from a prompt, streaming text to stdout, e.g. tachyon run --model m.gguf -p \"Once upon a time\" -n 64 --temp 0");
  cmd->add_option("--model", flags->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", flags->prompt, "Prompt text");
  cmd->add_option("--prompt-ids", flags->prompt_ids, "Prompt as token ids, e.g. 1,2,3 (instead of text)");
  cmd->add_option("-n", flags->n, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temp", flags->temperature, "Temperature; 0 is greedy")->capture_default_str();
  cmd->add_option("--top-k", flags->top_k, "Top-k; 0 keeps all tokens")->capture_default_str();
  cmd->add_option("--top-p", flags->top_p, "Top-p (nucleus); 1 is off")->capture_default_str();
  cmd->add_option("--min-p", flags->min_p, "Min-p; 0 is off")->capture_default_str();
  cmd->add_option("--repeat-penalty", flags->repeat_penalty, "Repetition penalty; 1 is off")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Sampling seed (same seed, same tokens)")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "Worker threads (default: physical cores)")->capture_default_str();
  cmd->add_flag("--chat", flags->chat, "Send the prompt as a user message through the model's chat template");
  cmd->add_option("--chat-template", flags->chat_template,
                  "With --chat: a Jinja template file (FILE.jinja) or a built-in renderer (chatml, llama3, llama2, "
                  "mistral, mistral-v7, phi3, gemma, deepseek, deepseek3, zephyr) instead of the model's own");
  cmd->add_option("--system", flags->system, "With --chat: a system message");
  cmd->add_flag("--print-ids", flags->print_ids, "Print the generated token ids (one line) instead of text");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "Do not stop at end-of-generation tokens: generate exactly -n");
  cmd->add_option("--speculative", flags->speculative,
                  "Speculative decoding: ngram, draft:FILE (a small GGUF model with the same vocabulary) or off; "
                  "the output is the same either way")
      ->capture_default_str();
  cmd->add_option("--num-speculative-tokens", flags->num_speculative_tokens,
                  "Most tokens proposed per step (1-32; adapts below it to the acceptance)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype, "K/V element type: f32, f16 or q8_0")
      ->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace tachyon::cli
