#include "http/http_server.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

namespace tachyon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// What a handler asked for, queued for the connection's coroutine.
struct Event {
  enum Kind { kRespond, kStart, kWrite, kEnd } kind;
  int status = 200;
  std::string content_type;
  std::string data;
};

class ConnectionWriter : public ResponseWriter, public std::enable_shared_from_this<ConnectionWriter> {
 public:
  explicit ConnectionWriter(asio::any_io_executor executor) : executor_(executor), timer_(executor) {
    timer_.expires_at(std::chrono::steady_clock::time_point::max());
  }

  void Respond(int status, const std::string& content_type, std::string body) override {
    Push({Event::kRespond, status, content_type, std::move(body)});
  }
  void StartStream(int status, const std::string& content_type) override {
    Push({Event::kStart, status, content_type, ""});
  }
  void Write(std::string data) override { Push({Event::kWrite, 200, "", std::move(data)}); }
  void End() override { Push({Event::kEnd, 200, "", ""}); }
  bool closed() const override { return closed_.load(); }
  void OnClose(std::function<void()> callback) override {
    std::lock_guard<std::mutex> lock(mutex_);
    on_close_ = std::move(callback);
  }

  // On the I/O thread: takes the queued events, waiting for one if there are none.
  asio::awaitable<std::deque<Event>> Next() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!events_.empty()) {
          std::deque<Event> out;
          out.swap(events_);
          co_return out;
        }
      }
      boost::system::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      timer_.expires_at(std::chrono::steady_clock::time_point::max());
    }
  }

  void MarkClosed() {
    std::function<void()> callback;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_.exchange(true)) return;
      callback = std::move(on_close_);
    }
    if (callback) callback();
  }

 private:
  void Push(Event event) {
    if (closed_.load()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    // The wake-up runs on the I/O thread, after Next() has checked the queue or while it waits.
    asio::post(executor_, [self = shared_from_this()] { self->timer_.cancel(); });
  }

  asio::any_io_executor executor_;
  asio::steady_timer timer_;
  std::mutex mutex_;
  std::deque<Event> events_;
  std::function<void()> on_close_;
  std::atomic<bool> closed_{false};
};

const char* ReasonPhrase(int status) {
  return bhttp::obsolete_reason(static_cast<bhttp::status>(status)).data();
}

std::string Header(int status, const std::string& content_type, const std::string& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) + "\r\n";
  out += "Content-Type: " + content_type + "\r\nServer: tachyon\r\n" + extra + "\r\n";
  return out;
}

std::string ChunkOf(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<int> open_responses{0};
  std::atomic<bool> stopping{false};
  int port = 0;

  asio::awaitable<void> Listen() {
    while (!stopping.load()) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopping.load() || ec == asio::error::operation_aborted) co_return;
        continue;
      }
      // Each SSE chunk goes out when written: without this, Nagle's algorithm holds a
      // small chunk back until the client acknowledges the last one (delayed ACK:
      // up to 40 ms on Linux), and two tokens arrive as one.
      socket.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(io, Session(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  asio::awaitable<void> Session(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    while (!stopping.load()) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(options.idle_timeout_seconds * 1000)));
      co_await bhttp::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == bhttp::error::body_limit) {
        std::string body = "{\"error\":{\"message\":\"the request body is larger than the limit of " +
                           std::to_string(options.max_body_bytes) +
                           " bytes (--max-body-bytes)\",\"type\":\"invalid_request_error\",\"param\":null,"
                           "\"code\":\"body_too_large\"}}";
        std::string response = Header(413, "application/json", "Content-Length: " + std::to_string(body.size()) +
                                                                   "\r\nConnection: close\r\n") + body;
        co_await asio::async_write(stream, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
        break;
      }
      if (ec) break;  // closed, timed out, or not HTTP
      stream.expires_never();
      bhttp::request<bhttp::string_body> message = parser.release();
      const bool keep_alive = message.keep_alive();
      HttpRequest request{std::string(message.method_string()), std::string(message.target()), {},
                          std::move(message.body())};
      for (const auto& field : message) {
        std::string name(field.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        request.headers[name] = std::string(field.value());
      }
      auto writer = std::make_shared<ConnectionWriter>(stream.get_executor());
      ++open_responses;
      handler(request, writer);
      bool ok = co_await Respond(stream, *writer, keep_alive);
      --open_responses;
      if (!ok || !keep_alive) break;
    }
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  // Writes what the handler produces; false if the connection is done.
  asio::awaitable<bool> Respond(beast::tcp_stream& stream, ConnectionWriter& writer, bool keep_alive) {
    const std::string connection = keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    boost::system::error_code ec;
    while (true) {
      std::deque<Event> events = co_await writer.Next();
      for (Event& e : events) {
        std::string bytes;
        switch (e.kind) {
          case Event::kRespond:
            bytes = Header(e.status, e.content_type, "Content-Length: " + std::to_string(e.data.size()) + "\r\n" +
                                                         connection) + e.data;
            break;
          case Event::kStart:
            bytes = Header(e.status, e.content_type,
                           "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n" +
                               connection);
            break;
          case Event::kWrite:
            if (e.data.empty()) continue;  // an empty chunk would end the stream
            bytes = ChunkOf(e.data);
            break;
          case Event::kEnd:
            bytes = "0\r\n\r\n";
            break;
        }
        co_await asio::async_write(stream, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
          writer.MarkClosed();
          co_return false;
        }
        if (e.kind == Event::kRespond || e.kind == Event::kEnd) co_return true;
      }
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  boost::system::error_code ec;
  auto address = asio::ip::make_address(options.host, ec);
  if (ec) return InvalidArgumentError("--host '" + options.host + "' is not an IP address");
  tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return UnavailableError("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                            ec.message());
  }
  impl->port = impl->acceptor.local_endpoint().port();
  Impl* raw = impl.get();
  asio::co_spawn(impl->io, raw->Listen(), asio::detached);
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop(double grace_seconds) {
  if (impl_->stopping.exchange(true)) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ec;
    impl->acceptor.close(ec);
  });
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
  while (impl_->open_responses.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  // The posted close may not have run before the loop stopped; the thread is gone now.
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

HttpServer::~HttpServer() { Stop(0); }

}  // namespace tachyon
