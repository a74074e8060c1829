#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "core/config_tree.h"
#include "data/jsonl.h"
#include "data/synthetic_corpus.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;

int64_t num(const std::string& s) { return std::stoll(s); }

// Re-derives a problem's answer from its question alone and checks every step of its
// solution and text; returns the answer the question implies.
int64_t check_problem(const Problem& p) {
  std::smatch m;
  const std::string& q = p.question;
  if (std::regex_match(q, m, std::regex(R"(What is (\d+) \+ (\d+)\?)"))) {
    const int64_t a = num(m[1]), b = num(m[2]), c = a + b;
    const std::string fact = std::to_string(a) + " + " + std::to_string(b) + " = " + std::to_string(c) + ".";
    if (p.skill == Skill::addition) {
      EXPECT_EQ(p.text, fact);
    }
    if (a >= 10 || b >= 10) {
      // Worked column sum: every line's arithmetic, and the written digits spell the answer.
      const std::string& worked = p.skill == Skill::column_addition ? p.text : p.solution;
      std::string digits;
      const std::regex line(R"((\w[\w-]*): ([\d +carry]+?)(?: = (\d+))?\. Write (\d+)(?:, carry (\d+))?\.)");
      for (auto it = std::sregex_iterator(worked.begin(), worked.end(), line); it != std::sregex_iterator(); ++it) {
        const std::smatch& l = *it;
        int64_t sum = 0;
        const std::string terms = l[2];
        const std::regex number(R"(\d+)");
        for (auto t = std::sregex_iterator(terms.begin(), terms.end(), number); t != std::sregex_iterator(); ++t)
          sum += num(t->str());
        if (l[3].matched) {
          EXPECT_EQ(num(l[3]), sum) << worked;
        }
        EXPECT_EQ(num(l[4]), l[5].matched ? sum % 10 : sum) << worked;
        if (l[5].matched) {
          EXPECT_EQ(num(l[5]), sum / 10) << worked;
        }
        digits = l[4].str() + digits;
      }
      EXPECT_EQ(num(digits), c) << worked;
      EXPECT_NE(worked.find("So " + fact), std::string::npos) << worked;
    }
    return c;
  }
  if (std::regex_match(q, m, std::regex(R"(What is (\d+) - (\d+)\?)"))) {
    const int64_t a = num(m[1]), b = num(m[2]);
    EXPECT_GE(a, b);
    EXPECT_EQ(p.text, m[1].str() + " - " + m[2].str() + " = " + std::to_string(a - b) + ".");
    EXPECT_EQ(p.solution.substr(0, p.solution.find('\n')),
              p.text.substr(0, p.text.size() - 1) + ", since " + std::to_string(a - b) + " + " + m[2].str() + " = " +
                  m[1].str() + ".");
    return a - b;
  }
  if (std::regex_match(q, m, std::regex(R"(What is (\d+) \* (\d+)\?)"))) {
    const int64_t a = num(m[1]), b = num(m[2]);
    EXPECT_GE(b, 2);
    EXPECT_LE(b, 9);
    // "a * b = p1 * b + p2 * b = q1 + q2 = c.": parts sum to a, products are right, they sum to c.
    std::smatch d;
    if (std::regex_match(p.text, d, std::regex(R"((\d+) \* (\d+) = (.+) = (.+) = (\d+)\.)"))) {
      const std::string parts = d[3], products = d[4];
      int64_t part_sum = 0, product_sum = 0;
      std::vector<int64_t> part_values, product_values;
      const std::regex pr(R"((\d+) \* (\d+))");
      for (auto it = std::sregex_iterator(parts.begin(), parts.end(), pr); it != std::sregex_iterator(); ++it) {
        part_values.push_back(num((*it)[1]));
        EXPECT_EQ(num((*it)[2]), b);
        part_sum += part_values.back();
      }
      const std::regex n(R"(\d+)");
      for (auto it = std::sregex_iterator(products.begin(), products.end(), n); it != std::sregex_iterator(); ++it) {
        product_values.push_back(num(it->str()));
        product_sum += product_values.back();
      }
      EXPECT_EQ(part_sum, a) << p.text;
      EXPECT_EQ(part_values.size(), product_values.size()) << p.text;
      for (size_t i = 0; i < std::min(part_values.size(), product_values.size()); ++i) {
        EXPECT_EQ(part_values[i] * b, product_values[i]) << p.text;
      }
      EXPECT_EQ(product_sum, a * b) << p.text;
      EXPECT_EQ(num(d[5]), a * b);
    } else {
      EXPECT_EQ(p.text, m[1].str() + " * " + m[2].str() + " = " + std::to_string(a * b) + ".");
    }
    return a * b;
  }
  // A word problem: replay the story told by the question.
  EXPECT_TRUE(std::regex_search(q, m, std::regex(R"(^(\w+) has (\d+) (\w+)\.)"))) << q;
  int64_t have = num(m[2]);
  const std::regex act(R"((?:She|He|Then she|Then he) (buys|finds|gets|gives|loses|sells) (\d+))");
  int steps = 0;
  for (auto it = std::sregex_iterator(q.begin(), q.end(), act); it != std::sregex_iterator(); ++it, ++steps) {
    const std::string verb = (*it)[1];
    const int64_t n = num((*it)[2]);
    EXPECT_GE(n, 1);
    have += (verb == "buys" || verb == "finds" || verb == "gets") ? n : -n;
    EXPECT_GE(have, 0) << q;
  }
  EXPECT_GE(steps, 1);
  // The solution's lines do the same arithmetic.
  const std::regex step(R"(: (\d+) ([+-]) (\d+) = (\d+)\.)");
  for (auto it = std::sregex_iterator(p.solution.begin(), p.solution.end(), step); it != std::sregex_iterator(); ++it) {
    const int64_t a = num((*it)[1]), b = num((*it)[3]);
    EXPECT_EQ(num((*it)[4]), (*it)[2] == "+" ? a + b : a - b) << p.solution;
  }
  EXPECT_NE(p.text.find("has " + std::to_string(have) + " "), std::string::npos) << p.text;
  return have;
}

