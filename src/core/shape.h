// Tensor shapes: a short list of non-negative extents, row-major (last dim fastest).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace nemotron {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  std::string str() const;  // "[2, 5, 7]"

 private:
  std::vector<int64_t> dims_;
};

}  // namespace nemotron
