#include "tokenizer/jinja.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <unordered_map>

namespace tachyon::jinja {

// ---------------------------------------------------------------------------
// Values

const Value* Value::Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::Dict::Set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      for (const auto& item : json) list.push_back(FromJson(item));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = MakeDict();
      for (const auto& [k, v] : json.items()) d.dict().items.emplace_back(k, FromJson(v));
      return d;
    }
    default: return Value();
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !string_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "object";
}

namespace {

// Python's repr of a float: the shortest digits that read back the same,
// positional from 1e-4 to 1e16, else with an exponent.
std::string FloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  // buf: d.ddde[+-]XX
  std::string s(buf);
  const size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits;
  bool negative = false;
  for (char c : mantissa) {
    if (c == '-') negative = true;
    if (c >= '0' && c <= '9') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -5 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  std::snprintf(buf, sizeof(buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + buf;
}

std::string StringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(quote)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + quote;
}

void JsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

}  // namespace

namespace {

constexpr int kMaxValueDepth = 100;

std::string ReprAt(const Value& v, int depth) {
  if (depth > kMaxValueDepth) return "...";
  switch (v.kind()) {
    case Value::Kind::kString: return StringRepr(v.as_string());
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < v.list().size(); ++i) out += (i ? ", " : "") + ReprAt(v.list()[i], depth + 1);
      return out + "]";
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.dict().items) {
        out += (first ? "" : ", ") + StringRepr(k) + ": " + ReprAt(item, depth + 1);
        first = false;
      }
      return out + "}";
    }
    default: return ToStr(v);
  }
}

}  // namespace

std::string ToRepr(const Value& v) { return ReprAt(v, 0); }

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return FloatRepr(v.as_float());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kCallable: return "<function " + v.function_name() + ">";
    default: return ToRepr(v);
  }
}

namespace {

void JsonInto(const Value& v, int indent, int level, std::string* out);

void NewLine(int indent, int level, std::string* out) {
  *out += '\n';
  out->append(static_cast<size_t>(indent * level), ' ');
}

void JsonInto(const Value& v, int indent, int level, std::string* out) {
  if (level > kMaxValueDepth) throw std::runtime_error("Circular reference detected");
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return;
    case Value::Kind::kBool: *out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      *out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : FloatRepr(f);
      return;
    }
    case Value::Kind::kString: JsonString(v.as_string(), out); return;
    case Value::Kind::kList: {
      if (v.list().empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) *out += indent < 0 ? ", " : ",";
        if (indent >= 0) NewLine(indent, level + 1, out);
        JsonInto(v.list()[i], indent, level + 1, out);
      }
      if (indent >= 0) NewLine(indent, level, out);
      *out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict().items.empty()) {
        *out += "{}";
        return;
      }
      *out += '{';
      bool first = true;
      for (const auto& [k, item] : v.dict().items) {
        if (!first) *out += indent < 0 ? ", " : ",";
        first = false;
        if (indent >= 0) NewLine(indent, level + 1, out);
        JsonString(k, out);
        *out += ": ";
        JsonInto(item, indent, level + 1, out);
      }
      if (indent >= 0) NewLine(indent, level, out);
      *out += '}';
      return;
    }
    default: break;
  }
  throw std::runtime_error(std::string("Object of type ") + (v.is_undefined() ? "Undefined" : v.TypeName()) +
                           " is not JSON serializable");
}

}  // namespace

std::string ToJson(const Value& v, int indent) {
  std::string out;
  JsonInto(v, indent, 0, &out);
  return out;
}

// ---------------------------------------------------------------------------
// Syntax tree

struct Node {
  enum class Kind {
    // statements
    kBody, kText, kOutput, kIf, kFor, kSet, kSetAttr, kSetBlock, kMacro, kBreak, kContinue,
    // expressions
    kLiteral, kName, kList, kTuple, kDict, kAttr, kItem, kSlice, kCall, kFilter, kTest, kNot, kNeg,
    kBinary, kAnd, kOr, kCond,
  };
  Kind kind;
  int line = 0, column = 0;
  Value value;                         // kLiteral; kText: the text
  std::string name;                    // kName, kAttr, kFilter, kTest, kMacro, kBinary (the operator), kSetAttr
  std::vector<std::string> names;      // kFor / kSet targets, kMacro parameters
  std::vector<std::shared_ptr<Node>> children;  // kBody statements; kIf conditions and bodies; list items; call args
  std::vector<std::pair<std::string, std::shared_ptr<Node>>> keywords;  // call / filter keyword arguments
  std::shared_ptr<Node> a, b, c;       // operands; kFor: iterable, body, else; kIf: else body
  std::shared_ptr<Node> filter;        // kFor: the `if` condition
  bool negate = false;                 // kTest: `is not`
};

using NodePtr = std::shared_ptr<Node>;

namespace {

struct ParseError {
  int line, column;
  std::string message;
};

// A template error raised while rendering: "Type: message".
struct RenderError {
  std::string type;
  std::string message;
};

[[noreturn]] void Fail(const std::string& type, const std::string& message) { throw RenderError{type, message}; }

// ---------------------------------------------------------------------------
// Lexing: the template into text and tags, with whitespace control applied.

struct Segment {
  enum class Type { kText, kExpression, kStatement } type;
  std::string text;
  int line, column;  // of the tag's content
};

struct Position {
  int line = 1, column = 1;
};

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

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

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

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd } type;
  std::string text;
  int line, column;
  int64_t int_value = 0;
  double float_value = 0;
};

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
      t.text = digits;
      if (is_float) {
        t.type = Token::Type::kFloat;
        t.float_value = std::strtod(digits.c_str(), nullptr);
      } else {
        t.type = Token::Type::kInt;
        t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
      }
      advance(j - i);
    } else if (c == '\'' || c == '"') {
      std::string value;
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          const char e = s[j + 1];
          j += 2;
          switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case '0': value += '\0'; break;
            case 'b': value += '\b'; break;
            case 'f': value += '\f'; break;
            case '\\': value += '\\'; break;
            case '\'': value += '\''; break;
            case '"': value += '"'; break;
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
              AppendUtf8(cp, &value);
              break;
            }
            default:
              value += '\\';
              value += e;
          }
        } else {
          value += s[j++];
        }
      }
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

