// Parsing: a template's segments into its syntax tree (statements), and a
// tag's tokens into expressions, with Jinja's precedence.
#include <algorithm>

#include "tokenizer/jinja/internal.h"

namespace tachyon::jinja::internal {
namespace {

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

}  // namespace
}  // namespace tachyon::jinja::internal

namespace tachyon::jinja {

using internal::Lex;
using internal::ParseError;
using internal::PositionAt;
using internal::TemplateParser;

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

}  // namespace tachyon::jinja
