// An arena for activations: bump allocation from large blocks, released all at once by reset()
// at the end of a step. After a step that overflowed into extra blocks, the next reset() merges
// them into one block, so a steady-state step makes no allocator calls at all.
#pragma once
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace nemotron {

class Workspace {
 public:
  explicit Workspace(Backend& backend, size_t initial_bytes = 0);
  Tensor alloc(Shape shape, DType dtype);
  Tensor zeros(Shape shape, DType dtype);
  // Invalidates every tensor handed out since construction or the previous reset.
  void reset();
  size_t used_bytes() const { return used_; }
  size_t capacity_bytes() const;
  size_t high_water_bytes() const { return high_water_; }
  Backend& backend() const { return *backend_; }

 private:
  struct Block {
    std::shared_ptr<void> memory;
    size_t bytes = 0, used = 0;
  };
  Backend* backend_;
  std::vector<Block> blocks_;
  size_t used_ = 0, high_water_ = 0;
  void add_block(size_t bytes);
};

}  // namespace nemotron
