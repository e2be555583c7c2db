// The Jinja interpreter's parts, shared by its files and by nothing else:
//   lexer.cc      the source into segments (text, tags) and a tag into tokens
//   parser.cc     segments and tokens into the syntax tree (Node)
//   evaluator.cc  the Renderer: statements into output, expressions into values
//   filters.cc    `x | filter`     methods.cc  `s.strip()`, `d.items()`
//   tests.cc      `x is test`      globals.cc  raise_exception, range, ...
//   value.cc      Value and Python's semantics (str, repr, ==, <, json.dumps)
// The public interface is tokenizer/jinja.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/jinja.h"

namespace tachyon::jinja {

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

}  // namespace tachyon::jinja

namespace tachyon::jinja::internal {

struct ParseError {
  int line, column;
  std::string message;
};

// A template error raised while rendering: "Type: message".
struct RenderError {
  std::string type;
  std::string message;
};

[[noreturn]] inline void Fail(const std::string& type, const std::string& message) { throw RenderError{type, message}; }
[[noreturn]] inline void FailUndefined(const Value& v) { Fail("UndefinedError", v.undefined_hint()); }

// Lexing (lexer.cc)

struct Segment {
  enum class Type { kText, kExpression, kStatement } type;
  std::string text;
  int line, column;  // of the tag's content
};

struct Position {
  int line = 1, column = 1;
};

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd } type;
  std::string text;
  int line, column;
  int64_t int_value = 0;
  double float_value = 0;
};

Position PositionAt(std::string_view source, size_t offset);
std::vector<Segment> Lex(std::string_view source, const Options& options);
std::vector<Token> Tokenize(const Segment& seg);

// Python's semantics and string helpers (value.cc)

bool IsSpace(char c);
size_t Utf8Length(const std::string& s);
std::vector<std::string> Utf8Chars(const std::string& s);
bool Equal(const Value& a, const Value& b, int depth = 0);
int Order(const Value& a, const Value& b, const std::string& op, int depth = 0);
std::string Escape(const std::string& s);
bool StartsWith(const std::string& s, const std::string& p);
bool EndsWith(const std::string& s, const std::string& p);
std::string Strip(const std::string& s, const Value& chars, bool left, bool right);
Value Arg(CallArgs& args, size_t index, const char* name, Value otherwise = Value());
void AddRanges(const Value& v, size_t offset, Value::Ranges* ranges);
Value Derived(Value result, const Value& from);
std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
std::string Title(const std::string& s);
std::string Capitalize(const std::string& s);

// Rendered text and which of its bytes came from literal (content) strings.
struct Output {
  std::string text;
  Value::Ranges literal;
};

class Renderer {
 public:
  Renderer(const Options& options, int64_t now) : options_(options), now_(now) {}

  std::string Render(const Node& root, const Value& context);

  Value::Ranges literal_;  // of the last Render

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::unordered_map<std::string, Value>;

  void Step();

  void Write(Output* out, const std::string& text);
  void Write(Output* out, const Value& v);

  const Value* Lookup(const std::string& name) const;

  void Assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

  Flow Exec(const Node& n, Output* out);

  Flow ExecFor(const Node& n, Output* out);

  Value MakeMacro(const Node& n);

  std::vector<Value> Iterate(const Value& v);

  // obj.name: a method or attribute first, then an item (as jinja2's getattr).
  Value GetAttr(const Value& obj, const std::string& name);

  // obj[key]: an item first, then an attribute.
  Value GetItem(const Value& obj, const Value& key);

  Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

  // Bound methods of strings and dicts; undefined when there is none.
  Value Method(const Value& obj, const std::string& name);

  CallArgs EvalArgs(const Node& n);

  Value Eval(const Node& n);

  Value Binary(const std::string& op, const Value& a, const Value& b);

  bool ApplyTest(const std::string& name, const Value& v, CallArgs& args);

  // Items of a sequence filter's operand.
  std::vector<Value> Items(const Value& v) { return Iterate(v); }

  // The attribute path "a.b" of an item (map / selectattr / join's attribute).
  Value Attribute(const Value& item, const std::string& path);

  Value ApplyFilter(const std::string& name, const Value& v, CallArgs& args);
  // ApplyFilter's families (filters.cc): the filter's value, or nullopt when the name is not theirs.
  std::optional<Value> StringFilter(const std::string& name, const Value& v, CallArgs& args);
  std::optional<Value> NumberFilter(const std::string& name, const Value& v, CallArgs& args);
  std::optional<Value> SequenceFilter(const std::string& name, const Value& v, CallArgs& args);
  std::optional<Value> HigherOrderFilter(const std::string& name, const Value& v, CallArgs& args);

  void InstallGlobals();

  const Options& options_;
  int64_t now_;
  int64_t steps_ = 0;
  int depth_ = 0;        // nested expressions
  int macro_depth_ = 0;  // nested macro calls
  std::vector<Frame> frames_;  // [0] globals and context, [1] the template's top level, then loops and macros
  size_t floor_ = 0;           // frames below it (past [0], [1]) belong to a caller and are hidden
};

}  // namespace tachyon::jinja::internal
