// The contract every layer's mixer keeps (Mamba-2, attention, MLP, MoE). A hybrid layer is
// x + mixer(rmsnorm(x)); the norm and the residual live in hybrid_model, the mixer sees the
// normed input u [B, T, H] and returns [B, T, H].
// Memory rules (STYLE.md lesson 3): forward keeps what backward needs in a MixerSaved subclass;
// backward returns du (a fresh tensor, overwritten) and accumulates parameter gradients (+=).
#pragma once
#include <memory>

#include "core/context.h"
#include "model/decode_state.h"
#include "model/model_config.h"
#include "model/param.h"

namespace nemotron::model {

// How the sequences lie in the rows of one call (reference/data-formats.md §6.8): packed rows hold
// several sequences back to back. seq_idx [B, T] int32 numbers them along each row (attention and
// the Mamba state, conv1d and SSD scan, restart at every change); position_ids [B, T] int32 are the
// positions within each sequence (RoPE). Both undefined: one sequence per row, positions 0..T-1,
// the exact unpacked computation. Mixers that mix no tokens (MLP, MoE) ignore it.
struct SequenceLayout {
  Tensor seq_idx;
  Tensor position_ids;
  // Sequence parallelism (model/sequence_split.h): {B, T} of the whole call, whose rows the
  // tensor group's ranks hold in parts between the mixers; empty otherwise.
  Shape rows;
  // Context parallelism (model/context_split.h): the rows hold this context rank's two chunks of
  // every sequence (position_ids then the global positions); attention and Mamba exchange over
  // ctx's context group. False: the rows are whole sequences, whatever the groups.
  bool context_split = false;
};

struct MixerSaved {
  virtual ~MixerSaved() = default;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  virtual LayerKind kind() const = 0;
  // Built split over the tensor-parallel group (model/model_shard.h): forward then returns this
  // rank's partial output and backward its partial input gradient, which the layer stack sums over
  // the group. A mixer that is not split holds the whole layer on every rank and computes it whole.
  virtual bool split_over_tensor() const { return false; }
  // Draws the initial weights (reference/architectures.md A.3.6, A.9) from `seed`.
  virtual void init(uint64_t seed) = 0;
  // u [B, T, H] -> out [B, T, H]. `saved` may be null (inference: keep nothing); a mixer that
  // uses `layout` keeps it in `saved` for its backward.
  virtual Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                         const SequenceLayout& layout = {}) = 0;
  virtual Tensor backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) = 0;
  // Incremental decoding (model/decode_state.h). The layer's own state for `cfg` on `backend`
  // (tensors in `dtype`, recurrent states in its stat_dtype), or null when it keeps none.
  virtual std::unique_ptr<LayerDecodeState> make_decode_state(const DecodeConfig& cfg, Backend& backend,
                                                              DType dtype) const {
    (void)cfg, (void)backend, (void)dtype;
    return nullptr;
  }
  // u [1, Ntot, H]: the new tokens of batch.size() sequences packed back to back (batch.cu) ->
  // out [1, Ntot, H], each token computed as in forward() over its whole sequence, reading and
  // advancing `state` (this layer's make_decode_state). Inference: nothing kept for backward.
  // The default serves mixers that mix no tokens (MLP, MoE: per-token forward); a token-mixing
  // mixer without its own extend refuses.
  virtual Tensor extend(Context& ctx, const Tensor& u, LayerDecodeState* state, const DecodeBatch& batch) {
    (void)state, (void)batch;
    if (kind() != LayerKind::mlp && kind() != LayerKind::moe)
      throw Error(fmt::format("{} mixer: no incremental decoding", layer_kind_name(kind())));
    return forward(ctx, u, nullptr);
  }
  // Matmul FLOPs of the forward pass per token at sequence length T (for `model info`, MFU).
  virtual double forward_flops_per_token(int64_t T) const = 0;
};

}  // namespace nemotron::model
