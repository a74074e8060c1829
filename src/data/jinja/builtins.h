// What a template can call: jinja2's filters and tests, the str and dict methods templates use
// (`content.split('</think>')`, `d.items()`), and the globals transformers renders with (range,
// namespace, dict, raise_exception, strftime_now). Attribute and item lookup follow jinja2's
// sandbox: a missing key, index or attribute is undefined, not an error; list and dict methods
// that would mutate are not offered (ImmutableSandboxedEnvironment). Python's rules hold where
// the output depends on them (str.split with and without a separator, case-insensitive sort and
// unique by default, round half even). Case mapping (upper, lower, title) is ASCII only.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "data/jinja/value.h"

namespace nemotron::data::jinja {

// Bounds that keep a hostile template from exhausting memory or time.
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;
inline constexpr int64_t kMaxRangeItems = 1'000'000;

// Applies a test by name ("defined", "equalto", ...); throws TemplateError for an unknown one.
bool apply_test(std::string_view name, const Value& v, const Args& args);
// Applies a filter by name; `args` excludes the operand.
Value apply_filter(std::string_view name, const Value& v, const Args& args);
// obj.name: a dict key, a namespace attribute, a bound str/dict method; otherwise undefined.
Value get_attribute(const Value& obj, const std::string& name, int line);
// obj[key]: list/str index (negative from the end), dict key; otherwise undefined.
Value get_item(const Value& obj, const Value& key, int line);
// obj[start:stop:step] with Python's clamping; lists, tuples and strings (by code point).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step, int line);
// A global function (range, namespace, dict, raise_exception, strftime_now), or undefined.
Value global_function(std::string_view name);
// The items a for loop or filter iterates: list elements, dict keys, string characters.
List iterate(const Value& v, int line);
// Python's `item in container`: substring, dict key, or an equal element.
bool contains(const Value& container, const Value& item, int line);
// Throws TemplateError when a string would exceed kMaxStringBytes.
void check_size(size_t bytes, int line);

}  // namespace nemotron::data::jinja
