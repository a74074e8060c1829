#include "data/split.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "data/numpy_random.h"

namespace nemotron::data {

const char* split_name(Split s) {
  switch (s) {
    case Split::train: return "train";
    case Split::valid: return "valid";
    case Split::test: return "test";
  }
  return "?";
}

std::array<double, 3> parse_split(const std::string& text, const std::string& where) {
  auto fail = [&](const std::string& why) -> void {
    throw InputError(fmt::format("{}: expected up to 3 non-negative numbers such as \"99,1,0\", got \"{}\" ({})",
                                 where, text, why));
  };
  // Megatron extracts the runs of [.0-9] (so any separator works); a sign would be dropped
  // silently there, so it is an error here.
  if (text.find('-') != std::string::npos) fail("negative numbers are not allowed");
  std::vector<double> values;
  for (size_t i = 0; i < text.size();) {
    if (!(std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    const std::string token = text.substr(i, j - i);
    char* end = nullptr;
    const double v = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size() || token == ".") fail("\"" + token + "\" is not a number");
    values.push_back(v);
    i = j;
  }
  if (values.empty()) fail("no numbers");
  if (values.size() > 3) fail(fmt::format("{} numbers", values.size()));
  values.resize(3, 0.0);
  const double sum = numpy_sum(values);
  if (!(sum > 0) || !std::isfinite(sum)) fail("they must have a positive, finite sum");
  return {values[0] / sum, values[1] / sum, values[2] / sum};
}

SplitBookends split_bookends(const std::array<double, 3>& f) {
  const double edges[4] = {0.0, f[0], f[0] + f[1], (f[0] + f[1]) + f[2]};
  SplitBookends out;
  for (int i = 0; i < 3; ++i) {
    if (edges[i + 1] > edges[i]) out[i] = std::make_pair(edges[i], edges[i + 1]);
  }
  return out;
}

std::pair<int64_t, int64_t> split_sequence_range(std::pair<double, double> b, int64_t n) {
  // std::nearbyint rounds half to even under the default rounding mode, like Python's round().
  const double nd = static_cast<double>(n);
  return {static_cast<int64_t>(std::nearbyint(b.first * nd)), static_cast<int64_t>(std::nearbyint(b.second * nd))};
}

}  // namespace nemotron::data
