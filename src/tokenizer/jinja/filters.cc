// Filters: `value | name(args)`, as jinja2 defines them.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {

Value Renderer::Attribute(const Value& item, const std::string& path) {
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

Value Renderer::ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  for (auto family : {&Renderer::StringFilter, &Renderer::NumberFilter, &Renderer::SequenceFilter,
                      &Renderer::HigherOrderFilter}) {
    if (std::optional<Value> result = (this->*family)(name, v, args)) return *std::move(result);
  }
  Fail("TemplateAssertionError", "No filter named '" + name + "'.");
}

// Filters of text: escaping, JSON, case, trimming, replacing, indenting.
std::optional<Value> Renderer::StringFilter(const std::string& name, const Value& v, CallArgs& args) {
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
  if (name == "replace") {
    return Value(Replace(ToStr(v), ToStr(Arg(args, 0, "old")), ToStr(Arg(args, 1, "new")),
                         Arg(args, 2, "count", Value(-1)).as_int()));
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
  if (name == "wordcount") {
    CallArgs none;
    return Value(static_cast<int64_t>(Method(Value(ToStr(v)), "split").function()(none).list().size()));
  }
  return std::nullopt;
}

// Filters of numbers: conversions, abs, round.
std::optional<Value> Renderer::NumberFilter(const std::string& name, const Value& v, CallArgs& args) {
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
  if (name == "round") {
    const int64_t precision = Arg(args, 0, "precision", Value(0)).as_int();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value(std::nearbyint(v.as_float() * scale) / scale);
  }
  return std::nullopt;
}

// Filters of sequences and mappings: length, default, first / last, join, sorting, unique.
std::optional<Value> Renderer::SequenceFilter(const std::string& name, const Value& v, CallArgs& args) {
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
  return std::nullopt;
}

// Filters that apply a filter or a test to each item: map, select, reject and their attr forms.
std::optional<Value> Renderer::HigherOrderFilter(const std::string& name, const Value& v, CallArgs& args) {
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
  return std::nullopt;
}

}  // namespace tachyon::jinja::internal
