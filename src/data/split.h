// Train/valid/test splits of one dataset (shared/reference/data-formats.md §2.5): Megatron's
// split string ("99,1,0", "969,30,1") normalized to fractions, turned into book-ends
// [lo, hi) per split, and into sequence-id ranges with Python's round-half-to-even.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace nemotron::data {

enum class Split { train = 0, valid = 1, test = 2 };
inline constexpr std::array<Split, 3> kSplits = {Split::train, Split::valid, Split::test};
const char* split_name(Split s);  // "train", "valid", "test"

// parse_and_normalize_split: the numbers in `text` (up to 3, missing ones are 0), each >= 0,
// divided by their sum. `where` prefixes errors ("recipe.yaml: data.split").
std::array<double, 3> parse_split(const std::string& text, const std::string& where);

// One split's book-ends; nullopt when the split is empty.
using SplitBookends = std::array<std::optional<std::pair<double, double>>, 3>;
// convert_split_vector_to_split_matrix: cumulative sums [0, a, a+b, a+b+c] paired up.
SplitBookends split_bookends(const std::array<double, 3>& fractions);

// Sequence ids [round(lo * n), round(hi * n)) of a split over n sequences.
std::pair<int64_t, int64_t> split_sequence_range(std::pair<double, double> bookends, int64_t n);

}  // namespace nemotron::data
