#include "core/dtype.h"

#include "core/error.h"

namespace nemotron {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "float64";
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  if (n == "float64" || n == "f64" || n == "fp64" || n == "double") return DType::f64;
  if (n == "float32" || n == "f32" || n == "fp32" || n == "float") return DType::f32;
  if (n == "bfloat16" || n == "bf16") return DType::bf16;
  if (n == "int32" || n == "i32") return DType::i32;
  if (n == "int64" || n == "i64") return DType::i64;
  throw InputError(fmt::format("unknown dtype \"{}\" (expected float64, float32, bfloat16, int32 or int64)", n));
}

}  // namespace nemotron
