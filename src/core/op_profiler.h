// Op-level phase profiling: every public op entry opens an OpScope naming its phase; a profiler
// hung on the Context (nullptr = off: the scope costs one branch) sees the outermost scopes only,
// so an op that calls another (grouped_linear -> matmul, matmul -> bias_add) counts once, to the
// phase of the op the model called. Device-neutral: the CUDA profiler times scopes with events.
#pragma once
#include <array>
#include <cstdint>

#include "core/context.h"

namespace nemotron {

enum class OpPhase : uint8_t {
  gemm,         // matmul, linear, grouped GEMMs
  attention,    // attention forward/backward kernels
  ssd_scan,     // the Mamba-2 chunked scan
  moe_routing,  // router scores/top-k, dispatch (permute), combine, aux loss
  elementwise,  // norms, activations, conv1d, softplus, rope, bias, casts, embedding, adds
  loss,         // cross-entropy
  optimizer,    // AdamW, grad norm, grad scaling
};
inline constexpr int kOpPhaseCount = 7;

const char* op_phase_name(OpPhase phase);  // "gemm", "attention", ...
inline constexpr std::array<OpPhase, kOpPhaseCount> all_op_phases() {
  return {OpPhase::gemm,        OpPhase::attention, OpPhase::ssd_scan, OpPhase::moe_routing,
          OpPhase::elementwise, OpPhase::loss,      OpPhase::optimizer};
}

struct OpProfiler {
  virtual ~OpProfiler() = default;
  // An outermost scope opens / closes. They always pair, also when the op throws; end runs in a
  // destructor, so it must not throw (keep the error for later).
  // `op` names the op (its function name, a string literal that outlives the profiler).
  virtual void begin(Context& ctx, OpPhase phase, const char* op) = 0;
  virtual void end(Context& ctx) = 0;
  int open_scopes = 0;    // nesting depth, kept by OpScope: only depth 0 -> 1 reaches begin
  double gemm_flops = 0;  // FLOPs (2 per multiply-add) of the GEMMs issued, for TFLOP/s
};

// RAII: `OpScope scope(ctx, OpPhase::gemm, __func__);` as the first line of an op.
class OpScope {
 public:
  OpScope(Context& ctx, OpPhase phase, const char* op) {
    if (!ctx.profiler) return;
    if (ctx.profiler->open_scopes == 0) ctx.profiler->begin(ctx, phase, op);  // may throw: then no scope
    ++ctx.profiler->open_scopes;
    ctx_ = &ctx;
    profiler_ = ctx.profiler;
  }
  ~OpScope() {
    if (profiler_ && --profiler_->open_scopes == 0) profiler_->end(*ctx_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Context* ctx_ = nullptr;
  OpProfiler* profiler_ = nullptr;
};

// Called where a GEMM is issued (once per product, not by the ops that wrap it).
inline void profile_gemm_flops(const Context& ctx, double flops) {
  if (ctx.profiler) ctx.profiler->gemm_flops += flops;
}

}  // namespace nemotron
