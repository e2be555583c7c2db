// A redis-server of a test's own on a free loopback port, no persistence,
// stopped (SIGKILL) by its pid; Stop then Start again is a Redis that went away
// and came back empty. Tests skip when redis-server is not installed.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/eventually.h"

namespace tachyon::testing_util {

inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class RedisServer {
 public:
  // extra: more redis-server flags ("--requirepass", "s3cret"); tls: the port is a
  // TLS port (extra then names the certificate files) and plain TCP is off.
  explicit RedisServer(int port, std::vector<std::string> extra = {}, bool tls = false)
      : port_(port), extra_(std::move(extra)), tls_(tls) {
    Start();
  }
  ~RedisServer() { Stop(); }
  void Start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      std::vector<std::string> args = {"redis-server", "--port", tls_ ? "0" : port, "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--loglevel", "warning"};
      if (tls_) args.insert(args.end(), {"--tls-port", port});
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("redis-server", argv.data());
      ::_exit(127);
    }
    // Up when it answers.
    tachyon::testing::Eventually([&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port_));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
      return up;
    }, 5, 0.05);
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string url() const { return std::string(tls_ ? "rediss" : "redis") + "://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int port_;
  std::vector<std::string> extra_;
  bool tls_ = false;
  pid_t pid_ = -1;
};

}  // namespace tachyon::testing_util
