// Methods of str and dict values (`s.strip()`, `d.items()`), as Python defines them.
#include <cctype>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
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

std::string Title(const std::string& s) {
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

std::string Capitalize(const std::string& s) {
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    const unsigned char u = static_cast<unsigned char>(out[i]);
    out[i] = static_cast<char>(i == 0 ? std::toupper(u) : std::tolower(u));
  }
  return out;
}

Value Renderer::Method(const Value& obj, const std::string& name) {
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

}  // namespace tachyon::jinja::internal