CorpusConfig small_config() {
  CorpusConfig c;
  c.seed = 42;
  c.num_documents = 50;
  c.problems_per_document = 4;
  c.num_examples = 300;
  return c;
}

TEST(SyntheticCorpus, same_seed_writes_byte_identical_files_other_seed_does_not) {
  const std::string dir = testing::temp_dir();
  const CorpusConfig c = small_config();
  write_pretrain_jsonl(dir + "/a.jsonl", generate_pretrain_corpus(c));
  write_pretrain_jsonl(dir + "/b.jsonl", generate_pretrain_corpus(c));
  write_sft_jsonl(dir + "/sft_a.jsonl", generate_sft_examples(c));
  write_sft_jsonl(dir + "/sft_b.jsonl", generate_sft_examples(c));
  write_rl_jsonl(dir + "/rl_a.jsonl", generate_rl_examples(c));
  write_rl_jsonl(dir + "/rl_b.jsonl", generate_rl_examples(c));
  EXPECT_EQ(testing::read_bytes(dir + "/a.jsonl"), testing::read_bytes(dir + "/b.jsonl"));
  EXPECT_EQ(testing::read_bytes(dir + "/sft_a.jsonl"), testing::read_bytes(dir + "/sft_b.jsonl"));
  EXPECT_EQ(testing::read_bytes(dir + "/rl_a.jsonl"), testing::read_bytes(dir + "/rl_b.jsonl"));
  CorpusConfig other = c;
  other.seed = 43;
  write_pretrain_jsonl(dir + "/c.jsonl", generate_pretrain_corpus(other));
  EXPECT_NE(testing::read_bytes(dir + "/a.jsonl"), testing::read_bytes(dir + "/c.jsonl"));
  // Problem i does not depend on how many are generated or where the range starts.
  EXPECT_EQ(generate_problems(c, 10, 5)[2].text, generate_problems(c, 0, 20)[12].text);
}

