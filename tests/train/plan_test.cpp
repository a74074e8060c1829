// The memory estimate before a real run: the data's sample indices grow with train_iters x
// global_batch_size and are counted, so a run whose indices cannot fit is refused up front with
// the keys to lower (it passed the check and died of std::bad_alloc building them).
#include <gtest/gtest.h>

#include "train/plan.h"
#include "train_fixtures.h"

namespace nemotron::testing {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

TEST(Plan, data_indices_grow_with_the_run_and_are_counted) {
  train::PretrainConfig files = tiny_train_config({"dataset.mock=false", "dataset.blend=[a]"});
  train::MemoryEstimate m = train::estimate_memory(files);
  EXPECT_EQ(m.indexed_samples, (6 + 2 * 1) * 4);  // train, valid and test samples
  EXPECT_EQ(m.index_bytes, 34.0 * m.indexed_samples);
  EXPECT_EQ(m.total(), m.param_bytes + m.grad_bytes + m.moment_bytes + m.activation_bytes + m.index_bytes);
  EXPECT_EQ(train::estimate_memory(tiny_train_config()).index_bytes, 0);  // mock tokens are not indexed
  EXPECT_NE(train::dry_run_text(files, "tiny_train.yaml", 0).find("  data indices "), std::string::npos);
}

TEST(Plan, a_run_whose_indices_do_not_fit_is_refused_naming_the_keys) {
  train::PretrainConfig big =
      tiny_train_config({"dataset.mock=false", "dataset.blend=[a]", "train.train_iters=100000000"});
  EXPECT_EQ(train::host_memory_shortfall(big, 12 * kGiB),
            "the data's sample indices (400,000,008 samples: train.train_iters 100000000 x train.global_batch_size 4, "
            "plus validation) need about 12.67 GiB of host memory, this machine has 12.00 GiB; lower "
            "train.train_iters (see the plan with --dry-run)");
  EXPECT_EQ(train::host_memory_shortfall(big, 64 * kGiB), "");
  EXPECT_EQ(train::host_memory_shortfall(big, 0), "");  // unknown: not refused
  // On a GPU the indices are still host memory.
  train::PretrainConfig gpu = tiny_train_config(
      {"dataset.mock=false", "dataset.blend=[a]", "train.train_iters=100000000", "device=cuda"});
  EXPECT_NE(train::host_memory_shortfall(gpu, 8 * kGiB), "");
  EXPECT_EQ(train::host_memory_shortfall(tiny_train_config({"train.train_iters=100000000"}), 8 * kGiB), "");
}

}  // namespace
}  // namespace nemotron::testing
