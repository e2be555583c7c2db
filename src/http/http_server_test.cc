// The real server over loopback, driven by curl (installed by scripts/setup).
#include "http/http_server.h"

#include "http/http_client.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <functional>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace tachyon {
namespace {

std::string Curl(const std::string& args) {
  std::string out;
  FILE* pipe = ::popen(("curl -s -S --max-time 10 " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  ::pclose(pipe);
  return out;
}

// Raw bytes to the server, its whole answer back (it closes, or 3 s pass).
std::string Raw(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    timeval tv{.tv_sec = 3, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::array<char, 4096> buf;
    ssize_t n;
    while ((n = ::recv(fd, buf.data(), buf.size(), 0)) > 0) out.append(buf.data(), n);
  }
  ::close(fd);
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    Restart({.port = 0, .max_body_bytes = 1024});
  }
  void Restart(HttpServerOptions options) {
    if (server_) server_->Stop(1.0);
    server_.reset();
    auto server = HttpServer::Start(options, [this](const HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
      Handle(r, std::move(w));
    });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    stop_flood_ = true;
    if (server_) server_->Stop(1.0);
    for (auto& t : threads_) t.join();
  }

  void Handle(const HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
    if (r.target == "/hello") {
      w->Respond(200, "text/plain", "hello " + r.method);
    } else if (r.target == "/echo") {
      w->Respond(200, "application/json", r.body + " " + r.headers.at("x-test"));
    } else if (r.target == "/pending") {
      // Never answered: the test sees whether a client that leaves is noticed.
      w->OnClose([this] { ClosedPending(); });
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back(w);
    } else if (r.target == "/medium") {
      w->Respond(200, "text/plain", std::string(2 << 20, 'm'));
    } else if (r.target == "/flood" || r.target == "/big") {
      // Written as fast as it can be, to a client that may not read: 64 KB chunks until
      // the writer is closed (or 256 MB), or one 64 MB answer.
      w->OnClose([this] { ClosedPending(); });
      if (r.target == "/big") {
        w->Respond(200, "text/plain", std::string(64 << 20, 'x'));
        return;
      }
      w->StartStream(200, "text/plain");
      threads_.emplace_back([this, w] {
        for (int i = 0; i < 4096 && !w->closed() && !stop_flood_.load(); ++i) {
          w->Write(std::string(64 << 10, 'x'));
          max_unsent_ = std::max(max_unsent_.load(), w->unsent_bytes());
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        w->End();
      });
    } else if (r.target == "/from-loop") {
      // Written on the I/O thread 30 ms on, while its coroutine waits, as an upstream's chunks
      // are: a first chunk larger than the socket takes at once, then small ones.
      w->StartStream(200, "text/plain");
      auto client = std::make_shared<HttpClient>(CurrentEventLoop(), HttpClientOptions{});
      client->RunAt(std::chrono::steady_clock::now() + std::chrono::milliseconds(30), [client, w] {
        w->Write(std::string(3 << 20, 'y'));
        for (int i = 0; i < 10; ++i) w->Write("data: " + std::to_string(i) + "\n\n");
        w->End();
      });
      std::lock_guard<std::mutex> lock(mutex_);
      loop_clients_.push_back(client);
    } else if (r.target == "/stream") {
      // Written from another thread, as the engine does.
      w->StartStream(200, "text/event-stream");
      threads_.emplace_back([w] {
        for (int i = 0; i < 5; ++i) {
          w->Write("data: " + std::to_string(i) + "\n\n");
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        w->End();
      });
    } else {
      w->Respond(404, "application/json", "{}");
    }
  }

  std::unique_ptr<HttpServer> server_;
  std::string base_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<ResponseWriter>> pending_;
  std::vector<std::shared_ptr<HttpClient>> loop_clients_;
  std::atomic<int> closed_pending_{0};
  std::mutex closed_mutex_;
  std::condition_variable closed_cv_;
  void ClosedPending() {
    std::lock_guard<std::mutex> lock(closed_mutex_);
    ++closed_pending_;
    closed_cv_.notify_all();
  }
  // Blocks until n pending answers learned their client left (or the timeout).
  bool WaitClosedPending(int n, double seconds) {
    std::unique_lock<std::mutex> lock(closed_mutex_);
    return closed_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return closed_pending_.load() >= n; });
  }
  std::atomic<bool> stop_flood_{false};
  std::atomic<int64_t> max_unsent_{0};
};

// A connected socket to the server, or -1.
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Waits up to `seconds` for `done`.
bool WaitUntil(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST_F(HttpServerTest, RespondsAndKeepsConnectionsAlive) {
  EXPECT_EQ(Curl(base_ + "/hello"), "hello GET");
  EXPECT_EQ(Curl("-X POST -H 'X-Test: yes' --data '{\"a\":1}' " + base_ + "/echo"), "{\"a\":1} yes");
  EXPECT_NE(Curl("-i " + base_ + "/nope").find("HTTP/1.1 404"), std::string::npos);
  // Two requests on one connection: curl reuses it (keep-alive).
  std::string both = Curl("-v " + base_ + "/hello " + base_ + "/hello");
  EXPECT_NE(both.find("Re-using existing connection"), std::string::npos) << both;
}

TEST_F(HttpServerTest, StreamsChunksWrittenFromAnotherThread) {
  std::string out = Curl("-N " + base_ + "/stream");
  EXPECT_EQ(out, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  std::string headers = Curl("-i -N " + base_ + "/stream");
  EXPECT_NE(headers.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(headers.find("X-Accel-Buffering: no"), std::string::npos);
}

TEST_F(HttpServerTest, OversizedBodiesGet413) {
  std::string big(5000, 'x');
  std::string out = Curl("-i -X POST --data '" + big + "' " + base_ + "/echo");
  EXPECT_NE(out.find("HTTP/1.1 413"), std::string::npos) << out.substr(0, 200);
  EXPECT_NE(out.find("larger than the limit of 1024 bytes"), std::string::npos);
}

TEST_F(HttpServerTest, AClientLeavingAPendingAnswerIsNoticedAtOnce) {
  // Not streaming and nothing written yet: only the watch on the socket can see it.
  Curl("--max-time 0.2 " + base_ + "/pending");
  EXPECT_TRUE(WaitClosedPending(1, 1));
  EXPECT_EQ(closed_pending_.load(), 1);
  std::lock_guard<std::mutex> lock(mutex_);
  ASSERT_EQ(pending_.size(), 1u);
  EXPECT_TRUE(pending_[0]->closed());
}

TEST(HttpServerThreadsTest, SeveralIoThreadsServeConcurrentConnections) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  std::mutex mutex;
  std::set<std::thread::id> threads;
  auto server = HttpServer::Start({.port = 0, .num_io_threads = 3},
                                  [&](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                                    {
                                      std::lock_guard<std::mutex> lock(mutex);
                                      threads.insert(std::this_thread::get_id());
                                    }
                                    w->Respond(200, "text/plain", r.target);
                                  });
  ASSERT_TRUE(server.ok());
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  std::vector<std::thread> clients;
  std::vector<std::string> outs(9);
  for (int i = 0; i < 9; ++i) clients.emplace_back([&, i] { outs[i] = Curl(base + "/n" + std::to_string(i)); });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 9; ++i) EXPECT_EQ(outs[i], "/n" + std::to_string(i));
  (*server)->Stop(1);
  std::lock_guard<std::mutex> lock(mutex);  // the handlers wrote under it, on the I/O threads
  EXPECT_EQ(threads.size(), 3u) << "connections are handed to the I/O threads in turn";
}

TEST(HttpServerStartTest, BadAddressesAreErrors) {
  EXPECT_FALSE(HttpServer::Start({.host = "not-an-ip"}, nullptr).ok());
  auto first = HttpServer::Start({.port = 0}, [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    w->Respond(200, "text/plain", "");
  });
  ASSERT_TRUE(first.ok());
  auto second = HttpServer::Start({.port = (*first)->port()}, nullptr);
  EXPECT_FALSE(second.ok()) << "the port is taken";
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

TEST_F(HttpServerTest, RequestsThatAreNotHttpGetAnErrorThenTheConnectionCloses) {
  const int port = server_->port();
  std::string out = Raw(port, "GARBAGE\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_NE(out.find("\"code\":\"bad_http\""), std::string::npos) << out;
  EXPECT_EQ(Raw(port, "GET /hello HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  out = Raw(port, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431", 0), 0u) << out.substr(0, 100);
  // A transfer coding that does not end in chunked, or one beside a Content-Length: no framing to trust.
  out = Raw(port, "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test: t\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_NE(out.find("Transfer-Encoding"), std::string::npos);
  out = Raw(port, "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test: t\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Length: 7\r\n\r\n2\r\nhi\r\n0\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  // Chunked alone is fine.
  out = Raw(port, "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test: t\r\nTransfer-Encoding: chunked\r\n"
                  "Connection: close\r\n\r\n2\r\nhi\r\n0\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  EXPECT_NE(out.find("hi t"), std::string::npos);
  EXPECT_EQ(Curl(base_ + "/hello"), "hello GET");
}

// Out of file descriptors, accept fails at once and again: the loop must wait,
// not spin a core, and serve again when descriptors are back.
TEST_F(HttpServerTest, RunningOutOfFileDescriptorsDoesNotSpin) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<int> clients;
  for (int i = 0; i < 16; ++i) clients.push_back(::socket(AF_INET, SOCK_STREAM, 0));
  // No descriptor left for the server to accept with (the probe finds the next free number).
  const int probe = ::dup(0);
  ::close(probe);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(probe);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int fd : clients) ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  auto cpu_seconds = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const double used = cpu_seconds() - before;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  // A spinning accept loop burns the whole second; waiting 50 ms between tries, a few milliseconds.
  EXPECT_LT(used, 0.3) << "CPU seconds used in one idle second while out of descriptors";
  for (int fd : clients) ::close(fd);
  EXPECT_EQ(Curl(base_ + "/hello"), "hello GET");
}

// A stream whose client never reads: the connection is dropped once the unsent bytes
// pass the bound (the handler's OnClose runs), and they never grow past it.
// A chunk written on the I/O thread goes out at once; what the socket does not take
// then is written after it, before anything queued later: every byte, in order.
TEST_F(HttpServerTest, ChunksWrittenOnTheIoThreadArriveWholeAndInOrder) {
  Restart({.port = 0, .socket_send_buffer_bytes = 64 << 10});
  std::string expected(3 << 20, 'y');
  for (int i = 0; i < 10; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  for (int round = 0; round < 3; ++round) {
    const std::string out = Curl("-N " + base_ + "/from-loop");
    ASSERT_EQ(out.size(), expected.size());
    EXPECT_TRUE(out == expected) << "round " << round;
  }
}

TEST_F(HttpServerTest, AReaderThatNeverReadsIsDroppedAtTheUnsentBound) {
  Restart({.port = 0, .write_timeout_seconds = 60, .max_unsent_bytes = 1 << 20});
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  // A small receive buffer so the kernel holds little of it.
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string request = "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  EXPECT_TRUE(WaitClosedPending(1, 20)) << "dropped long before the write timeout";
  EXPECT_LE(max_unsent_.load(), (1 << 20) + (64 << 10)) << "never more than the bound and one chunk";
  ::close(fd);
  EXPECT_EQ(Curl(base_ + "/hello"), "hello GET");
}

// A whole answer the client takes nothing of: the write times out and the connection ends.
TEST_F(HttpServerTest, AWriteTheClientTakesNothingOfTimesOut) {
  Restart({.port = 0, .write_timeout_seconds = 0.5, .max_unsent_bytes = int64_t{1} << 30});
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(WaitUntil([&] { return server_->num_connections() == 1; }, 5));
  EXPECT_TRUE(WaitClosedPending(1, 10)) << "the handler learns it";
  EXPECT_TRUE(WaitUntil([&] { return server_->num_connections() == 0; }, 10)) << server_->num_connections();
  ::close(fd);
}

// A client that reads slowly but steadily gets the whole answer, even when that takes
// longer than the write timeout: the timeout is for a write that makes no progress.
TEST_F(HttpServerTest, ASlowButSteadyReaderGetsItAll) {
  Restart({.port = 0, .write_timeout_seconds = 0.5});
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /medium HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const auto start = std::chrono::steady_clock::now();
  size_t got = 0;
  char buf[64 << 10];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
    got += static_cast<size_t>(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  ::close(fd);
  EXPECT_GT(got, size_t{2} << 20) << "headers and the whole 2 MB body";
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500)) << "it did outlast the timeout";
}

// Headers that trickle in (slowloris), and a body that never comes: closed at the read timeout.
TEST_F(HttpServerTest, ASlowSenderIsClosedAtTheReadTimeout) {
  Restart({.port = 0, .idle_timeout_seconds = 60, .read_timeout_seconds = 0.3});
  for (const std::string& partial : {std::string("GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: "),
                                    std::string("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")}) {
    const int fd = Connect(server_->port());
    ASSERT_GE(fd, 0);
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL);
    const auto start = std::chrono::steady_clock::now();
    char byte;
    const ssize_t n = ::recv(fd, &byte, 1, 0);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(n, 0) << "the server closed the connection (not the 5 s receive timeout)";
    EXPECT_LT(waited, 4.0);
    ::close(fd);
  }
  // An idle connection is not a slow one: it waits for the idle timeout, then a request is fine.
  const int fd = Connect(server_->port());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  EXPECT_NE(out.find("hello GET"), std::string::npos) << out;
  ::close(fd);
}

// One connection over the cap gets a 503 and is closed; the others are served.
TEST_F(HttpServerTest, ConnectionsOverTheCapGet503) {
  Restart({.port = 0, .max_connections = 2});
  const int a = Connect(server_->port()), b = Connect(server_->port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_TRUE(WaitUntil([&] { return server_->num_connections() == 2; }, 5));
  const std::string out = Raw(server_->port(), "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  EXPECT_NE(out.find("too_many_connections"), std::string::npos);
  ::close(a);
  ASSERT_TRUE(WaitUntil([&] { return server_->num_connections() == 1; }, 5));
  EXPECT_EQ(Curl(base_ + "/hello"), "hello GET");
  ::close(b);
}

}  // namespace
}  // namespace tachyon
