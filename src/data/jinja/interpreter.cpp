// Template::render: walks the statement tree with jinja2's scoping (a for loop's body and a macro's
// body are scopes of their own; if blocks are not; template-level names shadow the render
// variables, which shadow the globals) and Python's operator semantics.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "data/jinja/ast.h"
#include "data/jinja/builtins.h"
#include "data/jinja/lexer.h"
#include "data/jinja/parser.h"
#include "data/jinja/template.h"

namespace nemotron::data::jinja {

namespace {

struct Scope {
  Dict vars;
  std::shared_ptr<Scope> parent;

  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      if (const Value* v = find(s->vars, name)) return v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& kv : vars)
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(ScopePtr parent, Dict vars = {}) {
  auto s = std::make_shared<Scope>();
  s->vars = std::move(vars);
  s->parent = std::move(parent);
  return s;
}

[[noreturn]] void fail(const std::string& what, int line) { throw TemplateError(what, line); }

// Python ints are unbounded; ours stop at 64 bits with an error rather than wrap.
int64_t checked_op(char op, int64_t x, int64_t y, int line) {
  int64_t r = 0;
  const bool overflow = op == '+' ? __builtin_add_overflow(x, y, &r) : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                                                                  : __builtin_mul_overflow(x, y, &r);
  if (overflow) fail("integer overflow (this renderer's ints are 64-bit)", line);
  return r;
}

bool is_int_like(const Value& v) { return v.kind == Value::Kind::integer || v.kind == Value::Kind::boolean; }
int64_t int_of(const Value& v) { return v.kind == Value::Kind::integer ? v.i : v.b; }

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b, int line) {
  if (a.is_undefined() || b.is_undefined())
    fail(fmt::format("'{}' is undefined", a.is_undefined() ? a.undefined_name : b.undefined_name), line);
  fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, kind_name(a), kind_name(b)), line);
}

Value repeat(const Value& seq, int64_t n, int line) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    check_size(seq.str().size() * static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 32)), line);
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.str();
    return Value::string(std::move(out));
  }
  check_size(seq.l->size() * static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 32)) * sizeof(Value), line);
  List out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.l->begin(), seq.l->end());
  return Value::list(std::move(out), seq.tuple);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    check_size(s.size(), line);
    return Value::string(std::move(s));
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_size(a.str().size() + b.str().size(), line);
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.tuple == b.tuple && !a.generator && !b.generator) {
      check_size((a.l->size() + b.l->size()) * sizeof(Value), line);
      List out = *a.l;
      out.insert(out.end(), b.l->begin(), b.l->end());
      return Value::list(std::move(out), a.tuple);
    }
  }
  if (op == "*") {
    if ((a.is_string() || (a.is_list() && !a.generator)) && is_int_like(b)) return repeat(a, int_of(b), line);
    if ((b.is_string() || (b.is_list() && !b.generator)) && is_int_like(a)) return repeat(b, int_of(a), line);
  }
  if (op == "%" && a.is_string()) {
    return apply_filter("format", a, Args{b.is_list() && b.tuple ? *b.l : List{b}, {}, line});
  }
  if (!a.is_number() || !b.is_number()) bad_operands(op, a, b, line);
  if (is_int_like(a) && is_int_like(b) && op != "/") {
    const int64_t x = int_of(a), y = int_of(b);
    if (op == "+" || op == "-" || op == "*") return Value::integer(checked_op(op[0], x, y, line));
    if (op == "//" || op == "%") {
      if (y == 0) fail("integer division or modulo by zero", line);
      if (x == INT64_MIN && y == -1) fail("integer overflow (this renderer's ints are 64-bit)", line);
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t out = 1;
      for (int64_t k = 0; k < y; ++k) {
        out = checked_op('*', out, x, line);
        if (out == 0 || out == 1) break;
      }
      return Value::integer(out);
    }
  }
  const double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::floating(x + y);
  if (op == "-") return Value::floating(x - y);
  if (op == "*") return Value::floating(x * y);
  if (op == "/" || op == "//" || op == "%") {
    if (y == 0) fail("division by zero", line);
    if (op == "/") return Value::floating(x / y);
    const double m = std::fmod(x, y), mod = m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
    return Value::floating(op == "%" ? mod : std::floor(x / y));
  }
  if (op == "**") return Value::floating(std::pow(x, y));
  fail(fmt::format("unknown operator {}", op), line);
}

