#include "data/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "data/jinja/string_methods.h"

namespace nemotron::data::jinja {

void check_size(size_t bytes, int line) {
  if (bytes > kMaxStringBytes) throw TemplateError(fmt::format("a string would exceed {} bytes", kMaxStringBytes), line);
}

namespace {

[[noreturn]] void type_error(const std::string& what, int line) { throw TemplateError(what, line); }

int64_t as_int(const Value& v, const char* what, int line) {
  if (v.kind == Value::Kind::integer) return v.i;
  if (v.kind == Value::Kind::boolean) return v.b;
  type_error(fmt::format("{} must be an integer, got {}", what, kind_name(v)), line);
}

Value str_value(std::string s, int line) {
  check_size(s.size(), line);
  return Value::string(std::move(s));
}

// The key a sort, unique, min or max compares: lowercased strings unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(ascii_lower(v.str()));
  return v;
}

// "role" or "function.name" (jinja2's make_attrgetter): dotted attribute lookup, integers as indexes.
Value attribute_path(const Value& v, const Value& path, int line) {
  if (path.kind == Value::Kind::integer) return get_item(v, path, line);
  Value out = v;
  const std::string& p = path.str();
  size_t start = 0;
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    out = numeric ? get_item(out, Value::integer(std::stoll(part)), line) : get_item(out, Value::string(part), line);
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

Args shifted(const Args& a, size_t from) {
  Args out;
  out.line = a.line;
  for (size_t k = from; k < a.pos.size(); ++k) out.pos.push_back(a.pos[k]);
  out.kw = a.kw;
  return out;
}

List sorted(List items, bool reverse, bool case_sensitive, const Value& attribute, int line) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) {
    const Value key = attribute.is_undefined() || attribute.is_none() ? v : attribute_path(v, attribute, line);
    keyed.emplace_back(sort_key(key, case_sensitive), std::move(v));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first, line) : less(a.first, b.first, line);
  });
  List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// Python's round(x, n) for floats: the correctly rounded decimal, ties to even on the exact value.
double round_half_even(double x, int64_t digits) {
  if (!std::isfinite(x) || digits > 300) return x;
  if (digits < -300) return 0.0 * x;
  char buf[512];
  if (digits >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / scale) * scale;
}

// printf-style `fmt % args` for %s %r %d %i %f %%.
std::string percent_format(const std::string& f, const Value& args, int line) {
  const List items = args.is_list() && args.tuple ? *args.l : List{args};
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < f.size(); ++k) {
    if (f[k] != '%') {
      out += f[k];
      continue;
    }
    if (++k == f.size()) type_error("incomplete format", line);
    const char c = f[k];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= items.size()) type_error("not enough arguments for format string", line);
    const Value& v = items[next++];
    if (c == 's') out += to_str(v);
    else if (c == 'r') out += to_repr(v);
    else if (c == 'd' || c == 'i') out += std::to_string(v.kind == Value::Kind::floating ? static_cast<int64_t>(v.f) : as_int(v, "%d", line));
    else if (c == 'f') out += fmt::format("{:.6f}", v.as_double());
    else type_error(fmt::format("unsupported format character '{}'", c), line);
  }
  if (next < items.size()) type_error("not all arguments converted during string formatting", line);
  return out;
}

Value to_int(const Value& v, const Value& fallback) {
  switch (v.kind) {
    case Value::Kind::integer: return v;
    case Value::Kind::boolean: return Value::integer(v.b);
    case Value::Kind::floating: return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(v.f)) : fallback;
    case Value::Kind::string: {
      const std::string s = python_strip_str(v.str());
      try {
        size_t used = 0;
        const long long i = std::stoll(s, &used, 10);
        if (used == s.size()) return Value::integer(i);
        const double d = std::stod(s, &used);
        if (used == s.size() && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
      } catch (const std::exception&) {
      }
      return fallback;
    }
    default: return fallback;
  }
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value::floating(v.as_double());
  if (v.is_string()) {
    const std::string s = python_strip_str(v.str());
    try {
      size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value::floating(d);
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value indent(const std::string& text, const Value& width, bool first, bool blank, int line) {
  const std::string pad = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, as_int(width, "indent width", line))), ' ');
  const std::vector<std::string> lines = split_lines(text + "\n");
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) out += "\n";
    const bool indent_it = k > 0 && (blank || !lines[k].empty());
    out += (indent_it ? pad : "") + lines[k];
  }
  if (first) out = pad + out;
  return str_value(std::move(out), line);
}

}  // namespace

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    if (!item.is_string()) type_error(fmt::format("'in <string>' requires string as left operand, not {}", kind_name(item)), line);
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_dict()) {
    if (!item.is_string() && item.kind != Value::Kind::integer && item.kind != Value::Kind::boolean) return false;
    return find(*container.d, key_of(item, line)) != nullptr;
  }
  for (const Value& x : iterate(container, line))
    if (equal(x, item)) return true;
  return false;
}

