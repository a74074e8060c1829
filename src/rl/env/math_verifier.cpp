#include "rl/env/math_verifier.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace nemotron::rl::env {

namespace {

using i128 = __int128;

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t at = s.find(from); at != std::string::npos; pos = at + from.size(), at = s.find(from, pos))
    out.append(s, pos, at - pos).append(to);
  out.append(s, pos);
  s = std::move(out);
}

// Index just past the brace group opening at s[open] == '{'; npos when it never closes.
size_t close_brace(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {  // \{ and \} are literal braces
      ++i;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

// Removes one layer of outer math delimiters ($$..$$, $..$, \(..\), \[..\]); true when it did.
bool strip_delimiters(std::string& s) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    if (s.size() >= open.size() + close.size() && s.starts_with(open) && s.ends_with(close)) {
      s = trim(std::string_view(s).substr(open.size(), s.size() - open.size() - close.size()));
      return true;
    }
    return false;
  };
  return wrapped("$$", "$$") || wrapped("\\(", "\\)") || wrapped("\\[", "\\]") || wrapped("$", "$");
}

// `\cmd{X}` -> `X` for every occurrence of the command.
void unwrap_command(std::string& s, std::string_view cmd) {
  for (size_t at = s.find(cmd); at != std::string::npos; at = s.find(cmd, at)) {
    size_t open = at + cmd.size();
    while (open < s.size() && s[open] == ' ') ++open;
    if (open >= s.size() || s[open] != '{') {
      at += cmd.size();
      continue;
    }
    const size_t end = close_brace(s, open);
    if (end == std::string::npos) return;
    s = s.substr(0, at) + s.substr(open + 1, end - open - 2) + s.substr(end);
  }
}

// An exact rational p/q (q > 0, reduced). Parts stay below 1e18 so that cross products fit.
struct Rational {
  i128 p = 0, q = 1;
};

constexpr i128 kPartLimit = static_cast<i128>(1000000000000000000LL);

std::optional<Rational> make_rational(i128 p, i128 q) {
  if (q == 0) return std::nullopt;
  if (q < 0) p = -p, q = -q;
  i128 a = p < 0 ? -p : p, b = q;
  while (b != 0) {
    const i128 t = a % b;
    a = b, b = t;
  }
  if (a > 1) p /= a, q /= a;
  if (p >= kPartLimit || p <= -kPartLimit || q >= kPartLimit) return std::nullopt;
  return Rational{p, q};
}

std::optional<Rational> parse_rational(std::string_view s);

// A decimal: digits with optional ",ddd" thousands groups, an optional fraction part; no sign.
std::optional<Rational> parse_decimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  i128 p = 0, q = 1;
  size_t i = 0, digits = 0, group = 0;
  bool grouped = false;
  for (; i < s.size() && (is_digit(s[i]) || s[i] == ','); ++i) {
    if (s[i] == ',') {  // a thousands separator: digits before it and exactly three after
      if (i == 0 || (grouped && group != 3) || (!grouped && group > 3)) return std::nullopt;
      grouped = true, group = 0;
      continue;
    }
    if (++digits > 18) return std::nullopt;
    p = p * 10 + (s[i] - '0');
    ++group;
  }
  if (grouped && group != 3) return std::nullopt;
  if (i < s.size() && s[i] == '.') {
    ++i;
    size_t frac = 0;
    for (; i < s.size() && is_digit(s[i]); ++i, ++frac) {
      if (++digits > 18) return std::nullopt;
      p = p * 10 + (s[i] - '0'), q *= 10;
    }
    if (frac == 0 && digits == 0) return std::nullopt;  // "." alone
  }
  if (digits == 0 || i != s.size()) return std::nullopt;
  return make_rational(p, q);
}

std::optional<Rational> divide(std::optional<Rational> a, std::optional<Rational> b) {
  if (!a || !b || b->p == 0) return std::nullopt;
  // (a.p / a.q) / (b.p / b.q); the products of two parts below 1e18 fit in 128 bits.
  return make_rational(a->p * b->q, a->q * b->p);
}

