// libFuzzer target: constrained decoding and tool-call reading on arbitrary
// bytes. The input is SCHEMA \0 TEXT. A schema that compiles gives a matcher;
// TEXT is fed byte by byte (rejected bytes skipped): after every byte taken,
// the state must have a shortest completion that completes it. A mask over a
// small fixed vocabulary must equal feeding each token. TEXT is also read for
// tool calls in every syntax: no crash, and held bytes within the text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/tool_calls.h"
#include "grammar/json_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace {

using namespace tachyon;

const std::vector<std::string>& Vocab() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (int c = 0; c < 256; ++c) out.push_back(std::string(1, static_cast<char>(c)));
    for (const char* p : {"{\"", "\":", "\",", "\"}", "]}", "true", "null", "12", "-0.", "e+", "\\u00", "\xc3\xa9"}) {
      out.push_back(p);
    }
    return out;
  }();
  return v;
}

void CheckGrammar(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
  static const auto trie = std::make_shared<const TokenTrie>(Vocab());
  GrammarMasker masker(g, trie);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  int checked = 0;
  for (char c : text) {
    if (!m.Feed(std::string_view(&c, 1))) continue;
    std::string rest;
    if (!m.Shortest(&rest)) std::abort();
    GrammarMatcher closed = m;
    if (!closed.Feed(rest) || !closed.IsComplete()) std::abort();
    if (checked++ < 8) {  // the mask against brute force, on the first states
      masker.FillMask(m.state(), &bits);
      for (size_t id = 0; id < Vocab().size(); ++id) {
        GrammarMatcher copy = m;
        const bool fed = copy.Feed(Vocab()[id]);
        if (fed != static_cast<bool>(bits[id >> 6] >> (id & 63) & 1)) std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view schema_text = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (!schema.is_discarded()) {
    auto g = CompileJsonSchema(schema);
    if (g.ok()) CheckGrammar(*g, text);
  }
  CheckGrammar(AnyJsonObjectGrammar(), text);
  for (ToolCallSyntax s : {ToolCallSyntax::kJson, ToolCallSyntax::kHermes, ToolCallSyntax::kLlama3,
                           ToolCallSyntax::kMistral, ToolCallSyntax::kFunctionaryV31, ToolCallSyntax::kFunctionaryV32,
                           ToolCallSyntax::kDeepseek, ToolCallSyntax::kCommandR}) {
    ParsedAnswer a = ParseToolCalls(s, text);
    for (const ParsedToolCall& c : a.calls) {
      if (c.name.empty() || nlohmann::ordered_json::parse(c.arguments, nullptr, false).is_discarded()) std::abort();
    }
    if (ToolCallHoldFrom(s, text) > text.size()) std::abort();
  }
  return 0;
}