// ---------------------------------------------------------------------------
// Parsing

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Peek().type == Token::Type::kEnd; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).type == Token::Type::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).type == Token::Type::kName && Peek(ahead).text == name;
  }
  Token Next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  [[noreturn]] void Error(const std::string& message) const {
    throw ParseError{Peek().line, Peek().column, message};
  }
  std::string Describe(const Token& t) const {
    return t.type == Token::Type::kEnd ? "end of tag" : "'" + t.text + "'";
  }
  void ExpectOp(const char* op) {
    if (!IsOp(op)) Error(std::string("expected '") + op + "', found " + Describe(Peek()));
    ++pos_;
  }
  std::string ExpectName() {
    if (Peek().type != Token::Type::kName) Error("expected a name, found " + Describe(Peek()));
    return Next().text;
  }
  void ExpectEnd() {
    if (!AtEnd()) Error("unexpected " + Describe(Peek()));
  }

  NodePtr Make(Node::Kind kind, const Token& at) {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->line = at.line;
    n->column = at.column;
    return n;
  }

  // Bounds the parser's recursion: nested parentheses, `not`s and signs.
  struct Nesting {
    explicit Nesting(ExpressionParser* p) : p(p) {
      if (++p->depth_ > kMaxNesting) p->Error("expression nested too deep");
    }
    ~Nesting() { --p->depth_; }
    ExpressionParser* p;
  };
  static constexpr int kMaxNesting = 100;

  // expression := or_expr ['if' or_expr ['else' expression]]
  NodePtr Expression() {
    Nesting nesting(this);
    NodePtr value = Or();
    if (IsName("if")) {
      const Token at = Next();
      NodePtr cond = Or();
      NodePtr otherwise;
      if (IsName("else")) {
        Next();
        otherwise = Expression();
      }
      NodePtr n = Make(Node::Kind::kCond, at);
      n->a = cond;
      n->b = value;
      n->c = otherwise;
      return n;
    }
    return value;
  }

  // A tuple without parentheses (`for a, b in`, `set a, b =`) or one expression.
  NodePtr ExpressionOrTuple() {
    const Token at = Peek();
    NodePtr first = Expression();
    if (!IsOp(",")) return first;
    NodePtr tuple = Make(Node::Kind::kTuple, at);
    tuple->children.push_back(first);
    while (IsOp(",")) {
      Next();
      if (AtEnd() || IsOp(")")) break;
      tuple->children.push_back(Expression());
    }
    return tuple;
  }

  NodePtr Or() {
    NodePtr left = And();
    while (IsName("or")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kOr, at);
      n->a = left;
      n->b = And();
      left = n;
    }
    return left;
  }

  NodePtr And() {
    NodePtr left = Not();
    while (IsName("and")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kAnd, at);
      n->a = left;
      n->b = Not();
      left = n;
    }
    return left;
  }

  NodePtr Not() {
    Nesting nesting(this);
    if (IsName("not")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kNot, at);
      n->a = Not();
      return n;
    }
    return Compare();
  }

  NodePtr Compare() {
    NodePtr left = Concat();
    while (true) {
      std::string op;
      const Token at = Peek();
      if (Peek().type == Token::Type::kOp &&
          (at.text == "==" || at.text == "!=" || at.text == "<" || at.text == "<=" || at.text == ">" ||
           at.text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        break;
      }
      NodePtr n = Make(Node::Kind::kBinary, at);
      n->name = op;
      n->a = left;
      n->b = Concat();
      left = n;
    }
    return left;
  }

  NodePtr Concat() {
    NodePtr left = Additive();
    while (IsOp("~")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kBinary, at);
      n->name = "~";
      n->a = left;
      n->b = Additive();
      left = n;
    }
    return left;
  }

  NodePtr Additive() {
    NodePtr left = Multiplicative();
    while (IsOp("+") || IsOp("-")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kBinary, at);
      n->name = at.text;
      n->a = left;
      n->b = Multiplicative();
      left = n;
    }
    return left;
  }

  NodePtr Multiplicative() {
    NodePtr left = Unary();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kBinary, at);
      n->name = at.text;
      n->a = left;
      n->b = Unary();
      left = n;
    }
    return left;
  }

  NodePtr Unary() {
    Nesting nesting(this);
    if (IsOp("-") || IsOp("+")) {
      const Token at = Next();
      NodePtr operand = Unary();
      if (at.text == "+") return operand;
      NodePtr n = Make(Node::Kind::kNeg, at);
      n->a = operand;
      return n;
    }
    return Power();
  }

  NodePtr Power() {
    NodePtr left = FilteredPostfix();
    if (IsOp("**")) {
      const Token at = Next();
      NodePtr n = Make(Node::Kind::kBinary, at);
      n->name = "**";
      n->a = left;
      n->b = Unary();
      return n;
    }
    return left;
  }

  void Arguments(Node* call) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (Peek().type == Token::Type::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        Next();
        call->keywords.emplace_back(std::move(key), Expression());
      } else {
        call->children.push_back(Expression());
      }
      if (!IsOp(",")) break;
      Next();
    }
    ExpectOp(")");
  }

  // postfix, then filters and tests: x|f(a)|g is h
  NodePtr FilteredPostfix() {
    NodePtr value = Postfix();
    while (true) {
      if (IsOp("|")) {
        Next();
        const Token at = Peek();
        NodePtr n = Make(Node::Kind::kFilter, at);
        n->name = ExpectName();
        n->a = value;
        if (IsOp("(")) Arguments(n.get());
        value = n;
      } else if (IsName("is")) {
        const Token at = Next();
        NodePtr n = Make(Node::Kind::kTest, at);
        if (IsName("not")) {
          Next();
          n->negate = true;
        }
        // Test names may be keywords: none, true, false, defined...
        n->name = ExpectName();
        n->a = value;
        if (IsOp("(")) {
          Arguments(n.get());
        } else if (!AtEnd() && (Peek().type == Token::Type::kString || Peek().type == Token::Type::kInt ||
                                Peek().type == Token::Type::kFloat ||
                                (Peek().type == Token::Type::kName && !IsName("and") && !IsName("or") &&
                                 !IsName("else") && !IsName("if") && !IsName("is") && !IsName("in") &&
                                 !IsName("not")))) {
          n->children.push_back(Postfix());  // `is divisibleby 3`, `is equalto 'x'`
        }
        value = n;
      } else {
        return value;
      }
    }
  }

  NodePtr Postfix() {
    NodePtr value = Primary();
    while (true) {
      if (IsOp(".")) {
        const Token at = Next();
        NodePtr n = Make(Node::Kind::kAttr, at);
        if (Peek().type == Token::Type::kInt) {
          n->kind = Node::Kind::kItem;  // x.0
          NodePtr index = Make(Node::Kind::kLiteral, Peek());
          index->value = Value(Next().int_value);
          n->b = index;
        } else {
          n->name = ExpectName();
        }
        n->a = value;
        value = n;
      } else if (IsOp("[")) {
        const Token at = Next();
        NodePtr start, stop, step;
        bool slice = false;
        if (!IsOp(":")) start = Expression();
        if (IsOp(":")) {
          slice = true;
          Next();
          if (!IsOp("]") && !IsOp(":")) stop = Expression();
          if (IsOp(":")) {
            Next();
            if (!IsOp("]")) step = Expression();
          }
        }
        ExpectOp("]");
        NodePtr n = Make(slice ? Node::Kind::kSlice : Node::Kind::kItem, at);
        n->a = value;
        if (slice) {
          n->children = {start, stop, step};
        } else {
          n->b = start;
        }
        value = n;
      } else if (IsOp("(")) {
        const Token at = Peek();
        NodePtr n = Make(Node::Kind::kCall, at);
        n->a = value;
        Arguments(n.get());
        value = n;
      } else {
        return value;
      }
    }
  }

  NodePtr Primary() {
    const Token at = Peek();
    switch (at.type) {
      case Token::Type::kString: {
        NodePtr n = Make(Node::Kind::kLiteral, at);
        std::string s = Next().text;
        while (Peek().type == Token::Type::kString) s += Next().text;  // adjacent literals join
        n->value = Value(std::move(s));
        return n;
      }
      case Token::Type::kInt: {
        NodePtr n = Make(Node::Kind::kLiteral, at);
        n->value = Value(Next().int_value);
        return n;
      }
      case Token::Type::kFloat: {
        NodePtr n = Make(Node::Kind::kLiteral, at);
        n->value = Value(Next().float_value);
        return n;
      }
      case Token::Type::kName: {
        Next();
        NodePtr n = Make(Node::Kind::kLiteral, at);
        if (at.text == "true" || at.text == "True") {
          n->value = Value(true);
        } else if (at.text == "false" || at.text == "False") {
          n->value = Value(false);
        } else if (at.text == "none" || at.text == "None") {
          n->value = Value::None();
        } else {
          n->kind = Node::Kind::kName;
          n->name = at.text;
        }
        return n;
      }
      case Token::Type::kOp:
        if (at.text == "(") {
          Next();
          if (IsOp(")")) {
            Next();
            return Make(Node::Kind::kTuple, at);
          }
          NodePtr inner = ExpressionOrTuple();
          ExpectOp(")");
          return inner;
        }
        if (at.text == "[") {
          Next();
          NodePtr n = Make(Node::Kind::kList, at);
          while (!IsOp("]")) {
            n->children.push_back(Expression());
            if (!IsOp(",")) break;
            Next();
          }
          ExpectOp("]");
          return n;
        }
        if (at.text == "{") {
          Next();
          NodePtr n = Make(Node::Kind::kDict, at);
          while (!IsOp("}")) {
            n->children.push_back(Expression());
            ExpectOp(":");
            n->children.push_back(Expression());
            if (!IsOp(",")) break;
            Next();
          }
          ExpectOp("}");
          return n;
        }
        break;
      default: break;
    }
    Error("unexpected " + Describe(at));
  }

 private:
  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

