// libFuzzer target: TextStream with arbitrary stop strings over arbitrary tokens.
// Input: a count byte (0-4 stop strings), the stop strings each ended by NUL, then
// token ids (two bytes each, modulo the vocabulary). What is emitted must be a
// prefix of the full decoded text, contain no stop string, and end where the first
// stop string begins when one completes; without one, emitted + Finish() is all of it.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text_stream.h"
#include "tokenizer/streaming_detokenizer.h"
#include "builtin_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tachyon;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::BuiltinTokenizer("tachyon_text_stream_fuzz");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tok = fuzz::BuiltinTokenizer("tachyon_text_stream_fuzz");
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> stops;
  for (int i = 0; i < data[0] % 5; ++i) {
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) break;
    if (nul > 0) stops.emplace_back(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
  }
  std::vector<TokenId> ids;
  for (size_t i = 0; i + 1 < rest.size(); i += 2) {
    const int v = static_cast<uint8_t>(rest[i]) | (static_cast<uint8_t>(rest[i + 1]) << 8);
    ids.push_back(TokenId(v % tok.vocab().size()));
  }
  // The text with no stop strings at all, streamed the same way.
  TextStream plain(tok, {});
  std::string full;
  bool never = false;
  for (TokenId id : ids) full += plain.Add(id, &never);
  full += plain.Finish();
  if (never) std::abort();

  TextStream stream(tok, stops);
  std::string emitted;
  bool stopped = false;
  for (TokenId id : ids) {
    emitted += stream.Add(id, &stopped);
    if (stopped) break;
  }
  if (!stopped) emitted += stream.Finish();
  if (full.compare(0, emitted.size(), emitted) != 0) std::abort();  // a prefix of the text
  for (const std::string& s : stops) {
    if (emitted.find(s) != std::string::npos) std::abort();  // never emitted
  }
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, full.find(s));
  if (stopped) {
    // Cut where the stop string that completed first begins: one starts right there.
    bool at_stop = false;
    for (const std::string& s : stops) at_stop |= full.compare(emitted.size(), s.size(), s) == 0;
    if (!at_stop) std::abort();
  } else if (emitted != full.substr(0, first)) {
    // None completed while streaming: all of the text, up to a stop string the last
    // flushed bytes completed.
    std::abort();
  }
  return 0;
}
