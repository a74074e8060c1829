// Sharded checkpoints (train/sharded_checkpoint.h) without MPI: expert parameters that live on
// different ranks' stores (expert parallelism: each store registers only its own experts) written
// by their owners and reassembled into one store; a one-rank sharded save loaded back with its
// moments and tokenizer; the content hash of train_state.json refusing a changed file.
#include "train/sharded_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/checkpoint_layout.h"
#include "test_util.h"

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;

// Rank `rank` of `size` with no peers: what rank_pieces asks of a group (who is first).
class FixedRank final : public parallel::Communicator {
 public:
  FixedRank(int rank, int size) : rank_(rank), size_(size) {}
  using Communicator::all_reduce_host;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "fixed"; }
  void all_reduce(Tensor&, parallel::ReduceOp) override {}
  void reduce_scatter(const Tensor&, Tensor&, parallel::ReduceOp) override {}
  void all_gather(const Tensor&, Tensor&) override {}
  void all_to_all_v(const Tensor&, const std::vector<int64_t>&, Tensor&, const std::vector<int64_t>&) override {}
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
  void all_reduce_host(std::vector<double>&, parallel::ReduceOp) override {}

 private:
  int rank_, size_;
};

// World rank `rank` of EP 2 over 2 ranks: the dense weights' data group spans both ranks, each
// expert's expert-data group is the rank alone.
parallel::ProcessGroups ep2_groups(int rank) {
  parallel::ProcessGroups g;
  g.world_rank = rank;
  g.world = g.data = g.data_context = g.expert = std::make_shared<FixedRank>(rank, 2);
  g.expert_data = g.tensor = g.context = std::make_shared<FixedRank>(0, 1);
  return g;
}

const char* kDense = "backbone.embeddings.weight";
std::string expert(int e) { return fmt::format("backbone.layers.0.mixer.experts.{}.up_proj.weight", e); }