class TemplateParser {
 public:
  // end: where the template ends (for "found end of template").
  TemplateParser(std::vector<Segment> segments, Position end) : segments_(std::move(segments)), end_(end) {}

  NodePtr Parse() {
    std::string end;
    NodePtr body = Body({}, &end);
    return body;
  }

 private:
  // Statements until one of `ends` (a block tag's first word); its name goes to *end.
  NodePtr Body(const std::vector<std::string>& ends, std::string* end) {
    if (++depth_ > kMaxNesting) {
      const Segment& at = segments_[std::min(pos_, segments_.size() - 1)];
      throw ParseError{at.line, at.column, "blocks nested too deep"};
    }
    struct Unnest {
      int* depth;
      ~Unnest() { --*depth; }
    } unnest{&depth_};
    auto body = std::make_shared<Node>();
    body->kind = Node::Kind::kBody;
    while (pos_ < segments_.size()) {
      const Segment& seg = segments_[pos_];
      if (seg.type == Segment::Type::kText) {
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kText;
        n->value = Value(seg.text);
        body->children.push_back(n);
        ++pos_;
        continue;
      }
      ExpressionParser p(Tokenize(seg));
      if (seg.type == Segment::Type::kExpression) {
        ++pos_;
        NodePtr n = p.Make(Node::Kind::kOutput, p.Peek());
        n->a = p.Expression();
        p.ExpectEnd();
        body->children.push_back(n);
        continue;
      }
      if (p.Peek().type != Token::Type::kName) p.Error("expected a statement name");
      const std::string word = p.Peek().text;
      if (std::find(ends.begin(), ends.end(), word) != ends.end()) {
        *end = word;
        return body;
      }
      ++pos_;
      body->children.push_back(Statement(p));
    }
    if (!ends.empty()) {
      throw ParseError{end_.line, end_.column, "expected '" + ends.back() + "', found end of template"};
    }
    return body;
  }

  // The tag that ended a body: checked and consumed.
  ExpressionParser EndTag() {
    ExpressionParser p(Tokenize(segments_[pos_]));
    ++pos_;
    p.Next();
    return p;
  }

  NodePtr Statement(ExpressionParser& p) {
    const Token at = p.Next();
    const std::string& word = at.text;
    if (word == "if") {
      NodePtr n = p.Make(Node::Kind::kIf, at);
      n->children.push_back(p.Expression());
      p.ExpectEnd();
      while (true) {
        std::string end;
        n->children.push_back(Body({"elif", "else", "endif"}, &end));
        ExpressionParser tag = EndTag();
        if (end == "elif") {
          n->children.push_back(tag.Expression());
          tag.ExpectEnd();
          continue;
        }
        tag.ExpectEnd();
        if (end == "else") {
          std::string endif;
          n->c = Body({"endif"}, &endif);
          EndTag().ExpectEnd();
        }
        return n;
      }
    }
    if (word == "for") {
      NodePtr n = p.Make(Node::Kind::kFor, at);
      n->names.push_back(p.ExpectName());
      while (p.IsOp(",")) {
        p.Next();
        n->names.push_back(p.ExpectName());
      }
      if (!p.IsName("in")) p.Error("expected 'in', found " + p.Describe(p.Peek()));
      p.Next();
      // The iterable stops before a trailing `if` (the loop's filter).
      n->a = p.Or();
      if (p.IsName("if")) {
        p.Next();
        n->filter = p.Expression();
      }
      if (p.IsName("recursive")) p.Error("recursive loops are not supported");
      p.ExpectEnd();
      std::string end;
      n->b = Body({"else", "endfor"}, &end);
      EndTag().ExpectEnd();
      if (end == "else") {
        std::string endfor;
        n->c = Body({"endfor"}, &endfor);
        EndTag().ExpectEnd();
      }
      return n;
    }
    if (word == "set") {
      std::string first = p.ExpectName();
      if (p.IsOp(".")) {
        p.Next();
        NodePtr n = p.Make(Node::Kind::kSetAttr, at);
        n->name = first;
        n->names.push_back(p.ExpectName());
        p.ExpectOp("=");
        n->a = p.ExpressionOrTuple();
        p.ExpectEnd();
        return n;
      }
      NodePtr n = p.Make(Node::Kind::kSet, at);
      n->names.push_back(first);
      while (p.IsOp(",")) {
        p.Next();
        n->names.push_back(p.ExpectName());
      }
      if (p.AtEnd() && n->names.size() == 1) {
        n->kind = Node::Kind::kSetBlock;
        std::string end;
        n->a = Body({"endset"}, &end);
        EndTag().ExpectEnd();
        return n;
      }
      p.ExpectOp("=");
      n->a = p.ExpressionOrTuple();
      p.ExpectEnd();
      return n;
    }
    if (word == "macro") {
      NodePtr n = p.Make(Node::Kind::kMacro, at);
      n->name = p.ExpectName();
      p.ExpectOp("(");
      while (!p.IsOp(")")) {
        n->names.push_back(p.ExpectName());
        NodePtr default_value;
        if (p.IsOp("=")) {
          p.Next();
          default_value = p.Expression();
        }
        n->children.push_back(default_value);
        if (!p.IsOp(",")) break;
        p.Next();
      }
      p.ExpectOp(")");
      p.ExpectEnd();
      std::string end;
      n->a = Body({"endmacro"}, &end);
      EndTag().ExpectEnd();
      return n;
    }
    if (word == "break" || word == "continue") {
      p.ExpectEnd();
      return p.Make(word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, at);
    }
    throw ParseError{at.line, at.column, "unknown statement '" + word + "'"};
  }

  static constexpr int kMaxNesting = 50;  // blocks inside blocks
  std::vector<Segment> segments_;
  Position end_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------
// Evaluation

size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> Utf8Chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0) {
      n = 4;
    } else if (c >= 0xE0) {
      n = 3;
    } else if (c >= 0xC0) {
      n = 2;
    }
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool Equal(const Value& a, const Value& b, int depth = 0) {
  if (depth > kMaxValueDepth) return false;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equal(a.list()[i], b.list()[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !Equal(v, *other, depth + 1)) return false;
      }
      return true;
    }
    default: return false;
  }
}

// -1, 0, 1 as Python orders them; TypeError across kinds.
int Order(const Value& a, const Value& b, const std::string& op, int depth = 0) {
  if (depth > kMaxValueDepth) Fail("RecursionError", "maximum recursion depth exceeded in comparison");
  if (a.is_number() && b.is_number()) {
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    for (size_t i = 0; i < a.list().size() && i < b.list().size(); ++i) {
      if (!Equal(a.list()[i], b.list()[i])) return Order(a.list()[i], b.list()[i], op, depth + 1);
    }
    return a.list().size() < b.list().size() ? -1 : a.list().size() > b.list().size() ? 1 : 0;
  }
  Fail("TypeError", "'" + op + "' not supported between instances of '" + a.TypeName() + "' and '" +
                        b.TypeName() + "'");
}

[[noreturn]] void FailUndefined(const Value& v) { Fail("UndefinedError", v.undefined_hint()); }

// markupsafe's escape.
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool EndsWith(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    if (chars.is_none() || chars.is_undefined()) return IsSpace(c);
    return chars.as_string().find(c) != std::string::npos;
  };
  size_t a = 0, b = s.size();
  if (left) {
    while (a < b && strip_char(s[a])) ++a;
  }
  if (right) {
    while (b > a && strip_char(s[b - 1])) --b;
  }
  return s.substr(a, b - a);
}

