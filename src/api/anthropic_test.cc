#include "api/anthropic.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

using json = nlohmann::json;

CompletionRequest Chat(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed)) << std::get<ApiError>(parsed).message;
  return std::get<CompletionRequest>(parsed);
}

json Translate(const std::string& body) {
  auto out = MessagesRequestFromChat(Chat(body), {.model = "claude-x"});
  EXPECT_TRUE(std::holds_alternative<json>(out)) << std::get<ApiError>(out).message;
  return std::holds_alternative<json>(out) ? std::get<json>(out) : json();
}

ApiError Refused(const std::string& body) {
  auto out = MessagesRequestFromChat(Chat(body), {.model = "claude-x"});
  EXPECT_TRUE(std::holds_alternative<ApiError>(out)) << std::get<json>(out).dump();
  return std::holds_alternative<ApiError>(out) ? std::get<ApiError>(out) : ApiError{};
}

TEST(MessagesRequestTest, SystemGoesTopLevelAndSameRoleTurnsMerge) {
  const json m = Translate(R"({"model":"r","messages":[
      {"role":"system","content":"Be brief."},
      {"role":"developer","content":[{"type":"text","text":"Use metric units."}]},
      {"role":"user","content":"Hi"},{"role":"user","content":"there"},
      {"role":"assistant","content":"Hello"}],"stop":"END","user":"u1","max_completion_tokens":64,"top_p":0.5})");
  EXPECT_EQ(m["model"], "claude-x");
  EXPECT_EQ(m["max_tokens"], 64);
  ASSERT_EQ(m["system"].size(), 2u);
  EXPECT_EQ(m["system"][1]["text"], "Use metric units.");
  ASSERT_EQ(m["messages"].size(), 2u);
  EXPECT_EQ(m["messages"][0]["role"], "user");
  ASSERT_EQ(m["messages"][0]["content"].size(), 2u);
  EXPECT_EQ(m["messages"][0]["content"][1]["text"], "there");
  EXPECT_EQ(m["messages"][1]["content"], "Hello");  // a lone text block stays a string
  EXPECT_EQ(m["stop_sequences"], json::array({"END"}));
  EXPECT_EQ(m["metadata"]["user_id"], "u1");
  EXPECT_EQ(m["top_p"], 0.5);
}

TEST(MessagesRequestTest, DefaultMaxTokensAndCanonicalBytes) {
  const std::string a = Translate(R"({"messages":[{"role":"user","content":"x"}],"model":"r","tools":[
      {"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"b":{},"a":{}}}}}]})")
                            .dump();
  const std::string b = Translate(R"({"model":"r", "tools":[{"function":{"parameters":{"properties":{"a":{},"b":{}},
      "type":"object"},"name":"f"},"type":"function"}], "messages":[{"content":"x","role":"user"}]})")
                            .dump();
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("\"max_tokens\":4096"), std::string::npos);
}

