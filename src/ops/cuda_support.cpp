#include "ops/cuda_support.h"

#include <algorithm>

namespace nemotron::ops {

const std::vector<std::string>& cuda_supported_ops() {
#if NEMOTRON_CUDA
  static const std::vector<std::string> ops{"rmsnorm", "matmul", "elementwise", "cast", "bias_add", "relu2", "swiglu", "embedding", "embedding_range", "softmax_cross_entropy", "vocab_parallel_cross_entropy", "adamw", "grad_norm", "causal_conv1d", "dt_softplus", "gated_rmsnorm", "mamba_a", "attention", "rope", "ssd_scan", "ssd_scan_chunk_states", "chunk_decay", "context_states", "moe_router", "moe_dispatch", "moe_combine", "moe_seq_aux", "grouped_matmul", "kv_cache_write_decode", "attention_decode", "causal_conv1d_decode", "ssd_decode", "dropout", "transpose_blocks", "split_columns", "swiglu_halves", "qkv_rope_cache_write"};
#else
  static const std::vector<std::string> ops;
#endif
  return ops;
}

bool cuda_supports(const std::string& op) {
  const auto& s = cuda_supported_ops();
  return std::find(s.begin(), s.end(), op) != s.end();
}

}  // namespace nemotron::ops