List iterate(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::undefined: return {};
    case Value::Kind::list: return *v.l;
    case Value::Kind::dict: {
      List keys;
      for (const auto& kv : *v.d) keys.push_back(key_value(kv.first));
      return keys;
    }
    case Value::Kind::string: {
      List chars;
      const std::vector<size_t> at = code_point_offsets(v.str());
      for (size_t k = 0; k + 1 < at.size(); ++k) chars.push_back(Value::string(v.str().substr(at[k], at[k + 1] - at[k])));
      return chars;
    }
    default: type_error(fmt::format("'{}' object is not iterable", kind_name(v)), line);
  }
}

bool apply_test(std::string_view name, const Value& v, const Args& a) {
  const int line = a.line;
  const Value arg = a.get(0, "");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Value::Kind::boolean;
  if (name == "true") return v.kind == Value::Kind::boolean && v.b;
  if (name == "false") return v.kind == Value::Kind::boolean && !v.b;
  if (name == "integer") return v.kind == Value::Kind::integer;
  if (name == "float") return v.kind == Value::Kind::floating;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_undefined() || v.is_string() || (v.is_list() && !v.generator) || v.is_dict();
  if (name == "callable") return v.kind == Value::Kind::callable;
  if (name == "lower") return v.is_string() && ascii_lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && ascii_upper(v.str()) == v.str();
  if (name == "odd" || name == "even") {
    const int64_t i = as_int(v, "the operand of odd/even", line);
    return (((i % 2) + 2) % 2 == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = as_int(arg, "divisibleby's argument", line);
    if (d == 0) type_error("integer division or modulo by zero", line);
    return as_int(v, "the operand of divisibleby", line) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, arg);
  if (name == "ne" || name == "!=") return !equal(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, arg, line);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(arg, v, line);
  if (name == "le" || name == "<=") return !less(arg, v, line);
  if (name == "ge" || name == ">=") return !less(v, arg, line);
  if (name == "sameas") {
    if (v.kind != arg.kind) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind == Value::Kind::boolean) return v.b == arg.b;
    if (v.is_list()) return v.l == arg.l;
    if (v.is_dict()) return v.d == arg.d;
    return equal(v, arg) && v.kind != Value::Kind::string;
  }
  if (name == "in") return contains(arg, v, line);
  type_error(fmt::format("no test named '{}'", name), line);
}

namespace {

Value filter(std::string_view name, const Value& v, const Args& a);

}  // namespace

Value apply_filter(std::string_view name, const Value& v, const Args& a) {
  Value out = filter(name, v, a);
  if (out.is_list() && (name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
                        name == "rejectattr" || name == "unique" || name == "batch" || name == "items" || name == "reverse"))
    out.generator = true;
  return out;
}

