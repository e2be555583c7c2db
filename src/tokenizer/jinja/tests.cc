// Tests: `value is name(args)`, as jinja2 defines them.
#include <cctype>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {

bool Renderer::ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
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

}  // namespace tachyon::jinja::internal
