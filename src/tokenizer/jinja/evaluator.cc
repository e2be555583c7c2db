// Evaluation: the Renderer walks the syntax tree, executing statements into
// the output and evaluating expressions with Python's semantics, within the
// template's step, output and depth budgets.
#include <algorithm>
#include <cmath>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {

std::string Renderer::Render(const Node& root, const Value& context) {
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

void Renderer::Step() {
  if (++steps_ > options_.max_steps) Fail("TemplateError", "the template ran past its step budget");
}

void Renderer::Write(Output* out, const std::string& text) {
  out->text += text;
  if (out->text.size() > options_.max_output_bytes) {
    Fail("TemplateError", "the template's output passed its size limit");
  }
}

void Renderer::Write(Output* out, const Value& v) {
  AddRanges(v, out->text.size(), &out->literal);
  Write(out, ToStr(v));
}

const Value* Renderer::Lookup(const std::string& name) const {
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

Renderer::Flow Renderer::Exec(const Node& n, Output* out) {
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

Renderer::Flow Renderer::ExecFor(const Node& n, Output* out) {
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

Value Renderer::MakeMacro(const Node& n) {
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

std::vector<Value> Renderer::Iterate(const Value& v) {
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

Value Renderer::GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (Value method = Method(obj, name); !method.is_undefined()) return method;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
    return Value::Undefined("'" + std::string(obj.dict().is_namespace ? "Namespace" : "dict") +
                            " object' has no attribute '" + name + "'");
  }
  return Value::Undefined("'" + std::string(obj.TypeName()) + " object' has no attribute '" + name + "'");
}

Value Renderer::GetItem(const Value& obj, const Value& key) {
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

Value Renderer::Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
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

CallArgs Renderer::EvalArgs(const Node& n) {
  CallArgs args;
  for (const NodePtr& a : n.children) args.positional.push_back(Eval(*a));
  for (const auto& [k, a] : n.keywords) args.keyword.emplace_back(k, Eval(*a));
  return args;
}

Value Renderer::Eval(const Node& n) {
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

Value Renderer::Binary(const std::string& op, const Value& a, const Value& b) {
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

}  // namespace tachyon::jinja::internal

namespace tachyon::jinja {

StatusOr<std::string> Template::Render(const Value& context, int64_t now,
                                       std::vector<std::pair<size_t, size_t>>* content) const {
  internal::Renderer renderer(options_, now);
  try {
    std::string out = renderer.Render(*root_, context);
    if (content != nullptr) *content = std::move(renderer.literal_);
    return out;
  } catch (const internal::RenderError& e) {
    return InvalidArgumentError(e.type + ": " + e.message);
  }
}

}  // namespace tachyon::jinja