namespace {

Value filter(std::string_view name, const Value& v, const Args& a) {
  const int line = a.line;
  if (name == "safe") return v;
  if (name == "string") return v.is_string() ? v : Value::string(to_str(v));
  if (name == "trim") return Value::string(strip_chars(to_str(v), a.get(0, "chars"), 3));
  if (name == "upper") return Value::string(ascii_upper(to_str(v)));
  if (name == "lower") return Value::string(ascii_lower(to_str(v)));
  if (name == "title") return Value::string(jinja_title(to_str(v)));
  if (name == "capitalize") return Value::string(capitalize(to_str(v)));
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(code_point_count(v.str())));
    if (v.is_list() && !v.generator) return Value::integer(static_cast<int64_t>(v.l->size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.d->size()));
    if (v.is_undefined()) return Value::integer(0);
    type_error(fmt::format("object of type '{}' has no len()", kind_name(v)), line);
  }
  if (name == "tojson") {
    if (truthy(a.get(99, "ensure_ascii"))) type_error("tojson(ensure_ascii=True) is not supported", line);
    const Value ind = a.get(0, "indent", Value::none());
    const Value seps = a.get(99, "separators", Value::none());
    std::string item_sep = ", ", key_sep = ": ";
    if (seps.is_list() && seps.l->size() == 2 && (*seps.l)[0].is_string() && (*seps.l)[1].is_string()) {
      item_sep = (*seps.l)[0].str();
      key_sep = (*seps.l)[1].str();
    } else if (!seps.is_none()) {
      type_error("tojson separators must be a pair of strings", line);
    }
    const int indent_n = ind.is_none() ? -1 : static_cast<int>(std::clamp<int64_t>(as_int(ind, "tojson indent", line), 0, 64));
    try {
      return str_value(to_json(v, indent_n, item_sep, key_sep, truthy(a.get(99, "sort_keys"))), line);
    } catch (const TemplateError& e) {
      throw TemplateError(e.what(), line);
    }
  }
  if (name == "default" || name == "d") {
    const bool boolean = truthy(a.get(1, "boolean"));
    if (v.is_undefined() || (boolean && !truthy(v))) return a.get(0, "default_value", Value::string(""));
    return v;
  }
  if (name == "first") {
    const List items = iterate(v, line);
    return items.empty() ? Value::undefined("first item") : items.front();
  }
  if (name == "last") {
    const List items = iterate(v, line);
    return items.empty() ? Value::undefined("last item") : items.back();
  }
  if (name == "list") return Value::list(iterate(v, line));
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) type_error(fmt::format("items expects a mapping, got {}", kind_name(v)), line);
    List out;
    for (const auto& [k, x] : *v.d) out.push_back(Value::list({key_value(k), x}, true));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) type_error(fmt::format("dictsort expects a mapping, got {}", kind_name(v)), line);
    const bool by_value = a.get(1, "by", Value::string("key")).is_string() && a.get(1, "by", Value::string("key")).str() == "value";
    List pairs;
    for (const auto& [k, x] : *v.d) pairs.push_back(Value::list({key_value(k), x}, true));
    return Value::list(sorted(std::move(pairs), truthy(a.get(2, "reverse")), truthy(a.get(0, "case_sensitive")),
                              Value::integer(by_value ? 1 : 0), line));
  }
  if (name == "sort")
    return Value::list(sorted(iterate(v, line), truthy(a.get(0, "reverse")), truthy(a.get(1, "case_sensitive")),
                              a.get(2, "attribute"), line));
  if (name == "unique") {
    const bool cs = truthy(a.get(0, "case_sensitive"));
    const Value attribute = a.get(1, "attribute");
    List out, seen;
    for (const Value& x : iterate(v, line)) {
      const Value key = sort_key(attribute.is_undefined() ? x : attribute_path(x, attribute, line), cs);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
        seen.push_back(key);
        out.push_back(x);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "min" || name == "max") {
    const List items = sorted(iterate(v, line), false, truthy(a.get(0, "case_sensitive")), a.get(1, "attribute"), line);
    if (items.empty()) return Value::undefined("min/max of an empty sequence");
    return name == "min" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::string out;
      const List chars = iterate(v, line);
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->str();
      return Value::string(std::move(out));
    }
    List items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "join") {
    const Value attribute = a.get(1, "attribute");
    std::string sep = to_str(a.get(0, "d", Value::string(""))), out;
    bool first = true;
    for (const Value& x : iterate(v, line)) {
      if (!first) out += sep;
      first = false;
      out += to_str(attribute.is_undefined() ? x : attribute_path(x, attribute, line));
      check_size(out.size(), line);
    }
    return Value::string(std::move(out));
  }
  if (name == "sum") {
    const Value attribute = a.get(0, "attribute");
    Value total = a.get(1, "start", Value::integer(0));
    for (const Value& x : iterate(v, line)) {
      const Value y = attribute.is_undefined() ? x : attribute_path(x, attribute, line);
      if (!total.is_number() || !y.is_number()) type_error("sum of non-numbers", line);
      if (total.kind == Value::Kind::floating || y.kind == Value::Kind::floating) total = Value::floating(total.as_double() + y.as_double());
      else total = Value::integer(as_int(total, "sum", line) + as_int(y, "sum", line));
    }
    return total;
  }
  if (name == "map") {
    List out;
    if (!truthy(v)) return Value::list({});  // jinja2: `if value:` before iterating
    if (a.has(99, "attribute")) {
      const Value attribute = a.get(99, "attribute"), fallback = a.get(99, "default");
      for (const Value& x : iterate(v, line)) {
        Value y = attribute_path(x, attribute, line);
        out.push_back(y.is_undefined() && !fallback.is_undefined() ? fallback : y);
      }
    } else {
      const Value filter = a.get(0, "");
      if (!filter.is_string()) type_error("map needs a filter name or attribute=", line);
      const Args rest = shifted(a, 1);
      for (const Value& x : iterate(v, line)) out.push_back(apply_filter(filter.str(), x, rest));
    }
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool attr = name.ends_with("attr"), keep = name.starts_with("select");
    const size_t test_at = attr ? 1 : 0;
    const Value attribute = attr ? a.get(0, "") : Value::undefined();
    const Value test = a.get(test_at, "");
    const Args rest = shifted(a, test_at + 1);
    List out;
    if (!truthy(v)) return Value::list({});  // jinja2: `if value:` before iterating
    for (const Value& x : iterate(v, line)) {
      const Value y = attr ? attribute_path(x, attribute, line) : x;
      const bool ok = test.is_string() ? apply_test(test.str(), y, rest) : truthy(y);
      if (ok == keep) out.push_back(x);
    }
    return Value::list(std::move(out));
  }
  if (name == "batch") {
    const int64_t n = as_int(a.get(0, "linecount"), "batch size", line);
    if (n <= 0) type_error("batch size must be positive", line);
    const Value fill = a.get(1, "fill_with", Value::none());
    List out, cur;
    for (const Value& x : iterate(v, line)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
    }
    if (!cur.empty()) {
      if (!fill.is_none()) cur.resize(static_cast<size_t>(n), fill);
      out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out));
  }
  if (name == "int") return to_int(v, a.get(0, "default", Value::integer(0)));
  if (name == "float") return to_float(v, a.get(0, "default", Value::floating(0)));
  if (name == "abs") {
    if (v.kind == Value::Kind::integer) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.is_number()) return Value::floating(std::fabs(v.as_double()));
    type_error(fmt::format("bad operand type for abs(): '{}'", kind_name(v)), line);
  }
  if (name == "round") {
    if (!v.is_number()) type_error(fmt::format("round expects a number, got {}", kind_name(v)), line);
    const int64_t digits = as_int(a.get(0, "precision", Value::integer(0)), "round precision", line);
    const Value method = a.get(1, "method", Value::string("common"));
    const double x = v.as_double(), scale = std::pow(10.0, static_cast<double>(digits));
    if (method.is_string() && method.str() == "floor") return Value::floating(std::floor(x * scale) / scale);
    if (method.is_string() && method.str() == "ceil") return Value::floating(std::ceil(x * scale) / scale);
    return Value::floating(round_half_even(x, digits));
  }
  if (name == "replace") {
    const Value count = a.get(2, "count", Value::none());
    return str_value(replace(to_str(v), to_str(a.get(0, "old")), to_str(a.get(1, "new")),
                             count.is_none() ? -1 : as_int(count, "replace count", line), line), line);
  }
  if (name == "indent")
    return indent(to_str(v), a.get(0, "width", Value::integer(4)), truthy(a.get(1, "first")), truthy(a.get(2, "blank")), line);
  if (name == "format") {
    List items = a.pos;
    return str_value(percent_format(to_str(v), Value::list(std::move(items), true), line), line);
  }
  if (name == "attr") return get_attribute(v, to_str(a.get(0, "name")), line);
  type_error(fmt::format("no filter named '{}'", name), line);
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name, int line) {
  switch (obj.kind) {
    case Value::Kind::undefined:
      throw TemplateError(fmt::format("'{}' is undefined", obj.undefined_name.empty() ? name : obj.undefined_name), line);
    case Value::Kind::dict: {
      if (name == "items" || name == "keys" || name == "values" || name == "get") return dict_method(obj, name);
      if (const Value* v = find(*obj.d, name)) return *v;
      return Value::undefined(fmt::format("dict object' has no attribute '{}", name));
    }
    case Value::Kind::ns: {
      if (const Value* v = find(*obj.ns, name)) return *v;
      return Value::undefined(name);
    }
    case Value::Kind::string: return string_method(obj, name);
    default: return Value::undefined(fmt::format("{} object' has no attribute '{}", kind_name(obj), name));
  }
}

