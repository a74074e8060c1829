#include "data/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/tokenizer_utf8.h"

namespace nemotron::data {

namespace {

// Unicode White_Space, as class items (usable inside [...]).
constexpr const char* kWhiteSpaceItems =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// One match-data block per thread, big enough for the whole-match offsets (all we read).
struct MatchData {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(md); }
};

pcre2_match_data* thread_match_data() {
  thread_local MatchData m;
  NM_CHECK(m.md != nullptr, "pcre2_match_data_create failed");
  return m.md;
}

}  // namespace

std::string pcre2_onig_compatible(const std::string& p) {
  const std::string ws = kWhiteSpaceItems;
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'Q') {  // quoted literal text up to \E: copy as is
        const size_t end = p.find("\\E", i + 2);
        const size_t stop = end == std::string::npos ? p.size() : end + 2;
        out.append(p, i, stop - i);
        i = stop - 1;
        continue;
      }
      if (e == 's') {
        out += in_class ? ws : "[" + ws + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + ws + "]";
      } else {  // any other escape (including \S inside a class) stays as written
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (!in_class) {
      out += c;
      if (c == '[') {  // a class opens; a leading '^' and then a leading ']' are part of it
        in_class = true;
        if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
        if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      }
      continue;
    }
    if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX item [:name:] inside a class
      const size_t end = p.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(p, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (c == ']') in_class = false;
    out += c;
  }
  return out;
}

PretokRegex::PretokRegex(const std::string& pattern, bool literal, const std::string& source,
                         const std::string& key)
    : pattern_(pattern), literal_(literal) {
  const std::string compiled = literal ? pattern : pcre2_onig_compatible(pattern);
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options, &err,
                                   &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw_config_error(source, key,
                       fmt::format("invalid regex {}: {}", describe_value(pattern), reinterpret_cast<char*>(msg)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
}

void PretokRegex::find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  auto* code = static_cast<const pcre2_code*>(code_.get());
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= n) {
    int rc = pcre2_match(code, subject, n, start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking: the interpreter keeps its stack on the heap
      rc = pcre2_match(code, subject, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(fmt::format("pre-tokenizer regex {}: matching failed at byte {}: {}", describe_value(pattern_),
                              start, reinterpret_cast<char*>(msg)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {  // empty match touching the previous one: step on
      start += start < n ? utf8_char_len(static_cast<uint8_t>(text[start])) : 1;
      continue;
    }
    out.emplace_back(static_cast<uint32_t>(s), static_cast<uint32_t>(e));
    start = e;
    have_last = true;
    last_end = e;
  }
}

}  // namespace nemotron::data
