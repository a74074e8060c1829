#include <gtest/gtest.h>

#include "rl/env/math_verifier.h"

namespace nemotron::rl::env {
namespace {

TEST(MathVerifier, extracts_the_last_boxed_answer_with_nested_braces) {
  EXPECT_EQ(extract_boxed("first \\boxed{1}, then \\boxed{\\frac{1}{2}} done"), "\\frac{1}{2}");
  EXPECT_EQ(extract_boxed("\\boxed{\\left(\\frac{a}{b}\\right)}"), "\\left(\\frac{a}{b}\\right)");
  EXPECT_EQ(extract_boxed("so \\boxed 7 is it"), "7");
  EXPECT_EQ(extract_boxed("\\fbox{3}"), "3");
  EXPECT_EQ(extract_boxed("\\boxed{\\{1,2\\}}"), "\\{1,2\\}");  // escaped braces do not count
  EXPECT_EQ(extract_boxed("no box here"), std::nullopt);
  EXPECT_EQ(extract_boxed("\\boxed{unclosed {"), std::nullopt);
}

TEST(MathVerifier, extracts_the_gsm8k_hash_form) {
  EXPECT_EQ(extract_hash_answer("She has 3 + 4 = 7.\n#### 7"), "7");
  EXPECT_EQ(extract_hash_answer("#### 1\nmore\n#### 1,234 \nafter"), "1,234");
  EXPECT_EQ(extract_hash_answer("####   \n"), std::nullopt);
  EXPECT_EQ(extract_hash_answer("no marker"), std::nullopt);
}

TEST(MathVerifier, extraction_prefers_boxed_then_hash_then_answer_is_then_the_last_number) {
  EXPECT_EQ(extract_math_answer("#### 5 but \\boxed{6}"), "6");
  EXPECT_EQ(extract_math_answer("12 apples, so\n#### 5"), "5");
  EXPECT_EQ(extract_math_answer("17 + 25 = 42.\nThe answer is 42."), "42");
  EXPECT_EQ(extract_math_answer("Final answer: $-3.5$"), "$-3.5$");
  EXPECT_EQ(extract_math_answer("we get 3, then 1,250 and finally -7 left"), "-7");
  EXPECT_EQ(extract_math_answer("x2 and y3 only"), std::nullopt);  // digits inside words are not numbers
  EXPECT_EQ(extract_math_answer("nothing numeric"), std::nullopt);
}

TEST(MathVerifier, integers_decimals_and_thousands_separators) {
  EXPECT_TRUE(math_answers_equal("42", "42"));
  EXPECT_TRUE(math_answers_equal("42.0", "42"));
  EXPECT_TRUE(math_answers_equal("0.50", ".5"));
  EXPECT_TRUE(math_answers_equal("1,234", "1234"));
  EXPECT_TRUE(math_answers_equal("1{,}234{,}567", "1234567"));
  EXPECT_TRUE(math_answers_equal("+7", "7"));
  EXPECT_FALSE(math_answers_equal("43", "42"));
  EXPECT_FALSE(math_answers_equal("42.01", "42"));
  EXPECT_FALSE(math_answers_equal("1,23", "123"));  // not a thousands group: compared as text
  EXPECT_FALSE(math_answers_equal("", "0"));
}

TEST(MathVerifier, negative_numbers) {
  EXPECT_TRUE(math_answers_equal("-5", "-5"));
  EXPECT_TRUE(math_answers_equal("\xE2\x88\x92" "5", "-5"));  // U+2212 minus sign
  EXPECT_TRUE(math_answers_equal("-\\frac{1}{2}", "-0.5"));
  EXPECT_TRUE(math_answers_equal("\\frac{-1}{2}", "-1/2"));
  EXPECT_FALSE(math_answers_equal("5", "-5"));
  EXPECT_FALSE(math_answers_equal("-\\frac{1}{2}", "0.5"));
}

TEST(MathVerifier, fractions_in_every_spelling) {
  EXPECT_TRUE(math_answers_equal("\\frac{1}{2}", "0.5"));
  EXPECT_TRUE(math_answers_equal("\\dfrac{3}{6}", "1/2"));
  EXPECT_TRUE(math_answers_equal("\\tfrac12", "\\frac{1}{2}"));
  EXPECT_TRUE(math_answers_equal("\\left(\\frac{2}{4}\\right)", "1/2"));
  EXPECT_TRUE(math_answers_equal("6/3", "2"));
  EXPECT_TRUE(math_answers_equal("\\frac{\\frac{1}{2}}{2}", "0.25"));
  EXPECT_FALSE(math_answers_equal("\\frac{1}{3}", "0.333"));  // exact values, no rounding
  EXPECT_FALSE(math_answers_equal("\\frac{2}{3}", "3/2"));
}

TEST(MathVerifier, strips_delimiters_units_currency_and_percent) {
  EXPECT_TRUE(math_answers_equal("$42$", "42"));
  EXPECT_TRUE(math_answers_equal("\\(42\\)", "42"));
  EXPECT_TRUE(math_answers_equal("\\$1,000", "1000"));
  EXPECT_TRUE(math_answers_equal("50\\%", "50"));
  EXPECT_TRUE(math_answers_equal("90^\\circ", "90"));
  EXPECT_TRUE(math_answers_equal("12 apples", "12"));
  EXPECT_TRUE(math_answers_equal("5\\text{ cm}", "5"));
  EXPECT_TRUE(math_answers_equal("5cm", "5"));
  EXPECT_TRUE(math_answers_equal("x = 3", "3"));
  EXPECT_TRUE(math_answers_equal("42.", "42"));
  EXPECT_FALSE(math_answers_equal("2x", "2"));  // a glued single letter is algebra, not a unit
  EXPECT_FALSE(math_answers_equal("12 apples", "13"));
}

TEST(MathVerifier, non_numeric_answers_compare_as_normalised_latex) {
  EXPECT_TRUE(math_answers_equal("\\sqrt{2}", "\\sqrt{2}"));
  EXPECT_TRUE(math_answers_equal("\\left( 1, 2 \\right)", "(1,2)"));
  EXPECT_TRUE(math_answers_equal("\\text{(B)}", "(B)"));
  EXPECT_FALSE(math_answers_equal("\\sqrt{3}", "\\sqrt{2}"));
  EXPECT_FALSE(math_answers_equal("(1,3)", "(1,2)"));
}

TEST(MathVerifier, expected_answers_lose_outer_delimiters_and_box) {
  EXPECT_EQ(normalize_expected_answer(" $\\frac{1}{2}$ "), "\\frac{1}{2}");
  EXPECT_EQ(normalize_expected_answer("\\(32\\)"), "32");
  EXPECT_EQ(normalize_expected_answer("\\boxed{32}"), "32");
  EXPECT_EQ(normalize_expected_answer("32"), "32");
}

TEST(MathVerifier, rewards_one_for_a_match_and_zero_otherwise) {
  MathVerdict v = verify_math_answer("Adding them: 30 + 2 = 32, so \\boxed{32}.", "32");
  EXPECT_EQ(v.reward, 1.0);
  EXPECT_EQ(v.extracted, "32");
  v = verify_math_answer("Thus \\boxed{\\dfrac{1}{2}}", "$0.5$");
  EXPECT_EQ(v.reward, 1.0);
  v = verify_math_answer("Natalia sold 48/2 = 24 clips in May.\n#### 72", "72");
  EXPECT_EQ(v.reward, 1.0);
  v = verify_math_answer("so \\boxed{31}", "32");
  EXPECT_EQ(v.reward, 0.0);
  EXPECT_EQ(v.extracted, "31");
  v = verify_math_answer("I do not know.", "32");
  EXPECT_EQ(v.reward, 0.0);
  EXPECT_EQ(v.extracted, std::nullopt);
  v = verify_math_answer("\\boxed{", "32");  // broken LaTeX: no answer, no exception
  EXPECT_EQ(v.reward, 0.0);
}

}  // namespace
}  // namespace nemotron::rl::env
