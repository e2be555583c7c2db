#include "api/tool_calls.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

namespace tachyon {
namespace {

namespace fs = std::filesystem;

std::string Calls(const ParsedAnswer& a) {
  std::string out;
  for (const ParsedToolCall& c : a.calls) out += c.name + c.arguments + ";";
  return out;
}

TEST(ToolCallsTest, EachFamilysSyntax) {
  struct Case {
    ToolCallSyntax syntax;
    std::string text, content, calls;
  };
  const std::string ds_begin = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
  const std::string ds_call = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>";
  const std::string ds_sep = "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>";
  const std::string ds_end = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>";
  const std::vector<Case> cases = {
      {ToolCallSyntax::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>",
       "Let me check.", "get_weather{\"city\":\"Oslo\"};f{\"a\":1};"},
      {ToolCallSyntax::kHermes, "<tool_call>\n{\"name\": broken</tool_call>", "<tool_call>\n{\"name\": broken</tool_call>", ""},
      {ToolCallSyntax::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", "",
       "get_weather{\"city\":\"Rome\"};"},
      {ToolCallSyntax::kLlama3, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": [1]}}",
       "", "a{};b{\"x\":[1]};"},
      {ToolCallSyntax::kLlama3, "The answer is {\"x\": 1}.", "The answer is {\"x\": 1}.", ""},
      {ToolCallSyntax::kMistral, "[TOOL_CALLS][{\"name\": \"s\", \"arguments\": {\"q\": \"u\"}}]", "", "s{\"q\":\"u\"};"},
      {ToolCallSyntax::kMistral, "[{\"name\": \"s\", \"arguments\": {\"q\": \"u\"}, \"id\": \"abc123def\"}]", "",
       "s{\"q\":\"u\"};"},
      {ToolCallSyntax::kFunctionaryV31, "<function=get_weather>{\"city\": \"Oslo\"}</function>", "",
       "get_weather{\"city\":\"Oslo\"};"},
      {ToolCallSyntax::kFunctionaryV32, "get_weather\n{\"city\": \"Rome\"}>>>search_docs\n{\"query\": \"u\"}", "",
       "get_weather{\"city\":\"Rome\"};search_docs{\"query\":\"u\"};"},
      {ToolCallSyntax::kFunctionaryV32, "all\nHello there.", "Hello there.", ""},
      {ToolCallSyntax::kDeepseek,
       "Sure." + ds_begin + ds_call + "function" + ds_sep + "get_weather\n```json\n{\"city\": \"Oslo\"}\n```" + ds_end,
       "Sure.", "get_weather{\"city\":\"Oslo\"};"},
      {ToolCallSyntax::kCommandR,
       "Plan: look it up.\nAction: ```json\n[{\"tool_name\": \"internet_search\", \"parameters\": {\"query\": \"q\"}}]\n```",
       "Plan: look it up.", "internet_search{\"query\":\"q\"};"},
      {ToolCallSyntax::kCommandR,
       "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {}}]<|END_ACTION|>", "", "f{};"},
      {ToolCallSyntax::kJson, "{\"name\": \"f\", \"arguments\": {\"a\": true}}", "", "f{\"a\":true};"},
      {ToolCallSyntax::kJson, "Just text.", "Just text.", ""},
  };
  for (const Case& c : cases) {
    ParsedAnswer a = ParseToolCalls(c.syntax, c.text);
    EXPECT_EQ(a.content, c.content) << ToolCallSyntaxName(c.syntax) << ": " << c.text;
    EXPECT_EQ(Calls(a), c.calls) << ToolCallSyntaxName(c.syntax) << ": " << c.text;
  }
}

TEST(ToolCallsTest, StreamedTextIsHeldOnlyWhereACallMayStart) {
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kHermes, "Hello"), 5u);
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kHermes, "Hello <tool"), 6u) << "a marker's first bytes";
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kHermes, "Hi <tool_call>{"), 3u);
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kHermes, "a < b"), 5u);
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kLlama3, "  {\"name\""), 0u);
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kLlama3, "Sure, {"), 7u) << "text first: no call";
  EXPECT_EQ(ToolCallHoldFrom(ToolCallSyntax::kFunctionaryV32, "all\nHi"), 0u);
}

// Every fixture template with a tool syntax is recognized as its family's.
TEST(ToolCallsTest, DetectsTheSyntaxOfRealTemplates) {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  const std::string dir = std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/chat-templates/templates";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  const std::map<std::string, ToolCallSyntax> expected = {
      {"CohereForAI-c4ai-command-r-plus-tool_use", ToolCallSyntax::kCommandR},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", ToolCallSyntax::kCommandR},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", ToolCallSyntax::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallSyntax::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallSyntax::kHermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ToolCallSyntax::kDeepseek},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ToolCallSyntax::kDeepseek},
      {"meetkai-functionary-medium-v3.1", ToolCallSyntax::kFunctionaryV31},
      {"meetkai-functionary-medium-v3.2", ToolCallSyntax::kFunctionaryV32},
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallSyntax::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct", ToolCallSyntax::kLlama3},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolCallSyntax::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallSyntax::kMistral},
  };
  for (const auto& [name, syntax] : expected) {
    std::ifstream in(dir + "/" + name + ".jinja");
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ToolCallSyntaxName(DetectToolCallSyntax(ss.str())), std::string(ToolCallSyntaxName(syntax))) << name;
  }
}

// This project's templates (tests/golden/chat-templates): Qwen3 calls tools in
// <tool_call> tags as Hermes does; Gemma 3's and Phi-4-mini's templates name no syntax
// of their own: the generic JSON form.
TEST(ToolCallsTest, DetectsTheSyntaxOfTheNewerTemplates) {
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/tests/golden/chat-templates/templates";
  const std::map<std::string, ToolCallSyntax> expected = {
      {"Qwen-Qwen3-0.6B", ToolCallSyntax::kHermes},
      {"google-gemma-3-1b-it", ToolCallSyntax::kJson},
      {"microsoft-Phi-4-mini-instruct", ToolCallSyntax::kJson},
  };
  for (const auto& [name, syntax] : expected) {
    std::ifstream in(dir + "/" + name + ".jinja");
    ASSERT_TRUE(in.good()) << dir << "/" << name << ".jinja";
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ToolCallSyntaxName(DetectToolCallSyntax(ss.str())), std::string(ToolCallSyntaxName(syntax))) << name;
  }
}

}  // namespace
}  // namespace tachyon
