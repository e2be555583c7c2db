// Starts `tachyon serve` on a free port for end-to-end tests and stops it by its pid.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tachyon::e2e {

// The stories260K fixture in ../shared (or TACHYON_SHARED_DIR).
inline std::string StoriesModel() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/models/stories260K.gguf";
}

class ServerProcess {
 public:
  // args: extra flags for `tachyon serve`; the port is chosen by the server (--port 0).
  // With --config the engines' threads are the config's (the engine flags are refused then).
  // `tachyon serve` without the engines' warm-up request (tests count the
  // engine's requests and tokens exactly; ReadyTest covers the warm-up).
  explicit ServerProcess(const std::vector<std::string>& args)
      : ServerProcess(TACHYON_BINARY,
                      Concat(std::find(args.begin(), args.end(), "--config") == args.end()
                                 ? std::vector<std::string>{"serve", "--port", "0", "--threads", "1", "--no-warmup"}
                                 : std::vector<std::string>{"serve", "--port", "0", "--no-warmup"},
                             args)) {}

  // Any program whose first stdout line is "listening on http://HOST:PORT".
  ServerProcess(const std::string& binary, const std::vector<std::string>& args) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<std::string> argv_storage = {binary};
      argv_storage.insert(argv_storage.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : argv_storage) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    // The first stdout line is "listening on http://HOST:PORT".
    FILE* f = ::fdopen(out[0], "r");
    std::array<char, 256> line{};
    if (f != nullptr && std::fgets(line.data(), line.size(), f) != nullptr) {
      std::string s(line.data());
      size_t at = s.find("http://");
      if (at != std::string::npos) url_ = s.substr(at, s.find_last_not_of("\r\n") + 1 - at);
    }
    if (f != nullptr) std::fclose(f);
  }

  ~ServerProcess() {
    if (pid_ > 0 && !stopped_) Stop();
  }

  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }
  void Signal(int signo) const {
    if (pid_ > 0 && !stopped_) ::kill(pid_, signo);
  }
  // SIGKILL: the process dies at once, its connections reset.
  void Kill() {
    stopped_ = true;
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  bool started() const { return !url_.empty(); }

  // SIGTERM, then waits; returns the exit status (or -1).
  int Stop() {
    stopped_ = true;
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  static std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  pid_t pid_ = -1;
  bool stopped_ = false;
  std::string url_;
};

// A shell command's stdout.
inline std::string Shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  ::pclose(pipe);
  return out;
}

inline std::string Curl(const std::string& args) { return Shell("curl -s -S --max-time 30 " + args + " 2>&1"); }

}  // namespace tachyon::e2e
