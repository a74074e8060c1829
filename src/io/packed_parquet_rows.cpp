// The §6.5 row rules (reference/data-formats.md), checked on every row written and read.
#include "core/error.h"
#include "io/packed_parquet.h"

namespace nemotron::io {

void validate_packed_row(const PackedRow& row, const std::string& source, int64_t row_index) {
  auto bad = [&](const std::string& what) {
    throw InputError(fmt::format("{}: packed row {}: {}", source, row_index, what));
  };
  if (row.loss_mask.size() != row.input_ids.size())
    bad(fmt::format("loss_mask has {} values, input_ids has {} (they must have the same length)", row.loss_mask.size(),
                    row.input_ids.size()));
  if (row.input_ids.empty()) bad("input_ids is empty (a packed bin holds at least one token)");
  if (row.seq_start_id.empty()) bad("seq_start_id is empty (its first value must be 0)");
  if (row.seq_start_id[0] != 0) bad(fmt::format("seq_start_id[0] is {}, expected 0", row.seq_start_id[0]));
  const int64_t n = static_cast<int64_t>(row.input_ids.size());
  for (size_t k = 1; k < row.seq_start_id.size(); ++k) {
    const int32_t s = row.seq_start_id[k];
    if (s <= row.seq_start_id[k - 1])
      bad(fmt::format("seq_start_id[{}] = {} is not above seq_start_id[{}] = {} (starts must strictly increase)", k, s,
                      k - 1, row.seq_start_id[k - 1]));
    if (s >= n) bad(fmt::format("seq_start_id[{}] = {} is not below the {} tokens of input_ids", k, s, n));
  }
}

}  // namespace nemotron::io
