#include <gtest/gtest.h>

#include "data/split.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;

TEST(Split, normalizes_like_megatron) {
  auto f = parse_split("99,1,0", "cfg: split");
  EXPECT_DOUBLE_EQ(f[0], 0.99);
  EXPECT_DOUBLE_EQ(f[1], 0.01);
  EXPECT_EQ(f[2], 0.0);
  f = parse_split("969,30,1", "cfg: split");
  EXPECT_EQ(f[0], 969.0 / 1000.0);
  EXPECT_EQ(f[1], 30.0 / 1000.0);
  EXPECT_EQ(f[2], 1.0 / 1000.0);
  f = parse_split("100", "cfg: split");  // missing entries are 0
  EXPECT_EQ(f, (std::array<double, 3>{1.0, 0.0, 0.0}));
  f = parse_split("98 / 2", "cfg: split");  // any separator, as Megatron's regex
  EXPECT_EQ(f, (std::array<double, 3>{0.98, 0.02, 0.0}));
}

TEST(Split, bookends_and_sequence_ranges) {
  auto b = split_bookends(parse_split("969,30,1", "s"));
  ASSERT_TRUE(b[0] && b[1] && b[2]);
  EXPECT_EQ(split_sequence_range(*b[0], 1000), (std::pair<int64_t, int64_t>{0, 969}));
  EXPECT_EQ(split_sequence_range(*b[1], 1000), (std::pair<int64_t, int64_t>{969, 999}));
  EXPECT_EQ(split_sequence_range(*b[2], 1000), (std::pair<int64_t, int64_t>{999, 1000}));
  b = split_bookends(parse_split("99,1,0", "s"));
  EXPECT_FALSE(b[2].has_value());  // an empty split is no split
  // Mock mode's "1,1,1" over Megatron's 100000 mock documents.
  b = split_bookends(parse_split("1,1,1", "s"));
  EXPECT_EQ(split_sequence_range(*b[0], 100000), (std::pair<int64_t, int64_t>{0, 33333}));
  EXPECT_EQ(split_sequence_range(*b[1], 100000), (std::pair<int64_t, int64_t>{33333, 66667}));
  EXPECT_EQ(split_sequence_range(*b[2], 100000), (std::pair<int64_t, int64_t>{66667, 100000}));
}

TEST(Split, rounds_half_to_even_like_python) {
  auto b = split_bookends(parse_split("1,1", "s"));
  EXPECT_EQ(split_sequence_range(*b[0], 5), (std::pair<int64_t, int64_t>{0, 2}));   // round(2.5) == 2
  EXPECT_EQ(split_sequence_range(*b[1], 5), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_EQ(split_sequence_range(*b[0], 7), (std::pair<int64_t, int64_t>{0, 4}));   // round(3.5) == 4
}

TEST(Split, errors_name_the_key_and_the_value) {
  EXPECT_EQ(input_error([] { parse_split("", "r.yaml: data.split"); }),
            "r.yaml: data.split: expected up to 3 non-negative numbers such as \"99,1,0\", got \"\" (no numbers)");
  EXPECT_EQ(input_error([] { parse_split("1,2,3,4", "r.yaml: data.split"); }),
            "r.yaml: data.split: expected up to 3 non-negative numbers such as \"99,1,0\", got \"1,2,3,4\" (4 "
            "numbers)");
  EXPECT_EQ(input_error([] { parse_split("99,-1,0", "r.yaml: data.split"); }),
            "r.yaml: data.split: expected up to 3 non-negative numbers such as \"99,1,0\", got \"99,-1,0\" (negative "
            "numbers are not allowed)");
  EXPECT_EQ(input_error([] { parse_split("0,0,0", "r.yaml: data.split"); }),
            "r.yaml: data.split: expected up to 3 non-negative numbers such as \"99,1,0\", got \"0,0,0\" (they must "
            "have a positive, finite sum)");
  EXPECT_EQ(input_error([] { parse_split("1.2.3,4", "r.yaml: data.split"); }),
            "r.yaml: data.split: expected up to 3 non-negative numbers such as \"99,1,0\", got \"1.2.3,4\" (\"1.2.3\" "
            "is not a number)");
}

}  // namespace
}  // namespace nemotron::data
