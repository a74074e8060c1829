// The regex engine of the pre-tokenizers: PCRE2 (UTF-8, Unicode properties, JIT) made to behave
// like the Oniguruma engine Hugging Face `tokenizers` uses: `\s`/`\S` mean Unicode White_Space
// (PCRE2 alone also counts U+180E), and matches are iterated the way the `onig` crate does (an
// empty match right after the previous match is skipped by one character).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nemotron::data {

class PretokRegex {
 public:
  // Compiles `pattern` (taken literally when `literal`). A pattern PCRE2 rejects is an InputError
  // "<source>: <key>: invalid regex ...: <reason> at offset N".
  PretokRegex(const std::string& pattern, bool literal, const std::string& source, const std::string& key);

  const std::string& pattern() const { return pattern_; }
  bool literal() const { return literal_; }

  // Appends the successive non-overlapping matches in `text` as [begin, end) byte offsets.
  // `text` must be valid UTF-8 (not re-checked). Thread-safe.
  void find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

 private:
  std::string pattern_;
  bool literal_;
  std::shared_ptr<void> code_;  // pcre2_code_8, freed by pcre2_code_free
};

// `pattern` with every `\s` / `\S` (outside `\Q...\E`) spelled as the White_Space class, so PCRE2
// matches what Oniguruma matches. Exposed for tests.
std::string pcre2_onig_compatible(const std::string& pattern);

}  // namespace nemotron::data
