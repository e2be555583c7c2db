// TextStream: generated tokens -> text chunks for a client, with stop strings.
//
// Text is emitted only at UTF-8 character boundaries (StreamingDetokenizer),
// and text that could still be the start of a stop string is held back until
// it cannot be; a completed stop string ends the stream and is never emitted,
// even when it spans several tokens.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Text that can be sent after `id`; *stopped becomes true when a stop string
  // completes (the text before it is returned, the rest is dropped).
  std::string Add(TokenId id, bool* stopped);
  // The text still held back (at the end of generation, for any reason but a stop
  // string), cut where a stop string begins if the last bytes complete one.
  std::string Finish();

 private:
  std::string Release(bool* stopped);

  StreamingDetokenizer detokenizer_;
  std::vector<std::string> stop_strings_;
  std::string held_;  // decoded text not yet sent
};

}  // namespace tachyon
