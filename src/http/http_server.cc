#include "http/http_server.h"

#include "http/event_loop_internal.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>
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
  // kBytes: the unsent rest of a write made at once (already framed).
  enum Kind { kRespond, kStart, kWrite, kEnd, kAbort, kBytes } kind;
  int status = 200;
  std::string content_type;
  std::string data;
  HttpHeaders headers;
  int64_t counted = 0;  // kBytes: the handler's bytes it stands for (unsent_ counts those)
};

int64_t Counted(const Event& e) {
  return e.kind == Event::kBytes ? e.counted : static_cast<int64_t>(e.data.size());
}

const char* ReasonPhrase(int status) {
  return bhttp::obsolete_reason(static_cast<bhttp::status>(status)).data();
}

std::string Header(int status, const std::string& content_type, const HttpHeaders& headers, const std::string& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) + "\r\n";
  out += "Content-Type: " + content_type + "\r\nServer: tachyon\r\n";
  for (const auto& [name, value] : headers) {
    // A header value from elsewhere (an upstream, a client's request id) cannot split the response.
    if (name.find_first_of("\r\n:") != std::string::npos || value.find_first_of("\r\n") != std::string::npos) {
      continue;
    }
    out += name + ": " + value + "\r\n";
  }
  return out + extra + "\r\n";
}

// An OpenAI-shaped error answer to a request that could not be read; the connection then ends.
std::string ErrorResponse(int status, const std::string& message, const std::string& code) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
  }
  const std::string body = "{\"error\":{\"message\":\"" + escaped +
                           "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"" + code + "\"}}";
  return Header(status, "application/json", {},
                "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n") +
         body;
}

// Appends one chunk of the chunked transfer coding.
void AppendChunk(const std::string& data, std::string* out) {
  char size[24];
  char* end = size + sizeof(size);
  char* at = end;
  *--at = '\n';
  *--at = '\r';
  size_t n = data.size();
  do {
    *--at = "0123456789abcdef"[n & 15];
    n >>= 4;
  } while (n != 0);
  out->append(at, static_cast<size_t>(end - at)).append(data).append("\r\n");
}

// The bytes of queued events, in order, up to and including the one that ends the
// response (kRespond, kEnd) or the connection (kAbort); `connection` is the
// Connection header line.
void Format(const std::vector<Event>& events, const std::string& connection, std::string* bytes, bool* last,
              bool* abort) {
  *last = *abort = false;
  size_t size = bytes->size() + 512;
  for (const Event& e : events) size += e.data.size() + 24;
  bytes->reserve(size);
  for (const Event& e : events) {
    switch (e.kind) {
      case Event::kRespond:
        *bytes += Header(e.status, e.content_type, e.headers,
                         "Content-Length: " + std::to_string(e.data.size()) + "\r\n" + connection) +
                  e.data;
        *last = true;
        break;
      case Event::kStart:
        *bytes += Header(e.status, e.content_type, e.headers,
                         "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n" +
                             connection);
        break;
      case Event::kWrite:
        if (!e.data.empty()) AppendChunk(e.data, bytes);  // an empty chunk would end the stream
        break;
      case Event::kBytes:
        *bytes += e.data;
        break;
      case Event::kEnd:
        *bytes += "0\r\n\r\n";
        *last = true;
        break;
      case Event::kAbort:
        *last = *abort = true;
        break;
    }
    if (*last) break;
  }
}

class ConnectionWriter : public ResponseWriter, public std::enable_shared_from_this<ConnectionWriter> {
 public:
  // Made on the connection's I/O thread; `socket` is the connection's descriptor.
  ConnectionWriter(asio::any_io_executor executor, int64_t max_unsent, int socket, bool keep_alive)
      : executor_(executor),
        timer_(executor),
        max_unsent_(max_unsent),
        socket_(socket),
        io_thread_(std::this_thread::get_id()),
        connection_(keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n") {
    timer_.expires_at(std::chrono::steady_clock::time_point::max());
  }

  const std::string& connection() const { return connection_; }

