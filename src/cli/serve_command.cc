#include "cli/serve_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/thread_pool.h"
#include "engine/engine_loop.h"
#include "gateway/openai_service.h"
#include "http/http_server.h"
#include "model/model.h"
#include "model/model_gen.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

struct ServeFlags {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  std::string chat_template;
  int threads = ThreadPool::PhysicalCores();
  int block_size = 16;
  uint64_t kv_cache_memory = 0;
  int64_t max_model_len = 0;
  int max_num_seqs = 16;
  int64_t max_num_batched_tokens = 512;
  bool no_prefix_caching = false;
  std::string kv_cache_dtype = "f16";
  size_t max_body_bytes = 8 << 20;
  int max_queue = 256;
  double request_timeout = 0;
  double grace_seconds = 10;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tachyon: error: %s\n", message.c_str());
  return 1;
}

// The demo model: a small random-weight llama with the built-in byte vocabulary.
StatusOr<std::string> DemoModel() {
  std::string dir = (std::filesystem::temp_directory_path() / "tachyon-demo").string();
  std::filesystem::create_directories(dir);
  std::string path = dir + "/demo-tiny-q8_0.gguf";
  if (!std::filesystem::exists(path)) {
    // Written under a name of this process, then renamed: two servers starting at once do not collide.
    const std::string mine = path + "." + std::to_string(::getpid());
    StatusOr<ModelGenResult> gen = GenerateRandomModel(
        {.shape = FindModelShape("tiny"), .scheme = PureScheme(GgmlType::kQ8_0), .seed = 0, .out_path = mine});
    if (!gen.ok()) return gen.status();
    std::error_code ec;
    std::filesystem::rename(mine, path, ec);
    if (ec) return UnavailableError(path + ": " + ec.message());
  }
  return path;
}

