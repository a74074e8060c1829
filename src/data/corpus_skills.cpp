#include "data/corpus_skills.h"

#include <array>

#include "core/error.h"
#include "core/rng.h"

namespace nemotron::data {

namespace {

constexpr uint64_t kProblemStream = 0x636f72707573ull;  // "corpus"
constexpr uint64_t kWordsPerProblem = 256;

// The draws of one problem: words [index * 256, index * 256 + 256) of the corpus stream.
class Draws {
 public:
  Draws(uint64_t seed, int64_t index)
      : rng_(seed, kProblemStream), base_(static_cast<uint64_t>(index) * kWordsPerProblem) {}
  // Uniform in [lo, hi] (64 random bits reduced mod the range: bias below 2^-30 for any range here).
  int64_t range(int64_t lo, int64_t hi) {
    NM_CHECK(next_ + 2 <= kWordsPerProblem, "problem draws exhausted");
    const uint64_t bits = (static_cast<uint64_t>(rng_.bits(base_ + next_)) << 32) | rng_.bits(base_ + next_ + 1);
    next_ += 2;
    return lo + static_cast<int64_t>(bits % static_cast<uint64_t>(hi - lo + 1));
  }
  template <class T, size_t N>
  const T& pick(const std::array<T, N>& items) { return items[static_cast<size_t>(range(0, N - 1))]; }

