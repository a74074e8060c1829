#include "data/jinja/value.h"

#include <cmath>

#include <fmt/format.h>

#include "data/python_format.h"

namespace nemotron::data::jinja {

Value Args::get(size_t index, std::string_view name, Value fallback) const {
  for (const auto& [k, v] : kw)
    if (k == name) return v;
  return index < pos.size() ? pos[index] : fallback;
}

bool Args::has(size_t index, std::string_view name) const {
  for (const auto& kv : kw)
    if (kv.first == name) return true;
  return index < pos.size();
}

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::none: return "NoneType";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer: return "int";
    case Value::Kind::floating: return "float";
    case Value::Kind::string: return "str";
    case Value::Kind::list: return v.generator ? "generator" : v.tuple ? "tuple" : "list";
    case Value::Kind::dict: return "dict";
    case Value::Kind::ns: return "Namespace";
    case Value::Kind::callable: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return false;
    case Value::Kind::boolean: return v.b;
    case Value::Kind::integer: return v.i != 0;
    case Value::Kind::floating: return v.f != 0;
    case Value::Kind::string: return !v.s->empty();
    case Value::Kind::list: return v.generator || !v.l->empty();
    case Value::Kind::dict: return !v.d->empty();
    case Value::Kind::ns:
    case Value::Kind::callable: return true;
  }
  return false;
}

namespace {

// Shared lists can nest exponentially (`[l, l]` sixty times): text forms write into one buffer and
// stop at kMaxTextBytes, comparisons stop after kMaxCompareSteps element steps.
constexpr size_t kMaxTextBytes = size_t{64} << 20;
constexpr int64_t kMaxCompareSteps = 1'000'000;

void grow(const std::string& out) {
  if (out.size() > kMaxTextBytes) throw TemplateError(fmt::format("a value's text would exceed {} bytes", kMaxTextBytes));
}

void repr_into(std::string& out, const Value& v);

void repr_dict(std::string& out, const Dict& d) {
  out += '{';
  for (size_t k = 0; k < d.size(); ++k) {
    if (k) out += ", ";
    repr_into(out, key_value(d[k].first));
    out += ": ";
    repr_into(out, d[k].second);
    grow(out);
  }
  out += '}';
}

void repr_into(std::string& out, const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return;
    case Value::Kind::none: out += "None"; return;
    case Value::Kind::boolean: out += v.b ? "True" : "False"; return;
    case Value::Kind::integer: out += std::to_string(v.i); return;
    case Value::Kind::floating: out += python_float_repr(v.f); return;
    case Value::Kind::string: out += python_repr(OrderedJson(*v.s)); break;
    case Value::Kind::list:
      if (v.generator) {
        out += "<generator object>";  // jinja2 prints an address here
        return;
      }
      out += v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.l->size(); ++k) {
        if (k) out += ", ";
        repr_into(out, (*v.l)[k]);
        grow(out);
      }
      if (v.tuple && v.l->size() == 1) out += ",";
      out += v.tuple ? ")" : "]";
      return;
    case Value::Kind::dict: repr_dict(out, *v.d); return;
    case Value::Kind::ns:
      out += "<Namespace ";
      repr_dict(out, *v.ns);
      out += ">";
      return;
    case Value::Kind::callable: out += "<function>"; return;
  }
  grow(out);
}