Value get_item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) throw TemplateError(fmt::format("'{}' is undefined", obj.undefined_name), line);
  const bool int_key = key.kind == Value::Kind::integer || key.kind == Value::Kind::boolean;
  if (obj.is_list() && obj.generator) type_error("'generator' object is not subscriptable", line);
  if ((obj.is_list() || obj.is_string()) && int_key) {
    const int64_t k = key.kind == Value::Kind::integer ? key.i : key.b;
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.l->size()), at = k < 0 ? k + n : k;
      return at >= 0 && at < n ? (*obj.l)[static_cast<size_t>(at)] : Value::undefined("list index out of range");
    }
    const std::vector<size_t> cp = code_point_offsets(obj.str());
    const int64_t n = static_cast<int64_t>(cp.size()) - 1, at = k < 0 ? k + n : k;
    if (at < 0 || at >= n) return Value::undefined("string index out of range");
    return Value::string(obj.str().substr(cp[static_cast<size_t>(at)], cp[static_cast<size_t>(at) + 1] - cp[static_cast<size_t>(at)]));
  }
  if (obj.is_dict() && (key.is_string() || int_key)) {
    if (const Value* v = find(*obj.d, key_of(key, line))) return *v;
  }
  if (key.is_string()) return get_attribute(obj, key.str(), line);
  return Value::undefined("no such item");
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step, int line) {
  if ((!obj.is_list() && !obj.is_string()) || obj.generator)
    type_error(fmt::format("'{}' object is not subscriptable", kind_name(obj)), line);
  const std::vector<size_t> cp = obj.is_string() ? code_point_offsets(obj.str()) : std::vector<size_t>{};
  const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.l->size()) : static_cast<int64_t>(cp.size()) - 1;
  const int64_t st = step.is_undefined() || step.is_none() ? 1 : as_int(step, "slice step", line);
  if (st == 0) type_error("slice step cannot be zero", line);
  const auto bound = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t x = as_int(v, "slice index", line);
    if (x < 0) x += n;
    return st > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = bound(start, st > 0 ? 0 : n - 1), e = bound(stop, st > 0 ? n : -1);
  List items;
  std::string text;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
    if (obj.is_list()) items.push_back((*obj.l)[static_cast<size_t>(k)]);
    else text.append(obj.str(), cp[static_cast<size_t>(k)], cp[static_cast<size_t>(k) + 1] - cp[static_cast<size_t>(k)]);
  }
  return obj.is_list() ? Value::list(std::move(items), obj.tuple) : Value::string(std::move(text));
}

