#include "api/openai.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tachyon {
namespace {

ApiError ErrorOf(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = ParseCompletionRequest(body, e);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

CompletionRequest Parse(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = ParseCompletionRequest(body, e);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(r)) << std::get<ApiError>(r).message;
  return std::holds_alternative<CompletionRequest>(r) ? std::get<CompletionRequest>(r) : CompletionRequest{};
}

TEST(OpenAiTest, ParsesCompletionsAndChat) {
  CompletionRequest c = Parse(R"({"model":"m","prompt":"Hi","max_tokens":5,"temperature":0,"top_p":0.9,
    "seed":7,"stop":["\n","END"],"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,
    "unknown_field":{"x":1}})");
  EXPECT_EQ(c.prompt, "Hi");
  EXPECT_EQ(*c.max_tokens, 5);
  EXPECT_EQ(c.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(c.sampling.top_p, 0.9f);
  EXPECT_EQ(c.sampling.seed, 7u);
  EXPECT_EQ(c.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(c.stream && c.include_usage && c.ignore_eos);

  CompletionRequest ids = Parse(R"({"prompt":[1,2,3],"max_completion_tokens":2})");
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids.size(), 3u);

  CompletionRequest chat = Parse(R"({"messages":[{"role":"system","content":"S"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
                                 Endpoint::kChatCompletions);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[1].content, "ab");
  EXPECT_FALSE(chat.max_tokens.has_value());
  EXPECT_FALSE(chat.has_non_text_parts);
}

TEST(OpenAiTest, KeepsTheWholeBodyForPassthrough) {
  CompletionRequest c = Parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
    {"type":"image_url","image_url":{"url":"data:..."}}]}],"tools":[{"type":"function","function":{"name":"f"}}],
    "response_format":{"type":"json_object"}})", Endpoint::kChatCompletions);
  EXPECT_TRUE(c.has_non_text_parts);
  EXPECT_EQ(c.messages[0].content, "a");
  EXPECT_EQ(c.body["tools"][0]["type"], "function");
  EXPECT_EQ(c.body["response_format"]["type"], "json_object");
}

TEST(OpenAiTest, ToolsToolChoiceAndToolCallMessages) {
  CompletionRequest c = Parse(R"({"messages":[{"role":"user","content":"w?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"-3"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"z":{},"a":{}}}}}]})",
                              Endpoint::kChatCompletions);
  EXPECT_EQ(c.tool_choice, ToolChoice::kAuto) << "auto when tools are given";
  ASSERT_EQ(c.messages[1].tool_calls.size(), 1u);
  EXPECT_TRUE(c.messages[1].content_null);
  EXPECT_EQ(c.messages[1].tool_calls[0].arguments, R"({"city": "Oslo"})");
  EXPECT_EQ(c.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(c.tools[0]["function"]["parameters"]["properties"].begin().key(), "z") << "the client's order";
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f"}}])";
  EXPECT_EQ(Parse(R"({"messages":[{"role":"user","content":"x"}],)" + tools + R"(,"tool_choice":"required"})",
                  Endpoint::kChatCompletions).tool_choice, ToolChoice::kRequired);
  CompletionRequest named = Parse(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                                      R"(,"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false})",
                                  Endpoint::kChatCompletions);
  EXPECT_EQ(named.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(named.tool_choice_name, "f");
  EXPECT_FALSE(named.parallel_tool_calls);
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                        R"(,"tool_choice":{"type":"function","function":{"name":"g"}}})", Endpoint::kChatCompletions).param,
            "tool_choice");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})",
                    Endpoint::kChatCompletions).param, "tool_choice");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
                    Endpoint::kChatCompletions).param, "tools[0]");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":1}}]}]})",
                    Endpoint::kChatCompletions).param, "messages[0].tool_calls[0]");
}

TEST(OpenAiTest, ToolCallsInBodiesAndChunks) {
  const std::vector<ToolCall> calls = {{"call_a", "f", R"({"x":1})"}};
  const nlohmann::json body = nlohmann::json::parse(
      CompletionBody(Endpoint::kChatCompletions, "id", 1, "m", "", "tool_calls", {}, nullptr, &calls));
  EXPECT_TRUE(body["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  const nlohmann::json chunk = nlohmann::json::parse(
      ChunkBody(Endpoint::kChatCompletions, "id", 1, "m", "", "", false, nullptr, 0, &calls, 2));
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 2);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["id"], "call_a");
  EXPECT_FALSE(chunk["choices"][0]["delta"].contains("content"));
}