// One argument of \frac: "{...}" or a single character ("\frac12").
std::optional<std::string_view> frac_argument(std::string_view s, size_t& at) {
  if (at >= s.size()) return std::nullopt;
  if (s[at] == '{') {
    const size_t end = close_brace(s, at);
    if (end == std::string::npos) return std::nullopt;
    std::string_view arg = s.substr(at + 1, end - at - 2);
    at = end;
    return arg;
  }
  return s.substr(at++, 1);
}

std::optional<Rational> parse_rational(std::string_view s) {
  while (s.size() >= 2 && s.front() == '{' && close_brace(s, 0) == s.size()) s = s.substr(1, s.size() - 2);
  while (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  if (s.empty()) return std::nullopt;
  if (s[0] == '-' || s[0] == '+') {
    auto r = parse_rational(s.substr(1));
    if (r && s[0] == '-') r->p = -r->p;
    return r;
  }
  if (s.starts_with("\\frac")) {
    size_t at = 5;
    auto num = frac_argument(s, at);
    auto den = num ? frac_argument(s, at) : std::nullopt;
    if (!den || at != s.size()) return std::nullopt;
    return divide(parse_rational(*num), parse_rational(*den));
  }
  const size_t slash = s.find('/');
  if (slash != std::string_view::npos) return divide(parse_rational(s.substr(0, slash)), parse_rational(s.substr(slash + 1)));
  return parse_decimal(s);
}

// Length of the number (sign, digits, ",ddd" thousands groups, decimals) that starts `s`; 0 when none.
size_t number_prefix(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const size_t start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == start) return 0;
  // A comma followed by exactly three digits continues the number ("1,234"); "1,2" is a list.
  while (i + 3 < s.size() && s[i] == ',' && is_digit(s[i + 1]) && is_digit(s[i + 2]) && is_digit(s[i + 3]) &&
         (i + 4 >= s.size() || !is_digit(s[i + 4])))
    i += 4;
  if (i + 1 < s.size() && s[i] == '.' && is_digit(s[i + 1])) {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i;
}

// "42 apples", "5cm", "3 m^2": a number followed only by a unit word -> the number.
std::string strip_trailing_unit(const std::string& s) {
  const size_t n = number_prefix(s);
  if (n == 0 || n == s.size()) return s;
  size_t i = n;
  const bool spaced = is_space(s[i]);
  while (i < s.size() && is_space(s[i])) ++i;
  const size_t word = i;
  while (i < s.size() && (is_alpha(s[i]) || is_space(s[i]) || s[i] == '^' || is_digit(s[i]) || s[i] == '/' || s[i] == '.'))
    ++i;
  if (i != s.size() || word == s.size() || !is_alpha(s[word])) return s;
  // A single letter glued to the number ("2x") is algebra, not a unit.
  if (!spaced && (word + 1 >= s.size() || !is_alpha(s[word + 1]))) return s;
  return s.substr(0, n);
}

}  // namespace

std::optional<std::string> extract_boxed(std::string_view text) {
  size_t best = std::string_view::npos;
  std::string_view cmd;
  for (std::string_view c : {std::string_view("\\boxed"), std::string_view("\\fbox")}) {
    const size_t at = text.rfind(c);
    if (at != std::string_view::npos && (best == std::string_view::npos || at > best)) best = at, cmd = c;
  }
  if (best == std::string_view::npos) return std::nullopt;
  size_t at = best + cmd.size();
  while (at < text.size() && text[at] == ' ') ++at;
  if (at < text.size() && text[at] == '{') {
    const size_t end = close_brace(text, at);
    if (end == std::string_view::npos) return std::nullopt;
    return trim(text.substr(at + 1, end - at - 2));
  }
  if (at == best + cmd.size()) return std::nullopt;  // "\boxedfoo": another command
  size_t end = at;  // "\boxed 5": up to the next space or '$'
  while (end < text.size() && !is_space(text[end]) && text[end] != '$') ++end;
  if (end == at) return std::nullopt;
  return std::string(text.substr(at, end - at));
}

