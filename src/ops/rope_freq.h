// RoPE inverse frequencies, shared by the CPU reference and the CUDA kernel (plain C++, no core
// headers, so nvcc and the host compiler both read it). Two rules (reference/architectures.md B.3):
//   plain:  f_i = theta^(-2i/hd)
//   llama3 (rope_scaling.rope_type "llama3"): with wavelength l_i = 2 pi / f_i,
//     l_i < L / high_freq_factor  -> f_i            (fast dims: unchanged)
//     l_i > L / low_freq_factor   -> f_i / factor    (slow dims: stretched)
//     otherwise, s = (L / l_i - low) / (high - low), f_i <- (1 - s) f_i / factor + s f_i
//   where L = original_max_position_embeddings. (HF _compute_llama3_parameters; Megatron
//   _apply_scaling.) All in float64.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define NM_ROPE_HD __host__ __device__
#else
#define NM_ROPE_HD
#endif

namespace nemotron::ops {

struct RopeFreq {
  double theta = 10000.0;
  // llama3 scaling, used iff factor > 0 (factor 0 = plain RoPE).
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
  bool llama3() const { return factor > 0.0; }
};

// Inverse frequency of pair i (0 <= i < hd/2) for head size hd.
NM_ROPE_HD inline double rope_inv_freq(const RopeFreq& r, int64_t i, int64_t hd) {
  const double f = pow(r.theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
  if (!(r.factor > 0.0)) return f;
  const double L = r.original_max_position_embeddings;
  const double wavelen = 6.283185307179586 / f;
  if (wavelen < L / r.high_freq_factor) return f;
  if (wavelen > L / r.low_freq_factor) return f / r.factor;
  const double s = (L / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1.0 - s) * f / r.factor + s * f;
}

}  // namespace nemotron::ops
