// A Jinja interpreter for chat templates: the language subset the templates
// models ship use, evaluated with Python's semantics where the output depends
// on them (str(), json.dumps, truthiness, `+`), and configured as Hugging Face
// renders chat templates (trim_blocks, lstrip_blocks, loopcontrols, tojson
// without ASCII escapes, raise_exception, strftime_now).
//
//   ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(source));
//   jinja::Value context = jinja::Value::FromJson(json);   // messages, tools, ...
//   ASSIGN_OR_RETURN(std::string prompt, t.Render(context));
//
// Statements: if / elif / else, for (tuple targets, `if` filter, else,
// loop.*, break / continue), set (names, tuples, namespace attributes, blocks),
// macro (defaults, keyword arguments). Expressions: literals, lists, dicts,
// tuples, attributes, subscripts and slices, calls, filters, tests, `not`,
// `and`, `or`, comparisons, `in`, `is`, `~`, arithmetic, conditional
// expressions. Errors name the template's line and column; rendering a
// template's refusal (raise_exception) or a Python-level error gives the
// message Python's jinja2 gives ("TemplateError: ...", "UndefinedError: ...",
// "TypeError: ..."). Work is bounded: a step budget, an output limit and a
// recursion depth, so no template loops forever or allocates without limit.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tachyon::jinja {

class Value;
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A value with Python's data model: undefined, None, bool, int, float, str,
// list, dict (insertion-ordered) and callables. Lists and dicts are shared by
// reference, as in Python.
class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };
  using List = std::vector<Value>;
  struct Dict {
    std::vector<std::pair<std::string, Value>> items;  // in insertion order
    bool is_namespace = false;                          // namespace(): attributes may be set
    const Value* Find(std::string_view key) const;
    void Set(const std::string& key, Value value);
  };
  using Function = std::function<Value(CallArgs& args)>;

  Value() = default;  // undefined
  static Value Undefined(std::string hint) {
    Value v;
    v.string_ = std::move(hint);
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), bool_(b) {}
  Value(int64_t i) : kind_(Kind::kInt), int_(i) {}
  Value(int i) : kind_(Kind::kInt), int_(i) {}
  Value(double f) : kind_(Kind::kFloat), float_(f) {}
  Value(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::kString), string_(s) {}
  Value(List list) : kind_(Kind::kList), list_(std::make_shared<List>(std::move(list))) {}
  static Value MakeDict() {
    Value v(Kind::kDict);
    v.dict_ = std::make_shared<Dict>();
    return v;
  }
  static Value MakeFunction(std::string name, Function fn) {
    Value v(Kind::kCallable);
    v.string_ = std::move(name);
    v.function_ = std::make_shared<Function>(std::move(fn));
    return v;
  }
  // A string marked safe (`|safe`, markupsafe's Markup): `+` with a plain
  // string HTML-escapes the plain one, as jinja2 does even without autoescape.
  static Value Safe(std::string s) {
    Value v(std::move(s));
    v.safe_ = true;
    return v;
  }
  bool is_safe() const { return safe_; }
  // Byte ranges of a string that came from a message's content (never markup):
  // they follow the text through concatenation, filters, macros and output, so
  // the renderer can say which bytes of the prompt are content.
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  static Value Literal(std::string s) {
    Value v(std::move(s));
    if (!v.string_.empty()) v.literal_ = std::make_shared<const Ranges>(Ranges{{0, v.string_.size()}});
    return v;
  }
  static Value WithRanges(std::string s, Ranges ranges, bool safe = false) {
    Value v(std::move(s));
    v.safe_ = safe;
    if (!ranges.empty()) v.literal_ = std::make_shared<const Ranges>(std::move(ranges));
    return v;
  }
  bool has_literal() const { return literal_ != nullptr; }
  const Ranges& literal() const { return *literal_; }
  // JSON as Python's json.loads gives it (objects keep their key order).
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return bool_; }
  // Floats truncate toward zero, saturating (NaN is 0).
  int64_t as_int() const {
    if (kind_ == Kind::kFloat) {
      if (!(float_ == float_)) return 0;
      if (float_ >= 9.2e18) return INT64_MAX;
      if (float_ <= -9.2e18) return INT64_MIN;
      return static_cast<int64_t>(float_);
    }
    return kind_ == Kind::kBool ? bool_ : int_;
  }
  double as_float() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return string_; }
  // Undefined: why it is undefined ("'x' is undefined").
  const std::string& undefined_hint() const { return string_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Function& function() const { return *function_; }
  const std::string& function_name() const { return string_; }

  // Python's truthiness.
  bool Truthy() const;
  // Python's type name: NoneType, bool, int, float, str, list, dict, function.
  const char* TypeName() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool safe_ = false;  // kString: Markup
  std::shared_ptr<const Ranges> literal_;  // kString: content ranges, or null
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;  // kString: the text; kUndefined: the hint; kCallable: the name
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> function_;
};

// Python's str() (lists and dicts as their repr; nesting past 100 levels, as a
// namespace that holds itself, prints "...").
std::string ToStr(const Value& v);
std::string ToRepr(const Value& v);
// json.dumps(ensure_ascii=False). indent < 0: on one line with ", " and ": ";
// else one item per line. Throws std::runtime_error for what JSON cannot hold
// (undefined, functions, nesting past 100 levels).
std::string ToJson(const Value& v, int indent = -1);

struct Options {
  bool trim_blocks = true;        // the first newline after a block tag is removed
  bool lstrip_blocks = true;      // whitespace from a line's start to a block tag is removed
  int64_t max_steps = 1'000'000;  // evaluation steps per render (a real template takes a few thousand)
  size_t max_output_bytes = 16 << 20;
  int max_depth = 200;            // nested expressions, macro calls included
  int max_macro_depth = 20;       // nested macro calls (real templates recurse a few levels)
  size_t max_source_bytes = 1 << 20;
};

struct Node;

class Template {
 public:
  // Errors: "template line 3, column 14: expected 'endif', found end of template".
  static StatusOr<Template> Parse(std::string_view source, Options options = {});
  // context: a dict of the template's variables. The globals raise_exception,
  // strftime_now (at `now`, seconds since the epoch, UTC), namespace, range,
  // dict are added. Errors: the template's own refusal or a runtime error, as
  // "TemplateError: ...", "UndefinedError: ...", "TypeError: ...".
  // content: when given, gets the sorted byte ranges of the prompt that came
  // from Value::Literal strings of the context.
  StatusOr<std::string> Render(const Value& context, int64_t now = 0,
                               std::vector<std::pair<size_t, size_t>>* content = nullptr) const;

 private:
  Template(std::shared_ptr<const Node> root, Options options) : root_(std::move(root)), options_(options) {}
  std::shared_ptr<const Node> root_;
  Options options_;
};

}  // namespace tachyon::jinja
