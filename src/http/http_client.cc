#include "http/http_client.h"

#include "http/event_loop_internal.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/asio/ssl.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>

namespace tachyon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// A response body read as it arrives and handed on (the caller clears it after
// each read). Beast's string_body reserves the whole Content-Length up front: an
// upstream that announced 6 TB made one allocation of 6 TB (found by
// upstream_response_fuzz). This one holds only what came.
struct StreamedBody {
  using value_type = std::string;
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, boost::system::error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
      const std::size_t n = asio::buffer_size(buffers);
      for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
        const asio::const_buffer b = *it;
        body_.append(static_cast<const char*>(b.data()), b.size());
      }
      ec = {};
      return n;
    }
    void finish(boost::system::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  HttpUrl out;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
    out.tls = true;
    out.port = 443;
  } else {
    return InvalidArgumentError("'" + url + "' is not an http:// or https:// URL");
  }
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  out.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  std::string port;
  if (!authority.empty() && authority[0] == '[') {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string::npos) return InvalidArgumentError("'" + url + "': unclosed '[' in the host");
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return InvalidArgumentError("'" + url + "': expected ':' after ']'");
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgumentError("'" + url + "' has no host");
  if (!port.empty()) {
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (*end != '\0' || p < 1 || p > 65535) return InvalidArgumentError("'" + url + "': bad port '" + port + "'");
    out.port = static_cast<int>(p);
  }
  return out;
}

namespace {

// What one read of a response may bring (a whole burst of stream events).
constexpr size_t kReadBufferBytes = 16384;

Status NetworkError(const std::string& what, const HttpClientRequest& r, const boost::system::error_code& ec) {
  std::string where = r.host + ":" + std::to_string(r.port);
  if (!r.connect_address.empty()) where += " (at " + r.connect_address + ")";
  if (ec == beast::error::timeout) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", r.timeout_seconds);
    return OutOfRangeError(what + " " + where + ": no complete response within " + seconds + " s");
  }
  return UnavailableError(what + " " + where + ": " + ec.message());
}

