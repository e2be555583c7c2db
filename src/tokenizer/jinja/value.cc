// Values: Python's data model (str(), repr(), json.dumps, ==, <) and the
// string helpers the evaluator, filters, methods and tests share.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tokenizer/jinja/internal.h"

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

}  // namespace tachyon::jinja

namespace tachyon::jinja::internal {

// ---------------------------------------------------------------------------
// Python's semantics and string helpers shared by the evaluator, filters, methods and tests

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

bool Equal(const Value& a, const Value& b, int depth) {
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
int Order(const Value& a, const Value& b, const std::string& op, int depth) {
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

Value Arg(CallArgs& args, size_t index, const char* name, Value otherwise) {
  for (const auto& [k, v] : args.keyword) {
    if (k == name) return v;
  }
  return index < args.positional.size() ? args.positional[index] : otherwise;
}


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

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace tachyon::jinja::internal
