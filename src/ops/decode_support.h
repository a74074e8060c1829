// Shared plumbing of the incremental-decoding ops (attention_decode, kv_cache_decode,
// causal_conv1d_decode, ssd_decode): the ragged batch they all read, and the refusal of a device
// without a kernel. A decode call holds S sequences; sequence i owns new-token rows
// [cu_seqlens[i], cu_seqlens[i+1]) of the packed inputs ([Ntot, ...], Ntot = cu_seqlens[S]) and
// its cached state lives in slot slot_ids[i] of the per-slot tensors.
#pragma once
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace nemotron::ops {

// The CPU reference's tensors must all be on the CPU (the entry sends CUDA calls to the kernels
// before this check, so a CUDA tensor here sits beside CPU ones).
inline void require_cpu_decode(const Tensor& t, const char* op) {
  if (t.device().is_cuda())
    throw Error(fmt::format("{}: a CUDA tensor beside CPU ones (every tensor of one call must be on one device)", op));
  if (!t.device().is_cpu()) throw Error(fmt::format("{}: no kernel for {} tensors", op, t.device().str()));
}

// The CUDA path: every tensor (the int32 index tensors too) on the CUDA device, in the given dtype
// (undefined tensors are optional inputs and pass).
inline void require_cuda_decode(const Tensor& t, DType dtype, const char* what, const char* op) {
  if (!t.defined()) return;
  NM_CHECK(t.device().is_cuda(), "{} on CUDA: {} must be on the CUDA device with the other tensors, got {}", op, what,
           t.device().str());
  NM_CHECK(t.dtype() == dtype, "{} on CUDA: {} must be {}, got {}", op, what, dtype_name(dtype), dtype_name(t.dtype()));
}

// Checks an int32 vector of `n` elements on the CPU and returns its values.
inline std::vector<int32_t> decode_index_vector(const Tensor& t, int64_t n, const char* what, const char* op) {
  NM_CHECK(t.defined() && t.dtype() == DType::i32 && t.numel() == n, "{}: {} must be int32 [{}], got {}", op, what, n,
           t.defined() ? t.describe() : std::string("undefined"));
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + n);
}

// Checks cu_seqlens [S+1] (non-decreasing from 0) and returns it.
inline std::vector<int32_t> decode_offsets(const Tensor& cu_seqlens, int64_t total_tokens, const char* op) {
  NM_CHECK(cu_seqlens.defined() && cu_seqlens.rank() == 1 && cu_seqlens.dim(0) >= 1,
           "{}: cu_seqlens must be int32 [S+1]", op);
  std::vector<int32_t> cu = decode_index_vector(cu_seqlens, cu_seqlens.dim(0), "cu_seqlens", op);
  NM_CHECK(cu.front() == 0 && cu.back() == total_tokens, "{}: cu_seqlens must run from 0 to {} tokens, got {} .. {}",
           op, total_tokens, cu.front(), cu.back());
  for (size_t i = 1; i < cu.size(); ++i) NM_CHECK(cu[i] >= cu[i - 1], "{}: cu_seqlens must not decrease", op);
  return cu;
}

}  // namespace nemotron::ops
