#include "api/responses_front.h"

#include <gtest/gtest.h>

#include <vector>

namespace tachyon {
namespace {

using json = nlohmann::json;

ResponsesRequest Parse(const std::string& body) {
  auto r = ParseResponsesRequest(body);
  EXPECT_EQ(r.index(), 0u) << (r.index() == 1 ? std::get<1>(r).message : "");
  return r.index() == 0 ? std::get<0>(r) : ResponsesRequest{};
}

ApiError ErrorOf(const std::string& body) {
  auto r = ParseResponsesRequest(body);
  EXPECT_EQ(r.index(), 1u) << body;
  return r.index() == 1 ? std::get<1>(r) : ApiError{};
}

// The events of a stream: their types and payloads, in order.
std::vector<json> Events(const std::string& stream) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = stream.find("data: ", at)) != std::string::npos) {
    const size_t end = stream.find("\n\n", at);
    out.push_back(json::parse(stream.substr(at + 6, end - at - 6)));
    at = end;
  }
  return out;
}

TEST(ResponsesFrontTest, AStringInputIsOneUserMessage) {
  ResponsesRequest r = Parse(R"({"model":"chat","input":"Hi there","instructions":"Be brief","max_output_tokens":32,
                                  "temperature":0,"user":"u1","metadata":{"k":"v"}})");
  EXPECT_EQ(r.model, "chat");
  EXPECT_TRUE(r.store) << "OpenAI's default";
  ASSERT_EQ(r.input_items.size(), 1u);
  EXPECT_EQ(r.input_items[0]["content"][0], (json{{"type", "input_text"}, {"text", "Hi there"}}));
  const json chat = ChatBodyFromResponses(r, json::array());
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"system","content":"Be brief"},{"role":"user","content":"Hi there"}])"));
  EXPECT_EQ(chat["max_tokens"], 32);
  EXPECT_EQ(chat["temperature"], 0);
  EXPECT_EQ(chat["user"], "u1");
  EXPECT_FALSE(chat.contains("stream"));
  const json skeleton = ResponseSkeleton(r, "resp_1", 7);
  EXPECT_EQ(skeleton["instructions"], "Be brief");
  EXPECT_EQ(skeleton["metadata"]["k"], "v");
  EXPECT_EQ(skeleton["text"]["format"]["type"], "text");
  EXPECT_EQ(skeleton["tool_choice"], "auto");
  EXPECT_EQ(skeleton["status"], "in_progress");
}

TEST(ResponsesFrontTest, ItemsToolsAndFormatsBecomeTheChatRequest) {
  ResponsesRequest r = Parse(R"({"model":"chat","stream":true,
    "input":[{"role":"developer","content":"rules"},
             {"type":"message","role":"user","content":[{"type":"input_text","text":"weather? "},
                                                        {"type":"input_image","image_url":"data:image/png;base64,AA"}]},
             {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
             {"type":"function_call_output","call_id":"call_1","output":"{\"c\":3}"},
             {"type":"reasoning","summary":[]}],
    "tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}],
    "tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false,
    "text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}}})");
  const json chat = ChatBodyFromResponses(r, json::array());
  const json& m = chat["messages"];
  ASSERT_EQ(m.size(), 4u) << chat.dump();
  EXPECT_EQ(m[0], (json{{"role", "system"}, {"content", "rules"}}));
  EXPECT_EQ(m[1]["content"][1]["image_url"]["url"], "data:image/png;base64,AA");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[3], (json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"c\":3}"}}));
  EXPECT_EQ(chat["tools"][0]["function"]["strict"], true);
  EXPECT_EQ(chat["tool_choice"]["function"]["name"], "get_weather");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["response_format"]["json_schema"]["name"], "w");
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  // The history (an earlier turn's items) goes before this request's input.
  const json earlier = json::parse(R"([{"type":"message","role":"user","content":[{"type":"input_text","text":"before"}]}])");
  EXPECT_EQ(ChatBodyFromResponses(r, earlier)["messages"][0]["content"], "before");
}

TEST(ResponsesFrontTest, RefusesWhatItDoesNotServeNamingIt) {
  EXPECT_NE(ErrorOf(R"({"model":"m","input":"x","tools":[{"type":"web_search"}]})").message.find("'web_search'"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":"x","tools":[{"type":"file_search"}]})").param, "tools[0].type");
  EXPECT_NE(ErrorOf(R"({"model":"m","input":[{"type":"computer_call"}]})").message.find("'computer_call'"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_file"}]}]})").param,
            "input[0].content[0].type");
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":"x","frobnicate":1})").code, "unknown_parameter");
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":[{"role":"robot","content":"x"}]})").param, "input[0].role");
  EXPECT_EQ(ErrorOf(R"({"model":"m"})").param, "input");
  EXPECT_EQ(ErrorOf(R"({"model":3,"input":"x"})").param, "model");
  EXPECT_FALSE(Parse(R"({"input":"x"})").chat.contains("model")) << "a server of one model answers with it";
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":"x","max_output_tokens":3})").param, "max_output_tokens");
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n"}}})").param,
            "text.format.schema");
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":"x","background":true})").param, "background");
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":"x","stream":"yes"})").param, "stream");
  EXPECT_EQ(ErrorOf("{not json").http_status, 400);
  EXPECT_EQ(ErrorOf("[]").http_status, 400);
  EXPECT_EQ(ErrorOf(R"({"model":"m","input":[{"type":"function_call","call_id":"c","name":"f"}]})").param,
            "input[0].arguments");
}