// A reused connection that the server closed while it sat idle fails like this
// before any byte of the response; an idempotent request is then sent again.
bool IsStaleConnection(const boost::system::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

// A TLS connection; kept behind a pointer in the pool (the stream does not move).
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

beast::tcp_stream& Tcp(beast::tcp_stream& s) { return s; }
beast::tcp_stream& Tcp(TlsStream& s) { return beast::get_lowest_layer(s); }

// Whether an idle pooled connection may carry the next request: readable means the
// server closed it (end of stream) or sent bytes nobody asked for (the connection is
// out of step); either way it is dropped, not reused.
bool StillIdle(beast::tcp_stream& s) {
  char byte;
  const ssize_t n = ::recv(s.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// Requests that may be sent twice without harm (RFC 9110 9.2.2): only these are sent
// again when a reused connection turns out stale; a POST is not (the server may have
// acted on it before it closed).
bool Idempotent(const std::string& method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" || method == "OPTIONS";
}

}  // namespace

// One exchange's cancellation state, on the loop thread.
struct ExchangeState {
  bool cancelled = false;
  beast::tcp_stream* tcp = nullptr;  // the connection in use, while there is one
};

namespace {
thread_local EventLoop* current_loop = nullptr;
}  // namespace

EventLoop* CurrentEventLoop() { return current_loop; }
void SetCurrentEventLoop(EventLoop* loop) { current_loop = loop; }

namespace {

// Where idle connections and resolved addresses are kept: host:port, and the
// address connected to when the request names one.
std::string PoolKey(const HttpClientRequest& r) {
  std::string key = r.host + ":" + std::to_string(r.port);
  if (!r.connect_address.empty()) key += "@" + r.connect_address;
  return key;
}

// The port in the Host header only when it is not the scheme's default.
bool DefaultPort(const HttpClientRequest& r) { return r.port == (r.tls ? 443 : 80); }

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The request line and headers of an HTTP/1.1 keep-alive request; its body follows
// as it is. A caller's Host, User-Agent or Content-Type replaces ours; the framing
// (Content-Length, Transfer-Encoding, Connection) is ours alone, and a name or value
// with CR or LF is left out, so nothing a caller passes can split the request.
std::string RequestHead(const HttpClientRequest& r, const std::string& host, const std::string& user_agent) {
  auto given = [&](std::string_view name) {
    return std::any_of(r.headers.begin(), r.headers.end(), [&](const auto& h) { return SameName(h.first, name); });
  };
  std::string out;
  out.reserve(256);
  out.append(r.method).append(" ").append(r.target).append(" HTTP/1.1\r\n");
  if (!given("host")) out.append("Host: ").append(host).append("\r\n");
  if (!given("user-agent")) out.append("User-Agent: ").append(user_agent).append("\r\n");
  for (const auto& [name, value] : r.headers) {
    if (name.empty() || name.find_first_of("\r\n: ") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos || SameName(name, "content-length") ||
        SameName(name, "transfer-encoding") || SameName(name, "connection")) {
      continue;
    }
    out.append(name).append(": ").append(value).append("\r\n");
  }
  if (!r.body.empty() && !given("content-type")) out.append("Content-Type: application/json\r\n");
  if (!r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
    out.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n");
  }
  out.append("\r\n");
  return out;
}

}  // namespace

struct HttpClient::Impl {
  std::mutex stop_mutex;
  bool stop_requested = false;  // guarded by stop_mutex: Stop was called
  // Own loop, or (external) a loop another thread runs.
  explicit Impl(HttpClientOptions o)
      : options(std::move(o)), own_io(std::make_unique<asio::io_context>(1)), io(*own_io) {}
  Impl(HttpClientOptions o, asio::io_context& external) : options(std::move(o)), io(external) {}

  // Made at the first https request: building it costs ~15 ms, which plain-http runs need not pay.
  asio::ssl::context& Ssl() {
    if (!ssl) {
      ssl.emplace(asio::ssl::context::tls_client);
      ssl->set_verify_mode(options.verify_peer ? asio::ssl::verify_peer : asio::ssl::verify_none);
      boost::system::error_code ec;
      if (!options.ca_file.empty()) {
        ssl->load_verify_file(options.ca_file, ec);
        if (ec) ca_error = "cannot read the CA file '" + options.ca_file + "': " + ec.message();
      } else {
        ssl->set_default_verify_paths(ec);
      }
    }
    return *ssl;
  }

  // Declaration order is destruction order reversed: the pooled streams go before the
  // loop, and the loop (with the coroutine frames of unfinished exchanges) before the
  // TLS context their streams were made from.
  HttpClientOptions options;
  std::optional<asio::ssl::context> ssl;
  std::string ca_error;
  std::unique_ptr<asio::io_context> own_io;  // null on an external loop
  asio::io_context& io;
  std::vector<std::unique_ptr<asio::signal_set>> signals;
  std::unordered_map<std::string, std::vector<beast::tcp_stream>> idle;
  std::unordered_map<std::string, std::vector<std::unique_ptr<TlsStream>>> idle_tls;
  // A host's addresses, kept kResolvedSeconds at most and dropped when a connect
  // to them fails, so an upstream that moves (a new IP behind its name) is found.
  struct Resolved {
    tcp::resolver::results_type endpoints;
    std::chrono::steady_clock::time_point at;
  };
  static constexpr double kResolvedSeconds = 60;
  std::unordered_map<std::string, Resolved> resolved;
  std::unordered_map<uint64_t, std::shared_ptr<ExchangeState>> exchanges;  // in progress, by id
  std::atomic<uint64_t> next_id{1};
  HttpClientStats stats;

  enum class Outcome { kRetry, kKeep, kClose };

  // Resolves (at most once a minute per host, and after a failed connect) and
  // connects the TCP layer of a new stream.
  asio::awaitable<Status> Connect(beast::tcp_stream& tcp_stream, const HttpClientRequest& r,
                                  std::chrono::steady_clock::time_point connect_deadline) {
    const std::string key = PoolKey(r);
    const std::string& address = r.connect_address.empty() ? r.host : r.connect_address;
    boost::system::error_code ec;
    tcp::resolver::results_type endpoints;
    const auto now = std::chrono::steady_clock::now();
    if (auto found = resolved.find(key);
        found != resolved.end() && now - found->second.at < std::chrono::duration<double>(kResolvedSeconds)) {
      endpoints = found->second.endpoints;
    } else {
      tcp::resolver resolver(io);
      auto results = co_await resolver.async_resolve(address, std::to_string(r.port),
                                                     asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return UnavailableError("cannot resolve '" + address + "': " + ec.message());
      resolved[key] = Resolved{results, now};
      ++stats.resolutions;
      endpoints = results;
    }
    tcp_stream.expires_at(connect_deadline);
    co_await tcp_stream.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) resolved.erase(key);  // the next connect asks the resolver again
    if (ec == beast::error::timeout) {
      co_return UnavailableError("cannot connect to " + key + ": no connection within the connect timeout");
    }
    if (ec) co_return NetworkError("cannot connect to", r, ec);
    tcp_stream.socket().set_option(tcp::no_delay(true), ec);
    ++stats.connections_opened;
    co_return Status::Ok();
  }

  // Writes the request and streams the response to the callbacks. kRetry: a reused
  // connection turned out stale before any byte came back (nothing was reported).
  template <typename Stream>
  asio::awaitable<Outcome> Transfer(Stream& stream, const std::string& request_head, const std::string& body,
                                    const HttpClientRequest& r, HttpStreamCallbacks& cb, bool may_retry,
                                    std::chrono::steady_clock::time_point deadline) {
    const std::string key = r.host + ":" + std::to_string(r.port);
    boost::system::error_code ec;
    const bool first_byte_limit = r.first_byte_timeout_seconds > 0 &&
                                  Until(r.first_byte_timeout_seconds) < deadline;
    Tcp(stream).expires_at(first_byte_limit ? Until(r.first_byte_timeout_seconds) : deadline);
    const std::array<asio::const_buffer, 2> request{asio::buffer(request_head), asio::buffer(body)};
    co_await asio::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
    beast::flat_buffer buffer;
    // Room for a burst: a flat buffer that starts empty reads 512 bytes at a time,
    // so a 16-event burst took 7 reads, each with its own parse, write and timer.
    buffer.reserve(kReadBufferBytes);
    bhttp::response_parser<StreamedBody> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (!ec) co_await bhttp::async_read_header(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (may_retry && IsStaleConnection(ec)) {
        ++stats.retries;
        co_return Outcome::kRetry;
      }
      if (ec == beast::error::timeout && first_byte_limit) {
        char seconds[32];
        std::snprintf(seconds, sizeof(seconds), "%g", r.first_byte_timeout_seconds);
        cb.on_done(OutOfRangeError("no response from " + key + " within the first-byte timeout of " + seconds + " s"));
      } else {
        cb.on_done(NetworkError("no response from", r, ec));
      }
      co_return Outcome::kClose;
    }
    Tcp(stream).expires_at(deadline);
    HttpResponseHead head;
    head.status = static_cast<int>(parser.get().result_int());
    for (const auto& field : parser.get()) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      head.headers[name] = std::string(field.value());
    }
    if (cb.on_head) cb.on_head(head);
    // Each read hands over what one socket read brought, so the caller sees
    // every event at the time it arrived. A read parses one chunk; the chunks
    // already in the buffer are parsed here at once, or each would wait its
    // turn on the loop behind every other stream (0.5 ms at 256 streams), a
    // delay that would be the client's own.
    while (!parser.is_done()) {
      co_await bhttp::async_read_some(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      while (!ec && !parser.is_done() && buffer.size() > 0) {
        boost::system::error_code put_ec;
        const size_t used = parser.put(buffer.data(), put_ec);
        buffer.consume(used);
        if (put_ec == bhttp::error::need_more) break;
        if (put_ec) ec = put_ec;
        if (used == 0) break;
      }
      std::string& body = parser.get().body();
      if (!body.empty()) {
        if (cb.on_data) cb.on_data(body);
        body.clear();
      }
      if (ec) {
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == bhttp::error::partial_message ||
            ec == asio::error::connection_reset) {
          cb.on_done(DataLossError("the response from " + key + " ended early"));
        } else if (ec == bhttp::error::bad_chunk || ec == bhttp::error::bad_chunk_extension) {
          cb.on_done(DataLossError("malformed chunked body from " + key + ": " + ec.message()));
        } else {
          cb.on_done(NetworkError("reading from", r, ec));
        }
        co_return Outcome::kClose;
      }
    }
    cb.on_done(Status::Ok());
    // Bytes past the response's end: whatever they are, the next response would not
    // start where the parser expects it. Not pooled.
    if (buffer.size() > 0) co_return Outcome::kClose;
    co_return parser.get().keep_alive() ? Outcome::kKeep : Outcome::kClose;
  }

  static std::chrono::steady_clock::time_point Until(double seconds) {
    return std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  }

  // The callbacks of an exchange, silenced once it is cancelled.
  static HttpStreamCallbacks Guarded(HttpStreamCallbacks cb, std::shared_ptr<ExchangeState> state) {
    auto shared = std::make_shared<HttpStreamCallbacks>(std::move(cb));
    HttpStreamCallbacks out;
    out.on_head = [shared, state](const HttpResponseHead& h) {
      if (!state->cancelled && shared->on_head) shared->on_head(h);
    };
    out.on_data = [shared, state](std::string_view d) {
      if (!state->cancelled && shared->on_data) shared->on_data(d);
    };
    out.on_done = [shared, state](const Status& s) {
      if (!state->cancelled && shared->on_done) shared->on_done(s);
    };
    return out;
  }

  // keep: on an external loop, the client's state lives as long as its exchanges
  // (null on its own loop, whose destruction ends them first).
  asio::awaitable<void> Exchange(uint64_t id, HttpClientRequest r, HttpStreamCallbacks user_cb,
                                 [[maybe_unused]] std::shared_ptr<Impl> keep) {
    auto state = std::make_shared<ExchangeState>();
    exchanges.emplace(id, state);
    HttpStreamCallbacks cb = Guarded(std::move(user_cb), state);
    co_await Exchange(r, cb, *state);
    exchanges.erase(id);
  }

  asio::awaitable<void> Exchange(HttpClientRequest& r, HttpStreamCallbacks& cb, ExchangeState& state) {
    const auto deadline = Until(r.timeout_seconds);
    const auto connect_deadline =
        r.connect_timeout_seconds > 0 ? std::min(deadline, Until(r.connect_timeout_seconds)) : deadline;
    const std::string key = PoolKey(r);
    const std::string authority = r.host + ":" + std::to_string(r.port);
    const std::string head = RequestHead(r, DefaultPort(r) ? r.host : authority, options.user_agent);
    const std::string body = std::move(r.body);

    const bool may_retry = Idempotent(r.method) || r.replayable;
    for (int attempt = 0;; ++attempt) {
      // The pools are looked up again after each co_await: other exchanges may insert keys meanwhile.
      Outcome outcome;
      if (r.tls) {
        asio::ssl::context& ssl_context = Ssl();
        if (!ca_error.empty()) {
          cb.on_done(InvalidArgumentError(ca_error));
          co_return;
        }
        std::unique_ptr<TlsStream> stream;
        bool reused = false;
        for (auto& pool = idle_tls[key]; !pool.empty() && !reused;) {
          stream = std::move(pool.back());
          pool.pop_back();
          reused = StillIdle(Tcp(*stream));
          if (!reused) stream.reset();
        }
        if (reused) {
          ++stats.connections_reused;
        } else {
          stream = std::make_unique<TlsStream>(io, ssl_context);
          state.tcp = &Tcp(*stream);
          Status connected = co_await Connect(Tcp(*stream), r, connect_deadline);
          if (!connected.ok()) {
            state.tcp = nullptr;
            cb.on_done(connected);
            co_return;
          }
          if (state.cancelled) co_return;
          // SNI, and the certificate must name the host.
          SSL_set_tlsext_host_name(stream->native_handle(), r.host.c_str());
          stream->set_verify_callback(asio::ssl::host_name_verification(r.host));
          boost::system::error_code ec;
          co_await stream->async_handshake(asio::ssl::stream_base::client,
                                           asio::redirect_error(asio::use_awaitable, ec));
          if (ec) {
            state.tcp = nullptr;
            if (ec == beast::error::timeout) {
              cb.on_done(UnavailableError("TLS handshake with " + key + ": not done within the connect timeout"));
            } else {
              cb.on_done(NetworkError("TLS handshake with", r, ec));
            }
            co_return;
          }
        }
        state.tcp = &Tcp(*stream);
        outcome = co_await Transfer(*stream, head, body, r, cb, may_retry && reused && attempt == 0, deadline);
        state.tcp = nullptr;
        if (state.cancelled) outcome = Outcome::kClose;
        if (auto& pool = idle_tls[key]; outcome == Outcome::kKeep && pool.size() < options.max_idle_per_host) {
          Tcp(*stream).expires_never();
          pool.push_back(std::move(stream));
        }
      } else {
        std::optional<beast::tcp_stream> stream;
        bool reused = false;
        for (auto& pool = idle[key]; !pool.empty() && !reused;) {
          stream.emplace(std::move(pool.back()));
          pool.pop_back();
          reused = StillIdle(*stream);
          if (!reused) stream.reset();
        }
        if (reused) {
          ++stats.connections_reused;
        } else {
          stream.emplace(io);
          state.tcp = &*stream;
          Status connected = co_await Connect(*stream, r, connect_deadline);
          state.tcp = nullptr;
          if (!connected.ok()) {
            cb.on_done(connected);
            co_return;
          }
          if (state.cancelled) co_return;
        }
        state.tcp = &*stream;
        outcome = co_await Transfer(*stream, head, body, r, cb, may_retry && reused && attempt == 0, deadline);
        state.tcp = nullptr;
        if (state.cancelled) outcome = Outcome::kClose;
        if (auto& pool = idle[key]; outcome == Outcome::kKeep && pool.size() < options.max_idle_per_host) {
          stream->expires_never();
          pool.push_back(std::move(*stream));
        }
      }
      if (outcome != Outcome::kRetry || state.cancelled) co_return;
    }
  }
};

HttpClient::HttpClient(HttpClientOptions options) : impl_(std::make_shared<Impl>(options)) {}
HttpClient::HttpClient(EventLoop* loop, HttpClientOptions options)
    : impl_(std::make_shared<Impl>(options, *loop->io)) {}
HttpClient::~HttpClient() = default;

uint64_t HttpClient::Send(HttpClientRequest request, HttpStreamCallbacks callbacks) {
  const uint64_t id = impl_->next_id++;
  std::shared_ptr<Impl> keep = impl_->own_io ? nullptr : impl_;
  asio::post(impl_->io, [impl = impl_.get(), id, request = std::move(request), callbacks = std::move(callbacks),
                         keep = std::move(keep)]() mutable {
    asio::co_spawn(impl->io, impl->Exchange(id, std::move(request), std::move(callbacks), std::move(keep)),
                   asio::detached);
  });
  return id;
}

void HttpClient::Cancel(uint64_t id) {
  std::shared_ptr<Impl> keep = impl_->own_io ? nullptr : impl_;
  asio::dispatch(impl_->io, [impl = impl_.get(), keep = std::move(keep), id] {
    auto it = impl->exchanges.find(id);
    if (it == impl->exchanges.end()) return;
    it->second->cancelled = true;
    // The exchange's pending operation ends with an error; its coroutine then unwinds.
    if (it->second->tcp != nullptr) it->second->tcp->close();
  });
}

void HttpClient::RunAt(std::chrono::steady_clock::time_point t, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(impl_->io, t);
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
}

void HttpClient::Post(std::function<void()> fn) { asio::post(impl_->io, std::move(fn)); }

void HttpClient::Run() {
  impl_->io.restart();
  impl_->io.run();
}

void HttpClient::RunUntilStopped() {
  {
    // A Stop that came first (the thread started late) must not be undone by restart().
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    if (impl_->stop_requested) return;
    impl_->io.restart();
  }
  auto guard = asio::make_work_guard(impl_->io);
  impl_->io.run();
}

void HttpClient::Stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mutex);
  impl_->stop_requested = true;
  impl_->io.stop();
}

void HttpClient::OnSignalOnce(int signo, std::function<void()> fn) {
  auto set = std::make_unique<asio::signal_set>(impl_->io, signo);
  asio::signal_set* raw = set.get();
  raw->async_wait([raw, fn = std::move(fn)](const boost::system::error_code& ec, int) {
    if (ec) return;
    boost::system::error_code ignored;
    raw->clear(ignored);  // back to the default action
    fn();
  });
  impl_->signals.push_back(std::move(set));
}

void HttpClient::ClearSignals() {
  for (auto& set : impl_->signals) {
    boost::system::error_code ignored;
    set->cancel(ignored);
    set->clear(ignored);
  }
  impl_->signals.clear();
}

HttpClientStats HttpClient::stats() const { return impl_->stats; }

}  // namespace tachyon
