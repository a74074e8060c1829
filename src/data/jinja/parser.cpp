#include "data/jinja/parser.h"

#include <algorithm>

#include <fmt/format.h>

namespace nemotron::data::jinja {

namespace {

using T = Token::Type;

ExprPtr node(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

std::unique_ptr<Stmt> stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr a, ExprPtr b) {
  ExprPtr e = node(kind, a->line);
  e->name = std::move(op);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case T::text: return "template text";
    case T::var_begin: return "'{{'";
    case T::var_end: return "'}}'";
    case T::block_begin: return "'{%'";
    case T::block_end: return "end of statement block";
    case T::name: return "'" + t.text + "'";
    case T::string: return "string literal";
    case T::integer:
    case T::floating: return "number " + t.text;
    case T::op: return "'" + t.text + "'";
    case T::eof: return "end of template";
  }
  return "?";
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    std::string stopped;
    Body body = parse_body({}, &stopped);
    return body;
  }

 private:
  // Depth guard for every recursive descent step.
  struct Deeper {
    explicit Deeper(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth)
        throw TemplateError(fmt::format("template nested deeper than {} levels", kMaxParseDepth), p_.cur().line);
    }
    ~Deeper() { --p_.depth_; }
    Parser& p_;
  };

  const Token& cur() const { return t_[pos_]; }
  const Token& look(size_t k) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().type == T::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::name && cur().text == n; }
  const Token& next() {
    const Token& t = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return t;
  }
  [[noreturn]] void fail(const std::string& what) const { throw TemplateError(what, cur().line); }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
    next();
  }
  std::string expect_name() {
    if (cur().type != T::name) fail(fmt::format("expected a name, got {}", describe(cur())));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != T::block_end) fail(fmt::format("expected end of statement block, got {}", describe(cur())));
    next();
  }

  // Statements until one of `ends` (the tag name is consumed and stored in *stopped).
  Body parse_body(std::initializer_list<const char*> ends, std::string* stopped) {
    Deeper guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == T::eof) {
        if (ends.size()) fail(fmt::format("unexpected end of template, expected '{}'", *ends.begin()));
        return body;
      }
      if (t.type == T::text) {
        auto s = stmt(Stmt::Kind::text, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == T::var_begin) {
        next();
        auto s = stmt(Stmt::Kind::output, t.line);
        s->expr = parse_tuple(true, false);
        if (cur().type != T::var_end) fail(fmt::format("expected '}}}}', got {}", describe(cur())));
        next();
        body.push_back(std::move(s));
      } else if (t.type == T::block_begin) {
        next();
        if (cur().type != T::name) fail("expected a statement name after '{%'");
        const std::string tag = cur().text;
        for (const char* e : ends)
          if (tag == e) {
            next();
            *stopped = tag;
            return body;
          }
        body.push_back(parse_statement());
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    const int line = cur().line;
    const std::string tag = next().text;
    auto s = stmt(Stmt::Kind::text, line);
    std::string stopped;
    if (tag == "if") {
      s->kind = Stmt::Kind::if_;
      ExprPtr test = parse_tuple(false, false);
      expect_block_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"}, &stopped);
        s->branches.emplace_back(std::move(test), std::move(b));
        if (stopped == "elif") {
          test = parse_tuple(false, false);
          expect_block_end();
          continue;
        }
        if (stopped == "else") {
          expect_block_end();
          s->body = parse_body({"endif"}, &stopped);
        }
        break;
      }
    } else if (tag == "for") {
      s->kind = Stmt::Kind::for_;
      s->targets = parse_targets();
      if (!is_name("in")) fail(fmt::format("expected 'in', got {}", describe(cur())));
      next();
      s->expr = parse_tuple(false, false, "recursive");
      if (is_name("if")) {
        next();
        s->filter = parse_expression(true);
      }
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      s->body = parse_body({"endfor", "else"}, &stopped);
      if (stopped == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &stopped);
      }
    } else if (tag == "set") {
      s->kind = Stmt::Kind::set;
      if (cur().type == T::name && look(1).type == T::op && look(1).text == ".") {
        s->targets.push_back(next().text);
        next();
        s->attr = expect_name();
      } else {
        s->targets = parse_targets();
      }
      if (is_op("=")) {
        next();
        s->expr = parse_tuple(true, false);
      } else {
        if (s->targets.size() != 1 || !s->attr.empty()) fail("a block set assigns one name");
        s->kind = Stmt::Kind::set_block;
        if (is_op("|")) s->filter = parse_filter_chain(true);
        expect_block_end();
        s->body = parse_body({"endset"}, &stopped);
      }
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::macro;
      s->targets.push_back(expect_name());
      expect_op("(");
      while (!is_op(")")) {
        if (s->targets.size() > 1) expect_op(",");
        if (is_op(")")) break;
        s->targets.push_back(expect_name());
        if (is_op("=")) {
          next();
          s->defaults.push_back(parse_expression(true));
        } else {
          s->defaults.push_back(nullptr);
        }
      }
      next();
      expect_block_end();
      s->body = parse_body({"endmacro"}, &stopped);
      if (cur().type == T::name) next();  // {% endmacro name %}
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::filter_block;
      s->filter = parse_filter_chain(false);
      expect_block_end();
      s->body = parse_body({"endfilter"}, &stopped);
    } else if (tag == "generation") {
      s->kind = Stmt::Kind::block;  // transformers' AssistantTracker: the text is the body's
      expect_block_end();
      s->body = parse_body({"endgeneration"}, &stopped);
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
    } else {
      throw TemplateError(fmt::format("unknown or unsupported tag '{}'", tag), line);
    }
    expect_block_end();
    return s;
  }

  // for/set targets: name or names separated by commas, optionally in parentheses.
  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (cur().type != T::name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  // A filter chain after a set block ("| f | g") or in a filter tag ("f | g"): the operand slot
  // stays an empty literal, the body's text takes its place when rendered.
  ExprPtr parse_filter_chain(bool leading_bar) {
    if (leading_bar) expect_op("|");
    ExprPtr chain = parse_filter(node(Expr::Kind::literal, cur().line));
    while (is_op("|")) {
      next();
      chain = parse_filter(std::move(chain));
    }
    return chain;
  }

  bool is_tuple_end(const char* extra) const {
    return cur().type == T::var_end || cur().type == T::block_end || cur().type == T::eof || is_op(")") ||
           (extra && is_name(extra));
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const char* extra_end = nullptr) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail(fmt::format("expected an expression, got {}", describe(cur())));
    }
    ExprPtr e = node(Expr::Kind::list, line);
    e->tuple = true;
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    Deeper guard(*this);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      next();
      ExprPtr test = parse_or();
      ExprPtr otherwise;
      if (is_name("else")) {
        next();
        otherwise = parse_condexpr();
      }
      ExprPtr c = node(Expr::Kind::cond, expr->line);
      c->args.push_back(std::move(expr));
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(otherwise));
      expr = std::move(c);
    }
    return expr;
  }

  // One left-associative precedence level: operands from `operand`, joined by `ops` (keywords
  // when `names`, else symbols).
  template <class Operand>
  ExprPtr left_assoc(Expr::Kind kind, std::initializer_list<const char*> ops, bool names, Operand operand) {
    ExprPtr left = operand();
    while (std::any_of(ops.begin(), ops.end(), [&](const char* op) { return names ? is_name(op) : is_op(op); })) {
      std::string op = next().text;
      left = binary(kind, std::move(op), std::move(left), operand());
    }
    return left;
  }

  ExprPtr parse_or() { return left_assoc(Expr::Kind::or_, {"or"}, true, [&] { return parse_and(); }); }
  ExprPtr parse_and() { return left_assoc(Expr::Kind::and_, {"and"}, true, [&] { return parse_not(); }); }

  ExprPtr parse_not() {
    Deeper guard(*this);
    if (is_name("not")) {
      const int line = next().line;
      ExprPtr e = node(Expr::Kind::not_, line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr e;
    while (true) {
      std::string op;
      if (cur().type == T::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                                  cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && look(1).type == T::name && look(1).text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!e) {
        e = node(Expr::Kind::compare, first->line);
        e->args.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->args.push_back(parse_math1());
    }
    return e ? std::move(e) : std::move(first);
  }

  ExprPtr parse_math1() { return left_assoc(Expr::Kind::binary, {"+", "-"}, false, [&] { return parse_concat(); }); }
  ExprPtr parse_concat() { return left_assoc(Expr::Kind::binary, {"~"}, false, [&] { return parse_math2(); }); }
  ExprPtr parse_math2() {
    return left_assoc(Expr::Kind::binary, {"*", "/", "//", "%"}, false, [&] { return parse_pow(); });
  }
  ExprPtr parse_pow() { return left_assoc(Expr::Kind::binary, {"**"}, false, [&] { return parse_unary(true); }); }

  ExprPtr parse_unary(bool with_filter) {
    Deeper guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = node(t.text == "-" ? Expr::Kind::neg : Expr::Kind::pos, t.line);
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr literal(Value v, int line) {
    ExprPtr e = node(Expr::Kind::literal, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == T::name) {
      next();
      if (t.text == "true" || t.text == "True") return literal(Value::boolean(true), line);
      if (t.text == "false" || t.text == "False") return literal(Value::boolean(false), line);
      if (t.text == "none" || t.text == "None") return literal(Value::none(), line);
      ExprPtr e = node(Expr::Kind::name, line);
      e->name = t.text;
      return e;
    }
    if (t.type == T::string) {
      std::string s;
      while (cur().type == T::string) s += next().text;
      return literal(Value::string(std::move(s)), line);
    }
    if (t.type == T::integer) return literal(Value::integer(next().i), line);
    if (t.type == T::floating) return literal(Value::floating(next().f), line);
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      ExprPtr e = node(Expr::Kind::list, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    if (is_op("{")) {
      next();
      ExprPtr e = node(Expr::Kind::dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    fail(fmt::format("unexpected {}", describe(t)));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        next();
        if (cur().type == T::name) {
          ExprPtr g = node(Expr::Kind::getattr, cur().line);
          g->name = next().text;
          g->args.push_back(std::move(e));
          e = std::move(g);
        } else if (cur().type == T::integer) {
          ExprPtr g = node(Expr::Kind::getitem, cur().line);
          g->args.push_back(std::move(e));
          g->args.push_back(literal(Value::integer(next().i), g->line));
          e = std::move(g);
        } else {
          fail(fmt::format("expected an attribute name, got {}", describe(cur())));
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e), Expr::Kind::call);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr e) {
    const int line = next().line;  // '['
    ExprPtr parts[3];
    bool is_slice = false;
    if (!is_op(":")) parts[0] = parse_expression(true);
    if (is_op(":")) {
      is_slice = true;
      next();
      if (!is_op("]") && !is_op(":")) parts[1] = parse_expression(true);
      if (is_op(":")) {
        next();
        if (!is_op("]")) parts[2] = parse_expression(true);
      }
    }
    expect_op("]");
    ExprPtr g = node(is_slice ? Expr::Kind::slice : Expr::Kind::getitem, line);
    g->args.push_back(std::move(e));
    g->args.push_back(std::move(parts[0]));
    if (is_slice) {
      g->args.push_back(std::move(parts[1]));
      g->args.push_back(std::move(parts[2]));
    }
    return g;
  }

  // "(args)" after a callee, filter or test: positional then keyword arguments.
  ExprPtr parse_call(ExprPtr e, Expr::Kind kind) {
    ExprPtr c = kind == Expr::Kind::call ? node(kind, cur().line) : std::move(e);
    if (kind == Expr::Kind::call) c->args.push_back(std::move(e));
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == T::name && look(1).type == T::op && look(1).text == "=") {
        std::string key = next().text;
        next();
        c->kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!c->kwargs.empty()) fail("a positional argument follows a keyword argument");
        c->args.push_back(parse_expression(true));
      }
    }
    next();
    return c;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        next();
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e), Expr::Kind::call);
      } else {
        return e;
      }
    }
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && look(1).type == T::name) {
      next();
      n += "." + next().text;
    }
    return n;
  }

  // After '|': name and optional call arguments.
  ExprPtr parse_filter(ExprPtr operand) {
    ExprPtr f = node(Expr::Kind::filter, cur().line);
    f->name = dotted_name();
    f->args.push_back(std::move(operand));
    if (is_op("(")) f = parse_call(std::move(f), Expr::Kind::filter);
    return f;
  }

  ExprPtr parse_test(ExprPtr operand) {
    ExprPtr t = node(Expr::Kind::test, cur().line);
    if (is_name("not")) {
      next();
      t->negated = true;
    }
    t->name = dotted_name();
    t->args.push_back(std::move(operand));
    const Token& c = cur();
    if (is_op("(")) {
      t = parse_call(std::move(t), Expr::Kind::test);
    } else if ((c.type == T::name || c.type == T::string || c.type == T::integer || c.type == T::floating || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace nemotron::data::jinja