  void Respond(int status, const std::string& content_type, std::string body, HttpHeaders headers) override {
    Push({Event::kRespond, status, content_type, std::move(body), std::move(headers)});
  }
  void StartStream(int status, const std::string& content_type, HttpHeaders headers) override {
    Push({Event::kStart, status, content_type, "", std::move(headers)});
  }
  void Write(std::string data) override { Push({Event::kWrite, 200, "", std::move(data), {}}); }
  void End() override { Push({Event::kEnd, 200, "", "", {}}); }
  void Abort() override { Push({Event::kAbort, 200, "", "", {}}); }
  bool closed() const override { return closed_.load(); }
  int64_t unsent_bytes() const override { return unsent_.load(); }
  // On the I/O thread, once `n` queued bytes are in the socket.
  void Sent(int64_t n) { unsent_.fetch_sub(n); }
  void OnClose(std::function<void()> callback) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!closed_.load()) {
        on_close_ = std::move(callback);
        return;
      }
    }
    // Already gone: the caller learns it now, on the I/O thread as promised.
    asio::post(executor_, std::move(callback));
  }

  // On the I/O thread: takes the queued events, waiting for one if there are none;
  // empty once the client is gone.
  asio::awaitable<std::vector<Event>> Next() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!events_.empty()) {
          std::vector<Event> out;
          out.swap(events_);
          events_.reserve(out.size());
          co_return out;
        }
        if (closed_.load()) co_return std::vector<Event>{};
        idle_ = true;
      }
      boost::system::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      timer_.expires_at(std::chrono::steady_clock::time_point::max());
      std::lock_guard<std::mutex> lock(mutex_);
      idle_ = false;
    }
  }

  // On the I/O thread. After Finished(), a disconnect is no longer this response's.
  void MarkClosed() {
    std::function<void()> callback;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || closed_.exchange(true)) return;
      callback = std::move(on_close_);
    }
    timer_.cancel();
    if (callback) callback();
  }
  void Finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    on_close_ = nullptr;
  }

 private:
  void Push(Event event) {
    if (closed_.load()) return;
    // A client that does not read: past the bound nothing more is queued and the
    // connection is dropped (the handler's OnClose cancels the work behind it). One
    // event alone may be larger (a whole answer), so the bound is checked before it.
    const int64_t size = static_cast<int64_t>(event.data.size());
    if (unsent_.fetch_add(size) > max_unsent_) {
      unsent_.fetch_sub(size);
      if (!overflowed_.exchange(true)) {
        asio::post(executor_, [self = shared_from_this()] { self->MarkClosed(); });
      }
      return;
    }
    bool wake = false;
    std::vector<Event> now;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
      // A chunk written on the I/O thread while the connection's coroutine waits for
      // work goes out at once (with the head queued before it), not a turn of the loop
      // later: the first chunk of a burst reaches the client before the rest of the
      // burst is even parsed. Once a turn: the rest of a burst is one write.
      if (events_.back().kind == Event::kWrite && idle_ && !sent_this_turn_ &&
          std::this_thread::get_id() == io_thread_ &&
          std::all_of(events_.begin(), events_.end(),
                      [](const Event& e) { return e.kind == Event::kStart || e.kind == Event::kWrite; })) {
        sent_this_turn_ = true;
        now.swap(events_);
      } else {
        wake = !wake_pending_;
        wake_pending_ = true;
      }
    }
    if (!now.empty()) {
      SendNow(std::move(now));
      return;
    }
    // The wake-up runs on the I/O thread, after Next() has checked the queue or while
    // it waits; one is enough for a burst of events (Next takes them all).
    if (wake) PostWake();
  }

  void PostWake() {
    asio::post(executor_, [self = shared_from_this()] {
      {
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->wake_pending_ = false;
      }
      self->timer_.cancel();
    });
  }

  // On the I/O thread, with the coroutine waiting in Next(): nothing else writes to
  // the socket. What the socket does not take now goes back to the queue's front
  // for the coroutine to write (its error, if any, is the coroutine's to handle).
  void SendNow(std::vector<Event> events) {
    std::string bytes;
    bool last = false, abort = false;
    Format(events, connection_, &bytes, &last, &abort);
    int64_t counted = 0;
    for (const Event& e : events) counted += Counted(e);
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(socket_, bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        break;
      }
      sent += static_cast<size_t>(n);
    }
    asio::post(executor_, [self = shared_from_this()] {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->sent_this_turn_ = false;
    });
    if (sent == bytes.size()) {
      Sent(counted);
      return;
    }
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.insert(events_.begin(), Event{Event::kBytes, 200, "", bytes.substr(sent), {}, counted});
      wake = !wake_pending_;
      wake_pending_ = true;
    }
    if (wake) PostWake();
  }

  asio::any_io_executor executor_;
  asio::steady_timer timer_;
  const int64_t max_unsent_;
  const int socket_;
  const std::thread::id io_thread_;
  const std::string connection_;
  std::atomic<int64_t> unsent_{0};
  std::atomic<bool> overflowed_{false};
  std::mutex mutex_;
  std::vector<Event> events_;
  std::function<void()> on_close_;
  bool finished_ = false;  // guarded by mutex_
  bool wake_pending_ = false;  // guarded by mutex_: a wake-up is posted and has not run
  bool idle_ = false;  // guarded by mutex_: the coroutine waits in Next() (no write of its own under way)
  bool sent_this_turn_ = false;  // guarded by mutex_: SendNow ran in this turn of the loop
  std::atomic<bool> closed_{false};
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  // One io_context per I/O thread; the acceptor lives on the first.
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<EventLoop>> loops;  // the same loops, as clients may share them
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::atomic<int> open_responses{0};
  std::atomic<int> connections{0};
  std::atomic<bool> stopping{false};
  int port = 0;

  asio::awaitable<void> Listen() {
    size_t next = 0;
    asio::steady_timer accept_backoff(co_await asio::this_coro::executor);
    while (!stopping.load()) {
      boost::system::error_code ec;
      asio::io_context& target = *contexts[next++ % contexts.size()];
      tcp::socket socket = co_await acceptor->async_accept(target, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopping.load() || ec == asio::error::operation_aborted) co_return;
        // Out of file descriptors (or memory): the pending connection stays in the
        // backlog and accept would fail again at once, spinning a core. Wait first.
        if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
            ec == asio::error::no_memory || ec.value() == ENFILE) {
          accept_backoff.expires_after(std::chrono::milliseconds(50));
          co_await accept_backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        continue;
      }
      // Each SSE chunk goes out when written: without this, Nagle's algorithm holds a
      // small chunk back until the client acknowledges the last one (delayed ACK:
      // up to 40 ms on Linux), and two tokens arrive as one.
      socket.set_option(tcp::no_delay(true), ec);
      if (options.socket_send_buffer_bytes > 0) {
        socket.set_option(asio::socket_base::send_buffer_size(options.socket_send_buffer_bytes), ec);
      }
      if (connections.load() >= options.max_connections) {
        // Over the cap: a short answer, then the descriptor is free again.
        asio::co_spawn(target, Refuse(std::move(socket)), asio::detached);
        continue;
      }
      ++connections;
      asio::co_spawn(target, Session(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  asio::awaitable<void> Refuse(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    const std::string response =
        ErrorResponse(503, "the server is at its limit of " + std::to_string(options.max_connections) +
                               " open connections (--max-connections); retry later",
                      "too_many_connections");
    boost::system::error_code ec;
    stream.expires_after(std::chrono::seconds(1));
    co_await asio::async_write(stream, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  static std::chrono::milliseconds Millis(double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }

  asio::awaitable<void> Session(beast::tcp_stream stream) {
    co_await Serve(stream);
    --connections;
  }

  asio::awaitable<void> Serve(beast::tcp_stream& stream) {
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    while (!stopping.load()) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      if (buffer.size() == 0) {
        // Idle until the next request's first byte; from then on the whole request
        // must arrive within the read timeout, or the connection closes (slowloris).
        stream.expires_after(Millis(options.idle_timeout_seconds));
        const size_t n = co_await stream.async_read_some(buffer.prepare(4096),
                                                         asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
        buffer.commit(n);
      }
      stream.expires_after(Millis(options.read_timeout_seconds));
      co_await bhttp::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == beast::error::timeout) break;  // the stream closed the socket: nothing more to say
      if (ec == bhttp::error::body_limit) {
        std::string response = ErrorResponse(413,
                                             "the request body is larger than the limit of " +
                                                 std::to_string(options.max_body_bytes) + " bytes (--max-body-bytes)",
                                             "body_too_large");
        co_await asio::async_write(stream, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
        break;
      }
      if (ec) {  // closed or timed out: nothing to say; not HTTP: a 400 (431 for huge headers), then close
        if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
            ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
          // Named first: GCC 12 destroys temporaries of a co_await's arguments twice.
          const bool headers = ec == bhttp::error::header_limit;
          std::string response = headers ? ErrorResponse(431, "the request's headers are larger than the limit",
                                                         "headers_too_large")
                                         : ErrorResponse(400, "malformed HTTP request: " + ec.message(), "bad_http");
          stream.expires_after(std::chrono::seconds(5));
          co_await asio::async_write(stream, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
        }
        break;
      }
      stream.expires_never();
      bhttp::request<bhttp::string_body> message = parser.release();
      // A transfer coding other than a final chunked has no framing we can trust
      // (RFC 9112 6.1: answer 400 and close), nor has one with a Content-Length beside it.
      if (auto te = message.find(bhttp::field::transfer_encoding); te != message.end()) {
        if (!bhttp::token_list{te->value()}.exists("chunked") || !message.chunked() ||
            message.find(bhttp::field::content_length) != message.end()) {
          std::string response =
              ErrorResponse(400, "Transfer-Encoding must end in chunked, without a Content-Length", "bad_http");
          stream.expires_after(std::chrono::seconds(5));
          co_await asio::async_write(stream, asio::buffer(response), asio::redirect_error(asio::use_awaitable, ec));
          break;
        }
      }
      const bool keep_alive = message.keep_alive();
      HttpRequest request{std::string(message.method_string()), std::string(message.target()), {},
                          std::move(message.body())};
      for (const auto& field : message) {
        std::string name(field.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        request.headers[name] = std::string(field.value());
      }
      auto writer = std::make_shared<ConnectionWriter>(stream.get_executor(), options.max_unsent_bytes,
                                                       stream.socket().native_handle(), keep_alive);
      ++open_responses;
      // Bytes of a pipelined next request, if any, stay in `buffer`; with none there
      // the socket is watched for the client going away while the response is made.
      auto watching = std::make_shared<bool>(buffer.size() == 0);
      if (*watching) Watch(stream.socket(), writer, watching);
      handler(std::move(request), writer);
      bool ok = co_await Respond(stream, *writer);
      *watching = false;
      writer->Finished();
      --open_responses;
      if (!ok || !keep_alive) break;
      stream.socket().cancel(ec);  // the watch, if still waiting
    }
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  // Waits until the socket is readable: end of stream or an error means the client
  // is gone; bytes mean a pipelined request, left unread for the next parse.
  static void Watch(tcp::socket& socket, std::shared_ptr<ConnectionWriter> writer, std::shared_ptr<bool> watching) {
    socket.async_wait(tcp::socket::wait_read, [&socket, writer, watching](const boost::system::error_code& ec) {
      if (!*watching || ec == asio::error::operation_aborted) return;
      char byte;
      const ssize_t n = ec ? -1 : ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // a pipelined request
      if (n < 0 && !ec && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        Watch(socket, writer, watching);
        return;
      }
      writer->MarkClosed();
    });
  }

  // Writes what the handler produces; false if the connection is done.
  asio::awaitable<bool> Respond(beast::tcp_stream& stream, ConnectionWriter& writer) {
    boost::system::error_code ec;
    while (true) {
      std::vector<Event> events = co_await writer.Next();
      if (events.empty()) co_return false;  // the client went away
      // Everything queued goes out in one write: a burst of chunks costs one system call.
      std::string bytes;
      bool last = false, abort = false;
      Format(events, writer.connection(), &bytes, &last, &abort);
      // Written in slices, each with the write timeout: a client that reads slowly
      // gets all of it; one that takes no slice for that long is gone as far as we care.
      constexpr size_t kSlice = 64 << 10;
      for (size_t at = 0; at < bytes.size() && !ec; at += kSlice) {
        stream.expires_after(Millis(options.write_timeout_seconds));
        co_await asio::async_write(stream, asio::buffer(bytes.data() + at, std::min(kSlice, bytes.size() - at)),
                                   asio::redirect_error(asio::use_awaitable, ec));
      }
      stream.expires_never();
      int64_t queued = 0;
      for (const Event& e : events) queued += Counted(e);
      writer.Sent(queued);
      if (abort) {
        stream.socket().close(ec);
        co_return false;
      }
      if (ec) {
        writer.MarkClosed();
        co_return false;
      }
      if (last) co_return true;
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  const int num_threads = std::max(1, options.num_io_threads);
  for (int i = 0; i < num_threads; ++i) impl->contexts.push_back(std::make_unique<asio::io_context>(1));
  impl->acceptor = std::make_unique<tcp::acceptor>(*impl->contexts[0]);
  boost::system::error_code ec;
  auto address = asio::ip::make_address(options.host, ec);
  if (ec) return InvalidArgumentError("--host '" + options.host + "' is not an IP address");
  tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  impl->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(endpoint, ec);
  if (!ec) impl->acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return UnavailableError("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                            ec.message());
  }
  impl->port = impl->acceptor->local_endpoint().port();
  Impl* raw = impl.get();
  asio::co_spawn(*impl->contexts[0], raw->Listen(), asio::detached);
  for (auto& context : impl->contexts) {
    asio::io_context* io = context.get();
    impl->loops.push_back(std::make_unique<EventLoop>(EventLoop{io}));
    EventLoop* loop = impl->loops.back().get();
    // Each loop runs until Stop(), with or without connections.
    auto guard = std::make_shared<asio::executor_work_guard<asio::io_context::executor_type>>(io->get_executor());
    impl->threads.emplace_back([io, loop, guard] {
      SetCurrentEventLoop(loop);
      io->run();
      SetCurrentEventLoop(nullptr);
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port; }
int HttpServer::num_connections() const { return impl_->connections.load(); }

void HttpServer::Stop(double grace_seconds) {
  if (impl_->stopping.exchange(true)) return;
  asio::post(*impl_->contexts[0], [impl = impl_.get()] {
    boost::system::error_code ec;
    impl->acceptor->close(ec);
  });
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
  while (impl_->open_responses.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& context : impl_->contexts) context->stop();
  for (auto& thread : impl_->threads) {
    if (thread.joinable()) thread.join();
  }
  // The posted close may not have run before the loop stopped; the threads are gone now.
  boost::system::error_code ec;
  impl_->acceptor->close(ec);
}

HttpServer::~HttpServer() { Stop(0); }

}  // namespace tachyon
