// The cache budget serve prints and enforces (engine/cache_budget.h): its total is what
// CachedStepModel allocates (KV blocks rounded up, Mamba states), for a hybrid stack and an
// attention-only one and a Mamba-only one; the most slots and the longest context it reports fit
// the budget and one more slot (one more block of context) does not; no budget when the memory
// available is unknown; a rank of a model split over 2 (tensor parallelism) allocates the total
// for tensor_size 2.
#include <gtest/gtest.h>

#include "engine/cache_budget.h"
#include "engine/cached_step_model.h"
#include "model/block_configs.h"
#include "model/decode_state.h"

namespace nemotron::engine {
namespace {

TEST(CacheBudget, TotalIsWhatTheCacheAllocatesAndTheMostThatFitFits) {
  int positive = 0;  // cases where some context fits
  for (const std::string pattern : {"M*-E", "*-*", "MM"}) {
    model::ModelConfig cfg = testing::hybrid_config(pattern);
    cfg.vocab_size = 29;
    model::HybridModel net(cfg, host_backend(), DType::f32);
    for (int64_t len : {16, 37, 64}) {
      const int64_t slots = 3, bs = CachedStepModel::kBlockSize;
      CachedStepModel step(net, Context{&host_backend(), nullptr, DType::f32}, slots, len);
      const CacheBudget none = cache_budget(cfg, DType::f32, slots, len, 0, bs);
      EXPECT_EQ(none.total_bytes, step.state().bytes()) << pattern << " at " << len;
      EXPECT_EQ(none.budget_bytes, 0);
      EXPECT_TRUE(none.fits());

      // A budget of 2.5 slots: 2 fit, 3 do not.
      const auto available = static_cast<int64_t>(2.5 * static_cast<double>(none.per_slot_bytes) / kCacheMemoryFraction);
      const CacheBudget b = cache_budget(cfg, DType::f32, slots, len, available, bs);
      EXPECT_EQ(b.max_slots_that_fit, 2) << pattern;
      EXPECT_FALSE(b.fits());
      EXPECT_TRUE(cache_budget(cfg, DType::f32, 2, len, available, bs).fits());
      if (pattern == "MM") {
        EXPECT_EQ(b.max_seq_len_that_fits, 0);  // the states alone: 3 of them do not fit, at any length
        continue;
      }
      // 5/6 of a slot each for 3 slots: some whole blocks of context (none at a short length,
      // where the Mamba state is most of a slot), and one token more does not fit.
      const int64_t longest = b.max_seq_len_that_fits;
      EXPECT_EQ(longest % bs, 0);
      if (longest > 0) EXPECT_TRUE(cache_budget(cfg, DType::f32, slots, longest, available, bs).fits()) << pattern;
      EXPECT_FALSE(cache_budget(cfg, DType::f32, slots, longest + 1, available, bs).fits()) << pattern;
      positive += longest > 0;
    }
  }
  EXPECT_GE(positive, 2);
}

TEST(CacheBudget, TotalIsWhatOneRankOfASplitModelAllocates) {
  for (const std::string pattern : {"M*-E", "*-*", "MM"}) {
    model::ModelConfig cfg = testing::hybrid_config(pattern);
    cfg.vocab_size = 30;
    const int64_t slots = 3, len = 37, bs = CachedStepModel::kBlockSize;
    model::HybridModel net(cfg, host_backend(), DType::f32, model::ModelShard{0, 1, 1, 2, false});
    CachedStepModel step(net, Context{&host_backend(), nullptr, DType::f32}, slots, len);
    const CacheBudget b = cache_budget(cfg, DType::f32, slots, len, 0, bs, 2);
    EXPECT_EQ(b.total_bytes, step.state().bytes()) << pattern;
    EXPECT_EQ(2 * b.total_bytes, cache_budget(cfg, DType::f32, slots, len, 0, bs).total_bytes) << pattern;
  }
}

TEST(CacheBudget, AModelWithoutAttentionFitsAnyLengthOnceItsStatesFit) {
  const model::ModelConfig cfg = testing::hybrid_config("MM");
  const CacheBudget b = cache_budget(cfg, DType::bf16, 4, 4096, int64_t{1} << 30, CachedStepModel::kBlockSize);
  EXPECT_TRUE(b.fits());
  EXPECT_EQ(b.max_seq_len_that_fits, -1);
  EXPECT_EQ(b.per_slot_bytes, model::DecodeState::bytes_per_sequence(cfg, 0, DType::bf16));
}

}  // namespace
}  // namespace nemotron::engine
