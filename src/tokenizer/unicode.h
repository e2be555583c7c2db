// UTF-8 and Unicode helpers for the tokenizers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Bytes of the UTF-8 sequence that starts with `first_byte`, from its high bits
// alone (1 for a stray continuation byte), as the reference tokenizers split text.
inline int Utf8SequenceLength(uint8_t first_byte) {
  static constexpr int kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[first_byte >> 4];
}

// Decodes the code point at *offset and advances past it. An invalid or
// truncated sequence decodes to U+FFFD and advances one byte.
uint32_t DecodeUtf8(std::string_view text, size_t* offset);

void AppendUtf8(uint32_t code_point, std::string* out);

// Text with every invalid sequence, surrogate and out-of-range code point
// replaced by U+FFFD: always valid UTF-8 (what PCRE2 in UTF mode requires).
std::string SanitizeUtf8(std::string_view text);

// Length of the longest prefix of `bytes` that ends on a character boundary
// (an incomplete trailing sequence of up to 3 bytes is left out).
size_t CompleteUtf8Prefix(std::string_view bytes);

// GPT-2's reversible byte -> printable code point mapping used by byte-level BPE
// vocabularies: bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves, the
// rest to U+0100 and up, in byte order.
const std::string& ByteToUnicode(uint8_t byte);
// The byte a code point of that mapping stands for, or -1.
int UnicodeToByte(uint32_t code_point);

}  // namespace tachyon