std::optional<std::string> extract_hash_answer(std::string_view text) {
  const size_t at = text.rfind("####");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + 4);
  rest = rest.substr(0, rest.find('\n'));
  std::string out = trim(rest);
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<std::string> extract_math_answer(std::string_view response) {
  if (auto boxed = extract_boxed(response)) return boxed;
  if (auto hash = extract_hash_answer(response)) return hash;
  // "... the answer is 42." / "Final answer: 42": the rest of that line.
  std::string lower(response);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view key : {std::string_view("answer is"), std::string_view("answer:")}) {
    const size_t at = lower.rfind(key);
    if (at == std::string::npos) continue;
    std::string_view rest = response.substr(at + key.size());
    rest = rest.substr(0, rest.find('\n'));
    std::string out = trim(rest);
    while (!out.empty() && (out.back() == '.' || out.back() == ',' || out.back() == ';')) out.pop_back();
    if (!out.empty()) return out;
  }
  // The last number of the response.
  std::optional<std::string> last;
  for (size_t i = 0; i < response.size();) {
    const bool starts = is_digit(response[i]) || ((response[i] == '-' || response[i] == '.') && i + 1 < response.size() &&
                                                  is_digit(response[i + 1]));
    if (!starts || (i > 0 && (is_digit(response[i - 1]) || is_alpha(response[i - 1])))) {
      ++i;
      continue;
    }
    size_t n = response[i] == '.' ? 0 : number_prefix(response.substr(i));
    if (n == 0) {  // ".5"
      n = 1;
      while (i + n < response.size() && is_digit(response[i + n])) ++n;
    }
    last = std::string(response.substr(i, n));
    i += n;
  }
  return last;
}

std::string normalize_expected_answer(std::string_view expected) {
  std::string s = trim(expected);
  while (strip_delimiters(s)) {
  }
  if (s.starts_with("\\boxed")) {
    if (auto inner = extract_boxed(s); inner && s.ends_with('}')) s = *inner;
  }
  return s;
}

std::string normalize_answer(std::string_view answer) {
  std::string s = normalize_expected_answer(answer);
  replace_all(s, "\xE2\x88\x92", "-");  // U+2212 MINUS SIGN
  replace_all(s, "\\dfrac", "\\frac");
  replace_all(s, "\\tfrac", "\\frac");
  replace_all(s, "\\left", "");
  replace_all(s, "\\right", "");
  for (std::string_view space : {"\\!", "\\,", "\\;", "\\:", "\\quad", "\\qquad", "\\ ", "~"}) replace_all(s, space, " ");
  for (std::string_view cmd : {"\\text", "\\textbf", "\\mathrm", "\\mathbf", "\\mbox", "\\operatorname"}) unwrap_command(s, cmd);
  replace_all(s, "{,}", ",");
  for (std::string_view sign : {"^{\\circ}", "^\\circ", "\\circ", "\\degree", "\\%", "%", "\\$", "$", "\xC2\xB0"})
    replace_all(s, sign, "");
  s = trim(s);
  while (!s.empty() && s.back() == '.') s.pop_back();  // a sentence's full stop
  // "x = 5", "k=3": the value of a single named variable.
  size_t eq = s.find('=');
  if (eq != std::string::npos && s.find('=', eq + 1) == std::string::npos) {
    const std::string lhs = trim(std::string_view(s).substr(0, eq));
    bool name = !lhs.empty() && is_alpha(lhs[0]);
    for (char c : lhs) name = name && (is_alpha(c) || is_digit(c) || c == '_' || c == '\\');
    if (name) s = trim(std::string_view(s).substr(eq + 1));
  }
  s = strip_trailing_unit(s);
  std::string out;
  for (char c : s)
    if (!is_space(c)) out.push_back(c);
  return out;
}

bool math_answers_equal(std::string_view predicted, std::string_view expected) {
  const std::string a = normalize_answer(predicted), b = normalize_answer(expected);
  if (a.empty() || b.empty()) return false;
  const auto x = parse_rational(a), y = parse_rational(b);
  if (x && y) return x->p * y->q == y->p * x->q;
  return a == b;
}

MathVerdict verify_math_answer(std::string_view response, std::string_view expected_answer) {
  MathVerdict v;
  v.extracted = extract_math_answer(response);
  if (v.extracted && math_answers_equal(*v.extracted, normalize_expected_answer(expected_answer))) v.reward = 1.0;
  return v;
}

}  // namespace nemotron::rl::env