TEST(OpenAiTest, WrongTypesInsideContentPartsAreErrorsNotExceptions) {
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":[{"type":1,"text":"x"}]}]})",
                    Endpoint::kChatCompletions).param, "messages[0].content[0]");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":[{"type":"text","text":5}]}]})",
                    Endpoint::kChatCompletions).param, "messages[0].content[0].text");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":[7]}]})", Endpoint::kChatCompletions).param,
            "messages[0].content[0]");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","top_k":"3"})").param, "top_k");
}

TEST(OpenAiTest, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf("{not json").message, "the request body is not valid JSON");
  EXPECT_EQ(ErrorOf("[1,2]").message, "the request body must be a JSON object");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","max_tokens":"5"})").param, "max_tokens");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","temperature":3})").param, "temperature");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","temperature":"hot"})").param, "temperature");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","n":0})").param, "n");
  EXPECT_EQ(Parse(R"({"prompt":"x","n":2})").n, 2) << "a remote upstream may answer n > 1";
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","stream":"yes"})").param, "stream");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","stop":[1]})").param, "stop");
  // A stream holds text back while a stop string could still match: 2 MB ones would hold back everything.
  const std::string huge(2 << 20, 'a');
  EXPECT_NE(ErrorOf(R"({"prompt":"x","stop":[")" + huge + R"("]})").message.find("1 to 1024 bytes"), std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","stop":")" + std::string(1025, 'b') + R"("})").param, "stop");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","stop":[""]})").param, "stop");
  EXPECT_EQ(ErrorOf(R"({"prompt":{"a":1}})").param, "prompt");
  EXPECT_EQ(ErrorOf(R"({"model":5,"prompt":"x"})").param, "model");
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","logprobs":true})").param, "logprobs") << "completions take a count";
  EXPECT_EQ(ErrorOf(R"({"prompt":"x","logprobs":21})").param, "logprobs");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Endpoint::kChatCompletions).param,
            "top_logprobs") << "top_logprobs needs logprobs: true";
  EXPECT_EQ(Parse(R"({"prompt":"x","logprobs":3})").num_logprobs, 3);
  EXPECT_EQ(Parse(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":2})",
                  Endpoint::kChatCompletions).num_logprobs, 2);
  EXPECT_EQ(Parse(R"({"prompt":"x"})").num_logprobs, -1);
  EXPECT_EQ(ErrorOf(R"({"max_tokens":3})").param, "prompt");
  EXPECT_EQ(ErrorOf(R"({"messages":[]})", Endpoint::kChatCompletions).param, "messages");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"content":"x"}]})", Endpoint::kChatCompletions).param, "messages[0].role");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":5}]})", Endpoint::kChatCompletions).param,
            "messages[0].content");
  // Content is required but for an assistant's message (OpenAI answers these with 400 too).
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user"}]})", Endpoint::kChatCompletions).param, "messages[0].content");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"system","content":null},{"role":"user","content":"x"}]})",
                    Endpoint::kChatCompletions).param,
            "messages[0].content");
  EXPECT_TRUE(Parse(R"({"messages":[{"role":"user","content":"x"},{"role":"assistant"}]})", Endpoint::kChatCompletions)
                  .messages[1].content_null);
}

// Issue 31: a body nested past kMaxJsonDepth is refused before anything walks it
// (dump, copies and the canonical form recurse once a level).
TEST(OpenAiTest, ABodyNestedPastTheBoundIsRefusedNamingIt) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const ApiError e = ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"metadata":)" + deep + "}",
                             Endpoint::kChatCompletions);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.code, "json_too_deep");
  EXPECT_NE(e.message.find("128"), std::string::npos) << e.message;
  // At the bound: read (the object is one level, the arrays 127 more).
  const std::string at_bound = std::string(127, '[') + std::string(127, ']');
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(ParseCompletionRequest(
      R"({"messages":[{"role":"user","content":"x"}],"metadata":)" + at_bound + "}", Endpoint::kChatCompletions)));
  EXPECT_EQ(ErrorOf("{\"prompt\":" + std::string(129, '[') + "\"x\"" + std::string(129, ']') + "}").code,
            "json_too_deep");
}

