// StreamingDetokenizer: turns tokens into text as they are generated, emitting
// only whole UTF-8 characters. A character split across tokens (byte tokens,
// byte-level BPE pieces) is held back until its last byte arrives, so every
// chunk handed to a client (one SSE event) is valid UTF-8 on its own.
//
// Invariant: pending_ holds at most 3 bytes, the start of one unfinished character.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace tachyon {

class StreamingDetokenizer {
 public:
  // special: render control tokens' text. Generated text keeps SentencePiece's
  // leading space (it separates the continuation from the prompt), unless
  // strip_leading_space: for text that starts right after BOS, where
  // SentencePiece decoders drop the space of the first piece.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool special = false,
                                bool strip_leading_space = false)
      : tokenizer_(tokenizer), special_(special), strip_leading_space_(strip_leading_space) {}

  // Text that is complete after `id` (possibly empty).
  std::string Add(TokenId id);
  // Appends raw bytes (for tests and pieces that do not come from a token).
  std::string AddBytes(std::string_view bytes);
  // Whatever is still held back, with an unfinished character as U+FFFD. Resets.
  std::string Flush();

  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool special_;
  bool strip_leading_space_;  // until the first non-empty piece
  std::string pending_;
};

}  // namespace tachyon
