// The communicators under a real launcher: `mpirun -np 2` and `-np 4` (tests/CMakeLists.txt runs
// this binary both ways). Every collective on the world and on sub-groups, with values that make
// each member's contribution visible, against what the collective must give; the groups of a
// layout (EP 2 x DP 2 on 4 ranks). Only non-fatal EXPECTs: a rank that returned early from a test
// would leave the others waiting in the next collective.
#include <gtest/gtest.h>

#include <numeric>

#include "parallel/mpi_communicator.h"
#include "parallel/process_groups.h"

namespace nemotron::parallel {
namespace {

MpiRuntime* g_mpi = nullptr;

MpiCommunicator& world() {
  static MpiCommunicator w(MPI_COMM_WORLD);
  return w;
}

Tensor ramp(int64_t n, double base, DType dt = DType::f32) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = base + static_cast<double>(i);
  Tensor t = Tensor::from_vector<double>({n}, v);
  return dt == DType::f64 ? t : t.to_host(dt);
}

TEST(Mpi, AllReduceSumsEveryRank) {
  const int R = world().size(), me = world().rank();
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor t = ramp(1000, 10.0 * me, dt);
    world().all_reduce(t, ReduceOp::sum);
    const std::vector<double> got = t.to_f64_vector();
    const double ranks = R * (R - 1) / 2.0;
    for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], R * static_cast<double>(i) + 10.0 * ranks);
  }
  Tensor m = ramp(3, me);
  world().all_reduce(m, ReduceOp::max);
  EXPECT_EQ(m.to_f64_vector(), (std::vector<double>{R - 1.0, R + 0.0, R + 1.0}));
}

TEST(Mpi, ReduceScatterGivesEachRankItsChunkOfTheSum) {
  const int R = world().size(), me = world().rank();
  const int64_t chunk = 5;
  Tensor in = ramp(chunk * R, 100.0 * me), out = Tensor::zeros({chunk}, DType::f32);
  world().reduce_scatter(in, out, ReduceOp::sum);
  const double ranks = R * (R - 1) / 2.0;
  const std::vector<double> got = out.to_f64_vector();
  for (int64_t i = 0; i < chunk; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], R * static_cast<double>(me * chunk + i) + 100.0 * ranks);
}

TEST(Mpi, AllGatherConcatenatesInRankOrder) {
  const int R = world().size(), me = world().rank();
  Tensor in = ramp(3, 10.0 * me, DType::bf16), out = Tensor::zeros({3 * R}, DType::bf16);
  world().all_gather(in, out);
  const std::vector<double> got = out.to_f64_vector();
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(got[static_cast<size_t>(3 * r + i)], 10.0 * r + i);
}

TEST(Mpi, AllToAllVMovesUnevenCounts) {
  // Rank s sends (s + d + 1) elements of value 100 s + d to rank d.
  const int R = world().size(), me = world().rank();
  std::vector<int64_t> send(R), recv(R);
  std::vector<double> values;
  for (int d = 0; d < R; ++d) {
    send[d] = me + d + 1;
    recv[d] = d + me + 1;
    for (int64_t k = 0; k < send[d]; ++k) values.push_back(100.0 * me + d);
  }
  Tensor in = Tensor::from_vector<double>({static_cast<int64_t>(values.size())}, values);
  Tensor out = Tensor::zeros({std::accumulate(recv.begin(), recv.end(), int64_t{0})}, DType::f64);
  world().all_to_all_v(in, send, out, recv);
  std::vector<double> want;
  for (int s = 0; s < R; ++s)
    for (int64_t k = 0; k < recv[s]; ++k) want.push_back(100.0 * s + me);
  EXPECT_EQ(out.to_f64_vector(), want);
}

// broadcast_text: the root's bytes, whatever their length (a tail word half used, none at all,
// bytes a C string would cut), replace every other rank's.
TEST(Mpi, BroadcastTextCopiesTheRootsBytes) {
  const int R = world().size(), me = world().rank();
  for (const std::string sent : {std::string("{\"stop\": true}"), std::string(), std::string("a\0b\xff", 4)}) {
    std::string text = me == R - 1 ? sent : std::string("left over from before");
    broadcast_text(world(), text, R - 1);
    EXPECT_EQ(text, sent);
  }
}

// gather_text: the root gets every rank's bytes in rank order (lengths that leave a tail word half
// used, none at all, bytes a C string would cut, its own); the others get nothing.
TEST(Mpi, GatherTextBringsEveryRanksBytesToTheRoot) {
  const int R = world().size(), me = world().rank();
  auto text_of = [](int r) { return r == 1 ? std::string() : std::string(static_cast<size_t>(r) + 2, 'a' + r) + std::string("\0\xff", 2); };
  for (int root : {0, R - 1}) {
    const std::vector<std::string> got = gather_text(world(), text_of(me), root);
    if (me != root) {
      EXPECT_TRUE(got.empty());
      continue;
    }
    EXPECT_EQ(static_cast<int>(got.size()), R);
    for (int r = 0; r < R && r < static_cast<int>(got.size()); ++r)
      EXPECT_EQ(got[static_cast<size_t>(r)], text_of(r)) << "rank " << r;
  }
}

TEST(Mpi, BroadcastAndHostValues) {
  const int R = world().size(), me = world().rank();
  Tensor t = ramp(4, me == R - 1 ? 7.0 : -1.0);
  world().broadcast(t, R - 1);
  EXPECT_EQ(t.to_f64_vector(), (std::vector<double>{7, 8, 9, 10}));
  std::vector<double> v{1.0, static_cast<double>(me)};
  world().all_reduce_host(v, ReduceOp::sum);
  EXPECT_EQ(v, (std::vector<double>{static_cast<double>(R), R * (R - 1) / 2.0}));
  EXPECT_EQ(world().all_reduce_host(static_cast<double>(me), ReduceOp::max), R - 1.0);
  world().barrier();
}

TEST(Mpi, GroupsOfALayoutReduceWithinThemselves) {
  const int R = world().size(), me = world().rank();
  // EP 2 where the world allows it (2 or 4 ranks), with 8 experts.
  const RankLayout layout({1, 1, 2, false}, R, {8}, "test");
  auto g = ProcessGroups::create(layout, &world(), nullptr);
  EXPECT_EQ(g->world->size(), R);
  EXPECT_EQ(g->data->size(), R);
  EXPECT_EQ(g->expert->size(), 2);
  EXPECT_EQ(g->expert_data->size(), R / 2);
  EXPECT_EQ(g->expert->kind(), "mpi");
  EXPECT_EQ(g->tensor->kind(), "self");
  // Each EP group sums the world ranks of its members (consecutive pairs).
  EXPECT_EQ(g->expert->all_reduce_host(static_cast<double>(me)), me / 2 * 4 + 1.0);
  // An expert's replicas: ranks with the same ep coordinate (parity).
  double want = 0;
  for (int r = me % 2; r < R; r += 2) want += r;
  EXPECT_EQ(g->expert_data->all_reduce_host(static_cast<double>(me)), want);
  EXPECT_EQ(g->expert->rank(), me % 2);
}

}  // namespace
}  // namespace nemotron::parallel

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  nemotron::parallel::MpiRuntime mpi;
  nemotron::parallel::g_mpi = &mpi;
  // Only rank 0 prints gtest's report; every rank's failures still set the exit code.
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  // The job fails when any rank failed.
  const double worst = nemotron::parallel::world().all_reduce_host(static_cast<double>(rc), nemotron::parallel::ReduceOp::max);
  return worst > 0 ? 1 : 0;
}
