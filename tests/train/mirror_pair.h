// A data group of two members whose other member holds exactly this one's tensors: a sum over
// it doubles, a reduce-scatter gives twice rank 0's half, an all-gather repeats this rank's part.
// Lets a single process run the sharded paths (GradSlots, a training step under FSDP) and check
// them against the one-process arithmetic.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace nemotron::testing {

class MirrorPair final : public parallel::Communicator {
 public:
  int waits = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string kind() const override { return "mirror"; }
  void all_reduce(Tensor& t, parallel::ReduceOp) override { scale(t, 2); }
  void reduce_scatter(const Tensor& in, Tensor& out, parallel::ReduceOp) override {
    ASSERT_EQ(in.numel(), 2 * out.numel());
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = 2 * in.data<float>()[i];
  }
  void reduce_scatter_async(const Tensor& in, Tensor& out, parallel::ReduceOp op) override { reduce_scatter(in, out, op); }
  void all_gather(const Tensor& in, Tensor& out) override {
    for (int64_t r = 0; r < 2; ++r) out.slice(r * in.numel(), (r + 1) * in.numel()).copy_from(in);
  }
  void all_to_all_v(const Tensor&, const std::vector<int64_t>&, Tensor&, const std::vector<int64_t>&) override {
    FAIL();
  }
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
  void wait_pending() override { ++waits; }
  void all_reduce_host(std::vector<double>& v, parallel::ReduceOp) override {
    for (double& x : v) x *= 2;
  }

 private:
  static void scale(Tensor& t, float s) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= s;
  }
};

}  // namespace nemotron::testing