TEST(MessagesRequestTest, ToolsChoicesCallsAndResults) {
  const json m = Translate(R"({"model":"r","parallel_tool_calls":false,
      "tools":[{"type":"function","function":{"name":"get_weather","description":"d",
                "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
      "tool_choice":"required",
      "messages":[{"role":"user","content":"Weather in Oslo and Rome?"},
        {"role":"assistant","content":null,"tool_calls":[
          {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},
          {"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"5C"},
        {"role":"tool","tool_call_id":"c2","content":"20C"}]})");
  EXPECT_EQ(m["tools"][0]["input_schema"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(m["tool_choice"], (json{{"type", "any"}, {"disable_parallel_tool_use", true}}));
  ASSERT_EQ(m["messages"].size(), 3u);
  EXPECT_EQ(m["messages"][1]["content"][0]["type"], "tool_use");
  EXPECT_EQ(m["messages"][1]["content"][0]["input"]["city"], "Oslo");
  const json& results = m["messages"][2];
  EXPECT_EQ(results["role"], "user");
  ASSERT_EQ(results["content"].size(), 2u);  // both results of the turn in one message
  EXPECT_EQ(results["content"][1]["tool_use_id"], "c2");
  EXPECT_EQ(results["content"][1]["content"][0]["text"], "20C");

  const json named = Translate(R"({"model":"r","tools":[{"type":"function","function":{"name":"f"}}],
      "tool_choice":{"type":"function","function":{"name":"f"}},"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(named["tool_choice"], (json{{"type", "tool"}, {"name", "f"}}));
  EXPECT_EQ(named["tools"][0]["input_schema"]["type"], "object");
}

TEST(MessagesRequestTest, ImagesBecomeSources) {
  const json m = Translate(R"({"model":"r","messages":[{"role":"user","content":[
      {"type":"text","text":"What is this?"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}},
      {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]})");
  const json& c = m["messages"][0]["content"];
  EXPECT_EQ(c[1]["source"], (json{{"type", "base64"}, {"media_type", "image/png"}, {"data", "iVBORw0K"}}));
  EXPECT_EQ(c[2]["source"], (json{{"type", "url"}, {"url", "https://example.com/cat.jpg"}}));
}

TEST(MessagesRequestTest, RefusesWhatHasNoEquivalentByName) {
  EXPECT_EQ(Refused(R"({"model":"r","n":2,"messages":[{"role":"user","content":"x"}]})").param, "n");
  EXPECT_EQ(Refused(R"({"model":"r","seed":1,"messages":[{"role":"user","content":"x"}]})").param, "seed");
  EXPECT_EQ(Refused(R"({"model":"r","logprobs":true,"messages":[{"role":"user","content":"x"}]})").param, "logprobs");
  EXPECT_EQ(Refused(R"({"model":"r","presence_penalty":0.5,"messages":[{"role":"user","content":"x"}]})").param,
            "presence_penalty");
  const ApiError t = Refused(R"({"model":"r","temperature":1.5,"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(t.param, "temperature");
  EXPECT_NE(t.message.find("[0, 1]"), std::string::npos);
  EXPECT_EQ(Refused(R"({"model":"r","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]})")
                .param,
            "messages[0].content[0]");
  // A tool result that answers no call of the turn before it.
  EXPECT_EQ(Refused(R"({"model":"r","messages":[{"role":"user","content":"x"},
      {"role":"tool","tool_call_id":"nope","content":"y"}]})").param, "messages[1].tool_call_id");
  // The values that mean "off" pass.
  Translate(R"({"model":"r","n":1,"logprobs":false,"presence_penalty":0,"seed":null,
      "messages":[{"role":"user","content":"x"}]})");
  auto completions = ParseCompletionRequest(R"({"model":"r","prompt":"x"})", Endpoint::kCompletions);
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      MessagesRequestFromChat(std::get<CompletionRequest>(completions), {})));
}

TEST(MessagesAnswerTest, WholeAnswerWithToolsThinkingAndCachedUsage) {
  auto out = ChatAnswerFromMessages(R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
      "content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Checking."},
                 {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}],
      "stop_reason":"tool_use","stop_sequence":null,
      "usage":{"input_tokens":10,"output_tokens":7,"cache_read_input_tokens":2000,"cache_creation_input_tokens":5}})",
                                    "chatcmpl-1", 7, "route");
  ASSERT_TRUE(std::holds_alternative<TranslatedAnswer>(out)) << std::get<std::string>(out);
  const TranslatedAnswer& a = std::get<TranslatedAnswer>(out);
  const json body = json::parse(a.body);
  const json& msg = body["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Checking.");
  EXPECT_EQ(msg["reasoning_content"], "hmm");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 2015);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2000);
  EXPECT_FALSE(a.text.has_value());  // tool calls: not a plain answer

  auto plain = ChatAnswerFromMessages(R"({"type":"message","content":[{"type":"text","text":"Hi"}],
      "stop_reason":"max_tokens","usage":{"input_tokens":3,"output_tokens":1}})", "c", 0, "m");
  ASSERT_TRUE(std::holds_alternative<TranslatedAnswer>(plain));
  EXPECT_EQ(std::get<TranslatedAnswer>(plain).text, "Hi");
  EXPECT_EQ(std::get<TranslatedAnswer>(plain).finish_reason, "length");

  EXPECT_TRUE(std::holds_alternative<std::string>(
      ChatAnswerFromMessages(R"({"type":"message","content":[{"type":"server_tool_use"}]})", "c", 0, "m")));
  EXPECT_TRUE(std::holds_alternative<std::string>(ChatAnswerFromMessages("not json", "c", 0, "m")));
}

