#include "data/mock_dataset.h"

#include "core/error.h"

namespace nemotron::data {

namespace {
constexpr uint64_t kLengthStream = 0x6d6f636b4c656e00ull;  // "mockLen"
constexpr uint64_t kStartStream = 0x6d6f636b53746100ull;   // "mockSta"
}  // namespace

void MockConfig::validate(const std::string& where) const {
  auto fail = [&](const char* key, const std::string& what) {
    throw InputError(fmt::format("{}.{}: {}", where, key, what));
  };
  if (vocab_size < 2) fail("vocab_size", fmt::format("expected an integer >= 2, got {}", vocab_size));
  if (eod_id < 0 || eod_id >= vocab_size)
    fail("eod_id", fmt::format("expected an id in [0, {}) (vocab_size {}), got {}", vocab_size, vocab_size, eod_id));
  if (num_sequences < 1) fail("num_sequences", fmt::format("expected a positive integer, got {}", num_sequences));
  if (max_sequence_length < 2 || max_sequence_length > (int64_t{1} << 30))
    fail("max_sequence_length", fmt::format("expected an integer in [2, 2^30], got {}", max_sequence_length));
}

MockTokenSource::MockTokenSource(const MockConfig& cfg)
    : cfg_(cfg), lengths_rng_(cfg.seed, kLengthStream), starts_rng_(cfg.seed, kStartStream) {
  cfg_.validate("mock");
}

int64_t MockTokenSource::sequence_length(int64_t i) const {
  NM_CHECK(i >= 0 && i < cfg_.num_sequences, "sequence {} of {}", i, cfg_.num_sequences);
  return 1 + static_cast<int64_t>(lengths_rng_.bits(static_cast<uint64_t>(i)) %
                                  static_cast<uint64_t>(cfg_.max_sequence_length - 1));
}

std::vector<int32_t> MockTokenSource::sequence_lengths() const {
  std::vector<int32_t> v(static_cast<size_t>(cfg_.num_sequences));
  for (int64_t i = 0; i < cfg_.num_sequences; ++i) v[i] = static_cast<int32_t>(sequence_length(i));
  return v;
}

void MockTokenSource::read(int64_t i, int64_t offset, int64_t length, int64_t* out) const {
  const int64_t n = sequence_length(i);
  NM_CHECK(offset >= 0 && length >= 0 && offset + length <= n, "read [{}, {}) of {}", offset, offset + length, n);
  const int64_t ids = cfg_.vocab_size - 1;  // every id but EOD
  const int64_t start = static_cast<int64_t>(starts_rng_.bits(static_cast<uint64_t>(i)) % static_cast<uint64_t>(ids));
  for (int64_t j = 0; j < length; ++j) {
    const int64_t pos = offset + j;
    if (pos == n - 1) {
      out[j] = cfg_.eod_id;
    } else {
      const int64_t v = (start + pos) % ids;
      out[j] = v >= cfg_.eod_id ? v + 1 : v;
    }
  }
}

std::string MockTokenSource::description() const {
  return fmt::format("mock(vocab_size={}, eod_id={}, num_sequences={}, max_sequence_length={}, seed={})",
                     cfg_.vocab_size, cfg_.eod_id, cfg_.num_sequences, cfg_.max_sequence_length, cfg_.seed);
}

}  // namespace nemotron::data
