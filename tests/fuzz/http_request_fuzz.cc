// libFuzzer target: the server's whole request path. Raw bytes go over loopback
// into a real HttpServer (Beast's parser), then the routes, the gateway and a local
// engine on a generated tiny model, as `tachyon serve` runs them. Each input is sent
// on a fresh connection, the write side then shut, and the answer read until the
// server closes: every input must end (an answer or a close, within -timeout), and
// the server must stay up and accept the next.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "backend/local_backend.h"
#include "base/worker_pool.h"
#include "gateway/gateway.h"
#include "http/http_server.h"
#include "model/model_gen.h"
#include "obs/metrics.h"
#include "server/openai_server.h"

namespace {

using namespace tachyon;

struct Server {
  MetricsRegistry metrics;
  std::unique_ptr<WorkerPool> pool;
  GatewayHolder holder;
  std::unique_ptr<OpenAiServer> service;
  std::unique_ptr<HttpServer> http;
};

Server* g_server = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = std::filesystem::temp_directory_path() / "tachyon_http_request_fuzz.gguf";
  if (!GenerateRandomModel({.shape = FindModelShape("tiny"), .scheme = PureScheme(GgmlType::kQ8_0), .seed = 9,
                            .out_path = path})
           .ok()) {
    std::abort();
  }
  g_server = new Server();  // lives for the process
  auto backend = LocalBackend::Create({.name = "local", .model_path = path, .served_model_name = "tiny",
                                       .chat_template = "chatml", .threads = 1, .max_model_len = 64,
                                       .max_queue = 8, .request_timeout_seconds = 1},
                                      &g_server->metrics);
  if (!backend.ok()) std::abort();
  g_server->pool = std::make_unique<WorkerPool>(2);
  WorkerPool* pool = g_server->pool.get();
  g_server->holder.Set(Gateway::Single(std::shared_ptr<Backend>(std::move(backend).value()), "tiny",
                                       &g_server->metrics,
                                       [pool](std::function<void()> task) { pool->Post(std::move(task)); }));
  g_server->service = std::make_unique<OpenAiServer>(OpenAiServerOptions{.access_log = false}, &g_server->holder,
                                                     &g_server->metrics, pool);
  OpenAiServer* service = g_server->service.get();
  auto http = HttpServer::Start({.port = 0, .max_body_bytes = 65536, .read_timeout_seconds = 1},
                                [service](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                                  service->Handle(std::move(r), std::move(w));
                                });
  if (!http.ok()) std::abort();
  g_server->http = std::move(http).value();
  return 0;
}

// A connection to the server. Each input takes a connection and leaves its address
// pair in TIME_WAIT for a minute: at thousands of inputs a second the loopback
// runs out of local ports (EADDRNOTAVAIL), which is the harness's limit, not the
// server's, so it waits for ports to come free. libFuzzer's timer signal can
// interrupt a connect (EINTR): that one is retried on a fresh socket. Any other
// failure means the server is gone: that is a finding.
int ConnectToServer() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(g_server->http->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0; attempt < 12000; ++attempt) {  // up to 2 minutes: TIME_WAIT lasts 60 s
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
    const int error = errno;
    ::close(fd);
    if (error == EINTR) continue;
    if (error != EADDRNOTAVAIL) {
      std::fprintf(stderr, "connect to the server failed: %s\n", std::strerror(error));
      std::abort();
    }
    ::usleep(10000);
  }
  std::fprintf(stderr, "no local port came free in 2 minutes\n");
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ConnectToServer();
  for (size_t sent = 0; sent < size;) {  // EINTR (the timer signal) is not the server's doing
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      break;  // the server closed early (an error answer before the whole body): fine
    }
  }
  ::shutdown(fd, SHUT_WR);  // nothing more comes: the server answers what it has, then closes
  char buf[4096];
  std::string head;
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (head.size() < 16) head.append(buf, std::min(static_cast<size_t>(n), 16 - head.size()));
  }
  ::close(fd);
  // An answer, when there is one, is HTTP/1.1 with a 3-digit status.
  if (!head.empty() && (head.rfind("HTTP/1.1 ", 0) != 0 || head.size() < 12 || head[9] < '1' || head[9] > '5')) {
    std::abort();
  }
  return 0;
}