class Renderer {
 public:
  Renderer(const RenderLimits& limits) : lim_(limits) {}

  enum class Flow { normal, break_, continue_ };

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& s : body) {
      const Flow f = exec(*s, scope, out);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

 private:
  struct Depth {
    Depth(Renderer& r, int line) : r_(r) {
      if (++r_.eval_depth_ > r_.lim_.max_eval_depth) fail("template evaluation nested too deeply", line);
    }
    ~Depth() { --r_.eval_depth_; }
    Renderer& r_;
  };

  void emit(std::string& out, std::string_view s, int line) {
    out += s;
    if (out.size() > lim_.max_output_bytes) fail(fmt::format("output exceeds {} bytes", lim_.max_output_bytes), line);
  }

  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
    Depth guard(*this, s.line);
    switch (s.kind) {
      case Stmt::Kind::text: emit(out, s.text, s.line); return Flow::normal;
      case Stmt::Kind::output: emit(out, to_str(eval(*s.expr, scope)), s.line); return Flow::normal;
      case Stmt::Kind::if_:
        for (const auto& [test, body] : s.branches)
          if (truthy(eval(*test, scope))) return exec(body, scope, out);
        return exec(s.body, scope, out);
      case Stmt::Kind::for_: return exec_for(s, scope, out);
      case Stmt::Kind::set: {
        Value v = eval(*s.expr, scope);
        if (!s.attr.empty()) {
          const Value* ns = scope->lookup(s.targets[0]);
          if (!ns || ns->kind != Value::Kind::ns) fail("cannot assign attribute on non-namespace object", s.line);
          for (auto& kv : *ns->ns)
            if (kv.first == s.attr) {
              kv.second = std::move(v);
              return Flow::normal;
            }
          ns->ns->emplace_back(s.attr, std::move(v));
          return Flow::normal;
        }
        assign(s.targets, std::move(v), *scope, s.line);
        return Flow::normal;
      }
      case Stmt::Kind::set_block: {
        std::string text;
        exec(s.body, scope, text);
        Value v = Value::string(std::move(text));
        if (s.filter) v = apply_chain(*s.filter, v, scope);
        scope->set(s.targets[0], std::move(v));
        return Flow::normal;
      }
      case Stmt::Kind::macro: scope->set(s.targets[0], make_macro(s, scope)); return Flow::normal;
      case Stmt::Kind::filter_block: {
        std::string text;
        exec(s.body, scope, text);
        emit(out, to_str(apply_chain(*s.filter, Value::string(std::move(text)), scope)), s.line);
        return Flow::normal;
      }
      case Stmt::Kind::block: return exec(s.body, scope, out);
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
    }
    return Flow::normal;
  }

  void assign(const std::vector<std::string>& targets, Value v, Scope& scope, int line) {
    if (targets.size() == 1) {
      scope.set(targets[0], std::move(v));
      return;
    }
    const List items = iterate(v, line);
    if (items.size() != targets.size())
      fail(fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()), line);
    for (size_t k = 0; k < items.size(); ++k) scope.set(targets[k], items[k]);
  }

  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    List items = iterate(eval(*s.expr, scope), s.line);
    if (s.filter) {  // `for x in xs if cond`: loop.* counts the kept items only
      List kept;
      for (Value& item : items) {
        auto probe = child_of(scope);
        assign(s.targets, item, *probe, s.line);
        if (truthy(eval(*s.filter, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, scope, out) == Flow::break_ ? Flow::break_ : Flow::normal;
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      if (++iterations_ > lim_.max_loop_iterations)
        fail(fmt::format("more than {} loop iterations", lim_.max_loop_iterations), s.line);
      auto iter = child_of(scope);
      Dict loop = {{"index", Value::integer(k + 1)},     {"index0", Value::integer(k)},
                   {"revindex", Value::integer(n - k)},  {"revindex0", Value::integer(n - k - 1)},
                   {"first", Value::boolean(k == 0)},    {"last", Value::boolean(k == n - 1)},
                   {"length", Value::integer(n)},        {"depth", Value::integer(1)},
                   {"depth0", Value::integer(0)}};
      if (k > 0) loop.emplace_back("previtem", items[static_cast<size_t>(k - 1)]);
      if (k + 1 < n) loop.emplace_back("nextitem", items[static_cast<size_t>(k + 1)]);
      loop.emplace_back("cycle", Value::callable([k](Args& a) {
                          if (a.pos.empty()) fail("no items for cycling given", a.line);
                          return a.pos[static_cast<size_t>(k) % a.pos.size()];
                        }));
      iter->set("loop", Value::dict(std::move(loop)));
      assign(s.targets, items[static_cast<size_t>(k)], *iter, s.line);
      if (exec(s.body, iter, out) == Flow::break_) break;
    }
    return Flow::normal;
  }

  Value make_macro(const Stmt& s, const ScopePtr& scope) {
    const Stmt* def = &s;
    // The defining scope is held weakly: the macro is stored in it, and a strong reference would
    // keep both alive after the render.
    std::weak_ptr<Scope> weak = scope;
    return Value::callable([this, def, weak](Args& a) {
      const ScopePtr scope = weak.lock();
      if (!scope) fail(fmt::format("macro '{}' called after its scope ended", def->targets[0]), a.line);
      if (++call_depth_ > lim_.max_call_depth) fail("maximum macro recursion depth exceeded", a.line);
      struct Leave {
        int& d;
        ~Leave() { --d; }
      } leave{call_depth_};
      const size_t nparams = def->targets.size() - 1;
      if (a.pos.size() > nparams)
        fail(fmt::format("macro '{}' takes not more than {} argument(s)", def->targets[0], nparams), a.line);
      auto frame = child_of(scope);
      for (const auto& [k, v] : a.kw)
        if (std::find(def->targets.begin() + 1, def->targets.end(), k) == def->targets.end())
          fail(fmt::format("macro '{}' was invoked with the unknown keyword argument '{}'", def->targets[0], k), a.line);
      for (size_t p = 0; p < nparams; ++p) {
        const std::string& name = def->targets[p + 1];
        if (a.has(p, name)) frame->set(name, a.get(p, name));
        else if (def->defaults[p]) frame->set(name, eval(*def->defaults[p], frame));
        else frame->set(name, Value::undefined(name));
      }
      std::string text;
      exec(def->body, frame, text);
      return Value::string(std::move(text));
    });
  }

  Args eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    Args a;
    a.line = e.line;
    for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], scope));
    for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v, scope));
    return a;
  }

  // A filter chain parsed with an empty operand slot (set blocks, filter tags) applied to `v`.
  Value apply_chain(const Expr& f, const Value& v, const ScopePtr& scope) {
    const Value inner = f.args[0]->kind == Expr::Kind::filter ? apply_chain(*f.args[0], v, scope) : v;
    return apply_filter(f.name, inner, eval_args(f, 1, scope));
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    Depth guard(*this, e.line);
    switch (e.kind) {
      case Expr::Kind::literal: return e.value;
      case Expr::Kind::name: {
        if (const Value* v = scope->lookup(e.name)) return *v;
        Value g = global_function(e.name);
        if (g.is_undefined()) g.undefined_name = e.name;
        return g;
      }
      case Expr::Kind::list: {
        List items;
        for (const auto& x : e.args) items.push_back(eval(*x, scope));
        return Value::list(std::move(items), e.tuple);
      }
      case Expr::Kind::dict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          const std::string key = key_of(eval(*e.args[k], scope), e.line);
          Value v = eval(*e.args[k + 1], scope);
          auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == key; });
          if (it != d.end()) it->second = std::move(v);
          else d.emplace_back(key, std::move(v));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::getattr: return get_attribute(eval(*e.args[0], scope), e.name, e.line);
      case Expr::Kind::getitem: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope), e.line);
      case Expr::Kind::slice: {
        const auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k], scope) : Value::undefined(); };
        return get_slice(eval(*e.args[0], scope), part(1), part(2), part(3), e.line);
      }
      case Expr::Kind::call: {
        const Value callee = eval(*e.args[0], scope);
        Args a = eval_args(e, 1, scope);
        if (callee.kind != Value::Kind::callable) {
          if (callee.is_undefined()) fail(fmt::format("'{}' is undefined", callee.undefined_name), e.line);
          fail(fmt::format("'{}' object is not callable", kind_name(callee)), e.line);
        }
        return (*callee.fn)(a);
      }
      case Expr::Kind::filter: {
        const Value v = eval(*e.args[0], scope);
        return apply_filter(e.name, v, eval_args(e, 1, scope));
      }
      case Expr::Kind::test: {
        const Value v = eval(*e.args[0], scope);
        return Value::boolean(apply_test(e.name, v, eval_args(e, 1, scope)) != e.negated);
      }
      case Expr::Kind::neg:
      case Expr::Kind::pos: {
        const Value v = eval(*e.args[0], scope);
        if (!v.is_number()) fail(fmt::format("bad operand type for unary {}: '{}'", e.kind == Expr::Kind::neg ? '-' : '+', kind_name(v)), e.line);
        if (e.kind == Expr::Kind::pos) return v.kind == Value::Kind::boolean ? Value::integer(v.b) : v;
        if (v.kind == Value::Kind::floating) return Value::floating(-v.f);
        return Value::integer(checked_op('-', 0, int_of(v), e.line));
      }
      case Expr::Kind::not_: return Value::boolean(!truthy(eval(*e.args[0], scope)));
      case Expr::Kind::binary: return arithmetic(e.name, eval(*e.args[0], scope), eval(*e.args[1], scope), e.line);
      case Expr::Kind::and_: {
        Value a = eval(*e.args[0], scope);
        return truthy(a) ? eval(*e.args[1], scope) : a;
      }
      case Expr::Kind::or_: {
        Value a = eval(*e.args[0], scope);
        return truthy(a) ? a : eval(*e.args[1], scope);
      }
      case Expr::Kind::compare: {
        Value left = eval(*e.args[0], scope);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.args[k + 1], scope);
          const std::string& op = e.ops[k];
          bool ok;
          if (op == "==") ok = equal(left, right);
          else if (op == "!=") ok = !equal(left, right);
          else if (op == "<") ok = less(left, right, e.line);
          else if (op == ">") ok = less(right, left, e.line);
          else if (op == "<=") ok = !less(right, left, e.line);
          else if (op == ">=") ok = !less(left, right, e.line);
          else if (op == "in") ok = contains(right, left, e.line);
          else ok = !contains(right, left, e.line);
          if (!ok) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Expr::Kind::cond:
        if (truthy(eval(*e.args[1], scope))) return eval(*e.args[0], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined();
    }
    return Value::undefined();
  }

  const RenderLimits& lim_;
  int eval_depth_ = 0, call_depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace

Template::Template(std::string_view source)
    : body_(std::make_shared<const Body>(parse(tokenize(source)))) {}

std::string Template::render(const Dict& vars, const RenderLimits& limits) const {
  auto context = child_of(nullptr, vars);
  auto root = child_of(context);
  std::string out;
  Renderer(limits).exec(*body_, root, out);
  return out;
}

}  // namespace nemotron::data::jinja