// A whole answer's text as data (what the caches keep): one choice of plain
// text only; tool calls, several choices or no text give none.
TEST(OpenAiTest, PlainAnswerTextOfWholeBodies) {
  using json = nlohmann::json;
  const json chat = json::parse(R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},
                                     "finish_reason":"stop"}]})");
  EXPECT_EQ(PlainAnswerText(chat, Endpoint::kChatCompletions), "Hi.");
  EXPECT_EQ(PlainAnswerText(json::parse(R"({"choices":[{"text":" once"}]})"), Endpoint::kCompletions), " once");
  EXPECT_EQ(PlainAnswerText(json::parse(CompletionBody(Endpoint::kChatCompletions, "id", 1, "m", "made here", "stop",
                                                      {1, 2})),
                            Endpoint::kChatCompletions),
            "made here")
      << "a body this server writes reads back to its text";
  for (const char* no : {
           R"({"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function"}]}}]})",
           R"({"choices":[{"message":{"content":"x","function_call":{"name":"f"}}}]})",
           R"({"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]})",
           R"({"choices":[]})", R"({"choices":[{"message":{"content":[{"type":"text"}]}}]})", R"([1])",
           R"({"choices":[{"message":"text"}]})"}) {
    EXPECT_FALSE(PlainAnswerText(json::parse(no), Endpoint::kChatCompletions)) << no;
  }
  EXPECT_FALSE(PlainAnswerText(chat, Endpoint::kCompletions)) << "a chat body read as a completion has no text";
}

TEST(OpenAiTest, ResponseShapes) {
  auto error = nlohmann::json::parse(ErrorBody({404, "no such model", "not_found_error", "model", "model_not_found"}));
  EXPECT_EQ(error["error"]["message"], "no such model");
  EXPECT_EQ(error["error"]["param"], "model");
  auto body = nlohmann::json::parse(
      CompletionBody(Endpoint::kChatCompletions, "id1", 5, "m", "hello", "length", {3, 2}));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  auto chunk = nlohmann::json::parse(ChunkBody(Endpoint::kChatCompletions, "id1", 5, "m", "he", "", true));
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  auto text = nlohmann::json::parse(ChunkBody(Endpoint::kCompletions, "id1", 5, "m", "lo", "stop", false));
  EXPECT_EQ(text["choices"][0]["text"], "lo");
  EXPECT_EQ(text["choices"][0]["finish_reason"], "stop");
  auto usage = nlohmann::json::parse(UsageChunkBody(Endpoint::kCompletions, "id1", 5, "m", {4, 1}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(SseEvent("{}"), "data: {}\n\n");
  std::vector<LogprobEntry> entries = {{"Hi", -0.5f, {{"Hi", -0.5f}, {"Ho", -1.5f}}}, {"!", -0.1f, {}}};
  auto legacy = nlohmann::json::parse(
      CompletionBody(Endpoint::kCompletions, "i", 1, "m", "Hi!", "stop", {1, 2}, &entries));
  EXPECT_EQ(legacy["choices"][0]["logprobs"]["tokens"], nlohmann::json({"Hi", "!"}));
  EXPECT_EQ(legacy["choices"][0]["logprobs"]["text_offset"], nlohmann::json({0, 2}));
  EXPECT_FLOAT_EQ(legacy["choices"][0]["logprobs"]["top_logprobs"][0]["Ho"].get<float>(), -1.5f);
  auto chat_lp = nlohmann::json::parse(
      CompletionBody(Endpoint::kChatCompletions, "i", 1, "m", "Hi!", "stop", {1, 2}, &entries));
  EXPECT_EQ(chat_lp["choices"][0]["logprobs"]["content"][0]["bytes"], nlohmann::json({72, 105}));
  EXPECT_EQ(chat_lp["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["token"], "Ho");
}

}  // namespace
}  // namespace tachyon
