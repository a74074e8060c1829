// A tensor: a shared, typed, contiguous row-major buffer on one device plus a shape. Views
// (reshape, leading-dim slices) share the buffer. No strides: every op sees dense memory, which
// keeps the CPU references plain loops and the CUDA kernels simple.
#pragma once
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace nemotron {

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::bf16; }

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized memory from `backend` (host memory when omitted).
  static Tensor empty(Shape shape, DType dtype, Backend& backend = host_backend());
  static Tensor zeros(Shape shape, DType dtype, Backend& backend = host_backend());
  // A tensor over memory owned by someone else (an mmap, an arena); `keep` holds it alive.
  static Tensor wrap(Shape shape, DType dtype, Backend& backend, std::shared_ptr<void> keep, void* data);
  template <class T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values) {
    NM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "{} values for shape {}", values.size(), shape.str());
    Tensor t = empty(std::move(shape), dtype_of<T>());
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  bool defined() const { return static_cast<bool>(buffer_); }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  Device device() const { return backend_->device(); }
  Backend& backend() const { return *backend_; }

  void* raw() const { return static_cast<char*>(buffer_.get()) + offset_bytes_; }
  // Typed host access; checks the dtype and that the tensor lives in host memory.
  template <class T> T* data() const {
    NM_CHECK(dtype_ == dtype_of<T>(), "tensor is {}, accessed as {}", dtype_name(dtype_), dtype_name(dtype_of<T>()));
    NM_CHECK(device().is_cpu(), "host access to a tensor on {}", device().str());
    return static_cast<T*>(raw());
  }

  Tensor view(Shape shape) const;               // same elements, new shape
  Tensor slice(int64_t begin, int64_t end) const;  // rows [begin, end) of dim 0
  Tensor select(int64_t i) const { return slice(i, i + 1).view(Shape(std::vector<int64_t>(shape_.dims().begin() + 1, shape_.dims().end()))); }

  void zero_();
  void copy_from(const Tensor& src);   // same shape and dtype, any devices
  Tensor to(Backend& backend) const;   // a copy on another device
  Tensor clone() const { return to(*backend_); }
  // Host copy converted to f64/f32 (any float dtype) or i64 (integer dtypes), for checks and I/O.
  Tensor to_host(DType dtype) const;
  std::vector<double> to_f64_vector() const;
  std::string describe() const;  // "float32[2, 3] on cpu"

 private:
  std::shared_ptr<void> buffer_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Backend* backend_ = nullptr;
};

// Checks used by ops to validate their arguments with a readable message.
void expect_shape(const Tensor& t, const Shape& shape, const char* what);
void expect_dtype(const Tensor& t, DType dtype, const char* what);
void expect_same_device(const Tensor& a, const Tensor& b, const char* what);

}  // namespace nemotron
