// The server's whole request path on mutated raw requests (tests/support/mutation_fuzz.h):
// bytes in over loopback, through Beast's parser, the routes, the gateway and a local
// engine on a generated tiny model. Every input gets an HTTP answer or a closed
// connection; afterwards the server answers /health, has no request running and no
// KV block in use.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "backend/local_backend.h"
#include "base/worker_pool.h"
#include "gateway/gateway.h"
#include "http/http_server.h"
#include "model/model_gen.h"
#include "obs/metrics.h"
#include "server/openai_server.h"
#include "tests/support/mutation_fuzz.h"

namespace tachyon {
namespace {

// Sends `bytes`, reads until the server closes or 3 s pass; the answer's status (0: none).
int Exchange(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    timeval tv{.tv_sec = 3, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);  // no more bytes: the server answers what it has, or closes
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
    if (out.rfind("HTTP/1.1 ", 0) == 0 && out.size() >= 12) status = std::atoi(out.substr(9, 3).c_str());
  }
  ::close(fd);
  return status;
}

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(HttpFuzzTest, MutatedRequestsThroughTheWholeServer) {
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_http_fuzz.gguf";
  ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape("tiny"), .scheme = PureScheme(GgmlType::kQ8_0),
                                   .seed = 9, .out_path = path}).ok());
  MetricsRegistry metrics;
  auto backend = LocalBackend::Create({.name = "local", .model_path = path, .served_model_name = "tiny",
                                       .chat_template = "chatml", .threads = 1, .max_model_len = 128,
                                       .max_queue = 8, .request_timeout_seconds = 2},
                                      &metrics);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  WorkerPool pool(2);
  GatewayHolder holder;
  holder.Set(Gateway::Single(std::shared_ptr<Backend>(std::move(backend).value()), "tiny", &metrics,
                             [&pool](std::function<void()> task) { pool.Post(std::move(task)); }));
  OpenAiServer service({.access_log = false}, &holder, &metrics, &pool);
  auto server = HttpServer::Start({.port = 0, .max_body_bytes = 65536, .read_timeout_seconds = 1},
                                  [&service](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                                    service.Handle(std::move(r), std::move(w));
                                  });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();

  const std::vector<std::string> seeds = {
      Post("/v1/completions", R"({"prompt":"Hello","max_tokens":3,"temperature":0})"),
      Post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":2,"stream":true,"stop":["x"],"logprobs":2})"),
      Post("/v1/chat/completions",
           R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi <|im_end|>"}],"max_tokens":2})"),
      Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":2})"),
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "b\r\n{\"prompt\":1\r\n0\r\n\r\n",
      "OPTIONS /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://a\r\n\r\n",
      "DELETE /v1/cache?route=x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n\r\n",
      Post("/v1/embeddings", R"({"input":["a","b"]})"),
  };
  testing::MutationFuzzOptions options{
      .seconds = 8,
      .max_len = 8192,
      .dictionary = {"\r\n", "\r\n\r\n", "Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n",
                     "Connection: close\r\n", "Expect: 100-continue\r\n", "\"stream\":true,", "\"max_tokens\":100000,",
                     "\"prompt\":[99999],", "\"n\":2,", "\"stop\":[\"\"],", "\"logprobs\":20,", "<|im_start|>",
                     "{\"role\":\"tool\",\"content\":\"x\"},", " HTTP/1.0", "%00", "\\u0000"}};
  int answered = 0, closed = 0;
  const int64_t runs = testing::MutationFuzz(seeds, options, [&](const std::string& input) {
    const int status = Exchange(port, input);
    if (status == 0) {
      ++closed;
      return false;
    }
    ++answered;
    EXPECT_GE(status, 100);
    EXPECT_LT(status, 600);
    return status == 200;
  });
  std::printf("http request path: %lld inputs, %d answered, %d closed without an answer\n",
              static_cast<long long>(runs), answered, closed);
  EXPECT_GT(answered, 0);
  EXPECT_EQ(Exchange(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"), 200);
  // Idle again: nothing running, no KV block held.
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = metrics.Render();
    if (text.find("tachyon:num_requests_running{model_name=\"tiny\",backend=\"local\"} 0\n") != std::string::npos &&
        text.find("tachyon:kv_cache_usage_perc{model_name=\"tiny\",backend=\"local\"} 0\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(text.find("tachyon:kv_cache_usage_perc{model_name=\"tiny\",backend=\"local\"} 0\n"), std::string::npos)
      << text;
  (*server)->Stop(2);
  pool.Close();
  holder.Get()->Shutdown();
  holder.Set(nullptr);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tachyon