int Run(const ServeFlags& flags) {
  // SIGINT/SIGTERM are taken by sigwait below; every thread started from here inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string path = flags.model;
  const bool demo = path.empty();
  if (demo) {
    StatusOr<std::string> demo_path = DemoModel();
    if (!demo_path.ok()) return Fail(demo_path.status().message());
    path = *demo_path;
    std::fprintf(stderr, "tachyon serve: no --model given: serving the built-in demo model (random weights, "
                         "byte-level vocabulary) from %s; its output is noise\n", path.c_str());
  }
  StatusOr<std::unique_ptr<Model>> model = Model::Load(path);
  if (!model.ok()) return Fail(model.status().message());
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return Fail(path + ": " + tokenizer.status().message());
  const ModelConfig& c = (*model)->config();

  std::optional<ChatTemplate> chat;
  std::string template_name = flags.chat_template.empty() && demo ? "chatml" : flags.chat_template;
  StatusOr<ChatTemplate> t = ChatTemplate::ForModel((*model)->file(), template_name);
  if (t.ok()) {
    chat = *t;
  } else if (!flags.chat_template.empty()) {
    return Fail(t.status().message());
  } else {
    std::fprintf(stderr, "tachyon serve: chat requests are disabled: %s\n", t.status().message().c_str());
  }

  const int64_t max_model_len = flags.max_model_len > 0 ? flags.max_model_len : std::min<int64_t>(c.context_length, 4096);
  if (max_model_len > c.context_length) {
    return Fail("--max-model-len " + std::to_string(max_model_len) + " exceeds the model's context length " +
                std::to_string(c.context_length));
  }
  // KV blocks: from --kv-cache-memory, else enough for max_num_seqs full-length sequences, at most 2 GiB.
  if (flags.kv_cache_dtype != "f16" && flags.kv_cache_dtype != "f32" && flags.kv_cache_dtype != "q8_0") {
    return Fail("--kv-cache-dtype must be f16, f32 or q8_0, not " + flags.kv_cache_dtype);
  }
  const KvType kv_type = flags.kv_cache_dtype == "f32"    ? KvType::kF32
                         : flags.kv_cache_dtype == "q8_0" ? KvType::kQ8_0
                                                          : KvType::kF16;
  if (kv_type == KvType::kQ8_0 && c.head_dim % 32 != 0) {
    return Fail("--kv-cache-dtype q8_0 needs a head dimension that is a multiple of 32; this model's is " +
                std::to_string(c.head_dim));
  }
  const uint64_t bytes_per_block = KvBuffer::BlockBytes(c, flags.block_size, kv_type);
  uint64_t kv_bytes = flags.kv_cache_memory;
  if (kv_bytes == 0) {
    const uint64_t full = static_cast<uint64_t>((max_model_len + flags.block_size - 1) / flags.block_size) *
                          flags.max_num_seqs * bytes_per_block;
    kv_bytes = std::min<uint64_t>(full, 2ull << 30);
  }
  const int num_blocks = static_cast<int>(kv_bytes / bytes_per_block);
  if (num_blocks * static_cast<int64_t>(flags.block_size) < max_model_len) {
    return Fail("--kv-cache-memory holds " + std::to_string(num_blocks * static_cast<int64_t>(flags.block_size)) +
                " tokens, fewer than --max-model-len " + std::to_string(max_model_len));
  }
  EngineOptions options{.kv = {.num_blocks = num_blocks, .block_size = flags.block_size,
                               .enable_prefix_caching = !flags.no_prefix_caching},
                        .scheduler = {.max_num_batched_tokens = flags.max_num_batched_tokens,
                                      .max_num_seqs = flags.max_num_seqs, .max_model_len = max_model_len},
                        .num_threads = flags.threads,
                        .kv_type = kv_type};
  auto loop = std::make_unique<EngineLoop>(std::make_unique<Engine>(**model, &(*tokenizer)->vocab(), options));

  std::string name = !flags.served_model_name.empty() ? flags.served_model_name
                     : demo ? "tachyon-demo (random weights)"
                            : std::filesystem::path(path).stem().string();
  OpenAiService service({.model_name = name, .api_key = flags.api_key, .max_model_len = max_model_len,
                         .max_queue = flags.max_queue, .request_timeout_seconds = flags.request_timeout},
                        loop.get(), tokenizer->get(), chat);
  StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      {.host = flags.host, .port = flags.port, .max_body_bytes = flags.max_body_bytes},
      [&service](const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
        service.Handle(request, std::move(writer));
      });
  if (!server.ok()) return Fail(server.status().message());
  std::fprintf(stderr, "tachyon serve: model %s (%s), %d %s KV blocks of %d tokens (%.1f MB), max model length %lld\n",
               name.c_str(), c.architecture.c_str(), num_blocks, flags.kv_cache_dtype.c_str(), flags.block_size,
               static_cast<double>(num_blocks) * bytes_per_block / 1e6, static_cast<long long>(max_model_len));
  std::printf("listening on http://%s:%d\n", flags.host.c_str(), (*server)->port());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "tachyon serve: %s: finishing open responses (up to %.0f s)\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM", flags.grace_seconds);
  (*server)->Stop(flags.grace_seconds);
  loop.reset();  // cancels what is left; no callback runs after this
  server->reset();
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
               "/metrics); with no --model it serves a built-in random-weight demo model");
  cmd->add_option("--model", flags->model, "GGUF model to serve (default: the built-in demo model)");
  cmd->add_option("--host", flags->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", flags->port, "Port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", flags->api_key, "Require Authorization: Bearer KEY");
  cmd->add_option("--served-model-name", flags->served_model_name, "Model name in the API (default: file stem)");
  cmd->add_option("--chat-template", flags->chat_template,
                  "Chat template family instead of the model's (chatml, llama3, llama2, mistral, mistral-v7, phi3, "
                  "gemma, deepseek, deepseek3, zephyr)");
  cmd->add_option("--threads", flags->threads, "Compute threads")->capture_default_str();
  cmd->add_option("--block-size", flags->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--kv-cache-memory", flags->kv_cache_memory,
                  "Bytes of KV cache (default: max-num-seqs full-length sequences, at most 2 GiB)");
  cmd->add_option("--max-model-len", flags->max_model_len,
                  "Maximum prompt + completion tokens (default: the model's context, at most 4096)");
  cmd->add_option("--max-num-seqs", flags->max_num_seqs, "Sequences running at once")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", flags->max_num_batched_tokens, "Tokens computed per step")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", flags->no_prefix_caching, "Turn off automatic prefix caching");
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype, "K/V element type: f16, f32 or q8_0")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", flags->max_body_bytes, "Largest request body (413 above)")->capture_default_str();
  cmd->add_option("--max-queue", flags->max_queue, "Requests in flight before 429")->capture_default_str();
  cmd->add_option("--request-timeout", flags->request_timeout,
                  "Seconds a request may take, queued or running, before it ends with a 504 (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", flags->grace_seconds, "Seconds open responses get on SIGINT/SIGTERM")
      ->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace tachyon::cli
