// HttpClient: asynchronous HTTP/1.1 client on one event loop (Boost.Beast/Asio
// inside src/http/; this header has none of it).
//
// Everything runs on the thread that calls Run(): requests, their callbacks and
// timers. One loop drives thousands of concurrent streams: each request is a
// coroutine, and the body reaches the caller piece by piece as it arrives (the
// chunked transfer coding already removed), so a caller can timestamp every
// server-sent event. Idle keep-alive connections are kept per host and reused;
// a request that finds its reused connection closed by the server before any
// byte came back is retried once on a new connection. https uses OpenSSL through
// Asio: SNI, peer verification against the system's CAs (or a given CA file)
// and the host name.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tachyon {

// "http://host:port/base" or "https://..." split into its parts.
struct HttpUrl {
  std::string host;
  int port = 80;     // 443 for https without a port
  std::string path;  // "" or "/v1" (no trailing '/')
  bool tls = false;  // https
};
StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

struct HttpClientRequest {
  std::string method = "POST";
  std::string host;
  int port = 80;
  std::string target;  // "/v1/completions"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  double timeout_seconds = 600;  // the whole exchange, connect to last byte
  // 0: bounded by timeout_seconds only. Connecting (TCP + TLS handshake) within
  // connect_timeout_seconds; the response head within first_byte_timeout_seconds
  // of the request being written.
  double connect_timeout_seconds = 0;
  double first_byte_timeout_seconds = 0;
  bool tls = false;              // https: TLS with SNI, the certificate checked against host
  // A numeric address ("10.0.0.5", "::1") to connect to instead of host's; host still
  // names the server (Host header, SNI, the certificate). Discovered backends
  // (gateway/discovery.h) are one address of a name each.
  std::string connect_address;
  // A POST the caller knows may be sent twice (a benchmark's own completions):
  // sent again, as a GET is, when a reused connection turns out closed before
  // any byte of the response (llama-server closes a kept-alive connection after
  // a streamed response). Other POSTs are not: the server may have acted on them.
  bool replayable = false;
};

struct HttpClientOptions {
  bool verify_peer = true;  // false: accept any certificate (--insecure)
  std::string ca_file;      // PEM file of trusted CAs; empty: the system's
  std::string user_agent = "tachyon-bench";
  size_t max_idle_per_host = 8192;  // idle keep-alive connections kept per host; more are closed
};

struct HttpResponseHead {
  int status = 0;
  std::unordered_map<std::string, std::string> headers;  // lower-case names
};

// Called on the loop thread, in this order: on_head once, on_data for each piece of
// body as it arrives, on_done once (also alone, when the exchange fails before a head).
// on_done's Status: kUnavailable for connect / TLS / read / write failures (a
// connect timeout included), kOutOfRange for the first-byte and total timeouts,
// kDataLoss for a malformed response, kInvalidArgument for an unreadable CA file.
struct HttpStreamCallbacks {
  std::function<void(const HttpResponseHead&)> on_head;
  std::function<void(std::string_view data)> on_data;
  std::function<void(const Status&)> on_done;
};

struct HttpClientStats {
  int64_t connections_opened = 0;
  int64_t connections_reused = 0;
  int64_t retries = 0;
  int64_t resolutions = 0;  // name lookups (a host's addresses are kept a minute, or until a connect fails)
};

// The event loop of an HttpServer I/O thread, which clients may share: a client
// made on it runs its exchanges on that thread, so a gateway that answers a
// client from an upstream hands nothing between threads.
struct EventLoop;
// The loop the calling thread runs; null off HttpServer I/O threads.
EventLoop* CurrentEventLoop();

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  // A client on an existing loop (CurrentEventLoop() of an I/O thread): Send and
  // Cancel as usual; its callbacks run on that loop's thread. Run, Stop and the
  // signal calls are the loop owner's, not this client's. Exchanges still in
  // progress when the client is destroyed end quietly on the loop.
  HttpClient(EventLoop* loop, HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts an exchange; safe from any thread (it begins on the loop thread).
  // The id is for Cancel.
  uint64_t Send(HttpClientRequest request, HttpStreamCallbacks callbacks);
  // Abandons an exchange: its connection is closed (never pooled) and none of its
  // callbacks is called after Cancel returns on the loop thread (from another
  // thread: after the loop has run the cancellation). Unknown or finished ids are ignored.
  void Cancel(uint64_t id);
  // Runs fn on the loop thread at time t (now or past: soon).
  void RunAt(std::chrono::steady_clock::time_point t, std::function<void()> fn);
  // Runs fn on the loop thread; safe from any thread.
  void Post(std::function<void()> fn);
  // Runs the loop on this thread until Stop() or until no work is left.
  void Run();
  // Runs the loop on this thread until Stop(), idle or not (a client serving
  // requests posted from other threads).
  void RunUntilStopped();
  // Makes Run() return; safe from any thread. Open exchanges are abandoned.
  void Stop();
  // Runs fn on the loop thread the first time signal `signo` arrives while Run()
  // runs; after that the signal has its default action again (a second Ctrl-C quits).
  // While it waits, Run() does not return on its own: end it with Stop().
  void OnSignalOnce(int signo, std::function<void()> fn);
  // Drops every OnSignalOnce wait; the signals get their default action back.
  void ClearSignals();

  HttpClientStats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace tachyon