// A store with the dense weight and the routed experts `experts`, values from (name, element).
std::unique_ptr<model::ParamStore> store_with(const std::vector<int>& experts, float salt) {
  auto s = std::make_unique<model::ParamStore>(host_backend(), DType::f32);
  auto fill = [&](model::Param& p, float base) {
    for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<float>()[i] = salt * (base + static_cast<float>(i));
  };
  fill(s->add(kDense, {4, 3}), 100);
  for (int e : experts) {
    model::Param& p = s->add(expert(e), {2, 3});
    p.shard.replicas = model::ParamReplicas::expert_data;
    fill(p, 10.0f * static_cast<float>(e + 1));
  }
  return s;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / fmt::format("nemotron-sharded-{}-{}", ::getpid(),
                                                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(ShardedCheckpoint, experts_on_disjoint_ranks_reassemble_into_one_store) {
  TempDir tmp;
  auto rank0 = store_with({0, 1}, 1.0f), rank1 = store_with({2, 3}, 1.0f);
  std::vector<std::string> files;
  for (int r = 0; r < 2; ++r) {
    train::CheckpointContent c;
    c.params = r == 0 ? rank0.get() : rank1.get();
    const std::vector<io::TensorPiece> pieces = train::rank_pieces(c, ep2_groups(r));
    // Rank 0 writes the dense weight (first of its data group) and its experts; rank 1 its experts only.
    EXPECT_EQ(pieces.size(), r == 0 ? 3u : 2u);
    files.push_back((tmp.path / io::rank_file_name(r)).string());
    io::save_piece_file(files.back(), pieces);
  }
  const io::PieceSet set = io::PieceSet::open(files, tmp.path.string());
  auto whole = store_with({0, 1, 2, 3}, 0.0f);  // one process: every expert
  train::load_sharded_weights(set, *whole, tmp.path.string());
  const auto want = store_with({0, 1, 2, 3}, 1.0f);
  for (size_t k = 0; k < whole->all().size(); ++k)
    for (int64_t i = 0; i < whole->all()[k]->value.numel(); ++i)
      ASSERT_EQ(whole->all()[k]->value.data<float>()[i], want->all()[k]->value.data<float>()[i]) << whole->all()[k]->name;
  // An EP rank loads its own experts; the others' are not an error.
  auto mine = store_with({2, 3}, 0.0f);
  train::load_sharded_weights(set, *mine, tmp.path.string());
  EXPECT_EQ(mine->get(expert(3)).value.data<float>()[5], 45.0f);
  // A store that needs an expert no rank wrote: the tensor is named.
  auto more = store_with({4}, 0.0f);
  EXPECT_NE(input_error([&] { train::load_sharded_weights(set, *more, tmp.path.string()); })
                .find("missing tensor \"" + expert(4) + "\""),
            std::string::npos);
}

TEST(ShardedCheckpoint, one_rank_save_loads_back_with_moments_and_tokenizer) {
  TempDir tmp;
  auto params = store_with({0}, 1.0f);
  train::AdamW opt(*params, {});
  for (size_t k = 0; k < params->all().size(); ++k) {
    Tensor& m = opt.first_moments()[k];
    for (int64_t i = 0; i < m.numel(); ++i) m.data<float>()[i] = 0.25f * static_cast<float>(k + 1);
  }
  const fs::path tok = tmp.path / "tok";
  fs::create_directories(tok);
  std::ofstream(tok / "tokenizer.json") << "{}";
  train::CheckpointContent c;
  c.params = params.get();
  c.optimizer = &opt;
  c.state.iteration = 3;
  c.config_yaml = "model: {}\n";
  c.tokenizer_dir = tok.string();
  const std::string dir =
      train::save_sharded_checkpoint((tmp.path / "save").string(), c, *parallel::ProcessGroups::single());
  EXPECT_EQ(dir, (tmp.path / "save" / "iter_0000003").string());
  EXPECT_EQ(io::rank_files(dir), std::vector<std::string>{dir + "/rank_00000.safetensors"});
  EXPECT_TRUE(fs::exists(fs::path(dir) / "tokenizer" / "tokenizer.json"));
  EXPECT_EQ(train::resolve_checkpoint_dir((tmp.path / "save").string()), dir);
  EXPECT_EQ(train::read_train_state(dir).iteration, 3);

  auto back = store_with({0}, 0.0f);
  train::AdamW opt2(*back, {});
  train::load_checkpoint_weights(dir, *back);
  train::load_checkpoint_optimizer(dir, opt2, *back, 7);
  EXPECT_EQ(back->get(expert(0)).value.data<float>()[4], 14.0f);
  EXPECT_EQ(opt2.first_moments()[1].data<float>()[2], 0.5f);
  EXPECT_EQ(opt2.steps_taken(), 7);
}

TEST(ShardedCheckpoint, a_changed_file_is_refused_by_its_hash_unless_verification_is_off) {
  TempDir tmp;
  auto params = store_with({}, 1.0f);
  train::CheckpointContent c;
  c.params = params.get();
  c.state.iteration = 1;
  c.config_yaml = "model: {}\n";
  const std::string dir = train::save_checkpoint((tmp.path / "save").string(), c);
  // Same size, one byte of a weight changed (what a size check cannot see).
  const fs::path model = fs::path(dir) / "model.safetensors";
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(model) - 2));
    f.put('\x7f');
  }
  const std::string e = input_error([&] { train::resolve_checkpoint_dir((tmp.path / "save").string()); });
  EXPECT_NE(e.find(model.string() + ": content hash xxh64:"), std::string::npos) << e;
  EXPECT_NE(e.find("NEMOTRON_CHECKPOINT_VERIFY=0"), std::string::npos) << e;
  io::set_verify_checkpoint_hashes(false);
  EXPECT_EQ(train::resolve_checkpoint_dir((tmp.path / "save").string()), dir);
  io::set_verify_checkpoint_hashes(true);
}

}  // namespace
}  // namespace nemotron::testing
