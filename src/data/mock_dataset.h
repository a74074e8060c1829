// Synthetic token source for runs without data (Megatron-Bridge's mock mode, data-formats.md §5):
// `num_sequences` documents with lengths in [1, max_sequence_length - 1], each counting upwards
// from a seeded start through the ids [0, vocab_size) other than the EOD id, then ending with
// EOD. A counting pattern gives a tiny model something it can learn (falling loss), and every
// value is a pure function of (seed, document, position), so nothing is stored.
// Megatron's own mock lengths come from numpy's PCG64 and are not reproduced.
#pragma once
#include <cstdint>
#include <string>

#include "core/rng.h"
#include "data/token_source.h"

namespace nemotron::data {

struct MockConfig {
  int64_t vocab_size = 0;           // > 1
  int64_t eod_id = 0;               // in [0, vocab_size)
  int64_t num_sequences = 100000;   // Megatron's MockGPTLowLevelDataset.size
  int64_t max_sequence_length = 4096;
  uint64_t seed = 0;
  void validate(const std::string& where) const;
};

class MockTokenSource : public TokenSource {
 public:
  explicit MockTokenSource(const MockConfig& cfg);
  int64_t num_sequences() const override { return cfg_.num_sequences; }
  int64_t sequence_length(int64_t i) const override;
  std::vector<int32_t> sequence_lengths() const override;
  void read(int64_t i, int64_t offset, int64_t length, int64_t* out) const override;
  std::string description() const override;

 private:
  MockConfig cfg_;
  Philox lengths_rng_, starts_rng_;
};

}  // namespace nemotron::data
