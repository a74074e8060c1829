// Comparing MoE expert choices, [N, K] int32 (host or device; the order within a row is free).
#pragma once
#include <algorithm>
#include <vector>

#include "core/tensor.h"

namespace nemotron::testing {

// Rows of a and b that do not name the same set of experts.
inline int64_t rows_choosing_differently(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vector(), y = b.to_f64_vector();
  if (x.size() != y.size()) return a.dim(0);
  const auto K = static_cast<size_t>(a.dim(1));
  int64_t rows = 0;
  for (size_t r = 0; r + K <= x.size(); r += K) {
    std::sort(x.begin() + r, x.begin() + r + K);
    std::sort(y.begin() + r, y.begin() + r + K);
    rows += !std::equal(x.begin() + r, x.begin() + r + K, y.begin() + r);
  }
  return rows;
}

}  // namespace nemotron::testing
