// HttpClient over TLS against a small TLS server (Asio + OpenSSL) with a
// self-signed certificate for 127.0.0.1 made by the openssl tool at test time.
#include <gtest/gtest.h>
#include <unistd.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include <atomic>
#include <filesystem>
#include <thread>

#include "http/http_client.h"

namespace tachyon {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class HttpClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tls_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    cert_ = (dir_ / "cert.pem").string();
    key_ = (dir_ / "key.pem").string();
    const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                            "-addext subjectAltName=IP:127.0.0.1 -keyout " + key_ + " -out " + cert_ +
                            " > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "the openssl tool is not installed";
    ssl_.use_certificate_chain_file(cert_);
    ssl_.use_private_key_file(key_, asio::ssl::context::pem);
    acceptor_.open(tcp::v4());
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) {
      // Wake the blocking accept.
      asio::io_context io;
      tcp::socket s(io);
      boost::system::error_code ec;
      s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)}, ec);
      thread_.join();
    }
    std::filesystem::remove_all(dir_);
  }

  // One connection at a time: handshake, read one request, stream two events, close.
  void Serve() {
    while (!stop_) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) return;
      asio::ssl::stream<tcp::socket> tls(std::move(socket), ssl_);
      tls.handshake(asio::ssl::stream_base::server, ec);
      if (ec) continue;  // the client refused the certificate
      std::string request;
      asio::read_until(tls, asio::dynamic_buffer(request), "\r\n\r\n", ec);
      if (ec) continue;
      const std::string response =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
          "Connection: close\r\n\r\n"
          "9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n";
      asio::write(tls, asio::buffer(response), ec);
      tls.shutdown(ec);
    }
  }

  Status Fetch(HttpClientOptions options, std::string* body) {
    HttpClient client(options);
    Status done = InternalError("not done");
    client.Send({.method = "POST", .host = "127.0.0.1", .port = port_, .target = "/v1/completions",
                 .body = "{}", .timeout_seconds = 10, .tls = true},
                {.on_data = [&](std::string_view d) { body->append(d); },
                 .on_done = [&](const Status& s) { done = s; }});
    client.Run();
    return done;
  }

  std::filesystem::path dir_;
  std::string cert_, key_;
  asio::io_context io_;
  asio::ssl::context ssl_{asio::ssl::context::tls_server};
  tcp::acceptor acceptor_{io_};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(HttpClientTlsTest, TrustedCertificateStreams) {
  std::string body;
  Status s = Fetch({.verify_peer = true, .ca_file = cert_}, &body);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(body, "data: a\n\ndata: b\n\n");
}

TEST_F(HttpClientTlsTest, UntrustedCertificateIsRefused) {
  std::string body;
  Status s = Fetch({}, &body);  // the system's CAs do not know this certificate
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("TLS handshake with 127.0.0.1"), std::string::npos) << s.message();
  EXPECT_TRUE(body.empty());
}

TEST_F(HttpClientTlsTest, InsecureAcceptsAnyCertificate) {
  std::string body;
  Status s = Fetch({.verify_peer = false}, &body);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(body, "data: a\n\ndata: b\n\n");
}

TEST_F(HttpClientTlsTest, MissingCaFileIsAClearError) {
  std::string body;
  Status s = Fetch({.ca_file = (dir_ / "nope.pem").string()}, &body);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cannot read the CA file"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tachyon
