// Training from Megatron .bin/.idx files through the data layer (GPT dataset, loader cursor):
// a per-split blend.json and a blend cut by a split both train, the loader's cursor is the
// checkpointed data state, and a run resumed from it repeats the uninterrupted run bit for bit.
#include "train/data_sources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "data/blend.h"
#include "data/indexed_dataset_builder.h"
#include "model/hybrid_model.h"
#include "test_util.h"
#include "train/trainer.h"
#include "train_fixtures.h"

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;
using train::TrainResult;

struct DataDir {
  fs::path path = fs::temp_directory_path() / fmt::format("nemotron-data-src-{}", ::getpid());
  DataDir() {
    fs::remove_all(path);
    fs::create_directories(path);
    // Documents of 5..44 tokens of the mock Markov chain (vocabulary 64), so the model can learn.
    for (const char* name : {"train", "valid"}) {
      train::MockBatchSource chain(64, 64, 1, std::string(name) == "train" ? 11 : 12, 0);
      data::IndexedDatasetBuilder b((path / name).string());
      for (int64_t k = 0; k < 60; ++k) {
        std::vector<int32_t> doc = chain.sample(k);
        doc.resize(static_cast<size_t>(5 + (k * 7) % 40));
        b.add_document(doc);
      }
      b.finalize();
    }
    data::BlendPerSplit blends;
    blends[0] = data::Blend{{(path / "train").string()}, std::nullopt};
    blends[1] = data::Blend{{(path / "valid").string()}, std::nullopt};
    data::write_blend_json((path / "blend.json").string(), blends);
  }
  ~DataDir() { fs::remove_all(path); }
};

struct GptRun {
  train::PretrainConfig cfg;
  model::HybridModel net;
  train::DataSources data;
  GptRun(const std::vector<std::string>& overrides, uint64_t init_seed)
      : cfg(tiny_train_config(overrides)), net(cfg.model, host_backend(), DType::f32), data(make_data_sources(cfg)) {
    net.init(init_seed);
  }
  TrainResult go(bool resume) {
    train::Trainer t(cfg, net, *data.train, data.valid.get(), {nullptr, {}, {}, {}});
    if (resume) t.restore_from_config();
    return t.run();
  }
};

TEST(GptDataSources, resume_from_bin_idx_data_equals_uninterrupted_run_bit_for_bit) {
  DataDir d;
  const std::vector<std::string> base = {"dataset.mock=false",
                                         "dataset.per_split_data_args_path=" + (d.path / "blend.json").string()};
  GptRun full(base, 1);
  ASSERT_TRUE(full.data.valid);
  TrainResult a = full.go(false);
  ASSERT_EQ(a.steps.size(), 6u);

  const std::string save = (d.path / "ckpt").string();
  std::vector<std::string> first = base, second = base;
  first.insert(first.end(), {"checkpoint.save=" + save, "train.exit_interval=3"});
  second.insert(second.end(), {"checkpoint.save=" + save, "checkpoint.load=" + save});
  GptRun b_run(first, 1);
  TrainResult b = b_run.go(false);
  ASSERT_EQ(b.steps.size(), 3u);
  const train::TrainState st = train::read_train_state(save + "/iter_0000003");
  EXPECT_EQ(st.data["train"]["kind"], "gpt");
  EXPECT_EQ(st.data["train"]["consumed_samples"], 12);
  GptRun c_run(second, 9);
  TrainResult c = c_run.go(true);
  ASSERT_EQ(c.steps.size(), 3u);
  for (size_t i = 0; i < 6; ++i) {
    const train::StepRecord& r = i < 3 ? b.steps[i] : c.steps[i - 3];
    EXPECT_EQ(r.lm_loss, a.steps[i].lm_loss) << "iteration " << i + 1;
    EXPECT_EQ(r.grad_norm, a.steps[i].grad_norm) << "iteration " << i + 1;
  }
  EXPECT_EQ(c.evals.back().lm_loss, a.evals.back().lm_loss);

  // Mock data cannot take over a checkpoint of file data (and the reverse): one clear error.
  std::vector<std::string> mock = {"checkpoint.load=" + save};
  GptRun wrong(mock, 1);
  EXPECT_EQ(input_error([&] { wrong.go(true); }).rfind("data state {", 0), 0u);
}

TEST(GptDataSources, a_blend_cut_by_a_split_trains_and_validates) {
  DataDir d;
  GptRun r({"dataset.mock=false", "dataset.blend=[" + (d.path / "train").string() + "]", "dataset.split=8,2,0",
            "train.train_iters=2", "train.eval_interval=0", "scheduler.lr_wsd_decay_iters=1"},
           1);
  ASSERT_TRUE(r.data.valid);
  TrainResult res = r.go(false);
  ASSERT_EQ(res.steps.size(), 2u);
  ASSERT_EQ(res.evals.size(), 1u);
  EXPECT_TRUE(std::isfinite(res.evals[0].lm_loss));
  EXPECT_NE(r.data.train->describe().find("train split"), std::string::npos);
}

TEST(GptDataSources, a_missing_blend_json_is_an_input_error) {
  EXPECT_NE(input_error([] {
              train::make_data_sources(tiny_train_config(
                  {"dataset.mock=false", "dataset.per_split_data_args_path=/nonexistent/blend.json"}));
            }).find("/nonexistent/blend.json"),
            std::string::npos);
}

}  // namespace
}  // namespace nemotron::testing
