// What the trainer pulls micro-batches from: one source per split (train, validation), each a
// deterministic stream with a resumable cursor. state() is saved in every checkpoint and
// restore() puts a fresh source of the same configuration back at that cursor, so a resumed run
// sees exactly the batches an uninterrupted one would. MockBatchSource is the built-in synthetic
// source; LoaderBatchSource (data_sources.h) reads `.bin/.idx` files through src/data.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/hybrid_model.h"

namespace nemotron::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next micro-batch: input_ids and labels [micro_batch_size, seq_length] (labels are the
  // inputs shifted by one; negative = ignored), loss_mask optional.
  virtual model::Batch next() = 0;
  // The cursor (and whatever identifies the stream, so restore() can refuse a foreign state).
  virtual nlohmann::json state() const = 0;
  // Back to a cursor from state(); an InputError when the state belongs to another stream.
  virtual void restore(const nlohmann::json& state) = 0;
  // One line for logs: "mock (vocab 1024, seq 128, seed 1234, split train)".
  virtual std::string describe() const = 0;
};

// Deterministic synthetic text: sample k of a split is a pure function of (seed, split, k),
// drawn from Philox. The text follows a fixed random first-order Markov chain over the
// vocabulary in which every token has kBranching equally likely successors, so a model can learn
// it: the loss falls from ln(vocab) towards ln(kBranching) (1.386). Sample k is seq_length + 1
// tokens; inputs are the first seq_length, labels the last seq_length.
class MockBatchSource : public BatchSource {
 public:
  static constexpr int64_t kBranching = 4;
  // split: 0 train, 1 validation, 2 test (separate streams).
  MockBatchSource(int64_t vocab_size, int64_t seq_length, int64_t micro_batch_size, uint64_t seed, int split);
  model::Batch next() override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  std::string describe() const override;
  int64_t next_sample() const { return next_sample_; }
  // The tokens of sample k (seq_length + 1 of them).
  std::vector<int32_t> sample(int64_t k) const;

 private:
  int64_t V_, T_, B_;
  uint64_t seed_;
  int split_;
  int64_t next_sample_ = 0;
};

}  // namespace nemotron::train