TEST(SyntheticCorpus, every_answer_is_arithmetically_right) {
  CorpusConfig c = small_config();
  c.knobs.max_digits = 6;
  c.knobs.max_steps = 5;
  std::set<Skill> seen;
  for (const Problem& p : generate_problems(c, 0, 1000)) {
    seen.insert(p.skill);
    EXPECT_EQ(check_problem(p), p.answer) << p.question;
    EXPECT_EQ(extract_final_answer(p.solution), p.answer) << p.solution;
    EXPECT_EQ(p.solution.substr(p.solution.rfind('\n') + 1), "The answer is " + std::to_string(p.answer) + ".");
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(SyntheticCorpus, the_three_forms_agree) {
  CorpusConfig c = small_config();
  c.problems_per_document = 1;
  c.num_documents = c.num_examples;
  const auto docs = generate_pretrain_corpus(c);
  const auto sft = generate_sft_examples(c);
  const auto rl = generate_rl_examples(c);
  const auto problems = generate_problems(c, c.first_problem, c.num_examples);
  ASSERT_EQ(docs.size(), rl.size());
  for (size_t i = 0; i < rl.size(); ++i) {
    ASSERT_EQ(sft[i].messages.size(), 2u);
    EXPECT_EQ(sft[i].messages[0].role, "user");
    EXPECT_EQ(sft[i].messages[1].role, "assistant");
    EXPECT_EQ(sft[i].messages[0].content, rl[i].input);
    EXPECT_EQ(extract_final_answer(sft[i].messages[1].content), std::stoll(rl[i].output));
    EXPECT_EQ(docs[i].text, problems[i].text);
    EXPECT_EQ(rl[i].output, std::to_string(problems[i].answer));
    EXPECT_NE(docs[i].text.find(rl[i].output), std::string::npos) << docs[i].text;  // the fact is in the text
  }
  // Multi-problem documents are the same problems, one per line.
  c.problems_per_document = 3;
  EXPECT_EQ(generate_pretrain_corpus(c)[1].text, problems[3].text + "\n" + problems[4].text + "\n" + problems[5].text);
  // The rows have the shapes the SFT and RL stages read.
  EXPECT_EQ(to_json(sft[0])["messages"][0]["role"], "user");
  EXPECT_EQ(to_json(rl[0]).size(), 2u);
  EXPECT_TRUE(to_json(rl[0])["output"].is_string());
  EXPECT_EQ(to_json(docs[0]).begin().key(), "text");
}

TEST(SyntheticCorpus, difficulty_knobs_bound_the_operands_and_steps) {
  CorpusConfig c = small_config();
  c.knobs.min_digits = c.knobs.max_digits = 4;
  c.knobs.skills = {Skill::addition, Skill::subtraction};
  for (const Problem& p : generate_problems(c, 0, 300)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(p.question, m, std::regex(R"(What is (\d+) [+-] (\d+)\?)"))) << p.question;
    for (int g : {1, 2}) {
      EXPECT_GE(num(m[g]), 1000);
      EXPECT_LE(num(m[g]), 9999);
    }
  }
  c.knobs.min_digits = c.knobs.max_digits = 1;
  c.knobs.max_steps = 1;
  c.knobs.skills = {Skill::word_problem};
  for (const Problem& p : generate_problems(c, 0, 300)) {
    EXPECT_EQ(p.skill, Skill::word_problem);
    EXPECT_EQ(std::count(p.solution.begin(), p.solution.end(), '\n'), 2) << p.solution;  // start, 1 step, answer
    EXPECT_LE(p.answer, 18);
  }
}

TEST(SyntheticCorpus, worked_column_sum_reads_as_intended) {
  EXPECT_EQ(worked_column_sum(487, 358),
            "Add 487 and 358 column by column.\n"
            "Ones: 7 + 8 = 15. Write 5, carry 1.\n"
            "Tens: 8 + 5 + 1 = 14. Write 4, carry 1.\n"
            "Hundreds: 4 + 3 + 1 = 8. Write 8.\n"
            "So 487 + 358 = 845.");
  EXPECT_EQ(worked_column_sum(99, 1),
            "Add 99 and 1 column by column.\n"
            "Ones: 9 + 1 = 10. Write 0, carry 1.\n"
            "Tens: 9 + 1 = 10. Write 0, carry 1.\n"
            "Hundreds: carry 1. Write 1.\n"
            "So 99 + 1 = 100.");
  EXPECT_EQ(worked_column_sum(5, 123),
            "Add 5 and 123 column by column.\n"
            "Ones: 5 + 3 = 8. Write 8.\n"
            "Tens: 2. Write 2.\n"
            "Hundreds: 1. Write 1.\n"
            "So 5 + 123 = 128.");
}

TEST(SyntheticCorpus, final_answer_extraction) {
  EXPECT_EQ(extract_final_answer("blah\nThe answer is 42."), 42);
  EXPECT_EQ(extract_final_answer("The answer is 1. No wait. The answer is -7"), -7);
  EXPECT_EQ(extract_final_answer("The answer is x"), std::nullopt);
  EXPECT_EQ(extract_final_answer("42"), std::nullopt);
  EXPECT_EQ(extract_final_answer("The answer is 99999999999999999999999"), std::nullopt);
}

TEST(CorpusConfig, reads_and_validates_config_keys) {
  const nlohmann::json tree =
      parse_yaml_text("seed: 7\nnum_documents: 10\nmax_digits: 2\nskills: [addition, word_problem]\n", "c.yaml");
  ConfigReader r(tree, "c.yaml", "data.corpus");
  CorpusConfig c = CorpusConfig::read(r);
  r.check_unknown_keys();
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.num_documents, 10);
  EXPECT_EQ(c.knobs.skills, (std::vector<Skill>{Skill::addition, Skill::word_problem}));
  const nlohmann::json bad = parse_yaml_text("skills: [addition, multiplicaton]\n", "c.yaml");
  ConfigReader rb(bad, "c.yaml", "data.corpus");
  EXPECT_EQ(input_error([&] { CorpusConfig::read(rb); }),
            "c.yaml: data.corpus.skills[1]: unknown skill \"multiplicaton\" (did you mean \"multiplication\"?); "
            "expected one of addition, subtraction, multiplication, column_addition, word_problem");
  const nlohmann::json digits = parse_yaml_text("min_digits: 3\nmax_digits: 2\n", "c.yaml");
  ConfigReader rd(digits, "c.yaml", "data.corpus");
  EXPECT_EQ(input_error([&] { CorpusConfig::read(rd); }),
            "c.yaml: data.corpus.max_digits: expected an integer in [min_digits = 3, 9], got 2");
}

}  // namespace
}  // namespace nemotron::data
