#include "core/workspace.h"

#include <algorithm>

namespace nemotron {

namespace {
constexpr size_t kAlign = 256;  // keeps every activation aligned for vector loads and GEMMs
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Workspace::Workspace(Backend& backend, size_t initial_bytes) : backend_(&backend) {
  if (initial_bytes > 0) add_block(initial_bytes);
}

void Workspace::add_block(size_t bytes) {
  Backend* b = backend_;
  void* p = b->allocate(bytes);
  blocks_.push_back(Block{std::shared_ptr<void>(p, [b, bytes](void* q) { b->deallocate(q, bytes); }), bytes, 0});
}

Tensor Workspace::alloc(Shape shape, DType dtype) {
  size_t bytes = align_up(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  if (blocks_.empty() || blocks_.back().used + bytes > blocks_.back().bytes)
    add_block(std::max(bytes, blocks_.empty() ? size_t{1} << 20 : blocks_.back().bytes));
  Block& blk = blocks_.back();
  void* p = static_cast<char*>(blk.memory.get()) + blk.used;
  blk.used += bytes;
  used_ += bytes;
  high_water_ = std::max(high_water_, used_);
  return Tensor::wrap(std::move(shape), dtype, *backend_, blk.memory, p);
}

Tensor Workspace::zeros(Shape shape, DType dtype) {
  Tensor t = alloc(std::move(shape), dtype);
  t.zero_();
  return t;
}

void Workspace::reset() {
  if (blocks_.size() > 1) {
    size_t total = capacity_bytes();
    blocks_.clear();  // tensors still held keep their block alive through shared ownership
    add_block(std::max(total, high_water_));
  }
  for (Block& b : blocks_) b.used = 0;
  used_ = 0;
}

size_t Workspace::capacity_bytes() const {
  size_t n = 0;
  for (const Block& b : blocks_) n += b.bytes;
  return n;
}

}  // namespace nemotron
