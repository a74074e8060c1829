// What the model benchmarks share (cpu_train_step, cpu_decode, cuda_rollout): a model of a config
// file with the benchmarks' initial weights (seed 1234; random weights serve: throughput does not
// depend on their values), and random token ids drawn from one Philox stream.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/hybrid_model.h"
#include "model/model_config.h"

namespace nemotron::bench {

// `initialize` false leaves the weights for the caller to fill (cuda_rollout --fast-init);
// `trainable` false builds every parameter frozen, with no gradient ever allocated (generation).
inline std::unique_ptr<model::HybridModel> make_bench_model(const model::ModelConfig& cfg, Backend& backend,
                                                            DType dtype, const model::ModelShard& shard = {},
                                                            bool initialize = true, bool trainable = true) {
  auto net = std::make_unique<model::HybridModel>(cfg, backend, dtype, shard, trainable);
  if (initialize) net->init(1234);
  return net;
}

// n token ids in [0, vocab) from stream `seed`, values [offset, offset + n) of it.
inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed, uint64_t offset = 0) {
  Philox rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>(rng.bits(offset + i) % static_cast<uint64_t>(vocab));
  return ids;
}

// `count` prompts of `len` tokens each: prompt s is values [s * len, (s + 1) * len) of the stream.
inline std::vector<std::vector<int32_t>> random_prompts(int64_t count, int64_t len, int64_t vocab, uint64_t seed) {
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t s = 0; s < count; ++s)
    prompts.push_back(random_tokens(len, vocab, seed, static_cast<uint64_t>(s * len)));
  return prompts;
}

// A training micro-batch of B rows of T random tokens (stream `seed`): labels are the next token,
// -100 at each row's end.
inline model::Batch random_train_batch(const model::ModelConfig& cfg, int64_t B, int64_t T, uint64_t seed) {
  Philox rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(rng.bits(i) % cfg.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) labels[i] = (i + 1) % T == 0 ? -100 : ids[i + 1];
  return {Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels), {}};
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nemotron::bench
