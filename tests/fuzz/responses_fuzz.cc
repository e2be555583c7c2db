// libFuzzer target: the /v1/responses front door (api/responses_front.h) on
// arbitrary bytes. The first byte picks the path: even, a Responses request
// parsed, translated (after a history of its own items) to a chat request that
// the chat parser reads, and its response skeleton; odd, chat chunks (SSE data)
// framed as Responses events, ended or failed, and the bytes read as a whole
// chat answer. Whatever comes in: every event is JSON with a sequence number one
// past the last, the chat request is JSON, and nothing throws or crashes.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/responses_front.h"
#include "http/sse_parser.h"

namespace {

void MustBeJson(const std::string& text) {
  if (!nlohmann::json::accept(text)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon;
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto parsed = ParseResponsesRequest(bytes);
    if (auto* r = std::get_if<ResponsesRequest>(&parsed)) {
      const nlohmann::json history = (data[0] & 2) != 0 ? r->input_items : nlohmann::json::array();
      const nlohmann::json chat = ChatBodyFromResponses(*r, history);
      const std::string text = chat.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      MustBeJson(text);
      (void)ParseCompletionRequest(text, Endpoint::kChatCompletions);
      MustBeJson(ResponseSkeleton(*r, "resp_1", 1).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    return 0;
  }
  nlohmann::json skeleton = {{"id", "resp_1"}, {"object", "response"}, {"output", nlohmann::json::array()}};
  ResponsesEventWriter writer(skeleton);
  std::string out;
  SseParser events([&](std::string_view event) { writer.Chunk(event, &out); });
  events.Feed(bytes);
  if ((data[0] & 2) != 0) {
    writer.End({}, (data[0] & 4) != 0, &out);
  } else {
    writer.Fail(ApiError{502, "upstream", "api_error", "", ""}, &out);
  }
  int64_t expected = 0;
  for (size_t at = 0; (at = out.find("data: ", at)) != std::string::npos;) {
    const size_t end = out.find('\n', at);
    const nlohmann::json event = nlohmann::json::parse(out.substr(at + 6, end - at - 6), nullptr, false);
    if (event.is_discarded() || event.value("sequence_number", int64_t{-1}) != expected++) std::abort();
    at = end;
  }
  (void)ResponseFromChat(bytes, skeleton, {}, false);
  return 0;
}
