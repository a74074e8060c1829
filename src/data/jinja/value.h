// The values a Jinja chat template computes with, as Python's: undefined, None, bool, int, float,
// str (UTF-8; lengths, indexes and slices count code points), list and tuple, dict (string keys,
// insertion order), the mutable namespace() object, and callables (macros, builtin functions,
// bound string/dict methods). Lists and dicts are shared and never mutated: transformers renders
// in jinja2's ImmutableSandboxedEnvironment, where append/update are refused, so only a
// namespace's attributes change. Text forms follow Python: str(), repr(), and json.dumps as
// transformers' `tojson` calls it (ensure_ascii=False).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace nemotron::data::jinja {

// A render or syntax error; `line` is the template line (1-based), 0 when not known yet.
struct TemplateError : std::runtime_error {
  TemplateError(const std::string& what, int line_ = 0) : std::runtime_error(what), line(line_) {}
  int line;
};

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order; keys unique
struct Args;
using Function = std::function<Value(Args&)>;

struct Value {
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, ns, callable };
  Kind kind = Kind::undefined;
  bool b = false;
  bool tuple = false;  // a list written as a tuple (repr "(1, 2)")
  // A list that jinja2 would hold as a generator (what map, select, reject, unique, batch, items
  // and reverse return): always true, no len(), no index, not JSON; `| list` makes it a list.
  bool generator = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;
  std::shared_ptr<const List> l;
  std::shared_ptr<const Dict> d;
  std::shared_ptr<Dict> ns;  // namespace(): the one mutable kind
  std::shared_ptr<const Function> fn;
  std::string undefined_name;  // what was looked up, for the error an undefined value raises

  static Value undefined(std::string name = {}) {
    Value v;
    v.undefined_name = std::move(name);
    return v;
  }
  static Value none() { return make(Kind::none); }
  static Value boolean(bool x) { Value v = make(Kind::boolean); v.b = x; return v; }
  static Value integer(int64_t x) { Value v = make(Kind::integer); v.i = x; return v; }
  static Value floating(double x) { Value v = make(Kind::floating); v.f = x; return v; }
  static Value string(std::string x) {
    Value v = make(Kind::string);
    v.s = std::make_shared<const std::string>(std::move(x));
    return v;
  }
  static Value list(List x, bool as_tuple = false) {
    Value v = make(Kind::list);
    v.l = std::make_shared<const List>(std::move(x));
    v.tuple = as_tuple;
    return v;
  }
  static Value dict(Dict x) { Value v = make(Kind::dict); v.d = std::make_shared<const Dict>(std::move(x)); return v; }
  static Value namespace_(Dict x) { Value v = make(Kind::ns); v.ns = std::make_shared<Dict>(std::move(x)); return v; }
  static Value callable(Function f) { Value v = make(Kind::callable); v.fn = std::make_shared<const Function>(std::move(f)); return v; }

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  bool is_list() const { return kind == Kind::list; }
  bool is_dict() const { return kind == Kind::dict; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating || kind == Kind::boolean; }
  const std::string& str() const { return *s; }
  double as_double() const { return kind == Kind::floating ? f : kind == Kind::integer ? static_cast<double>(i) : b; }

 private:
  static Value make(Kind k) { Value v; v.kind = k; return v; }
};

// Call arguments: positional then keyword, as the template wrote them.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  int line = 0;
  // The argument named `name` or at position `index`, else `fallback` (undefined when omitted).
  Value get(size_t index, std::string_view name, Value fallback = Value::undefined()) const;
  bool has(size_t index, std::string_view name) const;
};

const char* kind_name(const Value& v);  // Python's type name, for errors
bool truthy(const Value& v);
std::string to_str(const Value& v);   // str(v); undefined renders as ""
std::string to_repr(const Value& v);  // repr(v)
// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); indent < 0 = None.
std::string to_json(const Value& v, int indent = -1, std::string_view item_sep = ", ", std::string_view key_sep = ": ",
                    bool sort_keys = false);
bool equal(const Value& a, const Value& b);  // Python ==
// Python <, for numbers, strings and lists; throws for other kinds.
bool less(const Value& a, const Value& b, int line);

// Dict lookup by key (nullptr when missing).
const Value* find(const Dict& d, std::string_view key);
// Dict keys are strings; an integer key (`{512: 128}` in a template) is stored encoded, behind a
// NUL byte no text key starts with. key_of throws for other kinds; key_value decodes.
std::string key_of(const Value& key, int line);
Value key_value(const std::string& key);

Value from_json(const nlohmann::ordered_json& j);

// UTF-8 code points: the byte offsets where each starts, plus the end.
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);

}  // namespace nemotron::data::jinja
