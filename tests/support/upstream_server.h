// UpstreamServer: a real OpenAI-style HTTP server (the project's HttpServer on a
// free loopback port) whose answers a test scripts, for testing what sits in
// front of an upstream: the remote backend, fallbacks, breakers, passthrough.
//
//   kStream   N content chunks `gap` apart, a usage chunk, [DONE]; or one JSON body
//   kStatus   an error status with an OpenAI error body
//   kHang     never answers (until the server stops)
//   kCutAfter streams `cut_after` chunks, then closes the connection mid-stream
// first_chunk_ms delays a stream's first chunk (its head goes at once) and a
// whole answer (a slow upstream's first byte).
#pragma once

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http_server.h"

namespace tachyon::testing {

class UpstreamServer {
 public:
  enum class Mode { kStream, kStatus, kHang, kCutAfter };

  // host and port: where it listens (another loopback address such as 127.0.0.2
  // stands for another replica behind one name); port 0: any free one.
  explicit UpstreamServer(std::string host = "127.0.0.1", int port = 0) : host_(std::move(host)) {
    auto server = HttpServer::Start({.host = host_, .port = port}, [this](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
      Handle(std::move(r), std::move(w));
    });
    if (server.ok()) server_ = std::move(server).value();
  }
  ~UpstreamServer() { Stop(); }

  void Stop() {
    stopping_ = true;
    if (server_) server_->Stop(0.2);
    for (auto& t : threads_) t.join();
    threads_.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hung_.clear();  // a writer must not outlive its server (its timer is on the server's loop)
    }
    server_.reset();
  }

  std::string base_url() const { return "http://" + host_ + ":" + std::to_string(server_->port()) + "/v1"; }
  bool ok() const { return server_ != nullptr; }
  int port() const { return server_->port(); }

  // What to do with the next requests.
  std::atomic<Mode> mode{Mode::kStream};
  std::atomic<int> num_chunks{3};
  std::atomic<int> gap_ms{0};
  std::atomic<int> status{500};
  std::atomic<int> cut_after{1};
  std::atomic<int> first_chunk_ms{0};
  std::string word = "tok";  // set before requests arrive

  int num_requests() const { return num_requests_.load(); }
  std::vector<nlohmann::json> bodies() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bodies_;
  }
  // The request bodies as they arrived, byte for byte.
  std::vector<std::string> raw_bodies() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return raw_bodies_;
  }
  std::vector<std::string> authorizations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return authorizations_;
  }
  // Requests whose client closed the connection before the answer ended.
  int num_client_closed() const { return num_closed_.load(); }
  // Blocks until n requests' clients closed early (or the timeout); true when they did.
  bool WaitClientClosed(int n, double seconds = 10) {
    std::unique_lock<std::mutex> lock(closed_mutex_);
    return closed_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return num_closed_.load() >= n; });
  }

 private:
  std::string host_;
  static std::string Chunk(bool chat, const std::string& text, const char* finish) {
    nlohmann::json choice = {{"index", 0}, {"finish_reason", finish ? nlohmann::json(finish) : nlohmann::json()}};
    if (chat) {
      choice["delta"] = {{"content", text}};
    } else {
      choice["text"] = text;
    }
    return nlohmann::json({{"id", "up-1"}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                           {"model", "upstream"}, {"choices", {choice}}})
        .dump();
  }

  void Handle(HttpRequest r, std::shared_ptr<ResponseWriter> w) {
    ++num_requests_;
    const bool chat = r.target.find("/chat/completions") != std::string::npos;
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bodies_.push_back(body);
      raw_bodies_.push_back(r.body);
      auto auth = r.headers.find("authorization");
      authorizations_.push_back(auth == r.headers.end() ? "" : auth->second);
    }
    w->OnClose([this] {
      std::lock_guard<std::mutex> lock(closed_mutex_);
      ++num_closed_;
      closed_cv_.notify_all();
    });
    const bool stream = body.is_object() && body.value("stream", false);
    const Mode m = mode.load();
    if (m == Mode::kHang) {
      std::lock_guard<std::mutex> lock(mutex_);
      hung_.push_back(w);  // kept open until the server stops
      return;
    }
    if (m == Mode::kStatus) {
      w->Respond(status.load(), "application/json",
                 R"({"error":{"message":"scripted failure )" + std::to_string(status.load()) +
                     R"(","type":"server_error","param":null,"code":null}})");
      return;
    }
    const int n = num_chunks.load(), gap = gap_ms.load(), cut = m == Mode::kCutAfter ? cut_after.load() : -1;
    const int late = first_chunk_ms.load();
    if (!stream && late > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.emplace_back([this, w, chat, n, late] {
        if (Sleep(late)) RespondWhole(*w, chat, n);
      });
      return;
    }
    if (!stream) {
      RespondWhole(*w, chat, n);
      return;
    }
    w->StartStream(200, "text/event-stream");
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.emplace_back([this, w, chat, n, gap, cut, late] {
      if (late > 0 && !Sleep(late)) return;
      for (int i = 0; i < n && !stopping_; ++i) {
        if (i > 0 && gap > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap));
        if (i == cut) {
          w->Abort();
          return;
        }
        w->Write("data: " + Chunk(chat, word, i + 1 == n ? "stop" : nullptr) + "\n\n");
      }
      w->Write(R"(data: {"id":"up-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":)" +
               std::to_string(n) + "}}\n\n");
      w->Write("data: [DONE]\n\n");
      w->End();
    });
  }

  // Sleeps ms, in steps, unless the server stops first (false then).
  bool Sleep(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      if (stopping_) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return !stopping_;
  }

  void RespondWhole(ResponseWriter& w, bool chat, int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += word;
    nlohmann::json choice = {{"index", 0}, {"finish_reason", "stop"}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    w.Respond(200, "application/json",
               nlohmann::json({{"id", "up-1"}, {"object", chat ? "chat.completion" : "text_completion"},
                               {"model", "upstream"}, {"choices", {choice}},
                               {"usage", {{"prompt_tokens", 5}, {"completion_tokens", n}, {"total_tokens", 5 + n}}}})
                   .dump());
  }

  std::unique_ptr<HttpServer> server_;
  mutable std::mutex mutex_;
  std::mutex closed_mutex_;  // its own: OnClose may run while mutex_ is held
  std::condition_variable closed_cv_;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<ResponseWriter>> hung_;
  std::vector<nlohmann::json> bodies_;
  std::vector<std::string> raw_bodies_;
  std::vector<std::string> authorizations_;
  std::atomic<int> num_requests_{0}, num_closed_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace tachyon::testing
