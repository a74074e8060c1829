#include "train/batch_source.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace nemotron::train {

namespace {
const char* split_name(int split) { return split == 0 ? "train" : split == 1 ? "validation" : "test"; }
// Streams: the chain's transition table, and one stream per split for the samples.
constexpr uint64_t kChainStream = 0x6d6f636bull << 32;  // "mock"
uint64_t split_stream(int split) { return kChainStream + 1 + static_cast<uint64_t>(split); }
}  // namespace

MockBatchSource::MockBatchSource(int64_t vocab_size, int64_t seq_length, int64_t micro_batch_size, uint64_t seed,
                                 int split)
    : V_(vocab_size), T_(seq_length), B_(micro_batch_size), seed_(seed), split_(split) {
  NM_CHECK(V_ > 0 && T_ > 0 && B_ > 0 && split >= 0 && split <= 2, "mock source: vocab {}, seq {}, batch {}, split {}",
           V_, T_, B_, split);
}

std::vector<int32_t> MockBatchSource::sample(int64_t k) const {
  const Philox chain(seed_, kChainStream), draw(seed_, split_stream(split_));
  const uint64_t base = static_cast<uint64_t>(k) * static_cast<uint64_t>(T_ + 1);
  std::vector<int32_t> tok(static_cast<size_t>(T_ + 1));
  tok[0] = static_cast<int32_t>(draw.bits(base) % static_cast<uint64_t>(V_));
  for (int64_t t = 1; t <= T_; ++t) {
    const uint64_t branch = draw.bits(base + static_cast<uint64_t>(t)) % kBranching;
    const uint64_t cell = static_cast<uint64_t>(tok[t - 1]) * kBranching + branch;
    tok[t] = static_cast<int32_t>(chain.bits(cell) % static_cast<uint64_t>(V_));
  }
  return tok;
}

model::Batch MockBatchSource::next() {
  std::vector<int32_t> ids(static_cast<size_t>(B_ * T_)), labels(ids.size());
  for (int64_t b = 0; b < B_; ++b) {
    std::vector<int32_t> s = sample(next_sample_++);
    std::copy(s.begin(), s.end() - 1, ids.begin() + b * T_);
    std::copy(s.begin() + 1, s.end(), labels.begin() + b * T_);
  }
  return {Tensor::from_vector<int32_t>({B_, T_}, ids), Tensor::from_vector<int32_t>({B_, T_}, labels), Tensor()};
}

nlohmann::json MockBatchSource::state() const {
  return {{"kind", "mock"},   {"split", split_name(split_)}, {"seed", seed_}, {"vocab_size", V_},
          {"seq_length", T_}, {"next_sample", next_sample_}};
}

void MockBatchSource::restore(const nlohmann::json& s) {
  auto mismatch = [&](const std::string& what) {
    throw InputError(fmt::format("data state {}: {} (this run: {})", s.dump(), what, state().dump()));
  };
  if (!s.is_object() || s.value("kind", "") != "mock") mismatch("not the state of mock data");
  if (s.value("split", "") != split_name(split_)) mismatch("another split");
  if (s.value("seed", uint64_t{0}) != seed_ || s.value("vocab_size", int64_t{0}) != V_ ||
      s.value("seq_length", int64_t{0}) != T_)
    mismatch("another seed, vocabulary or sequence length");
  const auto& n = s.find("next_sample");
  if (n == s.end() || !n->is_number_integer() || n->get<int64_t>() < 0) mismatch("no valid next_sample");
  next_sample_ = n->get<int64_t>();
}

std::string MockBatchSource::describe() const {
  return fmt::format("mock (vocab {}, seq {}, seed {}, {} split; a {}-way Markov chain: loss floor ln {} = {:.3f})", V_,
                     T_, seed_, split_name(split_), kBranching, kBranching, std::log(double(kBranching)));
}

}  // namespace nemotron::train
