#include "http/sse_parser.h"

#include <cstring>

namespace tachyon {
namespace {

// The first '\n' or '\r' at or after i, or bytes.size(): memchr for '\n' (the line
// ends OpenAI streams use), then for '\r' before it; both vectorized. (find_first_of
// with a two-character set calls memchr once per byte.)
size_t LineEnd(std::string_view bytes, size_t i) {
  const char* data = bytes.data();
  const void* nl = std::memchr(data + i, '\n', bytes.size() - i);
  const size_t limit = nl != nullptr ? static_cast<const char*>(nl) - data : bytes.size();
  const void* cr = std::memchr(data + i, '\r', limit - i);
  return cr != nullptr ? static_cast<const char*>(cr) - data : limit;
}

}  // namespace

void SseParser::Feed(std::string_view bytes) {
  size_t i = 0;
  if (after_cr_ && !bytes.empty() && bytes[0] == '\n') i = 1;
  after_cr_ = false;
  while (i < bytes.size()) {
    const size_t end = LineEnd(bytes, i);
    if (end == bytes.size()) {
      line_.append(bytes.substr(i));
      return;
    }
    if (line_.empty()) {
      Line(bytes.substr(i, end - i));
    } else {
      line_.append(bytes.substr(i, end - i));
      std::string line = std::move(line_);
      line_.clear();
      Line(line);
    }
    i = end + 1;
    if (bytes[end] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        after_cr_ = true;
      }
    }
  }
}

void SseParser::Line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) on_event_(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace tachyon
