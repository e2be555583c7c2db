// The real server over loopback, driven by curl (installed by scripts/setup).
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <atomic>
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

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    auto server = HttpServer::Start({.port = 0, .max_body_bytes = 1024}, [this](const HttpRequest& r,
                                                                               std::shared_ptr<ResponseWriter> w) {
      Handle(r, std::move(w));
    });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
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
      w->OnClose([this] { ++closed_pending_; });
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back(w);
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
  std::atomic<int> closed_pending_{0};
};

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
  for (int i = 0; i < 200 && closed_pending_.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