Value global_function(std::string_view name) {
  if (name == "range") {
    return Value::callable([](Args& a) {
      if (a.pos.empty() || a.pos.size() > 3 || !a.kw.empty()) type_error("range expects 1 to 3 integer arguments", a.line);
      int64_t start = 0, stop, step = 1;
      if (a.pos.size() == 1) {
        stop = as_int(a.pos[0], "range stop", a.line);
      } else {
        start = as_int(a.pos[0], "range start", a.line);
        stop = as_int(a.pos[1], "range stop", a.line);
        if (a.pos.size() == 3) step = as_int(a.pos[2], "range step", a.line);
      }
      if (step == 0) type_error("range() arg 3 must not be zero", a.line);
      const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
      if (count > static_cast<double>(kMaxRangeItems))
        type_error(fmt::format("range too big, maximum size for range is {}", kMaxRangeItems), a.line);
      List out;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(Value::integer(k));
      return Value::list(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    const bool ns = name == "namespace";
    return Value::callable([ns](Args& a) {
      Dict d;
      for (const Value& p : a.pos) {
        if (!p.is_dict()) type_error("namespace()/dict() take a mapping and keyword arguments", a.line);
        for (const auto& kv : *p.d) d.push_back(kv);
      }
      for (auto& [k, v] : a.kw) {
        auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == k; });
        if (it != d.end()) it->second = v;
        else d.emplace_back(k, v);
      }
      return ns ? Value::namespace_(std::move(d)) : Value::dict(std::move(d));
    });
  }
  if (name == "raise_exception") {
    return Value::callable([](Args& a) -> Value { throw TemplateError(to_str(a.get(0, "message")), a.line); });
  }
  if (name == "strftime_now") {
    return Value::callable([](Args& a) {
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, to_str(a.get(0, "format")).c_str(), &tm);
      return Value::string(std::string(buf, n));
    });
  }
  return Value::undefined(std::string(name));
}

}  // namespace nemotron::data::jinja
