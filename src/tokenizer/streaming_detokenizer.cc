#include "tokenizer/streaming_detokenizer.h"

#include "tokenizer/unicode.h"

namespace tachyon {

std::string StreamingDetokenizer::Add(TokenId id) {
  std::string piece = tokenizer_.TokenToPiece(id, special_);
  if (strip_leading_space_ && !piece.empty()) {
    if (piece[0] == ' ' && tokenizer_.vocab().add_space_prefix()) piece.erase(0, 1);
    strip_leading_space_ = false;
  }
  return AddBytes(piece);
}

std::string StreamingDetokenizer::AddBytes(std::string_view bytes) {
  pending_.append(bytes);
  size_t complete = CompleteUtf8Prefix(pending_);
  // Invalid bytes inside the complete part become U+FFFD, so the output is valid UTF-8.
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tachyon
