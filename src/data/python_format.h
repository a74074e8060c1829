// Python's text forms of JSON values, as the Jinja chat templates of the Python stack produce
// them: str() (`| string`, `~`, `{{ x }}`), repr() inside containers, json.dumps (HF's `tojson`:
// ensure_ascii=False, separators ", " and ": ", keys in insertion order) and str.strip()
// (`| trim`). Values come as nlohmann::ordered_json so objects keep the order of the input row.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nemotron::data {

using OrderedJson = nlohmann::ordered_json;

// repr(float): shortest round-trip digits; fixed notation for exponents in [-4, 16), else
// "1e+16" / "1e-05"; "1.0" for integral values.
std::string python_float_repr(double v);
// str(value): strings as they are, None, True/False, ints, float repr, lists/dicts as repr.
std::string python_str(const OrderedJson& v);
// repr(value): strings quoted as Python quotes them.
std::string python_repr(const OrderedJson& v);
// json.dumps(value, ensure_ascii=False).
std::string python_json_dumps(const OrderedJson& v);
// Truthiness: None, false, 0, "", [] and {} are false.
bool python_truthy(const OrderedJson& v);
// str.strip(): removes leading and trailing whitespace (ASCII and the Unicode spaces Python
// counts, encoded in UTF-8).
std::string python_strip(std::string_view s);
std::string python_lstrip(std::string_view s);  // str.lstrip()
std::string python_rstrip(std::string_view s);  // str.rstrip()
// The length in bytes of the whitespace character (as str.isspace counts it) at s[i], 0 if none.
size_t python_space_length(std::string_view s, size_t i);

}  // namespace nemotron::data
