#include "data/jinja/lexer.h"

#include <cstring>

#include <fmt/format.h>

#include "data/jinja/value.h"
#include "data/python_format.h"
#include "data/tokenizer_utf8.h"

namespace nemotron::data::jinja {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's body decoded as jinja2 decodes it (Python's unicode-escape codec): the
// usual escapes, \xhh, \uhhhh, \Uhhhhhhhh, octal; an unknown escape keeps its backslash.
std::string decode_string(std::string_view body, int line) {
  std::string out;
  for (size_t k = 0; k < body.size(); ++k) {
    if (body[k] != '\\' || k + 1 == body.size()) {
      out += body[k];
      continue;
    }
    const char c = body[++k];
    switch (c) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t d = 0; d < digits; ++d) {
          const int h = k + 1 + d < body.size() ? hex_digit(body[k + 1 + d]) : -1;
          if (h < 0) throw TemplateError(fmt::format("truncated \\{} escape in a string literal", c), line);
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10ffff) throw TemplateError("illegal Unicode character in a string literal", line);
        utf8_append(out, cp);
        k += digits;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = static_cast<uint32_t>(c - '0');
          for (int d = 0; d < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++d)
            cp = cp * 8 + static_cast<uint32_t>(body[++k] - '0');
          utf8_append(out, cp);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = python_space_length(s, i);
    if (!n) break;
    i += n;
  }
  return i;
}

