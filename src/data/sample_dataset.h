// A dataset of fixed-length training samples (GPTDataset, BlendedDataset): sample i is
// sample_length() token ids, normally sequence_length() + 1 so that inputs and shifted labels
// both have sequence_length() tokens. Positions past the end of the data hold kPadTokenId.
#pragma once
#include <cstdint>
#include <string>

namespace nemotron::data {

// Megatron's _PAD_TOKEN_ID: never a real token, so padding can be masked without ambiguity.
inline constexpr int64_t kPadTokenId = -1;

class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t sequence_length() const = 0;
  virtual int64_t sample_length() const = 0;
  // Writes sample_length() ids of sample i (0 <= i < size()) to out.
  virtual void sample(int64_t i, int64_t* out) const = 0;
  // Identifies the dataset (sources, seed, sizes) for resume checks.
  virtual std::string description() const = 0;
};

}  // namespace nemotron::data
