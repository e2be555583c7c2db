// HttpServer: HTTP/1.1 with keep-alive on Boost.Beast/Asio (C++20 coroutines),
// one I/O thread. Beast stays inside src/http/: this header has none of it.
//
// Each request goes to the handler with a ResponseWriter, which any thread may
// use later: a whole response, or a chunked stream (server-sent events) written
// piece by piece as tokens arrive. A client that goes away is noticed at the
// next write; OnClose lets the handler cancel the work behind the response.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/status.h"

namespace tachyon {

struct HttpRequest {
  std::string method;  // "GET", "POST"
  std::string target;  // "/v1/completions"
  std::unordered_map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A complete response (JSON or text).
  virtual void Respond(int status, const std::string& content_type, std::string body) = 0;
  // A chunked stream: StartStream once, Write any number of times, then End.
  virtual void StartStream(int status, const std::string& content_type) = 0;
  virtual void Write(std::string data) = 0;
  virtual void End() = 0;
  virtual bool closed() const = 0;
  // Called once, on the I/O thread, if the client disconnects before the response ends.
  virtual void OnClose(std::function<void()> callback) = 0;
};

using HttpHandler = std::function<void(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  size_t max_body_bytes = 8 << 20;
  double idle_timeout_seconds = 120;  // a connection waiting for a request this long is closed
};

class HttpServer {
 public:
  // Binds and starts serving on its own thread.
  static StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();

  int port() const;
  // Stops accepting, lets open responses finish for up to grace_seconds, then closes everything.
  void Stop(double grace_seconds);

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon
