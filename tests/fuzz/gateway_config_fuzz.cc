// libFuzzer target: the gateway config parser (TOML, then every table's keys and
// their cross-references) on arbitrary text. Each input is a config or an error
// that names the file, never a crash, an exception or undefined behaviour.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "gateway/gateway_config.h"

namespace {

// Every environment variable is set (so keys read from it resolve), one empty.
std::optional<std::string> Env(const std::string& name) {
  if (name == "EMPTY") return std::string();
  return "sk-" + name;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tachyon::StatusOr<tachyon::GatewayConfig> config = tachyon::ParseGatewayConfig(text, "fuzz.toml", Env);
  if (!config.ok() && config.status().message().find("fuzz.toml") == std::string::npos) std::abort();
  return 0;
}
