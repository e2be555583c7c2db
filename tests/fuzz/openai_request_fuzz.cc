// libFuzzer target: arbitrary bytes as the body of each OpenAI endpoint. Parsing
// must answer a request or an ApiError (never throw, crash or hit UB), an error
// must carry a 4xx status and a message, and a parsed request must be within the
// limits the parser promises (stop strings, their count, ids).
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "api/embeddings.h"
#include "api/openai.h"

namespace {

using namespace tachyon;

void CheckError(const ApiError& e) {
  if (e.http_status < 400 || e.http_status > 499 || e.message.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint endpoint : {Endpoint::kCompletions, Endpoint::kChatCompletions}) {
    auto parsed = ParseCompletionRequest(body, endpoint);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) {
      CheckError(*e);
      continue;
    }
    const CompletionRequest& r = std::get<CompletionRequest>(parsed);
    if (r.stop.size() > 4) std::abort();
    for (const std::string& s : r.stop) {
      if (s.empty() || s.size() > kMaxStopBytes) std::abort();
    }
    for (TokenId id : r.prompt_ids) {
      if (id.value() < 0) std::abort();
    }
    if (r.max_tokens && *r.max_tokens < 0) std::abort();
    if (endpoint == Endpoint::kChatCompletions && r.messages.empty()) std::abort();
  }
  auto embedding = ParseEmbeddingRequest(body);
  if (const ApiError* e = std::get_if<ApiError>(&embedding)) {
    CheckError(*e);
  } else {
    (void)CheckEmbeddingInputLimit(std::get<EmbeddingRequest>(embedding), 16);
  }
  return 0;
}