 private:
  Philox rng_;
  uint64_t base_, next_ = 0;
};

int64_t pow10(int d) {
  int64_t p = 1;
  for (int i = 0; i < d; ++i) p *= 10;
  return p;
}

// A number of `digits` digits (one digit: 0..9).
int64_t operand(Draws& dr, int digits) {
  return digits == 1 ? dr.range(0, 9) : dr.range(pow10(digits - 1), pow10(digits) - 1);
}
int64_t operand(Draws& dr, const SkillKnobs& k) {
  return operand(dr, static_cast<int>(dr.range(k.min_digits, k.max_digits)));
}

std::string answer_line(int64_t answer) { return fmt::format("{}{}.", kAnswerPrefix, answer); }

constexpr std::array<const char*, 10> kPlaces = {"Ones", "Tens", "Hundreds", "Thousands", "Ten-thousands",
                                                 "Hundred-thousands", "Millions", "Ten-millions", "Hundred-millions",
                                                 "Billions"};

// "Add 487 and 358 column by column.\nOnes: 7 + 8 = 15. Write 5, carry 1.\n...\nSo 487 + 358 = 845."
}  // namespace

std::string worked_column_sum(int64_t a, int64_t b) {
  std::string out = fmt::format("Add {} and {} column by column.\n", a, b);
  int columns = 1;
  while (std::max(a, b) >= pow10(columns)) ++columns;
  int64_t carry = 0;
  for (int col = 0; col < columns; ++col) {
    std::vector<int64_t> addends;
    for (int64_t x : {a, b})
      if (col == 0 || x >= pow10(col)) addends.push_back(x / pow10(col) % 10);
    if (carry) addends.push_back(carry);
    int64_t sum = 0;
    std::string expr;
    for (int64_t t : addends) {
      sum += t;
      expr += fmt::format("{}{}", expr.empty() ? "" : " + ", t);
    }
    out += addends.size() > 1 ? fmt::format("{}: {} = {}.", kPlaces[col], expr, sum)
                              : fmt::format("{}: {}.", kPlaces[col], expr);
    carry = sum / 10;
    out += carry ? fmt::format(" Write {}, carry {}.\n", sum % 10, carry) : fmt::format(" Write {}.\n", sum);
  }
  if (carry) out += fmt::format("{}: carry {}. Write {}.\n", kPlaces[columns], carry, carry);
  return out + fmt::format("So {} + {} = {}.", a, b, a + b);
}

namespace {

Problem addition(Draws& dr, const SkillKnobs& k, bool worked_text) {
  const int64_t a = operand(dr, k), b = operand(dr, k), c = a + b;
  Problem p;
  p.answer = c;
  p.question = fmt::format("What is {} + {}?", a, b);
  const std::string fact = fmt::format("{} + {} = {}.", a, b, c);
  const std::string worked = a < 10 && b < 10 ? fact : worked_column_sum(a, b);
  p.text = worked_text ? worked : fact;
  p.solution = worked + "\n" + answer_line(c);
  return p;
}

Problem subtraction(Draws& dr, const SkillKnobs& k) {
  int64_t a = operand(dr, k), b = operand(dr, k);
  if (a < b) std::swap(a, b);
  Problem p;
  p.answer = a - b;
  p.question = fmt::format("What is {} - {}?", a, b);
  p.text = fmt::format("{} - {} = {}.", a, b, a - b);
  p.solution = fmt::format("{} - {} = {}, since {} + {} = {}.\n{}", a, b, a - b, a - b, b, a, answer_line(a - b));
  return p;
}

Problem multiplication(Draws& dr, const SkillKnobs& k) {
  const int64_t a = operand(dr, k), b = dr.range(2, 9), c = a * b;
  // Place-value parts of a, largest first, zeros left out: 105 -> 100, 5.
  std::vector<int64_t> parts;
  for (int col = 9; col >= 0; --col) {
    const int64_t digit = a / pow10(col) % 10;
    if (digit) parts.push_back(digit * pow10(col));
  }
  std::string text = fmt::format("{} * {} = ", a, b);
  if (parts.size() > 1) {
    std::string split, products;
    for (int64_t part : parts) {
      split += fmt::format("{}{} * {}", split.empty() ? "" : " + ", part, b);
      products += fmt::format("{}{}", products.empty() ? "" : " + ", part * b);
    }
    text += split + " = " + products + " = ";
  }
  text += fmt::format("{}.", c);
  Problem p;
  p.answer = c;
  p.question = fmt::format("What is {} * {}?", a, b);
  p.text = text;
  p.solution = text + "\n" + answer_line(c);
  return p;
}

struct Person {
  const char* name;
  const char* pronoun;  // "She" / "He"
};
constexpr std::array<Person, 10> kPeople = {{{"Alice", "She"}, {"Bob", "He"}, {"Carol", "She"}, {"Dan", "He"},
                                             {"Eve", "She"}, {"Frank", "He"}, {"Grace", "She"}, {"Henry", "He"},
                                             {"Ivy", "She"}, {"Jack", "He"}}};
struct Item {
  const char* one;
  const char* many;
};
constexpr std::array<Item, 10> kItems = {{{"apple", "apples"}, {"pear", "pears"}, {"marble", "marbles"},
                                          {"book", "books"}, {"coin", "coins"}, {"sticker", "stickers"},
                                          {"pencil", "pencils"}, {"cookie", "cookies"}, {"shell", "shells"},
                                          {"card", "cards"}}};

Problem word_problem(Draws& dr, const SkillKnobs& k) {
  const Person& who = dr.pick(kPeople);
  const Person* other = &dr.pick(kPeople);
  if (other == &who) other = &kPeople[(static_cast<size_t>(other - kPeople.data()) + 1) % kPeople.size()];
  const Item& item = dr.pick(kItems);
  auto count = [&](int64_t n) { return fmt::format("{} {}", n, n == 1 ? item.one : item.many); };
  std::string pronoun = who.pronoun, lower = pronoun == "She" ? "she" : "he";
  int64_t have = operand(dr, k);
  const int64_t steps = dr.range(1, k.max_steps);
  std::string question = fmt::format("{} has {}.", who.name, count(have));
  std::string text = question;
  std::string solution = fmt::format("{} starts with {}.", who.name, count(have));
  for (int64_t s = 0; s < steps; ++s) {
    const bool gain = have == 0 || dr.range(0, 1) == 0;
    const int64_t n = gain ? std::max<int64_t>(1, operand(dr, k)) : dr.range(1, have);
    std::string action;
    if (gain) {
      const int64_t kind = dr.range(0, 2);
      action = kind == 0 ? fmt::format("buys {} more", n)
               : kind == 1 ? fmt::format("finds {} more", n)
                           : fmt::format("gets {} more from {}", n, other->name);
    } else {
      const int64_t kind = dr.range(0, 2);
      action = kind == 0 ? fmt::format("gives {} to {}", n, other->name)
               : kind == 1 ? fmt::format("loses {}", n)
                           : fmt::format("sells {}", n);
    }
    const int64_t before = have;
    have = gain ? have + n : have - n;
    const std::string subject = s == 0 ? pronoun : "Then " + lower;
    question += fmt::format(" {} {}.", subject, action);
    text += fmt::format(" {} {}, so {} has {}.", subject, action, lower, count(have));
    solution += fmt::format("\n{} {}: {} {} {} = {}.", pronoun, action, before, gain ? "+" : "-", n, have);
  }
  Problem p;
  p.answer = have;
  p.question = question + fmt::format(" How many {} does {} have now?", item.many, who.name);
  p.text = text;
  p.solution = solution + "\n" + answer_line(have);
  return p;
}

}  // namespace

const char* skill_name(Skill s) {
  switch (s) {
    case Skill::addition: return "addition";
    case Skill::subtraction: return "subtraction";
    case Skill::multiplication: return "multiplication";
    case Skill::column_addition: return "column_addition";
    case Skill::word_problem: return "word_problem";
  }
  return "?";
}

std::optional<Skill> skill_from_name(std::string_view name) {
  for (Skill s : kAllSkills)
    if (name == skill_name(s)) return s;
  return std::nullopt;
}

Problem make_problem(uint64_t seed, int64_t index, const SkillKnobs& knobs) {
  NM_CHECK(!knobs.skills.empty() && index >= 0, "problem {} with {} skills", index, knobs.skills.size());
  Draws dr(seed, index);
  const Skill skill = knobs.skills[static_cast<size_t>(dr.range(0, static_cast<int64_t>(knobs.skills.size()) - 1))];
  Problem p;
  switch (skill) {
    case Skill::addition: p = addition(dr, knobs, false); break;
    case Skill::column_addition: p = addition(dr, knobs, true); break;
    case Skill::subtraction: p = subtraction(dr, knobs); break;
    case Skill::multiplication: p = multiplication(dr, knobs); break;
    case Skill::word_problem: p = word_problem(dr, knobs); break;
  }
  p.index = index;
  p.skill = skill;
  return p;
}

std::optional<int64_t> extract_final_answer(std::string_view response) {
  const size_t at = response.rfind(kAnswerPrefix);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + kAnswerPrefix.size();
  const bool negative = i < response.size() && response[i] == '-';
  if (negative) ++i;
  if (i >= response.size() || !std::isdigit(static_cast<unsigned char>(response[i]))) return std::nullopt;
  int64_t v = 0;
  for (; i < response.size() && std::isdigit(static_cast<unsigned char>(response[i])); ++i) {
    if (v > (INT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + (response[i] - '0');
  }
  return negative ? -v : v;
}

}  // namespace nemotron::data
