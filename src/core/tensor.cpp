#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

namespace nemotron {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

Tensor Tensor::empty(Shape shape, DType dtype, Backend& backend) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.backend_ = &backend;
  size_t bytes = t.nbytes();
  Backend* b = &backend;
  void* p = backend.allocate(bytes);
  t.buffer_ = std::shared_ptr<void>(p, [b, bytes](void* q) { b->deallocate(q, bytes); });
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Backend& backend) {
  Tensor t = empty(std::move(shape), dtype, backend);
  t.zero_();
  return t;
}

Tensor Tensor::wrap(Shape shape, DType dtype, Backend& backend, std::shared_ptr<void> keep, void* data) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.backend_ = &backend;
  t.buffer_ = std::shared_ptr<void>(std::move(keep), data);
  return t;
}

Tensor Tensor::view(Shape shape) const {
  NM_CHECK(shape.numel() == numel(), "view {} of {}", shape.str(), shape_.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  NM_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice [{}, {}) of {}", begin, end, shape_.str());
  std::vector<int64_t> dims = shape_.dims();
  int64_t row = dims[0] == 0 ? 0 : numel() / dims[0];
  dims[0] = end - begin;
  Tensor t = *this;
  t.shape_ = Shape(dims);
  t.offset_bytes_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

void Tensor::zero_() {
  if (numel() > 0) backend_->fill_zero(raw(), nbytes());
}

void Tensor::copy_from(const Tensor& src) {
  NM_CHECK(src.shape() == shape_ && src.dtype() == dtype_, "copy {} into {}", src.describe(), describe());
  if (numel() == 0) return;
  if (device() == src.device()) {
    backend_->copy_on_device(raw(), src.raw(), nbytes());
  } else if (src.device().is_cpu()) {
    backend_->copy_from_host(raw(), src.raw(), nbytes());
  } else if (device().is_cpu()) {
    src.backend().copy_to_host(raw(), src.raw(), nbytes());
  } else {
    copy_from(src.to(host_backend()));
  }
}

Tensor Tensor::to(Backend& backend) const {
  Tensor t = empty(shape_, dtype_, backend);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to_host(DType want) const {
  Tensor host = device().is_cpu() ? *this : to(host_backend());
  if (want == dtype_) return device().is_cpu() ? clone() : host;
  Tensor out = empty(shape_, want);
  int64_t n = numel();
  auto get = [&](int64_t i) -> double {
    switch (dtype_) {
      case DType::f64: return static_cast<const double*>(host.raw())[i];
      case DType::f32: return static_cast<const float*>(host.raw())[i];
      case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(host.raw())[i]);
      case DType::i32: return static_cast<const int32_t*>(host.raw())[i];
      case DType::i64: return static_cast<double>(static_cast<const int64_t*>(host.raw())[i]);
    }
    return 0;
  };
  for (int64_t i = 0; i < n; ++i) {
    switch (want) {
      case DType::f64: static_cast<double*>(out.raw())[i] = get(i); break;
      case DType::f32: static_cast<float*>(out.raw())[i] = static_cast<float>(get(i)); break;
      case DType::bf16: static_cast<uint16_t*>(out.raw())[i] = f32_to_bf16(static_cast<float>(get(i))); break;
      case DType::i32: static_cast<int32_t*>(out.raw())[i] = static_cast<int32_t>(get(i)); break;
      case DType::i64:
        static_cast<int64_t*>(out.raw())[i] =
            dtype_ == DType::i64 ? static_cast<const int64_t*>(host.raw())[i] : static_cast<int64_t>(get(i));
        break;
    }
  }
  return out;
}

std::vector<double> Tensor::to_f64_vector() const {
  Tensor h = to_host(DType::f64);
  const double* p = h.data<double>();
  return std::vector<double>(p, p + numel());
}

std::string Tensor::describe() const {
  return fmt::format("{}{} on {}", dtype_name(dtype_), shape_.str(), backend_ ? device().str() : "nothing");
}

void expect_shape(const Tensor& t, const Shape& shape, const char* what) {
  NM_CHECK(t.defined(), "{} is not set", what);
  NM_CHECK(t.shape() == shape, "{}: expected shape {}, got {}", what, shape.str(), t.shape().str());
}

void expect_dtype(const Tensor& t, DType dtype, const char* what) {
  NM_CHECK(t.dtype() == dtype, "{}: expected {}, got {}", what, dtype_name(dtype), dtype_name(t.dtype()));
}

void expect_same_device(const Tensor& a, const Tensor& b, const char* what) {
  NM_CHECK(a.device() == b.device(), "{}: tensors on {} and {}", what, a.device().str(), b.device().str());
}

}  // namespace nemotron
