// Config files and mock upstreams for end-to-end tests of `tachyon serve --config`.
#pragma once

#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace tachyon::e2e {

// A file in the test's temporary directory, apart from other test processes' (ctest runs them in parallel).
inline std::string TempFile(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

inline std::string WriteConfig(const std::string& name, const std::string& text) {
  const std::string path = TempFile(name);
  std::ofstream(path) << text;
  return path;
}

// tests/support/mock_upstream on a free port, with its flags.
inline std::unique_ptr<ServerProcess> Upstream(const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {"--port", "0"};
  args.insert(args.end(), flags.begin(), flags.end());
  return std::make_unique<ServerProcess>(MOCK_UPSTREAM_BINARY, args);
}

// A [[backend]] table of kind openai for an upstream, with more keys in `extra`.
inline std::string Backend(const std::string& name, const ServerProcess& up, const std::string& extra = "") {
  return "[[backend]]\nname = \"" + name + "\"\nkind = \"openai\"\nbase_url = \"" + up.url() + "/v1\"\n" + extra + "\n";
}

}  // namespace tachyon::e2e
