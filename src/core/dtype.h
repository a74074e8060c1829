// Element types a tensor can hold. bf16 is a storage type: the CPU computes in f32/f64 and
// converts with round-to-nearest-even; CUDA kernels compute on it directly.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace nemotron {

enum class DType : uint8_t { f64, f32, bf16, i32, i64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // "float32"/"f32"/"bf16"/...; throws InputError
inline bool is_float(DType t) { return t == DType::f64 || t == DType::f32 || t == DType::bf16; }
// The dtype of statistics (norm rstd, softmax log-sum-exp, scan states) kept for tensors of `t`:
// float32 for reduced precision, float64 when the whole computation is float64.
inline DType stat_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }
// The dtype of parameter gradients (and master weights) for parameters held in `t`: bf16 weights
// accumulate their gradients in float32 (Megatron's main_grad), full-precision ones in their own.
inline DType grad_dtype(DType t) { return t == DType::bf16 ? DType::f32 : t; }

// bf16 <-> f32, round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace nemotron
