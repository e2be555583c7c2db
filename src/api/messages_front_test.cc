#include "api/messages_front.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

using json = nlohmann::json;

json Chat(const std::string& body) {
  auto out = ChatBodyFromMessagesRequest(body);
  EXPECT_TRUE(std::holds_alternative<json>(out)) << std::get<ApiError>(out).message;
  return std::holds_alternative<json>(out) ? std::get<json>(out) : json();
}

std::string Refusal(const std::string& body) {
  auto out = ChatBodyFromMessagesRequest(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(out)) << std::get<json>(out).dump();
  return std::holds_alternative<ApiError>(out) ? std::get<ApiError>(out).message : "";
}

TEST(MessagesFrontTest, RequestBecomesAChatRequest) {
  const json c = Chat(R"({"model":"claude","max_tokens":100,"stream":true,"stop_sequences":["X"],
      "metadata":{"user_id":"u"},"temperature":0.5,
      "system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
      "tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],
      "tool_choice":{"type":"any","disable_parallel_tool_use":true},
      "messages":[{"role":"user","content":[{"type":"text","text":"hi"},
                   {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]},
                  {"role":"assistant","content":[{"type":"text","text":"calling"},
                   {"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},
                  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},
                   {"type":"text","text":"and?"}]}]})");
  EXPECT_EQ(c["max_tokens"], 100);
  EXPECT_EQ(c["stop"], json::array({"X"}));
  EXPECT_EQ(c["user"], "u");
  EXPECT_EQ(c["stream_options"]["include_usage"], true);
  EXPECT_EQ(c["tool_choice"], "required");
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(c["tools"][0]["function"]["parameters"]["type"], "object");
  const json& m = c["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"][0]["cache_control"]["type"], "ephemeral");  // the client's breakpoint travels
  EXPECT_EQ(m[1]["content"][1]["image_url"]["url"], "data:image/png;base64,AA");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(m[3]["role"], "tool");  // results first, as OpenAI wants them right after the call
  EXPECT_EQ(m[3]["tool_call_id"], "t1");
  EXPECT_EQ(m[4]["content"][0]["text"], "and?");
  // And back to the Messages API, the client's breakpoint still in place.
  auto parsed = ParseCompletionRequest(c.dump(), Endpoint::kChatCompletions);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed)) << std::get<ApiError>(parsed).message;
  auto again = MessagesRequestFromChat(std::get<CompletionRequest>(parsed), {.model = "claude"});
  ASSERT_TRUE(std::holds_alternative<json>(again)) << std::get<ApiError>(again).message;
  EXPECT_EQ(std::get<json>(again)["system"][0]["cache_control"]["type"], "ephemeral");
}

TEST(MessagesFrontTest, ValidatesAsAnthropicDoes) {
  EXPECT_NE(Refusal(R"({"model":"c","messages":[{"role":"user","content":"x"}]})").find("max_tokens"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"bogus":1,"messages":[{"role":"user","content":"x"}]})")
                .find("Extra inputs"), std::string::npos);
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"messages":[{"role":"system","content":"x"}]})").find("role"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"messages":[{"role":"user","content":[
      {"type":"tool_result","tool_use_id":"nope","content":"x"}]}]})").find("tool_use_id"), std::string::npos);
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"messages":[{"role":"user","content":[
      {"type":"mystery"}]}]})").find("mystery"), std::string::npos);
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"temperature":1.5,"messages":[{"role":"user","content":"x"}]})")
                .find("temperature"), std::string::npos);
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"x"}]})")
                .find("thinking"), std::string::npos);
  EXPECT_NE(Refusal("{not json").find("JSON"), std::string::npos);
  json five = {{"model", "c"}, {"max_tokens", 1}, {"messages", json::array({{{"role", "user"}, {"content", json::array()}}})}};
  for (int i = 0; i < 5; ++i) {
    five["messages"][0]["content"].push_back(
        {{"type", "text"}, {"text", "t"}, {"cache_control", {{"type", "ephemeral"}}}});
  }
  EXPECT_NE(Refusal(five.dump()).find("maximum of 4"), std::string::npos);
  // An assistant tool_use must be answered in the next user turn.
  EXPECT_NE(Refusal(R"({"model":"c","max_tokens":1,"messages":[{"role":"user","content":"x"},
      {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
      {"role":"user","content":"y"}]})").find("tool_result"), std::string::npos);
  // count_tokens takes no max_tokens.
  EXPECT_TRUE(std::holds_alternative<json>(
      ChatBodyFromMessagesRequest(R"({"model":"c","messages":[{"role":"user","content":"x"}]})", true)));
}

TEST(MessagesFrontTest, AnswersAndEventsInAnthropicsShape) {
  auto whole = MessagesAnswerFromChat(
      R"({"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi",
          "reasoning_content":"hmm","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
          "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":3,
          "prompt_tokens_details":{"cached_tokens":4}}})",
      "claude", {}, false);
  ASSERT_EQ(whole.index(), 0u) << std::get<1>(whole);
  const json m = json::parse(std::get<0>(whole));
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][1]["text"], "Hi");
  EXPECT_EQ(m["content"][2]["input"]["a"], 1);
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 6);
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 4);
  EXPECT_EQ(MessagesAnswerFromChat("[]", "c", {}, false).index(), 1u);

  MessagesEventWriter writer("chatcmpl-2", "claude");
  std::string events;
  writer.Chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"He"},"finish_reason":null}]})", &events);
  writer.Chunk(R"({"choices":[{"index":0,"delta":{"content":"llo"},"finish_reason":null}]})", &events);
  writer.Chunk(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",
      "function":{"name":"f","arguments":""}}]},"finish_reason":null}]})", &events);
  writer.Chunk(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},
      "finish_reason":"tool_calls"}]})", &events);
  writer.End({.input_tokens = 5, .output_tokens = 2}, true, &events);
  const std::vector<std::string> order = {"message_start", "content_block_start", "text_delta", "text_delta",
                                          "content_block_stop", "content_block_start", "input_json_delta",
                                          "content_block_stop", "message_delta", "message_stop"};
  size_t at = 0;
  for (const std::string& e : order) {
    at = events.find(e, at);
    ASSERT_NE(at, std::string::npos) << e << " in\n" << events;
  }
  EXPECT_NE(events.find(R"("stop_reason":"tool_use")"), std::string::npos);
  EXPECT_NE(events.find(R"("index":1)"), std::string::npos);
  EXPECT_EQ(MessagesEventWriter::ErrorEvent({503, "busy", "", "", ""}).rfind("event: error\n", 0), 0u);
  EXPECT_NE(MessagesErrorBody({503, "busy", "", "", ""}).find("overloaded_error"), std::string::npos);
}

}  // namespace
}  // namespace tachyon
