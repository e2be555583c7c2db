// Lexing: a template's source into text and tags (whitespace control
// applied), and a tag's content into tokens.
#include <cstring>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {

// ---------------------------------------------------------------------------
// Lexing: the template into text and tags, with whitespace control applied.



Position PositionAt(std::string_view source, size_t offset) {
  Position p;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

namespace {

// The end of a tag opened at `start` (content from `from`): the offset of its
// closing delimiter, skipping string literals.
size_t FindTagEnd(std::string_view source, size_t from, std::string_view close, bool strings) {
  char quote = 0;
  int depth = 0;  // braces of dict literals inside the tag
  for (size_t i = from; i < source.size(); ++i) {
    const char c = source[i];
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (strings && (c == '\'' || c == '"')) {
      quote = c;
      continue;
    }
    if (depth == 0 && source.compare(i, close.size(), close) == 0) return i;
    if (strings && c == '{') ++depth;
    if (strings && c == '}' && depth > 0) --depth;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<Segment> Lex(std::string_view source, const Options& options) {
  std::vector<Segment> out;
  size_t pos = 0;
  bool strip_leading = false;  // the previous tag ended with '-'
  bool trim_newline = false;   // the previous tag was a block or comment (trim_blocks)
  while (pos <= source.size()) {
    size_t start = pos;
    // The next tag opener.
    size_t tag = std::string_view::npos;
    for (size_t i = pos; i + 1 < source.size(); ++i) {
      if (source[i] == '{' && (source[i + 1] == '{' || source[i + 1] == '%' || source[i + 1] == '#')) {
        tag = i;
        break;
      }
    }
    const size_t text_end = tag == std::string_view::npos ? source.size() : tag;
    if (strip_leading) {
      while (start < text_end && IsSpace(source[start])) ++start;
    } else if (trim_newline && start < text_end) {
      if (source[start] == '\n') {
        ++start;
      } else if (source[start] == '\r' && start + 1 < text_end && source[start + 1] == '\n') {
        start += 2;
      }
    }
    std::string text(source.substr(start, text_end - start));
    if (tag == std::string_view::npos) {
      if (!text.empty()) out.push_back({Segment::Type::kText, std::move(text), 0, 0});
      break;
    }
    const char kind = source[tag + 1];
    size_t content = tag + 2;
    const bool strip_before = content < source.size() && source[content] == '-';
    const bool keep_before = content < source.size() && source[content] == '+';
    if (strip_before || keep_before) ++content;
    if (strip_before) {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (options.lstrip_blocks && kind != '{' && !keep_before) {
      // Only whitespace between the line's start and the tag: it goes.
      const size_t line_start = text.rfind('\n');
      const size_t from = line_start == std::string::npos ? 0 : line_start + 1;
      const bool at_line_start = line_start != std::string::npos || start == 0 || source[start - 1] == '\n';
      if (at_line_start && std::all_of(text.begin() + from, text.end(), [](char c) { return c == ' ' || c == '\t'; })) {
        text.resize(from);
      }
    }
    if (!text.empty()) out.push_back({Segment::Type::kText, std::move(text), 0, 0});
    const std::string_view close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = FindTagEnd(source, content, close, kind != '#');
    const Position where = PositionAt(source, tag);
    if (end == std::string_view::npos) {
      throw ParseError{where.line, where.column,
                       std::string("unclosed ") + (kind == '{' ? "'{{'" : kind == '%' ? "'{%'" : "comment")};
    }
    const bool strip_after = end > content && source[end - 1] == '-';
    std::string inner(source.substr(content, end - content - (strip_after ? 1 : 0)));
    if (kind != '#') {
      const Position at = PositionAt(source, content);
      out.push_back({kind == '{' ? Segment::Type::kExpression : Segment::Type::kStatement, std::move(inner), at.line,
                     at.column});
    }
    strip_leading = strip_after;
    trim_newline = options.trim_blocks && kind != '{';
    pos = end + 2;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Tokens of a tag's content.


namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

namespace {

// A number literal from s[i] (digits, '_' separators, a fraction, an
// exponent) into *t; returns where it ends.
size_t ScanNumber(const std::string& s, size_t i, Token* t) {
  size_t j = i;
  while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
  bool is_float = false;
  if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
    is_float = true;
    ++j;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
      is_float = true;
      j = k;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    }
  }
  std::string digits;
  for (size_t k = i; k < j; ++k) {
    if (s[k] != '_') digits += s[k];
  }
  t->text = digits;
  if (is_float) {
    t->type = Token::Type::kFloat;
    t->float_value = std::strtod(digits.c_str(), nullptr);
  } else {
    t->type = Token::Type::kInt;
    t->int_value = std::strtoll(digits.c_str(), nullptr, 10);
  }
  return j;
}

// A string literal's value from the quote at s[i] into *value, escapes
// decoded as Python decodes them; returns the offset of the closing quote
// (s.size() when there is none).
size_t ScanString(const std::string& s, size_t i, std::string* value) {
  const char c = s[i];
  size_t j = i + 1;
  while (j < s.size() && s[j] != c) {
    if (s[j] == '\\' && j + 1 < s.size()) {
      const char e = s[j + 1];
      j += 2;
      switch (e) {
        case 'n': *value += '\n'; break;
        case 't': *value += '\t'; break;
        case 'r': *value += '\r'; break;
        case '0': *value += '\0'; break;
        case 'b': *value += '\b'; break;
        case 'f': *value += '\f'; break;
        case '\\': *value += '\\'; break;
        case '\'': *value += '\''; break;
        case '"': *value += '"'; break;
        case '\n': break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          size_t k = 0;
          for (; k < n && j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j])); ++k, ++j) {
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(s[j]))
                                                     ? s[j] - '0'
                                                     : (std::tolower(static_cast<unsigned char>(s[j])) - 'a' + 10));
          }
          AppendUtf8(cp, value);
          break;
        }
        default:
          *value += '\\';
          *value += e;
      }
    } else {
      *value += s[j++];
    }
  }
  return j;
}

}  // namespace

std::vector<Token> Tokenize(const Segment& seg) {
  std::vector<Token> out;
  const std::string& s = seg.text;
  int line = seg.line, column = seg.column;
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
  };
  while (true) {
    while (i < s.size() && IsSpace(s[i])) advance(1);
    if (i >= s.size()) break;
    Token t{Token::Type::kOp, "", line, column};
    const char c = s[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      t.type = Token::Type::kName;
      t.text = s.substr(i, j - i);
      advance(j - i);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      advance(ScanNumber(s, i, &t) - i);
    } else if (c == '\'' || c == '"') {
      std::string value;
      const size_t j = ScanString(s, i, &value);
      if (j >= s.size()) throw ParseError{line, column, "unterminated string"};
      t.type = Token::Type::kString;
      t.text = std::move(value);
      advance(j + 1 - i);
    } else {
      static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ",", ".",
                                   ":",  "|",  "~",  "+",  "-",  "*",  "/", "%", "<", ">", "=", "!"};
      bool found = false;
      for (const char* op : kOps) {
        const size_t n = std::strlen(op);
        if (s.compare(i, n, op) == 0) {
          t.text = op;
          advance(n);
          found = true;
          break;
        }
      }
      if (!found) throw ParseError{line, column, std::string("unexpected character '") + c + "'"};
    }
    out.push_back(std::move(t));
  }
  out.push_back({Token::Type::kEnd, "", line, column});
  return out;
}

}  // namespace tachyon::jinja::internal