bool all_space(std::string_view s) { return skip_space(s, 0) == s.size(); }

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// jinja2 normalises \r\n and \r to \n and drops one trailing newline (keep_trailing_newline off).
std::string normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos_), line_);
        line_ += count_lines(std::string_view(src_).substr(pos_));
        pos_ = src_.size();
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
      std::string text = src_.substr(pos_, open - pos_);
      const int text_line = line_;
      line_ += count_lines(text);
      if (sign == '-') {
        text = python_rstrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: spaces between the line start and a block or comment tag vanish.
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting_) && l_pos < text.size() && all_space(std::string_view(text).substr(l_pos)))
          text.resize(l_pos);
      }
      emit_text(std::move(text), text_line);
      pos_ = open + 2 + (sign ? 1 : 0);
      if (kind == '#') comment();
      else if (kind == '%' && raw_begins()) raw();
      else tag(kind == '{');
    }
    out_.push_back({Token::Type::eof, "", 0, 0, line_});
    return std::move(out_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t k = src_.find('{', from); k != std::string::npos; k = src_.find('{', k + 1))
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return std::string::npos;
  }

  void emit_text(std::string text, int line) {
    if (!text.empty()) out_.push_back({Token::Type::text, std::move(text), 0, 0, line});
  }

  // After a closing "%}" / "#}" / "}}" at pos_ - close_len: the whitespace control that follows.
  void after_close(char sign, bool block) {
    if (sign == '-') {
      const size_t end = skip_space(src_, pos_);
      line_ += count_lines(std::string_view(src_).substr(pos_, end - pos_));
      pos_ = end;
    } else if (sign != '+' && block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;  // trim_blocks
      ++line_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void comment() {
    const int start = line_;
    for (size_t k = pos_; k + 1 < src_.size(); ++k) {
      if (src_[k] != '#' || src_[k + 1] != '}') continue;
      const char sign = k > pos_ && (src_[k - 1] == '-' || src_[k - 1] == '+') ? src_[k - 1] : 0;
      line_ += count_lines(std::string_view(src_).substr(pos_, k - pos_));
      pos_ = k + 2;
      after_close(sign, true);
      return;
    }
    throw TemplateError("unterminated comment", start);
  }

  // "{% raw %}" (with optional whitespace control) at the tag body starting at pos_.
  bool raw_begins() {
    const size_t k = skip_space(src_, pos_);
    return src_.compare(k, 3, "raw") == 0 && (k + 3 == src_.size() || (!is_name_start(src_[k + 3]) && !is_digit(src_[k + 3])));
  }

  void raw() {
    const int start = line_;
    size_t k = skip_space(src_, pos_) + 3;
    k = skip_space(src_, k);
    const char open_sign = k < src_.size() && src_[k] == '-' ? '-' : 0;
    if (src_.compare(k + (open_sign ? 1 : 0), 2, "%}") != 0) throw TemplateError("expected '%}' after 'raw'", start);
    pos_ = k + (open_sign ? 1 : 0) + 2;
    if (open_sign) pos_ = skip_space(src_, pos_);
    for (size_t e = src_.find("{%", pos_); e != std::string::npos; e = src_.find("{%", e + 2)) {
      const char sign = e + 2 < src_.size() && (src_[e + 2] == '-' || src_[e + 2] == '+') ? src_[e + 2] : 0;
      size_t q = skip_space(src_, e + 2 + (sign ? 1 : 0));
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = skip_space(src_, q + 6);
      const char close_sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (src_.compare(q + (close_sign ? 1 : 0), 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, e - pos_);
      if (sign == '-') text = python_rstrip(text);
      emit_text(std::move(text), line_);
      line_ += count_lines(std::string_view(src_).substr(pos_, q - pos_));
      pos_ = q + (close_sign ? 1 : 0) + 2;
      after_close(close_sign, true);
      return;
    }
    throw TemplateError("unterminated {% raw %} block", start);
  }

  // The tokens of a {{ }} or {% %} tag up to its closer; brackets suspend the closer, as in jinja2.
  void tag(bool variable) {
    out_.push_back({variable ? Token::Type::var_begin : Token::Type::block_begin, "", 0, 0, line_});
    const int start = line_;
    int depth = 0;
    while (true) {
      const size_t k = skip_space(src_, pos_);
      line_ += count_lines(std::string_view(src_).substr(pos_, k - pos_));
      pos_ = k;
      if (pos_ >= src_.size()) throw TemplateError(variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'", start);
      if (depth == 0) {
        const char* close = variable ? "}}" : "%}";
        const char sign = src_[pos_] == '-' || (!variable && src_[pos_] == '+') ? src_[pos_] : 0;
        if (src_.compare(pos_ + (sign ? 1 : 0), 2, close) == 0) {
          pos_ += (sign ? 1 : 0) + 2;
          out_.push_back({variable ? Token::Type::var_end : Token::Type::block_end, "", 0, 0, line_});
          after_close(sign, !variable);
          return;
        }
      }
      const char c = src_[pos_];
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
        out_.push_back({Token::Type::name, src_.substr(pos_, e - pos_), 0, 0, line_});
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else if (is_digit(c)) {
        number();
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* t : kTwo)
          if (src_.compare(pos_, 2, t) == 0) op = t;
        if (op.size() == 1 && !std::strchr("+-*/%~<>=()[]{},.:|;", c))
          throw TemplateError(fmt::format("unexpected char '{}'", c), line_);
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        out_.push_back({Token::Type::op, op, 0, 0, line_});
        pos_ += op.size();
      }
    }
  }

  void string_literal(char quote) {
    size_t e = pos_ + 1;
    while (e < src_.size() && src_[e] != quote) e += src_[e] == '\\' ? 2 : 1;
    if (e >= src_.size()) throw TemplateError("unterminated string literal", line_);
    out_.push_back({Token::Type::string, decode_string(std::string_view(src_).substr(pos_ + 1, e - pos_ - 1), line_), 0, 0, line_});
    line_ += count_lines(std::string_view(src_).substr(pos_, e - pos_));
    pos_ = e + 1;
  }

  // Integers and floats as jinja2 reads them (underscores between digits allowed).
  void number() {
    size_t e = pos_;
    const auto digits = [&] {
      while (e < src_.size() && (is_digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1])))) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && is_digit(src_[x])) {
        e = x;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    Token t{is_float ? Token::Type::floating : Token::Type::integer, text, 0, 0, line_};
    try {
      if (is_float) t.f = std::stod(text);
      else t.i = std::stoll(text);
    } catch (const std::exception&) {
      throw TemplateError(fmt::format("number literal {} out of range", text), line_);
    }
    out_.push_back(std::move(t));
    pos_ = e;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize(source)).run(); }

}  // namespace nemotron::data::jinja
