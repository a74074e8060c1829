// Math answer verification for RL rewards (reference/data-formats.md §7.4): extract the model's
// final answer and compare it with the expected one, giving reward 1 or 0. It follows what NeMo
// RL's math environment and NeMo Gym's math_with_judge get from Hugging Face math-verify on the
// common cases: the last \boxed{} answer (nested braces), else the GSM8K "#### 42" line, else (as
// math-verify's ExprExtractionConfig on the prediction does) the number after the last
// "answer is", else the last number of the response. Answers are equal when both read as exact
// rationals (integers, decimals, 1,234 thousands separators, a/b, \frac{a}{b}, signs) of equal
// value, else when their normalised LaTeX strings are equal. No symbolic algebra: "2x+1" equals
// "1+2x" only in math-verify, not here.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace nemotron::rl::env {

// The content of the last \boxed{...} (or \fbox{...}) in `text`, braces balanced; nullopt when
// there is none or its braces never close. "\boxed 5" (no braces) gives "5".
std::optional<std::string> extract_boxed(std::string_view text);

// The rest of the line after the last "####" (GSM8K's answer form), trimmed; nullopt when absent
// or empty.
std::optional<std::string> extract_hash_answer(std::string_view text);

// The model's final answer in `response`, by the rules above; nullopt when nothing is found.
std::optional<std::string> extract_math_answer(std::string_view response);

// The expected answer as the verifiers read it: outer $...$, \(...\), \[...\] removed, and the
// content of a \boxed{} taken when the whole answer is boxed.
std::string normalize_expected_answer(std::string_view expected);

// The answer with the LaTeX that does not change its value removed: outer math delimiters,
// \left/\right, \dfrac/\tfrac -> \frac, spacing commands, \text{}/\mathrm{} wrappers, a leading
// "x =", trailing units and currency/percent/degree signs after a number, whitespace.
std::string normalize_answer(std::string_view answer);

// True when the two answers are equal (numerically when both are numbers, else as normalised
// strings).
bool math_answers_equal(std::string_view predicted, std::string_view expected);

struct MathVerdict {
  double reward = 0;                     // 1.0 when the extracted answer equals the expected one
  std::optional<std::string> extracted;  // what was read from the response (nullopt: nothing)
};

// Scores one response against its expected answer; never throws on any text.
MathVerdict verify_math_answer(std::string_view response, std::string_view expected_answer);

}  // namespace nemotron::rl::env
