#include "engine/text_stream.h"

#include <algorithm>

namespace tachyon {

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : detokenizer_(tokenizer), stop_strings_(std::move(stop_strings)) {
  stop_strings_.erase(std::remove(stop_strings_.begin(), stop_strings_.end(), ""), stop_strings_.end());
}

std::string TextStream::Add(TokenId id, bool* stopped) {
  held_ += detokenizer_.Add(id);
  return Release(stopped);
}

std::string TextStream::Release(bool* stopped) {
  *stopped = false;
  // The earliest complete stop string ends the text.
  size_t stop_at = std::string::npos;
  for (const std::string& s : stop_strings_) stop_at = std::min(stop_at, held_.find(s));
  if (stop_at != std::string::npos) {
    *stopped = true;
    std::string out = held_.substr(0, stop_at);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stop_strings_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::Finish() {
  // The flushed tail (a character cut short becomes U+FFFD) may complete a stop string too.
  std::string out = held_ + detokenizer_.Flush();
  held_.clear();
  size_t stop_at = std::string::npos;
  for (const std::string& s : stop_strings_) stop_at = std::min(stop_at, out.find(s));
  if (stop_at != std::string::npos) out.resize(stop_at);
  return out;
}

}  // namespace tachyon