TEST(MessagesAnswerTest, ErrorBodiesAndStopReasons) {
  const ApiError e = ApiErrorFromMessagesError(
      400, R"({"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}})");
  EXPECT_EQ(e.message, "max_tokens: required");
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(FinishReasonFromStopReason("end_turn"), "stop");
  EXPECT_EQ(FinishReasonFromStopReason("stop_sequence"), "stop");
  EXPECT_EQ(FinishReasonFromStopReason("refusal"), "content_filter");
}

std::vector<MessagesStreamTranslator::Chunk> FeedAll(MessagesStreamTranslator& t, const std::vector<std::string>& events) {
  std::vector<MessagesStreamTranslator::Chunk> out;
  for (const std::string& e : events) {
    const std::string error = t.Feed(e, &out);
    EXPECT_EQ(error, "") << e;
  }
  return out;
}

TEST(MessagesStreamTest, TextToolCallsUsageAndFinish) {
  MessagesStreamTranslator t("chatcmpl-9", 5, "route", /*include_usage=*/true);
  auto chunks = FeedAll(t, {
      R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],
          "usage":{"input_tokens":12,"output_tokens":1,"cache_read_input_tokens":2048,"cache_creation_input_tokens":0}}})",
      R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})",
      R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me see"}})",
      R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}})",
      R"({"type":"content_block_stop","index":0})",
      R"({"type":"ping"})",
      R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})",
      R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}})",
      R"({"type":"content_block_stop","index":1})",
      R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}})",
      R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}})",
      R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}})",
      R"({"type":"content_block_stop","index":2})",
      R"({"type":"some_future_event"})",
      R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}})",
      R"({"type":"message_stop"})"});
  ASSERT_EQ(chunks.size(), 7u);
  const json first = json::parse(chunks[0].event);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");  // the role rides on the first delta
  EXPECT_EQ(first["choices"][0]["delta"]["reasoning_content"], "Let me see");
  EXPECT_TRUE(chunks[0].reasoning);
  EXPECT_EQ(chunks[1].text, "Hello");
  EXPECT_FALSE(chunks[1].reasoning);
  const json call = json::parse(chunks[2].event)["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["id"], "toolu_1");
  EXPECT_EQ(call["function"]["name"], "f");
  EXPECT_EQ(call["index"], 0);
  EXPECT_EQ(json::parse(chunks[4].event)["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "1}");
  EXPECT_EQ(chunks[5].finish_reason, "tool_calls");
  const json usage = json::parse(chunks[6].event);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 2060);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 9);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 2048);
  EXPECT_TRUE(t.stopped());
}

TEST(MessagesStreamTest, ErrorsAndMalformedEvents) {
  std::vector<MessagesStreamTranslator::Chunk> out;
  {
    MessagesStreamTranslator t("c", 0, "m", false);
    bool upstream = false;
    EXPECT_NE(t.Feed(R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})", &out,
                     &upstream),
              "");
    EXPECT_TRUE(upstream);
  }
  {
    MessagesStreamTranslator t("c", 0, "m", false);
    EXPECT_NE(t.Feed(R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}})", &out), "");
  }
  {
    MessagesStreamTranslator t("c", 0, "m", false);
    EXPECT_EQ(t.Feed(R"({"type":"message_start","message":{}})", &out), "");
    EXPECT_NE(t.Feed(R"({"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}})", &out), "");
    EXPECT_NE(t.Feed(R"({"type":"content_block_start","index":0,"content_block":{"type":"mystery"}})", &out), "");
    EXPECT_NE(t.Feed("[1,2", &out), "");
  }
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

