// The low-level view GPT-style datasets sample from: numbered sequences of token ids with known
// lengths. Implemented by IndexedDataset (a `.bin/.idx` pair) and MockTokenSource (synthetic).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nemotron::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t num_sequences() const = 0;
  virtual int64_t sequence_length(int64_t i) const = 0;
  // Every sequence length, in order (what GPTDataset's index builders read).
  virtual std::vector<int32_t> sequence_lengths() const = 0;
  // Tokens [offset, offset + length) of sequence i into out[0, length).
  // Requires 0 <= i < num_sequences() and offset + length <= sequence_length(i).
  virtual void read(int64_t i, int64_t offset, int64_t length, int64_t* out) const = 0;
  // What this source is, for error messages and dataset fingerprints (a path prefix, "mock(...)").
  virtual std::string description() const = 0;
};

}  // namespace nemotron::data