TEST(ResponsesFrontTest, AWholeChatAnswerBecomesAResponse) {
  ResponsesRequest r = Parse(R"({"model":"chat","input":"x"})");
  const json skeleton = ResponseSkeleton(r, "resp_abc", 9);
  auto done = ResponseFromChat(
      R"({"choices":[{"message":{"role":"assistant","content":"Hello","reasoning_content":"hmm",
          "tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
          "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,
          "prompt_tokens_details":{"cached_tokens":4}}})",
      skeleton, {}, false);
  ASSERT_EQ(done.index(), 0u) << std::get<1>(done);
  const json& resp = std::get<0>(done);
  EXPECT_EQ(resp["status"], "completed");
  ASSERT_EQ(resp["output"].size(), 3u);
  EXPECT_EQ(resp["output"][0]["type"], "reasoning");
  EXPECT_EQ(resp["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(resp["output"][2]["call_id"], "call_9");
  EXPECT_EQ(resp["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(resp["usage"]["input_tokens"], 10);
  EXPECT_EQ(resp["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(resp["usage"]["total_tokens"], 15);
  // Stopped at max_output_tokens: incomplete.
  auto cut = ResponseFromChat(R"({"choices":[{"message":{"content":"Hel"},"finish_reason":"length"}]})", skeleton,
                              {.input_tokens = 3, .output_tokens = 16}, true);
  ASSERT_EQ(cut.index(), 0u);
  EXPECT_EQ(std::get<0>(cut)["status"], "incomplete");
  EXPECT_EQ(std::get<0>(cut)["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(std::get<0>(cut)["usage"]["output_tokens"], 16);
  EXPECT_EQ(std::get<0>(cut)["output"][0]["status"], "incomplete");
  EXPECT_EQ(ResponseFromChat("{}", skeleton, {}, false).index(), 1u);
}

TEST(ResponsesFrontTest, ChunksBecomeTheTypedEventsInOrder) {
  ResponsesRequest r = Parse(R"({"model":"chat","input":"x","stream":true})");
  ResponsesEventWriter w(ResponseSkeleton(r, "resp_s", 1));
  std::string out;
  w.Chunk(R"({"choices":[{"delta":{"role":"assistant","content":"Hel"}}]})", &out);
  w.Chunk(R"({"choices":[{"delta":{"content":"lo"}}]})", &out);
  w.Chunk(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{\"a\""}}]}}]})", &out);
  w.Chunk(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]})", &out);
  w.Chunk(R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})", &out);
  w.Chunk(R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":6}})", &out);
  w.End({}, false, &out);
  const std::vector<json> events = Events(out);
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    types.push_back(events[i]["type"]);
    EXPECT_EQ(events[i]["sequence_number"], i);
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",
                       "response.function_call_arguments.delta", "response.function_call_arguments.done",
                       "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[6]["text"], "Hello");
  EXPECT_EQ(events[12]["arguments"], "{\"a\":1}");
  EXPECT_EQ(events[13]["output_index"], 1);
  const json& final_response = events.back()["response"];
  EXPECT_EQ(final_response["status"], "completed");
  EXPECT_EQ(final_response["output"].size(), 2u);
  EXPECT_EQ(final_response["usage"]["output_tokens"], 6);
  EXPECT_EQ(w.response(), final_response);
  EXPECT_EQ(out.find("[DONE]"), std::string::npos);
  EXPECT_EQ(out.rfind("event: response.completed\n", 0), std::string::npos);
  EXPECT_NE(out.find("event: response.completed\ndata: "), std::string::npos);
}

TEST(ResponsesFrontTest, AnErrorMidStreamEndsWithResponseFailed) {
  ResponsesRequest r = Parse(R"({"model":"chat","input":"x","stream":true})");
  ResponsesEventWriter w(ResponseSkeleton(r, "resp_f", 1));
  std::string out;
  w.Chunk(R"({"choices":[{"delta":{"content":"partial"}}]})", &out);
  w.Fail(ApiError{502, "the upstream went away", "api_error", "", "upstream_error"}, &out);
  const std::vector<json> events = Events(out);
  EXPECT_EQ(events.back()["type"], "response.failed");
  EXPECT_EQ(events.back()["response"]["error"]["code"], "upstream_error");
  EXPECT_EQ(events.back()["response"]["output"][0]["content"][0]["text"], "partial");
  // A stream cut at max_output_tokens ends incomplete.
  ResponsesEventWriter cut(ResponseSkeleton(r, "resp_c", 1));
  std::string out2;
  cut.Chunk(R"({"choices":[{"delta":{"content":"abc"},"finish_reason":"length"}]})", &out2);
  cut.End({.input_tokens = 1, .output_tokens = 16}, true, &out2);
  EXPECT_EQ(Events(out2).back()["type"], "response.incomplete");
  EXPECT_EQ(Events(out2).back()["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(Events(out2).back()["response"]["output"][0]["status"], "incomplete");
}

TEST(ResponsesFrontTest, IdsAreFreshAndUnguessable) {
  const std::string a = NewResponseId(), b = NewResponseId();
  EXPECT_EQ(a.rfind("resp_", 0), 0u);
  EXPECT_EQ(a.size(), 37u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace tachyon