TEST(PromptCacheTest, AutoPlacesBreakpointsAfterStablePrefixesOnly) {
  const std::string system(6000, 's');  // ~1,500 tokens by the low estimate
  const std::string body = R"({"model":"r","tools":[{"type":"function","function":{"name":"f"}}],"messages":[
      {"role":"system","content":")" + system + R"("},
      {"role":"user","content":"first"},{"role":"assistant","content":"answer"},
      {"role":"user","content":"second"}]})";
  MessagesRequestOptions options{.model = "c", .prompt_cache = {.automatic = true, .min_tokens = 1024}};
  auto out = MessagesRequestFromChat(Chat(body), options);
  ASSERT_TRUE(std::holds_alternative<json>(out));
  const json& m = std::get<json>(out);
  EXPECT_EQ(m["system"].back()["cache_control"], (json{{"type", "ephemeral"}}));
  // The history before the newest user turn ends with the assistant's answer.
  EXPECT_EQ(m["messages"][1]["content"][0]["cache_control"]["type"], "ephemeral");
  EXPECT_EQ(m["messages"][1]["content"][0]["text"], "answer");
  EXPECT_EQ(m["messages"][2]["content"], "second");  // the newest turn: untouched
  EXPECT_FALSE(m["tools"][0].contains("cache_control"));  // a prefix under min_tokens gets none

  // Off: nothing placed; a short prompt: nothing placed.
  EXPECT_EQ(Translate(body).dump().find("cache_control"), std::string::npos);
  auto short_prompt = MessagesRequestFromChat(
      Chat(R"({"model":"r","messages":[{"role":"system","content":"s"},{"role":"user","content":"x"}]})"), options);
  EXPECT_EQ(std::get<json>(short_prompt).dump().find("cache_control"), std::string::npos);

  // The client's own breakpoints stay and count against the four.
  json mine = json::parse(body);
  mine["messages"][0]["content"] = json::array();
  for (int i = 0; i < 3; ++i) {
    mine["messages"][0]["content"].push_back(
        {{"type", "text"}, {"text", system + std::to_string(i)}, {"cache_control", {{"type", "ephemeral"}}}});
  }
  options.prompt_cache.long_ttl = true;
  auto capped = MessagesRequestFromChat(Chat(mine.dump()), options);
  const std::string capped_bytes = std::get<json>(capped).dump();
  size_t marks = 0;
  for (size_t at = 0; (at = capped_bytes.find("cache_control", at)) != std::string::npos; ++at) ++marks;
  EXPECT_EQ(marks, 4u);
  EXPECT_NE(capped_bytes.find(R"("cache_control":{"ttl":"1h","type":"ephemeral"},"text":"answer")"), std::string::npos)
      << capped_bytes;
}

TEST(PromptCacheTest, OpenAiKeyDependsOnTheStablePrefixOnly) {
  const json a = json::parse(R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"q1"}]})");
  const json b = json::parse(R"({"messages":[{"content":"S","role":"system"},{"role":"user","content":"q2"}]})");
  const json c = json::parse(R"({"messages":[{"role":"system","content":"T"},{"role":"user","content":"q1"}]})");
  EXPECT_EQ(PromptCacheKey(a, "chat"), PromptCacheKey(b, "chat"));
  EXPECT_NE(PromptCacheKey(a, "chat"), PromptCacheKey(c, "chat"));
  EXPECT_NE(PromptCacheKey(a, "chat"), PromptCacheKey(a, "other"));
  EXPECT_EQ(PromptCacheKey(a, "chat").rfind("tachyon-", 0), 0u);
}

}  // namespace
}  // namespace tachyon
