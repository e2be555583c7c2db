// HttpServer: HTTP/1.1 with keep-alive on Boost.Beast/Asio (C++20 coroutines).
// Beast stays inside src/http/: this header has none of it.
//
// I/O threads: one io_context each; the acceptor runs on the first and hands
// each new connection to the next thread in turn, so a connection lives on one
// thread and needs no locks. The handler is called on that connection's I/O
// thread and must not block it (the server layer moves request work to a pool).
//
// Each request goes to the handler with a ResponseWriter, which any thread may
// use later: a whole response, or a chunked stream (server-sent events) written
// piece by piece as they arrive. While a response is pending the socket is
// watched, so a client that goes away is noticed at once, streaming or not;
// OnClose lets the handler cancel the work behind the response.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tachyon {

struct HttpRequest {
  std::string method;  // "GET", "POST"
  std::string target;  // "/v1/completions"
  std::unordered_map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// Extra response headers: (name, value), written as given.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// A writer must not outlive its HttpServer (it waits on the server's loop).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A complete response (JSON or text).
  virtual void Respond(int status, const std::string& content_type, std::string body, HttpHeaders headers = {}) = 0;
  // A chunked stream: StartStream once, Write any number of times, then End.
  virtual void StartStream(int status, const std::string& content_type, HttpHeaders headers = {}) = 0;
  virtual void Write(std::string data) = 0;
  virtual void End() = 0;
  // Drops the connection after what was written so far (the client sees its answer cut).
  virtual void Abort() = 0;
  virtual bool closed() const = 0;
  // Bytes handed to the writer and not yet taken by the client's socket. Past
  // HttpServerOptions::max_unsent_bytes the connection is dropped (and OnClose runs).
  virtual int64_t unsent_bytes() const = 0;
  // Called once, on the I/O thread, if the client disconnects before the response ends
  // (at once if it already has).
  virtual void OnClose(std::function<void()> callback) = 0;
};

using HttpHandler = std::function<void(HttpRequest request, std::shared_ptr<ResponseWriter> writer)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  size_t max_body_bytes = 8 << 20;
  double idle_timeout_seconds = 120;  // a connection waiting for a request this long is closed
  // From a request's first byte to its last (headers and body): a client that sends
  // slower than this (slowloris) gets a 408 and the connection closes.
  double read_timeout_seconds = 30;
  // A write the client takes nothing of for this long ends the connection (a reader
  // that stopped reading).
  double write_timeout_seconds = 30;
  // Per connection, bytes written by the handler and not yet sent: above this the
  // connection is dropped. Streams slow down before (see ResponseWriter::unsent_bytes).
  int64_t max_unsent_bytes = 4 << 20;
  // The kernel's send buffer per connection (SO_SNDBUF; Linux doubles it); 0: the
  // kernel's autotuning, which lets an unread connection hold up to tcp_wmem's maximum
  // (4 MB) before the server sees any backpressure.
  int socket_send_buffer_bytes = 256 << 10;
  // Open connections at once; one more is answered 503 and closed.
  int max_connections = 4096;
  int num_io_threads = 1;
};

class HttpServer {
 public:
  // Binds and starts serving on its own thread.
  static StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();

  int port() const;
  int num_connections() const;
  // Stops accepting, lets open responses finish for up to grace_seconds, then closes everything.
  void Stop(double grace_seconds);

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon
