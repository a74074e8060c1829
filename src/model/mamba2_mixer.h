// The Mamba-2 mixer of an `M` layer (reference/architectures.md A.3):
//   u -> in_proj -> [z | x B C | dt] -> causal conv + SiLU on x, B, C -> dt = clamp(softplus(.))
//     -> chunked SSD scan -> gated grouped RMSNorm (gate z) -> out_proj
// Parameters carry the Hub names under `prefix` (A.3.1). in_proj and out_proj are model::Linear
// (frozen weights skip their dW; one adapter wrapper covers them like every other projection).
// in_proj is applied as five GEMMs on contiguous row blocks of its weight and the conv per channel block, so z, x, B, C and dt come
// out as separate dense tensors without split copies. Saved activations are per token (no
// per-chunk matrices); dt and the normed output are recomputed in backward. The conv output is
// kept: recomputing it read x, B, C again and wrote them a second time (one more conv forward per
// layer and step), while keeping it costs the same bytes as its input, (d + 2GN) per token.
#pragma once
#include <array>
#include <string>

#include "model/linear.h"
#include "model/mixer.h"
#include "model/model_shard.h"

namespace nemotron::model {

struct ContextScanChain;

// What backward needs, all [B, T, .] per token: d = nH*P, GN = G*N.
struct Mamba2Saved : MixerSaved {
  Tensor u;                    // [B, T, H] mixer input, the caller's tensor (in_proj weight gradient)
  Tensor z;                    // [B, T, d] gate
  Tensor x_raw, B_raw, C_raw;  // [B, T, d], [B, T, GN], [B, T, GN] conv inputs
  Tensor x, Bm, Cm;            // the conv outputs (the scan's inputs), same shapes (no halos)
  Tensor dt_raw;               // [B, T, nH] in_proj dt rows, before dt_bias and softplus
  Tensor y;                    // [B, T, d] scan output
  Tensor rstd;                 // [B*T, G] gated-norm statistics
  Tensor seq_idx;              // [B, T] int32 packed-sequence ids of the forward, or undefined
  LinearSaved in_proj, out_proj;  // their adapters' h (LoRA), for the backward
  // Context parallelism (model/mamba_context.h): x/B/C_raw are then the chunks with their halos
  // [2B, K-1+L, .], conv_seq_idx their ids, and chain the scan's incoming states.
  bool context_split = false;
  Tensor conv_seq_idx;
  std::shared_ptr<ContextScanChain> chain;
};

class Mamba2Mixer : public Mixer {
 public:
  // Registers prefix + in_proj.weight [2d + 2GN + nH, H], conv1d.weight [d + 2GN, 1, K],
  // conv1d.bias (use_conv_bias), dt_bias, A_log, D [nH], norm.weight [d], out_proj.weight [H, d],
  // and in_proj.bias / out_proj.bias (use_bias). 1-D tensors get no weight decay.
  // Tensor parallelism (shard.tensor_size T > 1): nH / T heads and G / T groups, each tensor's
  // per-head or per-group blocks split on their own; forward returns the partial out_proj product.
  Mamba2Mixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index,
              const ModelShard& shard = {});

  LayerKind kind() const override { return LayerKind::mamba; }
  bool split_over_tensor() const override { return split_; }
  // A.3.6 (HF): A_log = log(1..nH), D = 1, dt_bias = softplus^-1(dt), dt = max(exp(U(log
  // time_step_min, log time_step_max)), time_step_floor); conv weight and bias U(+-1/sqrt(K))
  // (Kaiming-uniform a=sqrt(5) with fan_in = K); norm 1; in_proj N(0, initializer_range);
  // out_proj N(0, initializer_range / sqrt(num_layers)) when rescale_prenorm_residual; biases 0.
  void init(uint64_t seed) override;
  // Packed rows (layout.seq_idx): the conv window and the scan state restart at every sequence.
  // Context parallelism (layout.context_split): the conv's halo and the scan's state pass between
  // the context ranks' chunks in sequence order (model/mamba_context.h).
  Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                 const SequenceLayout& layout = {}) override;
  Tensor backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) override;
  // 2 * (MACs per token), counting in_proj H(2d + 2GN + nH) + out_proj dH and the chunked scan's
  // dense products with Q' = min(chunk_size, T): G Q' N (C B^T, shared by a group's heads) +
  // nH (Q' P (intra-chunk M x) + P N (state read C S^T) + P N (state write x^T B)). The conv,
  // norm and elementwise work are not matmuls and are not counted.
  double forward_flops_per_token(int64_t T) const override;
  // Per slot: the x, B and C conv windows [slots, K-1, width] in `dtype` and the SSM state
  // [slots, nH, P, N] in stat_dtype(dtype), zeroed (model/decode_state.h).
  std::unique_ptr<LayerDecodeState> make_decode_state(const DecodeConfig& cfg, Backend& backend,
                                                      DType dtype) const override;
  // forward() on the new tokens with the conv continued from each slot's window
  // (ops/causal_conv1d_decode.h) and the SSM recurrence from its state: the prompts of a step
  // (several new tokens: new, continued, forked, beside running sequences) through the chunked
  // scan (ops/ssd_scan.h, one padded row each from its slot's state, model/prefill_layout.h), the
  // single tokens (decodes) through ops/ssd_decode.h; a step without a layout all token by token.
  Tensor extend(Context& ctx, const Tensor& u, LayerDecodeState* state, const DecodeBatch& batch) override;

 private:
  // Rows [begin, end) of in_proj for one part, in the Hub order z, x, B, C, dt.
  struct Rows {
    int64_t begin, end;
  };
  enum Part { kZ, kX, kB, kC, kDt, kNumParts };
  Rows in_rows(Part part) const;
  Rows conv_rows(Part part) const;  // kX, kB, kC: channels of conv1d
  std::array<RowBlock, kNumParts> in_blocks() const;  // in_rows of every part, in Part order
  Tensor A(Context& ctx, DType dtype) const;  // -exp(A_log) [nH]
  // The x, B and C convs from their raw inputs, one launch for the three (context parallel: with
  // halos, which the outputs drop).
  void convs(Context& ctx, const Tensor* raw[3], const Tensor& seq_idx, bool context_split, Tensor out[3]) const;
  Tensor compute_dt(Context& ctx, const Tensor& dt_raw) const;
  // extend()'s scan of a step with prompts: conv_out x, B, C [T, .], dt [T, nH] -> y [1, T, d]
  // and each sequence's final state in ssm [slots, nH, P, N].
  void scan_prompts(Context& ctx, const Tensor conv_out[3], const Tensor& dt, const DecodeBatch& batch, Tensor& ssm,
                    Tensor& y) const;

  ModelConfig cfg_;
  std::string prefix_;
  int64_t layer_index_;
  bool split_ = false;
  int64_t H_, d_, nH_, P_, G_, N_, K_, GN_;  // this rank's heads, groups and widths
  int64_t first_head_ = 0;                   // global index of this rank's first head
  Linear in_proj_;
  Param* conv_w_;
  Param* conv_b_ = nullptr;
  Param* dt_bias_;
  Param* A_log_;
  Param* D_;
  Param* norm_w_;
  Linear out_proj_;
};

}  // namespace nemotron::model