Value Arg(CallArgs& args, size_t index, const char* name, Value otherwise = Value()) {
  for (const auto& [k, v] : args.keyword) {
    if (k == name) return v;
  }
  return index < args.positional.size() ? args.positional[index] : otherwise;
}

// Rendered text and which of its bytes came from literal (content) strings.
struct Output {
  std::string text;
  Value::Ranges literal;
};

// Appends `v`'s literal ranges, shifted by `offset`, to `ranges` (adjacent ones merged).
void AddRanges(const Value& v, size_t offset, Value::Ranges* ranges) {
  if (!v.has_literal()) return;
  for (const auto& [a, b] : v.literal()) {
    if (!ranges->empty() && ranges->back().second == a + offset) {
      ranges->back().second = b + offset;
    } else {
      ranges->emplace_back(a + offset, b + offset);
    }
  }
}

// A string derived from a literal one (trimmed, replaced, sliced...) is content as a whole.
Value Derived(Value result, const Value& from) {
  if (!result.is_string() || result.has_literal() || result.as_string().empty()) return result;
  bool tainted = from.has_literal();
  if (from.is_list()) {
    for (const Value& item : from.list()) tainted = tainted || item.has_literal();
  }
  if (!tainted) return result;
  const size_t n = result.as_string().size();
  return Value::WithRanges(result.as_string(), {{0, n}}, result.is_safe());
}

class Renderer {
 public:
  Renderer(const Options& options, int64_t now) : options_(options), now_(now) {}

  std::string Render(const Node& root, const Value& context) {
    frames_.emplace_back();
    InstallGlobals();
    if (context.is_dict()) {
      for (const auto& [k, v] : context.dict().items) frames_[0][k] = v;
    }
    frames_.emplace_back();  // the template's own top level
    Output out;
    Exec(root, &out);
    literal_ = std::move(out.literal);
    return std::move(out.text);
  }

  Value::Ranges literal_;  // of the last Render

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::unordered_map<std::string, Value>;

  void Step() {
    if (++steps_ > options_.max_steps) Fail("TemplateError", "the template ran past its step budget");
  }

  void Write(Output* out, const std::string& text) {
    out->text += text;
    if (out->text.size() > options_.max_output_bytes) {
      Fail("TemplateError", "the template's output passed its size limit");
    }
  }
  void Write(Output* out, const Value& v) {
    AddRanges(v, out->text.size(), &out->literal);
    Write(out, ToStr(v));
  }

  const Value* Lookup(const std::string& name) const {
    for (size_t i = frames_.size(); i-- > floor_;) {
      auto it = frames_[i].find(name);
      if (it != frames_[i].end()) return &it->second;
    }
    for (size_t i = std::min<size_t>(2, floor_); i-- > 0;) {
      auto it = frames_[i].find(name);
      if (it != frames_[i].end()) return &it->second;
    }
    return nullptr;
  }

  void Assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

  Flow Exec(const Node& n, Output* out) {
    Step();
    switch (n.kind) {
      case Node::Kind::kBody:
        for (const NodePtr& s : n.children) {
          const Flow f = Exec(*s, out);
          if (f != Flow::kNormal) return f;
        }
        return Flow::kNormal;
      case Node::Kind::kText: Write(out, n.value.as_string()); return Flow::kNormal;
      case Node::Kind::kOutput: Write(out, Eval(*n.a)); return Flow::kNormal;
      case Node::Kind::kIf: {
        for (size_t i = 0; i + 1 < n.children.size(); i += 2) {
          if (Eval(*n.children[i]).Truthy()) return Exec(*n.children[i + 1], out);
        }
        return n.c ? Exec(*n.c, out) : Flow::kNormal;
      }
      case Node::Kind::kFor: return ExecFor(n, out);
      case Node::Kind::kSet: {
        Value v = Eval(*n.a);
        if (n.names.size() == 1) {
          Assign(n.names[0], std::move(v));
        } else {
          const std::vector<Value> items = Iterate(v);
          if (items.size() != n.names.size()) {
            Fail("ValueError", "too many values to unpack (expected " + std::to_string(n.names.size()) + ")");
          }
          for (size_t i = 0; i < items.size(); ++i) Assign(n.names[i], items[i]);
        }
        return Flow::kNormal;
      }
      case Node::Kind::kSetAttr: {
        const Value* target = Lookup(n.name);
        if (target == nullptr || !target->is_dict() || !target->dict().is_namespace) {
          Fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        }
        target->dict().Set(n.names[0], Eval(*n.a));
        return Flow::kNormal;
      }
      case Node::Kind::kSetBlock: {
        Output captured;
        Exec(*n.a, &captured);
        Assign(n.names[0], Value::WithRanges(std::move(captured.text), std::move(captured.literal)));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: Assign(n.name, MakeMacro(n)); return Flow::kNormal;
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      default: Write(out, Eval(n)); return Flow::kNormal;
    }
  }

  Flow ExecFor(const Node& n, Output* out) {
    std::vector<Value> items = Iterate(Eval(*n.a));
    frames_.emplace_back();
    auto bind = [&](const Value& item) {
      if (n.names.size() == 1) {
        Assign(n.names[0], item);
        return;
      }
      const std::vector<Value> parts = Iterate(item);
      if (parts.size() != n.names.size()) {
        Fail("ValueError", "not enough values to unpack (expected " + std::to_string(n.names.size()) + ", got " +
                               std::to_string(parts.size()) + ")");
      }
      for (size_t i = 0; i < parts.size(); ++i) Assign(n.names[i], parts[i]);
    };
    if (n.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        bind(item);
        if (Eval(*n.filter).Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      bind(items[i]);
      Value loop = Value::MakeDict();
      const int64_t len = static_cast<int64_t>(items.size()), idx = static_cast<int64_t>(i);
      loop.dict().items = {{"index", Value(idx + 1)},
                           {"index0", Value(idx)},
                           {"revindex", Value(len - idx)},
                           {"revindex0", Value(len - idx - 1)},
                           {"first", Value(i == 0)},
                           {"last", Value(i + 1 == items.size())},
                           {"length", Value(len)},
                           {"previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item")},
                           {"nextitem", i + 1 < items.size() ? items[i + 1] : Value::Undefined("there is no next item")}};
      Assign("loop", std::move(loop));
      const Flow f = Exec(*n.b, out);
      if (f == Flow::kBreak) break;
    }
    frames_.pop_back();  // the loop's variables and `loop` end with it
    if (items.empty() && n.c) return Exec(*n.c, out);
    return Flow::kNormal;
  }

  Value MakeMacro(const Node& n) {
    const Node* macro = &n;
    return Value::MakeFunction(n.name, [this, macro](CallArgs& args) {
      if (++macro_depth_ > options_.max_macro_depth) Fail("TemplateError", "macro calls nested too deep");
      Frame frame;
      for (size_t i = 0; i < macro->names.size(); ++i) {
        Value v;
        bool given = false;
        for (const auto& [k, kv] : args.keyword) {
          if (k == macro->names[i]) {
            v = kv;
            given = true;
          }
        }
        if (!given && i < args.positional.size()) {
          v = args.positional[i];
          given = true;
        }
        if (!given) {
          v = macro->children[i] ? Eval(*macro->children[i]) : Value::Undefined("'" + macro->names[i] + "' is undefined");
        }
        frame[macro->names[i]] = std::move(v);
      }
      if (args.positional.size() > macro->names.size()) {
        Fail("TypeError", "macro '" + macro->name + "' takes not more than " + std::to_string(macro->names.size()) +
                              " argument(s)");
      }
      const size_t saved_floor = floor_;
      floor_ = frames_.size();
      frames_.push_back(std::move(frame));
      Output out;
      Exec(*macro->a, &out);
      frames_.pop_back();
      floor_ = saved_floor;
      --macro_depth_;
      return Value::WithRanges(std::move(out.text), std::move(out.literal));
    });
  }

  std::vector<Value> Iterate(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined: return {};
      case Value::Kind::kList: return v.list();
      case Value::Kind::kDict: {
        std::vector<Value> keys;
        for (const auto& [k, item] : v.dict().items) keys.emplace_back(k);
        return keys;
      }
      case Value::Kind::kString: {
        std::vector<Value> chars;
        for (std::string& c : Utf8Chars(v.as_string())) chars.emplace_back(std::move(c));
        return chars;
      }
      default: Fail("TypeError", std::string("'") + v.TypeName() + "' object is not iterable");
    }
  }

