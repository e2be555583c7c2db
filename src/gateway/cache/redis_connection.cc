#include "gateway/cache/redis_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/percent_decode.h"

namespace tachyon {
namespace {

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no detail from OpenSSL";
  char text[256];
  ERR_error_string_n(e, text, sizeof(text));
  ERR_clear_error();
  return text;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A TCP connection to one of the host's addresses within the deadline; -1 and *error on failure.
int ConnectTcp(const std::string& host, int port, double timeout_seconds, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // Resolved at every connect: an address that moved is found at the next attempt.
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    *error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  int fd = -1;
  *error = "no address for " + host;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) == 1 ? 0 : -1;
      int so_error = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof(so_error);
      if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        errno = so_error;
        rc = -1;
      }
    }
    if (rc != 0) {
      *error = "cannot connect to " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

void RedisReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

std::string RedisText(const redisReply* r) {
  return r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : "";
}

std::string RedisErrorReason(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_ERROR) return "";
  const std::string text = RedisText(r);
  std::string word = text.substr(0, text.find(' '));
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool plain = !word.empty() && word.size() <= 16 &&
                     std::all_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  return plain ? word : "error";  // a label value from a small set, whatever the server says
}

StatusOr<RedisAddress> ParseRedisUrl(const std::string& url) {
  RedisAddress a;
  std::string rest;
  if (url.rfind("redis://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("rediss://", 0) == 0) {
    rest = url.substr(9);
    a.tls = true;
  } else {
    return InvalidArgumentError("not a redis:// or rediss:// URL: " + RedactRedisUrl(url));
  }
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    const bool ok = PercentDecode(userinfo.substr(0, colon), &a.user) &&
                    (colon == std::string::npos || PercentDecode(userinfo.substr(colon + 1), &a.password));
    // USER@ alone names the user (its password may come from password_env).
    if (!ok) return InvalidArgumentError("a broken %-escape in the user or password of " + RedactRedisUrl(url));
  }
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      char* end = nullptr;
      const long n = std::strtol(db.c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > 1000) return InvalidArgumentError("bad database number in " + RedactRedisUrl(url));
      a.db = static_cast<int>(n);
    }
  }
  std::string host = rest;
  if (!rest.empty() && rest[0] == '[') {  // [v6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) return InvalidArgumentError("bad IPv6 host in " + RedactRedisUrl(url));
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return InvalidArgumentError("bad host in " + RedactRedisUrl(url));
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    rest = rest.substr(colon);
  } else {
    rest.clear();
  }
  if (!rest.empty()) {  // ":PORT"
    char* end = nullptr;
    const long port = std::strtol(rest.c_str() + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) return InvalidArgumentError("bad port in " + RedactRedisUrl(url));
    a.port = static_cast<int>(port);
  }
  if (!host.empty()) a.host = host;
  return a;
}

std::string RedactRedisUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  const size_t colon = url.find(':', scheme + 3);
  const size_t secret = colon != std::string::npos && colon < at ? colon + 1 : scheme + 3;
  return url.substr(0, secret) + "***" + url.substr(at);
}

StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(const RedisAddress& address, double timeout_seconds,
                                                                 double io_timeout_seconds, std::string* reason) {
  std::string why = "connect";
  auto fail = [&](std::string message) {
    if (reason != nullptr) *reason = why;
    return UnavailableError(std::move(message));
  };
  std::unique_ptr<RedisConnection> c(new RedisConnection());
  std::string error;
  c->fd_ = ConnectTcp(address.host, address.port, timeout_seconds, &error);
  if (c->fd_ < 0) return fail(error);
  // Blocking from here, every read and write bounded.
  ::fcntl(c->fd_, F_SETFL, ::fcntl(c->fd_, F_GETFL) & ~O_NONBLOCK);
  const double whole = std::floor(io_timeout_seconds);
  const timeval io{static_cast<time_t>(whole), static_cast<suseconds_t>((io_timeout_seconds - whole) * 1e6)};
  ::setsockopt(c->fd_, SOL_SOCKET, SO_RCVTIMEO, &io, sizeof(io));
  ::setsockopt(c->fd_, SOL_SOCKET, SO_SNDTIMEO, &io, sizeof(io));
  const int one = 1;
  ::setsockopt(c->fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  c->reader_ = redisReaderCreate();
  if (address.tls) {
    why = "tls";
    c->ctx_ = SSL_CTX_new(TLS_client_method());
    if (c->ctx_ == nullptr) return fail("TLS: " + OpenSslError());
    SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
    if (address.verify_tls) {
      SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
      const int loaded = address.ca_file.empty()
                             ? SSL_CTX_set_default_verify_paths(c->ctx_)
                             : SSL_CTX_load_verify_locations(c->ctx_, address.ca_file.c_str(), nullptr);
      if (loaded != 1) return fail("TLS: cannot read the CA file '" + address.ca_file + "': " + OpenSslError());
    }
    c->ssl_ = SSL_new(c->ctx_);
    // Memory BIOs: the socket I/O is ours (send with MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
    SSL_set_bio(c->ssl_, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
    SSL_set_connect_state(c->ssl_);
    if (!IsIpLiteral(address.host)) SSL_set_tlsext_host_name(c->ssl_, address.host.c_str());
    if (address.verify_tls) {
      X509_VERIFY_PARAM* param = SSL_get0_param(c->ssl_);
      if (IsIpLiteral(address.host)) {
        X509_VERIFY_PARAM_set1_ip_asc(param, address.host.c_str());
      } else {
        X509_VERIFY_PARAM_set1_host(param, address.host.c_str(), 0);
      }
    }
    while (true) {
      const int rc = SSL_do_handshake(c->ssl_);
      if (rc == 1) break;
      const int e = SSL_get_error(c->ssl_, rc);
      if (e != SSL_ERROR_WANT_READ || !c->Flush() || !c->ReadSome()) {
        const long verify = SSL_get_verify_result(c->ssl_);
        return fail("TLS handshake with " + address.host + ": " +
                    (verify != X509_V_OK ? std::string(X509_verify_cert_error_string(verify)) : OpenSslError()));
      }
    }
    if (!c->Flush()) return fail("TLS handshake with " + address.host + ": the connection closed");
  }
  if (!address.password.empty()) {
    RedisReplyPtr r = address.user.empty() ? c->Command({"AUTH", address.password})
                                           : c->Command({"AUTH", address.user, address.password});
    if (!r) return fail("AUTH: the connection closed");
    if (r->type == REDIS_REPLY_ERROR) {
      why = RedisErrorReason(r.get());
      return fail("AUTH refused: " + RedisText(r.get()));
    }
  }
  if (address.db != 0) {
    RedisReplyPtr r = c->Command({"SELECT", std::to_string(address.db)});
    if (!r) return fail("SELECT: the connection closed");
    if (r->type == REDIS_REPLY_ERROR) {
      why = RedisErrorReason(r.get());
      return fail("SELECT " + std::to_string(address.db) + " refused: " + RedisText(r.get()));
    }
  }
  return c;
}

RedisConnection::~RedisConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees its BIOs
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (reader_ != nullptr) redisReaderFree(reader_);
  if (fd_ >= 0) ::close(fd_);
}

void RedisConnection::Append(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* command = nullptr;
  const int n = redisFormatCommandArgv(&command, static_cast<int>(args.size()), argv.data(), lengths.data());
  if (n > 0) out_.append(command, static_cast<size_t>(n));
  std::free(command);
}

// Sends out_ (through TLS when on), then whatever TLS has to send.
bool RedisConnection::Flush() {
  if (broken_) return false;
  if (ssl_ != nullptr && !out_.empty()) {
    if (SSL_write(ssl_, out_.data(), static_cast<int>(out_.size())) <= 0) return Broken();
    out_.clear();
  }
  std::string pending;
  if (ssl_ != nullptr) {
    BIO* wbio = SSL_get_wbio(ssl_);
    char buf[16384];
    int n;
    while ((n = BIO_read(wbio, buf, sizeof(buf))) > 0) pending.append(buf, static_cast<size_t>(n));
  } else {
    pending.swap(out_);
  }
  size_t sent = 0;
  while (sent < pending.size()) {
    const ssize_t n = ::send(fd_, pending.data() + sent, pending.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return Broken();
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads what the socket has (waiting up to the I/O timeout) into TLS or the reply reader.
bool RedisConnection::ReadSome() {
  char buf[16384];
  ssize_t n;
  do {
    n = ::recv(fd_, buf, sizeof(buf), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return Broken();
  if (ssl_ != nullptr) {
    BIO_write(SSL_get_rbio(ssl_), buf, static_cast<int>(n));
  } else {
    redisReaderFeed(reader_, buf, static_cast<size_t>(n));
  }
  return true;
}

RedisReplyPtr RedisConnection::GetReply() {
  if (!Flush()) return nullptr;
  while (true) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {  // a protocol error: the stream is lost
      broken_ = true;
      return nullptr;
    }
    if (reply != nullptr) return RedisReplyPtr(static_cast<redisReply*>(reply));
    if (ssl_ == nullptr) {
      if (!ReadSome()) return nullptr;
      continue;
    }
    char buf[16384];
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n > 0) {
      redisReaderFeed(reader_, buf, static_cast<size_t>(n));
      continue;
    }
    if (SSL_get_error(ssl_, n) != SSL_ERROR_WANT_READ || !Flush() || !ReadSome()) {
      broken_ = true;
      return nullptr;
    }
  }
}

RedisReplyPtr RedisConnection::Command(const std::vector<std::string>& args) {
  Append(args);
  return GetReply();
}

}  // namespace tachyon
