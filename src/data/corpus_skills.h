// The skills of the bundled corpus: small arithmetic problems a tiny model can visibly learn,
// each with a question, a worked solution ending in "The answer is N." and a plain-text form
// for pretraining, so one problem feeds pretraining, SFT and RL alike (synthetic_corpus.h).
// Problem i of a seed is a pure function of (seed, i): counter-based Philox draws, nothing shared.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nemotron::data {

enum class Skill {
  addition,         // "17 + 25 = 42."; multi-digit solutions are worked column by column
  subtraction,      // "42 - 17 = 25."; the solution checks by adding back
  multiplication,   // a x one digit, split by place value: "23 * 4 = 20 * 4 + 3 * 4 = 80 + 12 = 92."
  column_addition,  // the worked sum with carries written out is itself the pretraining text
  word_problem,     // "Alice has 3 apples. She buys 4 more, so she has 7 apples. ..."
};
inline constexpr Skill kAllSkills[] = {Skill::addition, Skill::subtraction, Skill::multiplication,
                                       Skill::column_addition, Skill::word_problem};
const char* skill_name(Skill s);
std::optional<Skill> skill_from_name(std::string_view name);

struct SkillKnobs {
  int min_digits = 1;  // operand digits, 1..9
  int max_digits = 3;
  int max_steps = 3;   // word problems: operations, 1..8
  std::vector<Skill> skills = {std::begin(kAllSkills), std::end(kAllSkills)};
};

struct Problem {
  int64_t index = 0;
  Skill skill = Skill::addition;
  std::string question;  // the user turn / RL prompt
  std::string solution;  // the assistant turn: worked steps, then "The answer is N."
  std::string text;      // the pretraining form (a fact, a worked sum, a story)
  int64_t answer = 0;
};

// Problem `index` of the sequence drawn from `seed`.
Problem make_problem(uint64_t seed, int64_t index, const SkillKnobs& knobs);

// The worked sum with carries, column by column ("Ones: 7 + 8 = 15. Write 5, carry 1.").
std::string worked_column_sum(int64_t a, int64_t b);

inline constexpr std::string_view kAnswerPrefix = "The answer is ";
// The integer after the last "The answer is " in a response; nullopt when there is none.
std::optional<int64_t> extract_final_answer(std::string_view response);

}  // namespace nemotron::data