  // obj.name: a method or attribute first, then an item (as jinja2's getattr).
  Value GetAttr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) FailUndefined(obj);
    if (Value method = Method(obj, name); !method.is_undefined()) return method;
    if (obj.is_dict()) {
      if (const Value* v = obj.dict().Find(name)) return *v;
      return Value::Undefined("'" + std::string(obj.dict().is_namespace ? "Namespace" : "dict") +
                              " object' has no attribute '" + name + "'");
    }
    return Value::Undefined("'" + std::string(obj.TypeName()) + " object' has no attribute '" + name + "'");
  }

  // obj[key]: an item first, then an attribute.
  Value GetItem(const Value& obj, const Value& key) {
    if (obj.is_undefined()) FailUndefined(obj);
    if (obj.is_dict() && key.is_string()) {
      if (const Value* v = obj.dict().Find(key.as_string())) return *v;
      return Value::Undefined("'dict object' has no attribute '" + key.as_string() + "'");
    }
    if ((obj.is_list() || obj.is_string()) && key.is_number()) {
      const int64_t size =
          obj.is_list() ? static_cast<int64_t>(obj.list().size()) : static_cast<int64_t>(Utf8Length(obj.as_string()));
      int64_t i = key.as_int();
      if (i < 0) i += size;
      if (i < 0 || i >= size) {
        return Value::Undefined("'" + std::string(obj.TypeName()) + " object' has no element " +
                                std::to_string(key.as_int()));
      }
      if (obj.is_list()) return obj.list()[i];
      return Value(Utf8Chars(obj.as_string())[i]);
    }
    if (key.is_string()) return GetAttr(obj, key.as_string());
    return Value::Undefined("'" + std::string(obj.TypeName()) + " object' has no element " + ToStr(key));
  }

  Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
    std::vector<Value> items;
    const bool is_string = obj.is_string();
    if (is_string) {
      for (std::string& c : Utf8Chars(obj.as_string())) items.emplace_back(std::move(c));
    } else if (obj.is_list()) {
      items = obj.list();
    } else {
      Fail("TypeError", std::string("'") + obj.TypeName() + "' object is not subscriptable");
    }
    const int64_t n = static_cast<int64_t>(items.size());
    const int64_t s = step.is_number() ? step.as_int() : 1;
    if (s == 0) Fail("ValueError", "slice step cannot be zero");
    auto clamp = [&](const Value& v, int64_t dflt) {
      if (!v.is_number()) return dflt;
      int64_t i = v.as_int();
      if (i < 0) i += n;
      if (s > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t a = clamp(start, s > 0 ? 0 : n - 1), b = clamp(stop, s > 0 ? n : -1);
    std::vector<Value> out;
    for (int64_t i = a; s > 0 ? i < b : i > b;) {
      out.push_back(items[i]);
      if (__builtin_add_overflow(i, s, &i)) break;
    }
    if (!is_string) return Value(std::move(out));
    std::string text;
    for (const Value& c : out) text += c.as_string();
    return Value(std::move(text));
  }

  // Bound methods of strings and dicts; undefined when there is none.
  Value Method(const Value& obj, const std::string& name) {
    if (obj.is_string()) {
      const std::string s = obj.as_string();
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        return Value::MakeFunction(name, [s, name](CallArgs& a) {
          return Value(Strip(s, Arg(a, 0, "chars"), name != "rstrip", name != "lstrip"));
        });
      }
      if (name == "startswith" || name == "endswith") {
        return Value::MakeFunction(name, [s, name](CallArgs& a) {
          const Value p = Arg(a, 0, "prefix");
          std::vector<Value> options = p.is_list() ? p.list() : std::vector<Value>{p};
          for (const Value& o : options) {
            if (!o.is_string()) Fail("TypeError", name + " first arg must be str or a tuple of str");
            if (name == "startswith" ? StartsWith(s, o.as_string()) : EndsWith(s, o.as_string())) return Value(true);
          }
          return Value(false);
        });
      }
      if (name == "upper" || name == "lower") {
        return Value::MakeFunction(name, [s, name](CallArgs&) {
          std::string r = s;
          for (char& c : r) c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                                 : std::tolower(static_cast<unsigned char>(c)));
          return Value(r);
        });
      }
      if (name == "split") {
        return Value::MakeFunction(name, [s](CallArgs& a) {
          const Value sep = Arg(a, 0, "sep");
          const int64_t max_split = Arg(a, 1, "maxsplit", Value(-1)).as_int();
          Value::List parts;
          if (sep.is_none() || sep.is_undefined()) {
            size_t i = 0;
            int64_t splits = 0;
            while (i < s.size()) {
              while (i < s.size() && IsSpace(s[i])) ++i;
              if (i >= s.size()) break;
              if (max_split >= 0 && splits == max_split) {
                parts.emplace_back(Strip(s.substr(i), Value(), false, true));
                break;
              }
              size_t j = i;
              while (j < s.size() && !IsSpace(s[j])) ++j;
              parts.emplace_back(s.substr(i, j - i));
              ++splits;
              i = j;
            }
            return Value(std::move(parts));
          }
          const std::string d = sep.as_string();
          if (d.empty()) Fail("ValueError", "empty separator");
          size_t from = 0;
          int64_t splits = 0;
          while (true) {
            const size_t at = s.find(d, from);
            if (at == std::string::npos || (max_split >= 0 && splits == max_split)) break;
            parts.emplace_back(s.substr(from, at - from));
            from = at + d.size();
            ++splits;
          }
          parts.emplace_back(s.substr(from));
          return Value(std::move(parts));
        });
      }
      if (name == "replace") {
        return Value::MakeFunction(name, [s](CallArgs& a) {
          return Value(Replace(s, ToStr(Arg(a, 0, "old")), ToStr(Arg(a, 1, "new")), Arg(a, 2, "count", Value(-1)).as_int()));
        });
      }
      if (name == "title" || name == "capitalize") {
        return Value::MakeFunction(name, [s, name](CallArgs&) { return Value(name == "title" ? Title(s) : Capitalize(s)); });
      }
      if (name == "find" || name == "count") {
        return Value::MakeFunction(name, [s, name](CallArgs& a) {
          const std::string sub = ToStr(Arg(a, 0, "sub"));
          if (name == "find") {
            const size_t at = s.find(sub);
            return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(Utf8Length(s.substr(0, at))));
          }
          int64_t n = 0;
          for (size_t at = s.find(sub); at != std::string::npos && !sub.empty(); at = s.find(sub, at + sub.size())) ++n;
          return Value(n);
        });
      }
    }
    if (obj.is_dict() && !obj.dict().is_namespace) {
      const Value d = obj;
      if (name == "items" || name == "keys" || name == "values") {
        return Value::MakeFunction(name, [d, name](CallArgs&) {
          Value::List out;
          for (const auto& [k, v] : d.dict().items) {
            if (name == "items") {
              out.emplace_back(Value::List{Value(k), v});
            } else {
              out.push_back(name == "keys" ? Value(k) : v);
            }
          }
          return Value(std::move(out));
        });
      }
      if (name == "get") {
        return Value::MakeFunction(name, [d](CallArgs& a) {
          const Value key = Arg(a, 0, "key");
          if (key.is_string()) {
            if (const Value* v = d.dict().Find(key.as_string())) return *v;
          }
          return Arg(a, 1, "default", Value::None());
        });
      }
    }
    return Value::Undefined("");
  }

  static std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    if (from.empty()) return s;
    std::string out;
    size_t pos = 0;
    int64_t n = 0;
    while (true) {
      const size_t at = s.find(from, pos);
      if (at == std::string::npos || (count >= 0 && n == count)) break;
      out += s.substr(pos, at - pos) + to;
      pos = at + from.size();
      ++n;
    }
    return out + s.substr(pos);
  }

  static std::string Title(const std::string& s) {
    std::string out = s;
    bool start = true;
    for (char& c : out) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (std::isalpha(u)) {
        c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
        start = false;
      } else {
        start = true;
      }
    }
    return out;
  }

  static std::string Capitalize(const std::string& s) {
    std::string out = s;
    for (size_t i = 0; i < out.size(); ++i) {
      const unsigned char u = static_cast<unsigned char>(out[i]);
      out[i] = static_cast<char>(i == 0 ? std::toupper(u) : std::tolower(u));
    }
    return out;
  }

  CallArgs EvalArgs(const Node& n) {
    CallArgs args;
    for (const NodePtr& a : n.children) args.positional.push_back(Eval(*a));
    for (const auto& [k, a] : n.keywords) args.keyword.emplace_back(k, Eval(*a));
    return args;
  }

  Value Eval(const Node& n) {
    Step();
    if (++depth_ > options_.max_depth) Fail("TemplateError", "expression nested too deep");
    struct Unwind {
      int* depth;
      ~Unwind() { --*depth; }
    } unwind{&depth_};
    switch (n.kind) {
      case Node::Kind::kLiteral: return n.value;
      case Node::Kind::kName: {
        if (const Value* v = Lookup(n.name)) return *v;
        return Value::Undefined("'" + n.name + "' is undefined");
      }
      case Node::Kind::kList:
      case Node::Kind::kTuple: {
        Value::List items;
        for (const NodePtr& c : n.children) items.push_back(Eval(*c));
        return Value(std::move(items));
      }
      case Node::Kind::kDict: {
        Value d = Value::MakeDict();
        for (size_t i = 0; i + 1 < n.children.size(); i += 2) {
          const Value key = Eval(*n.children[i]);
          d.dict().Set(ToStr(key), Eval(*n.children[i + 1]));
        }
        return d;
      }
      case Node::Kind::kAttr: return GetAttr(Eval(*n.a), n.name);
      case Node::Kind::kItem: {
        const Value obj = Eval(*n.a);
        return obj.is_string() ? Derived(GetItem(obj, Eval(*n.b)), obj) : GetItem(obj, Eval(*n.b));
      }
      case Node::Kind::kSlice: {
        auto part = [&](size_t i) { return n.children[i] ? Eval(*n.children[i]) : Value::None(); };
        const Value obj = Eval(*n.a);
        return Derived(Slice(obj, part(0), part(1), part(2)), obj.is_string() ? obj : Value());
      }
      case Node::Kind::kCall: {
        if (n.a->kind == Node::Kind::kAttr) {  // a method: a literal receiver's result is content
          const Value receiver = Eval(*n.a->a);
          const Value fn = GetAttr(receiver, n.a->name);
          if (fn.is_undefined()) FailUndefined(fn);
          if (!fn.is_callable()) Fail("TypeError", std::string("'") + fn.TypeName() + "' object is not callable");
          CallArgs args = EvalArgs(n);
          return Derived(fn.function()(args), receiver);
        }
        const Value fn = Eval(*n.a);
        if (fn.is_undefined()) FailUndefined(fn);
        if (!fn.is_callable()) Fail("TypeError", std::string("'") + fn.TypeName() + "' object is not callable");
        CallArgs args = EvalArgs(n);
        return fn.function()(args);
      }
      case Node::Kind::kFilter: {
        Value operand = Eval(*n.a);
        CallArgs args = EvalArgs(n);
        return Derived(ApplyFilter(n.name, operand, args), operand);
      }
      case Node::Kind::kTest: {
        const Value operand = Eval(*n.a);
        CallArgs args = EvalArgs(n);
        const bool result = ApplyTest(n.name, operand, args);
        return Value(n.negate ? !result : result);
      }
      case Node::Kind::kNot: return Value(!Eval(*n.a).Truthy());
      case Node::Kind::kNeg: {
        const Value v = Eval(*n.a);
        if (v.kind() == Value::Kind::kFloat) return Value(-v.as_float());
        if (v.is_number()) return v.as_int() == INT64_MIN ? Value(-static_cast<double>(v.as_int())) : Value(-v.as_int());
        if (v.is_undefined()) FailUndefined(v);
        Fail("TypeError", std::string("bad operand type for unary -: '") + v.TypeName() + "'");
      }
      case Node::Kind::kAnd: {
        Value a = Eval(*n.a);
        return a.Truthy() ? Eval(*n.b) : a;
      }
      case Node::Kind::kOr: {
        Value a = Eval(*n.a);
        return a.Truthy() ? a : Eval(*n.b);
      }
      case Node::Kind::kCond:
        if (Eval(*n.a).Truthy()) return Eval(*n.b);
        return n.c ? Eval(*n.c) : Value::Undefined("the inline if-expression evaluated to false and no else section was defined");
      case Node::Kind::kBinary: return Binary(n.name, Eval(*n.a), Eval(*n.b));
      default: Fail("TemplateError", "a statement where an expression belongs");
    }
  }

  Value Binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") {
      Value::Ranges ranges;
      const std::string left = ToStr(a);
      AddRanges(a, 0, &ranges);
      AddRanges(b, left.size(), &ranges);
      return Value::WithRanges(left + ToStr(b), std::move(ranges));
    }
    if (op == "==") return Value(Equal(a, b));
    if (op == "!=") return Value(!Equal(a, b));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) Fail("TypeError", std::string("'in <string>' requires string as left operand, not ") + a.TypeName());
        found = b.as_string().find(a.as_string()) != std::string::npos;
      } else if (b.is_list()) {
        for (const Value& item : b.list()) found = found || Equal(item, a);
      } else if (b.is_dict()) {
        found = a.is_string() && b.dict().Find(a.as_string()) != nullptr;
      } else if (b.is_undefined()) {
        found = false;  // iterating an undefined value gives nothing
      } else {
        Fail("TypeError", std::string("argument of type '") + b.TypeName() + "' is not iterable");
      }
      return Value(op == "in" ? found : !found);
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      if (a.is_undefined()) FailUndefined(a);
      if (b.is_undefined()) FailUndefined(b);
      const int c = Order(a, b, op);
      return Value(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
    }
    if (a.is_undefined()) FailUndefined(a);
    if (b.is_undefined()) FailUndefined(b);
    if (op == "+") {
      if (a.is_string() || b.is_string()) {
        if (a.is_string() && b.is_string()) {
          Value::Ranges ranges;
          if (!a.is_safe() && !b.is_safe()) {
            AddRanges(a, 0, &ranges);
            AddRanges(b, a.as_string().size(), &ranges);
            return Value::WithRanges(a.as_string() + b.as_string(), std::move(ranges));
          }
          // Markup + str escapes the str (markupsafe), autoescape or not; an
          // escaped literal part stays content as a whole.
          auto part = [](const Value& v) {
            return v.is_safe() ? v : Derived(Value(Escape(v.as_string())), v);
          };
          const Value left = part(a), right = part(b);
          AddRanges(left, 0, &ranges);
          AddRanges(right, left.as_string().size(), &ranges);
          return Value::WithRanges(left.as_string() + right.as_string(), std::move(ranges), true);
        }
        if (a.is_string()) Fail("TypeError", std::string("can only concatenate str (not \"") + b.TypeName() + "\") to str");
      }
      if (a.is_list() && b.is_list()) {
        Value::List out = a.list();
        out.insert(out.end(), b.list().begin(), b.list().end());
        return Value(std::move(out));
      }
      if (a.is_list()) Fail("TypeError", std::string("can only concatenate list (not \"") + b.TypeName() + "\") to list");
    }
    if (op == "*" && ((a.is_string() && b.kind() == Value::Kind::kInt) || (b.is_string() && a.kind() == Value::Kind::kInt))) {
      const std::string& s = a.is_string() ? a.as_string() : b.as_string();
      const int64_t times = a.is_string() ? b.as_int() : a.as_int();
      if (static_cast<double>(s.size()) * std::max<int64_t>(0, times) > static_cast<double>(options_.max_output_bytes)) {
        Fail("TemplateError", "a repeated string passed the output size limit");
      }
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += s;
      return Value(std::move(out));
    }
    if (!a.is_number() || !b.is_number()) {
      Fail("TypeError", "unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() + "'");
    }
    const bool floats = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
    if (op == "/") {
      if (b.as_float() == 0) Fail("ZeroDivisionError", "division by zero");
      return Value(a.as_float() / b.as_float());
    }
    if (floats) {
      const double x = a.as_float(), y = b.as_float();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "**") return Value(std::pow(x, y));
      if (y == 0) Fail("ZeroDivisionError", "float modulo");
      if (op == "//") return Value(std::floor(x / y));
      if (op == "%") return Value(x - std::floor(x / y) * y);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    // Python's integers do not overflow; past 64 bits the result is a float here.
    if (op == "+") return __builtin_add_overflow(x, y, &r) ? Value(static_cast<double>(x) + static_cast<double>(y)) : Value(r);
    if (op == "-") return __builtin_sub_overflow(x, y, &r) ? Value(static_cast<double>(x) - static_cast<double>(y)) : Value(r);
    if (op == "*") return __builtin_mul_overflow(x, y, &r) ? Value(static_cast<double>(x) * static_cast<double>(y)) : Value(r);
    if (op == "**") {
      const double p = std::pow(static_cast<double>(x), static_cast<double>(y));
      if (y < 0 || !(std::fabs(p) < 9.0e15)) return Value(p);  // exact as an integer only below 2^53
      return Value(static_cast<int64_t>(p));
    }
    if (y == 0) Fail("ZeroDivisionError", "integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return Value(-static_cast<double>(x));
    const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);
    if (op == "//") return Value(q);
    return Value(x - q * y);  // "%": Python's modulo takes the divisor's sign
  }

  bool ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict();
    if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict();
    if (name == "number") return v.is_number() && v.kind() != Value::Kind::kBool;
    if (name == "integer") return v.kind() == Value::Kind::kInt;
    if (name == "float") return v.kind() == Value::Kind::kFloat;
    if (name == "boolean") return v.kind() == Value::Kind::kBool;
    if (name == "true") return v.kind() == Value::Kind::kBool && v.as_bool();
    if (name == "false") return v.kind() == Value::Kind::kBool && !v.as_bool();
    if (name == "callable") return v.is_callable();
    if (name == "odd" || name == "even") {
      if (!v.is_number()) Fail("TypeError", std::string("unsupported operand type(s) for %: '") + v.TypeName() + "' and 'int'");
      return (v.as_int() % 2 != 0) == (name == "odd");
    }
    const Value other = Arg(args, 0, "other");
    if (name == "eq" || name == "equalto" || name == "sameas") return Equal(v, other);
    if (name == "ne") return !Equal(v, other);
    if (name == "lt" || name == "lessthan") return Order(v, other, "<") < 0;
    if (name == "le") return Order(v, other, "<=") <= 0;
    if (name == "gt" || name == "greaterthan") return Order(v, other, ">") > 0;
    if (name == "ge") return Order(v, other, ">=") >= 0;
    if (name == "in") return Binary("in", v, other).as_bool();
    if (name == "divisibleby") return other.as_int() != 0 && v.as_int() % other.as_int() == 0;
    if (name == "lower" || name == "upper") {
      if (!v.is_string()) return false;
      for (char c : v.as_string()) {
        if (name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c))) {
          return false;
        }
      }
      return true;
    }
    Fail("TemplateAssertionError", "No test named '" + name + "'.");
  }

  // Items of a sequence filter's operand.
  std::vector<Value> Items(const Value& v) { return Iterate(v); }

  // The attribute path "a.b" of an item (map / selectattr / join's attribute).
  Value Attribute(const Value& item, const std::string& path) {
    Value v = item;
    size_t from = 0;
    while (true) {
      const size_t dot = path.find('.', from);
      const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      v = v.is_undefined() ? v : GetItem(v, Value(part));
      if (dot == std::string::npos) return v;
      from = dot + 1;
    }
  }

  Value ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
    if (name == "safe") return Value::Safe(ToStr(v));
    if (name == "e" || name == "escape" || name == "forceescape") {
      return v.is_safe() && name != "forceescape" ? v : Value::Safe(Escape(ToStr(v)));
    }
    if (name == "tojson") {
      const Value indent = Arg(args, 0, "indent");
      try {
        return Value(ToJson(v, indent.is_number() ? static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64)) : -1));
      } catch (const std::runtime_error& e) {
        Fail("TypeError", e.what());
      }
    }
    if (name == "string") return Value(ToStr(v));
    if (name == "trim") {
      return Value(Strip(ToStr(v), Arg(args, 0, "chars"), true, true));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      CallArgs none;
      return Method(Value(ToStr(v)), name).function()(none);
    }
    if (name == "length" || name == "count") {
      switch (v.kind()) {
        case Value::Kind::kUndefined: return Value(int64_t{0});
        case Value::Kind::kString: return Value(static_cast<int64_t>(Utf8Length(v.as_string())));
        case Value::Kind::kList: return Value(static_cast<int64_t>(v.list().size()));
        case Value::Kind::kDict: return Value(static_cast<int64_t>(v.dict().items.size()));
        default: Fail("TypeError", std::string("object of type '") + v.TypeName() + "' has no len()");
      }
    }
    if (name == "default" || name == "d") {
      const bool boolean = Arg(args, 1, "boolean", Value(false)).Truthy();
      if (v.is_undefined() || (boolean && !v.Truthy())) return Arg(args, 0, "default_value", Value(""));
      return v;
    }
    if (name == "int") {
      if (v.is_number()) return Value(v.as_int());
      if (v.is_string()) {
        char* end = nullptr;
        const std::string s = Strip(v.as_string(), Value(), true, true);
        const long long i = std::strtoll(s.c_str(), &end, 10);
        if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(i));
        const double f = std::strtod(s.c_str(), &end);
        if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(f));
      }
      return Arg(args, 0, "default", Value(int64_t{0}));
    }
    if (name == "float") {
      if (v.is_number()) return Value(v.as_float());
      if (v.is_string()) {
        char* end = nullptr;
        const double f = std::strtod(v.as_string().c_str(), &end);
        if (!v.as_string().empty() && *end == '\0') return Value(f);
      }
      return Arg(args, 0, "default", Value(0.0));
    }
    if (name == "abs") {
      if (v.kind() == Value::Kind::kFloat || v.as_int() == INT64_MIN) return Value(std::fabs(v.as_float()));
      return Value(static_cast<int64_t>(std::llabs(v.as_int())));
    }
    if (name == "list") return Value(Items(v));
    if (name == "first" || name == "last") {
      const std::vector<Value> items = Items(v);
      if (items.empty()) return Value::Undefined("No " + name + " item, sequence was empty.");
      return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
      if (v.is_string()) {
        std::vector<std::string> chars = Utf8Chars(v.as_string());
        std::string out;
        for (size_t i = chars.size(); i-- > 0;) out += chars[i];
        return Value(std::move(out));
      }
      std::vector<Value> items = Items(v);
      std::reverse(items.begin(), items.end());
      return Value(std::move(items));
    }
    if (name == "join") {
      const std::string sep = ToStr(Arg(args, 0, "d", Value("")));
      const Value attribute = Arg(args, 1, "attribute");
      std::string out;
      Value::Ranges ranges;
      bool first = true;
      for (const Value& item : Items(v)) {
        if (!first) out += sep;
        const Value part = attribute.is_string() ? Attribute(item, attribute.as_string()) : item;
        AddRanges(part, out.size(), &ranges);
        out += ToStr(part);
        first = false;
      }
      return Value::WithRanges(std::move(out), std::move(ranges));
    }
    if (name == "replace") {
      return Value(Replace(ToStr(v), ToStr(Arg(args, 0, "old")), ToStr(Arg(args, 1, "new")),
                           Arg(args, 2, "count", Value(-1)).as_int()));
    }
    if (name == "items") {
      if (v.is_undefined()) return Value(Value::List{});
      if (!v.is_dict()) Fail("TypeError", "Can only get item pairs from a mapping.");
      CallArgs none;
      return Method(v, "items").function()(none);
    }
    if (name == "dictsort") {
      if (!v.is_dict()) Fail("TypeError", "dictsort expects a mapping");
      std::vector<std::pair<std::string, Value>> items = v.dict().items;
      std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      Value::List out;
      for (auto& [k, item] : items) out.emplace_back(Value::List{Value(k), item});
      return Value(std::move(out));
    }
    if (name == "unique") {
      Value::List out;
      for (const Value& item : Items(v)) {
        if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return Equal(o, item); })) out.push_back(item);
      }
      return Value(std::move(out));
    }
    if (name == "map") {
      Value::List out;
      const Value attribute = Arg(args, 0, "attribute");
      // As jinja2: a false operand (None, empty) maps to nothing.
      for (const Value& item : v.Truthy() ? Items(v) : std::vector<Value>{}) {
        if (!args.keyword.empty() && args.keyword[0].first == "attribute") {
          Value got = Attribute(item, args.keyword[0].second.as_string());
          if (got.is_undefined()) {
            for (const auto& [k, d] : args.keyword) {
              if (k == "default") got = d;
            }
          }
          out.push_back(got);
        } else if (attribute.is_string()) {
          CallArgs rest;
          rest.positional.assign(args.positional.begin() + 1, args.positional.end());
          out.push_back(ApplyFilter(attribute.as_string(), item, rest));
        } else {
          Fail("FilterArgumentError", "map requires a filter argument");
        }
      }
      return Value(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      const bool by_attribute = name == "selectattr" || name == "rejectattr";
      const bool keep = name == "select" || name == "selectattr";
      const size_t test_at = by_attribute ? 1 : 0;
      Value::List out;
      for (const Value& item : v.Truthy() ? Items(v) : std::vector<Value>{}) {
        const Value subject = by_attribute ? Attribute(item, ToStr(Arg(args, 0, "attribute"))) : item;
        bool pass;
        if (args.positional.size() > test_at) {
          CallArgs test_args;
          test_args.positional.assign(args.positional.begin() + test_at + 1, args.positional.end());
          pass = ApplyTest(ToStr(args.positional[test_at]), subject, test_args);
        } else {
          pass = subject.Truthy();
        }
        if (pass == keep) out.push_back(item);
      }
      return Value(std::move(out));
    }
    if (name == "indent") {
      const Value width = Arg(args, 0, "width", Value(4));
      const std::string pad = width.is_string() ? width.as_string()
                                                : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 1024)), ' ');
      const bool first = Arg(args, 1, "first", Value(false)).Truthy();
      const bool blank = Arg(args, 2, "blank", Value(false)).Truthy();
      const std::string s = ToStr(v);
      std::string out;
      size_t from = 0;
      bool first_line = true;
      while (from <= s.size()) {
        const size_t nl = s.find('\n', from);
        const std::string line = s.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
        // As jinja2: the first line only with first=True; others unless empty (blank=True: those too).
        if (first_line ? first : (blank || !line.empty())) out += pad;
        out += line;
        if (nl == std::string::npos) break;
        out += '\n';
        from = nl + 1;
        first_line = false;
      }
      return Value(std::move(out));
    }
    if (name == "round") {
      const int64_t precision = Arg(args, 0, "precision", Value(0)).as_int();
      const double scale = std::pow(10.0, static_cast<double>(precision));
      return Value(std::nearbyint(v.as_float() * scale) / scale);
    }
    if (name == "wordcount") {
      CallArgs none;
      return Value(static_cast<int64_t>(Method(Value(ToStr(v)), "split").function()(none).list().size()));
    }
    Fail("TemplateAssertionError", "No filter named '" + name + "'.");
  }

  void InstallGlobals() {
    Frame& g = frames_[0];
    g["raise_exception"] = Value::MakeFunction("raise_exception", [](CallArgs& a) -> Value {
      Fail("TemplateError", ToStr(Arg(a, 0, "message")));
    });
    const int64_t now = now_;
    g["strftime_now"] = Value::MakeFunction("strftime_now", [now](CallArgs& a) {
      const std::string format = ToStr(Arg(a, 0, "format"));
      const std::time_t t = static_cast<std::time_t>(now);
      std::tm tm{};
      gmtime_r(&t, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
      return Value(std::string(buf, n));
    });
    g["namespace"] = Value::MakeFunction("namespace", [](CallArgs& a) {
      Value ns = Value::MakeDict();
      ns.dict().is_namespace = true;
      for (const Value& p : a.positional) {
        if (p.is_dict()) {
          for (const auto& [k, v] : p.dict().items) ns.dict().Set(k, v);
        }
      }
      for (const auto& [k, v] : a.keyword) ns.dict().Set(k, v);
      return ns;
    });
    g["dict"] = Value::MakeFunction("dict", [](CallArgs& a) {
      Value d = Value::MakeDict();
      for (const auto& [k, v] : a.keyword) d.dict().Set(k, v);
      return d;
    });
    const Options options = options_;
    g["range"] = Value::MakeFunction("range", [options](CallArgs& a) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.positional.size() == 1) {
        stop = a.positional[0].as_int();
      } else if (a.positional.size() >= 2) {
        start = a.positional[0].as_int();
        stop = a.positional[1].as_int();
        if (a.positional.size() > 2) step = a.positional[2].as_int();
      }
      if (step == 0) Fail("ValueError", "range() arg 3 must not be zero");
      Value::List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (out.size() >= 1'000'000) Fail("TemplateError", "range() too large");
        out.emplace_back(i);
        if (__builtin_add_overflow(i, step, &i)) break;
      }
      return Value(std::move(out));
    });
  }

  const Options& options_;
  int64_t now_;
  int64_t steps_ = 0;
  int depth_ = 0;        // nested expressions
  int macro_depth_ = 0;  // nested macro calls
  std::vector<Frame> frames_;  // [0] globals and context, [1] the template's top level, then loops and macros
  size_t floor_ = 0;           // frames below it (past [0], [1]) belong to a caller and are hidden
};

}  // namespace

StatusOr<Template> Template::Parse(std::string_view source, Options options) {
  if (source.size() > options.max_source_bytes) {
    return InvalidArgumentError("the template has " + std::to_string(source.size()) + " bytes; at most " +
                                std::to_string(options.max_source_bytes) + " are read");
  }
  try {
    TemplateParser parser(Lex(source, options), PositionAt(source, source.size()));
    return Template(parser.Parse(), options);
  } catch (const ParseError& e) {
    return InvalidArgumentError("template line " + std::to_string(e.line) + ", column " + std::to_string(e.column) +
                                ": " + e.message);
  }
}

StatusOr<std::string> Template::Render(const Value& context, int64_t now,
                                       std::vector<std::pair<size_t, size_t>>* content) const {
  Renderer renderer(options_, now);
  try {
    std::string out = renderer.Render(*root_, context);
    if (content != nullptr) *content = std::move(renderer.literal_);
    return out;
  } catch (const RenderError& e) {
    return InvalidArgumentError(e.type + ": " + e.message);
  }
}

}  // namespace tachyon::jinja
