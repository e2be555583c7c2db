// libFuzzer target: the Anthropic translation (api/anthropic.h) on arbitrary
// bytes. The first byte picks the path: 0, a Messages event stream (SSE) read
// event by event through MessagesStreamTranslator, as the remote backend reads
// an Anthropic upstream; 1, a whole Messages answer; 2, an OpenAI chat request
// translated to a Messages request. Whatever comes in, every chunk and body that
// comes out must be JSON, usage counts are never negative, and a stream that errs once is not
// read further.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/anthropic.h"
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
  switch (data[0] % 3) {
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
