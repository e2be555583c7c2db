// libFuzzer target: the upstream response path's parsers on arbitrary bytes. The
// first byte sets where the stream is cut into pieces: SseParser must give the
// same events however the bytes are split (one Feed, or one per piece), and each
// event's data goes through StreamChunkParser (completions and chat) as the
// remote backend and the bench read it.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "api/stream_chunk.h"
#include "http/sse_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon;
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 16;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> whole, split;
  SseParser at_once([&](std::string_view d) { whole.emplace_back(d); });
  at_once.Feed(bytes);
  SseParser pieces([&](std::string_view d) { split.emplace_back(d); });
  for (size_t i = 0; i < bytes.size(); i += piece) pieces.Feed(bytes.substr(i, piece));
  if (whole != split) std::abort();
  if (at_once.pending_bytes() != pieces.pending_bytes() || at_once.pending_bytes() > bytes.size()) std::abort();
  StreamChunkParser chunks;
  for (const std::string& event : whole) {
    for (bool chat : {false, true}) {
      StreamChunk chunk;
      if (chunks.Parse(event, chat, &chunk) && chunk.has_usage &&
          (chunk.prompt_tokens < 0 || chunk.completion_tokens < 0)) {
        std::abort();
      }
    }
  }
  // The raw bytes as one event's data, as an upstream's non-SSE body would be.
  StreamChunk chunk;
  (void)chunks.Parse(bytes, true, &chunk);
  return 0;
}