void dump(std::string& out, const Value& v, int indent, int depth, std::string_view item_sep, std::string_view key_sep,
          bool sort_keys) {
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  };
  // With an indent, json.dumps ends items with "," + newline (its item separator loses the space).
  const std::string_view sep = indent >= 0 && item_sep == ", " ? std::string_view(",") : item_sep;
  switch (v.kind) {
    case Value::Kind::none: out += "null"; return;
    case Value::Kind::boolean: out += v.b ? "true" : "false"; return;
    case Value::Kind::integer: out += std::to_string(v.i); return;
    case Value::Kind::floating:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : python_float_repr(v.f);
      return;
    case Value::Kind::string: out += python_json_dumps(OrderedJson(*v.s)); return;
    case Value::Kind::list: {
      if (v.generator) throw TemplateError("Object of type generator is not JSON serializable");
      if (v.l->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.l->size(); ++k) {
        if (k) out += sep;
        if (indent >= 0) newline(depth + 1);
        dump(out, (*v.l)[k], indent, depth + 1, item_sep, key_sep, sort_keys);
        grow(out);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::dict: {
      if (v.d->empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.d) items.push_back(&kv);
      if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += sep;
        if (indent >= 0) newline(depth + 1);
        out += python_json_dumps(OrderedJson(to_str(key_value(items[k]->first))));  // json.dumps: int keys as strings
        out += key_sep;
        dump(out, items[k]->second, indent, depth + 1, item_sep, key_sep, sort_keys);
        grow(out);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    default: throw TemplateError(fmt::format("Object of type {} is not JSON serializable", kind_name(v)));
  }
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "";
    case Value::Kind::string: return *v.s;
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(out, v);
  return out;
}

std::string to_json(const Value& v, int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys) {
  std::string out;
  dump(out, v, indent, 0, item_sep, key_sep, sort_keys);
  return out;
}

static bool equal_steps(const Value& a, const Value& b, int64_t& steps);

bool equal(const Value& a, const Value& b) {
  int64_t steps = 0;
  return equal_steps(a, b, steps);
}

static bool equal_steps(const Value& a, const Value& b, int64_t& steps) {
  if (++steps > kMaxCompareSteps) throw TemplateError("comparison too large (values nest too deeply or widely)");
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::floating || b.kind == Value::Kind::floating) return a.as_double() == b.as_double();
    return (a.kind == Value::Kind::integer ? a.i : a.b) == (b.kind == Value::Kind::integer ? b.i : b.b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return *a.s == *b.s;
    case Value::Kind::list: {
      if (a.generator || b.generator) return a.l == b.l;  // identity
      if (a.l == b.l) return a.tuple == b.tuple;
      if (a.tuple != b.tuple || a.l->size() != b.l->size()) return false;
      for (size_t k = 0; k < a.l->size(); ++k)
        if (!equal_steps((*a.l)[k], (*b.l)[k], steps)) return false;
      return true;
    }
    case Value::Kind::dict: {
      if (a.d->size() != b.d->size()) return false;
      for (const auto& [k, x] : *a.d) {
        const Value* y = find(*b.d, k);
        if (!y || !equal_steps(x, *y, steps)) return false;
      }
      return true;
    }
    case Value::Kind::ns: return a.ns == b.ns;
    case Value::Kind::callable: return a.fn == b.fn;
    default: return false;
  }
}

namespace {

bool less_steps(const Value& a, const Value& b, int line, int64_t& steps) {
  if (++steps > kMaxCompareSteps) throw TemplateError("comparison too large (values nest too deeply or widely)", line);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::floating || b.kind == Value::Kind::floating) return a.as_double() < b.as_double();
    return (a.kind == Value::Kind::integer ? a.i : a.b) < (b.kind == Value::Kind::integer ? b.i : b.b);
  }
  if (a.is_string() && b.is_string()) return *a.s < *b.s;  // UTF-8 byte order = code point order
  if (a.is_list() && b.is_list()) {
    for (size_t k = 0; k < a.l->size() && k < b.l->size(); ++k) {
      if (less_steps((*a.l)[k], (*b.l)[k], line, steps)) return true;
      if (less_steps((*b.l)[k], (*a.l)[k], line, steps)) return false;
    }
    return a.l->size() < b.l->size();
  }
  throw TemplateError(fmt::format("'<' not supported between instances of '{}' and '{}'", kind_name(a), kind_name(b)), line);
}

}  // namespace

bool less(const Value& a, const Value& b, int line) {
  int64_t steps = 0;
  return less_steps(a, b, line, steps);
}

std::string key_of(const Value& key, int line) {
  if (key.is_string()) return key.str();
  if (key.kind == Value::Kind::integer || key.kind == Value::Kind::boolean)
    return std::string(1, '\0') + std::to_string(key.kind == Value::Kind::integer ? key.i : key.b);
  throw TemplateError(fmt::format("dict keys must be strings or integers here, got {}", kind_name(key)), line);
}

Value key_value(const std::string& key) {
  if (!key.empty() && key[0] == '\0') return Value::integer(std::stoll(key.substr(1)));
  return Value::string(key);
}

const Value* find(const Dict& d, std::string_view key) {
  for (const auto& kv : d)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case T::number_float: return Value::floating(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json(x));
      return Value::list(std::move(l));
    }
    case T::object: {
      Dict d;
      d.reserve(j.size());
      for (const auto& [k, x] : j.items()) d.emplace_back(k, from_json(x));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t k = 0; k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xc0) != 0x80) out.push_back(k);
  out.push_back(s.size());
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

}  // namespace nemotron::data::jinja
