// libFuzzer target: the Anthropic translation (api/anthropic.h, api/messages_front.h)
// on arbitrary bytes. The first byte picks the path: 0, a Messages event stream
// (SSE) read event by event through MessagesStreamTranslator, as the remote
// backend reads an Anthropic upstream; 1, a whole Messages answer; 2, an OpenAI
// chat request translated to a Messages request; 3, a Messages request at the
// /v1/messages front door, to a chat request and back; 4, chat chunks framed as
// Messages events (and a body read as a whole chat answer). Whatever comes in, every chunk and body that
// comes out must be JSON, usage counts are never negative, and a stream that errs once is not
// read further.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/anthropic.h"
#include "api/messages_front.h"
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
  switch (data[0] % 5) {
    case 0: {
      MessagesStreamTranslator translator("chatcmpl-1", 0, "m", (data[0] & 4) != 0);
      bool failed = false;
      SseParser events([&](std::string_view event) {
        if (failed) return;
        std::vector<MessagesStreamTranslator::Chunk> chunks;
        failed = !translator.Feed(event, &chunks).empty();
        for (const auto& c : chunks) MustBeJson(c.event);
      });
      events.Feed(bytes);
      const MessagesUsage& u = translator.usage();
      if (u.input_tokens < 0 || u.output_tokens < 0 || u.cache_read_tokens < 0 || u.cache_write_tokens < 0) {
        std::abort();  // counts are clamped at zero
      }
      break;
    }
    case 1: {
      auto answer = ChatAnswerFromMessages(bytes, "chatcmpl-1", 0, "m");
      if (auto* a = std::get_if<TranslatedAnswer>(&answer)) MustBeJson(a->body);
      (void)ApiErrorFromMessagesError(400, std::string(bytes));
      break;
    }
    case 3: {  // the /v1/messages front door: a Messages request, to chat and back
      auto chat = ChatBodyFromMessagesRequest(bytes, (data[0] & 8) != 0);
      if (auto* body = std::get_if<nlohmann::json>(&chat)) {
        const std::string text = body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        auto request = ParseCompletionRequest(text, Endpoint::kChatCompletions);
        if (auto* r = std::get_if<CompletionRequest>(&request)) (void)MessagesRequestFromChat(*r, {.model = "c"});
      }
      break;
    }
    case 4: {  // chat chunks (SSE data) framed as Messages events
      MessagesEventWriter writer("chatcmpl-1", "m");
      std::string out;
      SseParser events([&](std::string_view event) { writer.Chunk(event, &out); });
      events.Feed(bytes);
      writer.End({}, (data[0] & 8) != 0, &out);
      for (size_t at = 0; (at = out.find("data: ", at)) != std::string::npos;) {
        const size_t end = out.find('\n', at);
        MustBeJson(out.substr(at + 6, end - at - 6));
        at = end;
      }
      (void)MessagesAnswerFromChat(bytes, "m", {}, false);
      break;
    }
    default: {
      auto request = ParseCompletionRequest(bytes, Endpoint::kChatCompletions);
      if (auto* r = std::get_if<CompletionRequest>(&request)) {
        auto messages = MessagesRequestFromChat(*r, {.model = "claude"});
        if (auto* m = std::get_if<nlohmann::json>(&messages)) {
          MustBeJson(m->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        }
      }
      break;
    }
  }
  return 0;
}
