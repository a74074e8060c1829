// Python's str and dict methods as chat templates call them (`s.strip()`, `s.split('</think>')`,
// `d.items()`), bound to their receiver as callables, and the string helpers the filters share.
// Offsets a template sees (find) count code points, as Python's do.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "data/jinja/value.h"

namespace nemotron::data::jinja {

std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);
std::string capitalize(const std::string& s);   // str.capitalize / the capitalize filter
std::string jinja_title(const std::string& s);  // the title filter (words split at spaces, -, (, {, [, <)
std::string python_strip_str(const std::string& s);
// str.strip/lstrip/rstrip(chars): `chars` undefined or None = whitespace; side 1 left, 2 right, 3 both.
std::string strip_chars(const std::string& s, const Value& chars, int side);
// str.splitlines() for \n, \r\n and \r.
std::vector<std::string> split_lines(const std::string& s);
// str.replace(old, new, count); count < 0 = all.
std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count, int line);

// s.name as a bound method, or undefined when str has no such method here.
Value string_method(const Value& s, const std::string& name);
// d.items / keys / values / get bound to d.
Value dict_method(const Value& d, const std::string& name);

}  // namespace nemotron::data::jinja
