#include "tokenizer/unicode.h"

#include <array>

namespace tachyon {

uint32_t DecodeUtf8(std::string_view text, size_t* offset) {
  const size_t i = *offset;
  const uint8_t b0 = static_cast<uint8_t>(text[i]);
  auto continuation = [&](size_t k) {
    return i + k < text.size() && (static_cast<uint8_t>(text[i + k]) & 0xC0) == 0x80;
  };
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(text[i + k])); };
  if (b0 < 0x80) {
    *offset = i + 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0 && continuation(1)) {
    *offset = i + 2;
    return ((b0 & 0x1F) << 6) | (byte(1) & 0x3F);
  }
  if ((b0 & 0xF0) == 0xE0 && continuation(1) && continuation(2)) {
    *offset = i + 3;
    return ((b0 & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  }
  if ((b0 & 0xF8) == 0xF0 && continuation(1) && continuation(2) && continuation(3)) {
    *offset = i + 4;
    return ((b0 & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
           (byte(3) & 0x3F);
  }
  *offset = i + 1;
  return kReplacementChar;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    size_t start = offset;
    uint32_t cp = DecodeUtf8(text, &offset);
    bool overlong = (offset - start == 2 && cp < 0x80) || (offset - start == 3 && cp < 0x800) ||
                    (offset - start == 4 && cp < 0x10000);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || overlong) cp = kReplacementChar;
    if (cp == kReplacementChar || offset - start == 1) {
      AppendUtf8(cp, &out);
    } else {
      out.append(text.substr(start, offset - start));  // already valid: copy the bytes
    }
  }
  return out;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Look back at most 3 bytes for the lead byte of a sequence that is not finished.
  size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    uint8_t b = static_cast<uint8_t>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    int need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return static_cast<size_t>(need) > back ? n - back : n;
  }
  return n;
}

namespace {

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int, 512> to_byte;  // code points below 0x200 cover the whole mapping
  ByteTables() {
    to_byte.fill(-1);
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      uint32_t cp = printable ? b : 256 + shifted++;
      AppendUtf8(cp, &to_unicode[b]);
      to_byte[cp] = b;
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Tables().to_unicode[byte]; }

int UnicodeToByte(uint32_t code_point) {
  return code_point < 512 ? Tables().to_byte[code_point] : -1;
}

}  // namespace tachyon
