// The gateway config parser on mutated configs (tests/support/mutation_fuzz.h): every
// input is a config or an error naming the file, never a crash or an exception.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gateway/gateway_config.h"
#include "tests/support/mutation_fuzz.h"

namespace tachyon {
namespace {

// Every variable is set, so that keys read from the environment resolve; one is empty.
std::optional<std::string> Env(const std::string& name) {
  if (name == "EMPTY") return std::string();
  return "sk-" + name;
}

TEST(GatewayConfigFuzzTest, MutatedConfigsParseOrFailWithAMessage) {
  std::vector<std::string> seeds = {
      R"cfg([[backend]]
name = "local"
kind = "local"
model = "m.gguf"
[[route]]
model = "chat"
backends = ["local"]
)cfg",
      R"cfg([server]
port = 8000
max_body_bytes = 1048576
[[backend]]
name = "up"
kind = "openai"
base_url = "http://127.0.0.1:9000/v1"
api_key_env = "KEY"
upstream_model = "gpt-4o-mini"
[[route]]
model = "gpt"
aliases = ["gpt-*"]
backends = ["up"]
policy = "fallback"
[route.trim]
whitespace = true
history_tokens = 100
)cfg",
      R"cfg([[backend]]
name = "a"
kind = "local"
model = "a.gguf"
[[backend]]
name = "b"
kind = "local"
model = "b.gguf"
[[route]]
model = "auto"
policy = "classify"
default = "large"
[[route.class]]
name = "small"
backends = ["a"]
[[route.class]]
name = "large"
backends = ["b"]
fallback = ["a"]
[[route.rule]]
name = "x"
class = "small"
user_regex = "^(extract|classify)"
max_prompt_chars = 2000
)cfg"};
  std::ifstream example(std::string(TACHYON_SOURCE_DIR) + "/examples/tachyon.toml");
  if (example) {
    std::stringstream ss;
    ss << example.rdbuf();
    seeds.push_back(ss.str());
  }
  testing::MutationFuzzOptions options{.seconds = 8,
                                       .max_len = 16384,
                                       .dictionary = {"[[backend]]\n", "[[route]]\n", "[route.trim]\n",
                                                      "[[route.rule]]\n", "[[route.class]]\n", "[server]\n",
                                                      "name = \"x\"\n", "= 0\n", "= -1\n", "= 1e400\n", "= []\n",
                                                      "= {}\n", "\"\"\"", "'''", "= 9223372036854775807\n",
                                                      "backends = [\"local\"]\n", "policy = \"classify\"\n",
                                                      "user_regex = \"(a+)+$\"\n", "kind = \"embedding\"\n", "api_key_env = \"EMPTY\"\n", "kind = \"openai\"\n"}};
  int64_t parsed = 0;
  const int64_t runs = testing::MutationFuzz(seeds, options, [&](const std::string& text) {
    StatusOr<GatewayConfig> c = ParseGatewayConfig(text, "fuzz.toml", Env);
    if (c.ok()) {
      ++parsed;
      return true;
    }
    EXPECT_FALSE(c.status().message().empty());
    return false;
  });
  EXPECT_GT(parsed, 0);
  std::printf("gateway config: %lld inputs, %lld parsed\n", static_cast<long long>(runs), static_cast<long long>(parsed));
}

}  // namespace
}  // namespace tachyon
