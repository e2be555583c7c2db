// libFuzzer target: the upstream response path. A raw loopback server answers every
// request with the input's bytes (after its first byte) and closes; a RemoteBackend
// asks it for a completion, streamed or not (the first byte's low bit), through
// HttpClient (Beast's response parser, chunked bodies), the SSE parser and the chunk
// relay, as the gateway does in front of an OpenAI-compatible API. Each call must
// end (OnDone within -timeout) with a result that says what happened: ok, or an
// error with an HTTP status and a message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "api/openai.h"
#include "backend/remote_backend.h"

namespace {

using namespace tachyon;

int g_listen = -1;
int g_port = 0;
std::mutex g_mutex;
std::string g_answer;  // what the next connection gets
std::unique_ptr<RemoteBackend> g_backend;

void Serve() {
  while (true) {
    const int fd = ::accept(g_listen, nullptr, nullptr);
    if (fd < 0) continue;
    // Read the request (up to its blank line and body; the client's are small).
    std::string in;
    char buf[8192];
    timeval tv{.tv_sec = 2, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (in.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    std::string answer;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      answer = g_answer;
    }
    ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    while (::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    ::close(fd);
  }
}

class Sink : public BackendSink {
 public:
  void OnChunk(BackendChunk) override {}
  void OnDone(BackendResult r) override {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(r);
    done_ = true;
    cv_.notify_all();
  }
  BackendResult Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    return result_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  BackendResult result_;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_listen = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(g_listen, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(g_listen, 64) != 0) {
    std::abort();
  }
  socklen_t len = sizeof(addr);
  ::getsockname(g_listen, reinterpret_cast<sockaddr*>(&addr), &len);
  g_port = ntohs(addr.sin_port);
  std::thread(Serve).detach();
  auto backend = RemoteBackend::Create({.name = "up",
                                        .base_url = "http://127.0.0.1:" + std::to_string(g_port) + "/v1",
                                        .first_byte_timeout_seconds = 5,
                                        .total_timeout_seconds = 5,
                                        .pool_size = 0,
                                        .max_body_bytes = 1 << 20});
  if (!backend.ok()) std::abort();
  g_backend = std::move(backend).value();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool stream = (data[0] & 1) != 0, chat = (data[0] & 2) != 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_answer.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  }
  const std::string body = chat ? R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":)" +
                                      std::string(stream ? "true" : "false") + "}"
                                : R"({"model":"m","prompt":"hi","stream":)" + std::string(stream ? "true" : "false") + "}";
  auto parsed = ParseCompletionRequest(body, chat ? Endpoint::kChatCompletions : Endpoint::kCompletions);
  if (!std::holds_alternative<CompletionRequest>(parsed)) std::abort();
  auto sink = std::make_shared<Sink>();
  g_backend->Start(BackendRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                                  .id = "cmpl-1",
                                  .created = 1,
                                  .model_name = "m",
                                  .arrival = std::chrono::steady_clock::now()},
                   sink);
  const BackendResult r = sink->Wait();
  switch (r.kind) {
    case BackendResult::Kind::kOk:
      break;
    case BackendResult::Kind::kRejected:  // the upstream's own non-200 answer, relayed as it is
      if (r.http_status <= 200 || r.http_status > 599 || r.http_status == 204 || r.http_status == 304) std::abort();
      break;
    case BackendResult::Kind::kFailed:
    case BackendResult::Kind::kBroken:
      if (r.error.http_status < 400 || r.error.http_status > 599 || r.error.message.empty()) std::abort();
      break;
  }
  return 0;
}
