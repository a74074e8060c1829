// Packed rows for op cases: per row, the lengths of the sequences packed into it (they sum to T).
// Builds the seq_idx [B, T] and position_ids [B, T] tensors the ops take, names the layout in a
// case's parameters, and cuts one sequence out of a [B, T, ...] tensor, so a test can run every
// sequence alone and compare it with the packed call.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"

namespace nemotron::testing {

using PackedLayout = std::vector<std::vector<int64_t>>;  // [row][sequence] = length; empty = unpacked

// "3+1+5|9" (rows separated by '|').
inline std::string layout_str(const PackedLayout& p) {
  std::string s;
  for (size_t b = 0; b < p.size(); ++b) {
    if (b) s += "|";
    for (size_t k = 0; k < p[b].size(); ++k) {
      if (k) s += '+';
      s += std::to_string(p[b][k]);
    }
  }
  return s;
}

// [start, end) of every sequence of row b.
inline std::vector<std::pair<int64_t, int64_t>> spans(const PackedLayout& p, size_t b) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t s = 0;
  for (int64_t len : p[b]) out.emplace_back(s, s + len), s += len;
  return out;
}

// ids start at 2b+1 and step by 1 or 2, so a kernel that assumes ids 0, 1, 2, ... fails.
inline Tensor seq_idx_tensor(Context& ctx, const PackedLayout& p, int64_t T) {
  std::vector<int32_t> ids;
  for (size_t b = 0; b < p.size(); ++b) {
    int32_t id = static_cast<int32_t>(2 * b + 1);
    for (size_t k = 0; k < p[b].size(); ++k, id += static_cast<int32_t>(1 + k % 2))
      for (int64_t t = 0; t < p[b][k]; ++t) ids.push_back(id);
    NM_CHECK(static_cast<int64_t>(ids.size()) == static_cast<int64_t>(b + 1) * T, "row {} of {} is not T = {} long",
             b, layout_str(p), T);
  }
  return Tensor::from_vector<int32_t>({static_cast<int64_t>(p.size()), T}, ids).to(*ctx.backend);
}

// Positions restarting at 0 in every sequence (data-formats.md §6.8).
inline Tensor position_ids_tensor(Context& ctx, const PackedLayout& p, int64_t T) {
  std::vector<int32_t> pos;
  for (size_t b = 0; b < p.size(); ++b)
    for (int64_t len : p[b])
      for (int64_t t = 0; t < len; ++t) pos.push_back(static_cast<int32_t>(t));
  return Tensor::from_vector<int32_t>({static_cast<int64_t>(p.size()), T}, pos).to(*ctx.backend);
}

// Tokens [s, e) of row b of t [B, T, ...] as a [1, e - s, ...] view (shares t's buffer).
inline Tensor tokens(const Tensor& t, int64_t b, int64_t s, int64_t e) {
  std::vector<int64_t> rows = t.shape().dims(), one = t.shape().dims();
  const int64_t T = rows[1];
  rows.erase(rows.begin());
  rows[0] = t.dim(0) * T;
  one[0] = 1, one[1] = e - s;
  return t.view(Shape(rows)).slice(b * T + s, b * T + e).view(Shape(one));
}

}  // namespace nemotron::testing
