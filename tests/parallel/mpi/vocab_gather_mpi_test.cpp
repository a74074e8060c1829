// model::gather_vocab under `mpirun -np 2` and `-np 4`: the whole vocabulary's logits from each
// rank's columns of a split LM head (all-gather + transpose_blocks, no host copy) against the
// host reference (every rank's block of columns copied into its place row by row), bit for bit
// in float32 and bf16, for one row and for many. Only non-fatal EXPECTs (a rank that returned
// early would leave the others waiting in a collective).
#include <gtest/gtest.h>

#include "mpi_gtest_main.h"

#include <cstring>

#include "model/vocab_parallel.h"
#include "parallel/mpi_communicator.h"
#include "parallel/process_groups.h"

namespace nemotron::model {
namespace {

std::shared_ptr<parallel::MpiCommunicator> world() {
  static auto w = std::make_shared<parallel::MpiCommunicator>(MPI_COMM_WORLD);
  return w;
}

// Every group of one except the tensor group, which is the world.
parallel::ProcessGroups tensor_groups() {
  parallel::ProcessGroups g = *parallel::ProcessGroups::single();
  g.tensor = world();
  g.world = world();
  g.world_rank = world()->rank();
  return g;
}

// The whole [R, V] logits every rank agrees on: distinct values, exact in bf16.
std::vector<double> whole_logits(int64_t R, int64_t V) {
  std::vector<double> v(static_cast<size_t>(R * V));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>(i % 251) - 125) / 8.0;
  return v;
}

// The host path: all-gather to [T, R, Vl], then rank t's block of columns into place per row.
Tensor host_reference(const Tensor& every, int64_t T, int64_t R, int64_t Vl) {
  Tensor whole = Tensor::empty({R, T * Vl}, every.dtype());
  const size_t es = dtype_size(every.dtype());
  const char* src = static_cast<const char*>(every.raw());
  char* dst = static_cast<char*>(whole.raw());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(dst + static_cast<size_t>((r * T + t) * Vl) * es, src + static_cast<size_t>((t * R + r) * Vl) * es,
                  static_cast<size_t>(Vl) * es);
  return whole;
}

void check(DType dt, int64_t R, int64_t Vl) {
  const parallel::ProcessGroups groups = tensor_groups();
  Context ctx;
  ctx.groups = &groups;
  ctx.compute_dtype = dt;
  const int64_t T = world()->size(), t = world()->rank(), V = T * Vl, H = 3;
  Param head;
  head.name = "lm_head.weight";
  head.value = Tensor::empty({Vl, H}, dt);
  head.shard.global_shape = Shape({V, H});
  head.shard.offset = {t * Vl, 0};
  ASSERT_TRUE(head.tensor_split());
  const std::vector<double> all = whole_logits(R, V);
  std::vector<double> mine(static_cast<size_t>(R * Vl));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t v = 0; v < Vl; ++v)
      mine[static_cast<size_t>(r * Vl + v)] = all[static_cast<size_t>(r * V + t * Vl + v)];
  const Tensor local = Tensor::from_vector<double>({R, Vl}, mine).to_host(dt);
  const Tensor got = gather_vocab(ctx, head, local);
  EXPECT_EQ(got.shape(), Shape({R, V}));
  EXPECT_EQ(got.to_f64_vector(), Tensor::from_vector<double>({R, V}, all).to_host(dt).to_f64_vector());
  Tensor every = Tensor::empty({T, R, Vl}, dt);
  world()->all_gather(local, every);
  EXPECT_EQ(got.to_f64_vector(), host_reference(every, T, R, Vl).to_f64_vector());
}

TEST(GatherVocab, equals_the_host_path_in_float32) {
  check(DType::f32, 1, 7);
  check(DType::f32, 5, 16);
}

TEST(GatherVocab, equals_the_host_path_in_bf16) {
  check(DType::bf16, 1, 9);
  check(DType::bf16, 6, 32);
}

TEST(GatherVocab, whole_head_is_returned_as_it_is) {
  Context ctx;
  Param head;
  head.value = Tensor::empty({8, 3}, DType::f32);
  const Tensor logits = Tensor::from_vector<double>({2, 8}, whole_logits(2, 8)).to_host(DType::f32);
  EXPECT_EQ(gather_vocab(ctx, head, logits).raw(), logits.raw());
}

}  // namespace
}  // namespace nemotron::model

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
