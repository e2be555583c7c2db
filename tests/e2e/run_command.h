// Runs the real tachyon binary for end-to-end tests and captures its output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace tachyon::e2e {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `tachyon <args>` through the shell (args are shell words).
inline CommandResult RunTachyon(const std::string& args) {
  // ctest runs test cases as parallel processes: the pid keeps their files apart.
  static int counter = 0;
  std::string err_path = ::testing::TempDir() + "/tachyon_e2e_stderr_" + std::to_string(::getpid()) +
                         "_" + std::to_string(counter++);
  std::string command = std::string(TACHYON_BINARY) + " " + args + " 2>" + err_path;
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.out.append(buf.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream ss;
  ss << err.rdbuf();
  result.err = ss.str();
  std::remove(err_path.c_str());
  return result;
}

}  // namespace tachyon::e2e
