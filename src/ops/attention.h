// Causal scaled-dot-product attention with grouped KV heads (reference/architectures.md A.5, B.3):
//   o[b,t,h] = sum_{s<=t} softmax_s(q[b,t,h] . k[b,s,j] / sqrt(hd)) v[b,s,j],  j = h / (nq / nkv).
// Flash-attention contract: the forward saves only the row log-sum-exp lse[b,h,t] of the scaled
// scores; the backward recomputes the probabilities from q, k and lse (the CUDA kernel keeps it).
// Backward overwrites dq, dk, dv (activation gradients).
// Packed rows (ops/seq_idx.h): with seq_idx [B, T] int32 given, query t attends to key s only if
// s <= t and seq_idx[b, s] == seq_idx[b, t], so a row of several packed sequences gives each the
// output it would have alone. An undefined seq_idx is the plain causal mask, at no extra cost.
// Queries of a sequence's tail (context parallelism): q may hold fewer rows than k and v,
// q [B, T, nq, hd] with k/v [B, Tk, nkv, hd], T <= Tk; query row i is then the key sequence's
// position i + Tk - T and attends to keys s <= i + Tk - T (flash-attn's bottom-right causal mask);
// seq_idx is the keys' [B, Tk] (a query's id is its position's). T == Tk is the plain case.
// Dtypes (CUDA.md): q, k, v, o, dout, dq, dk, dv in the activation dtype T; lse in stat_dtype(T)
// (float32 on a bf16 call). CUDA kernels and their accumulation order: ops/attention_cuda.h.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// Sizes of one attention call; raw-pointer kernels take this.
struct AttentionDims {
  int64_t B = 0, T = 0, nq = 0, nkv = 0, hd = 0, Tk = 0;  // T query rows, Tk keys
  int64_t group() const { return nq / nkv; }  // query heads per KV head
  int64_t offset() const { return Tk - T; }    // key position of query row 0
};

// Checks q [B,T,nq,hd], k/v [B,Tk,nkv,hd] with T <= Tk, nq % nkv == 0, one float dtype; returns
// the sizes.
AttentionDims attention_dims(const Tensor& q, const Tensor& k, const Tensor& v);

// q, k, v -> o [B,T,nq,hd] and lse [B,nq,T] (natural log, of the scaled scores); seq_idx [B,Tk].
void attention_forward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, Tensor& lse,
                       const Tensor& seq_idx = {});

// From the forward's inputs, its output o and lse, and dO: dq like q, dk/dv like k (overwritten).
void attention_backward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                        const Tensor& seq_idx = {});

}  // namespace nemotron::ops
