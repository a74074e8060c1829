#include <gtest/gtest.h>

#include "data/data_loader.h"
#include "data/dataset_builder.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;

// Sample i = [10 i, 10 i + 1, ..., 10 i + n - 1], with kPadTokenId from position `pad_from` of
// the last sample on.
class CountingDataset : public SampleDataset {
 public:
  CountingDataset(int64_t size, int64_t T, bool extra, int64_t pad_from = -1)
      : size_(size), T_(T), extra_(extra), pad_from_(pad_from) {}
  int64_t size() const override { return size_; }
  int64_t sequence_length() const override { return T_; }
  int64_t sample_length() const override { return T_ + (extra_ ? 1 : 0); }
  void sample(int64_t i, int64_t* out) const override {
    for (int64_t t = 0; t < sample_length(); ++t)
      out[t] = (i == size_ - 1 && pad_from_ >= 0 && t >= pad_from_) ? kPadTokenId : 10 * i + t;
  }
  std::string description() const override { return "counting" + std::to_string(size_); }

 private:
  int64_t size_, T_;
  bool extra_;
  int64_t pad_from_;
};

std::vector<int32_t> ints(const Tensor& t) {
  return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
}
std::vector<float> floats(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

TEST(DataLoader, inputs_are_sample_head_and_labels_the_shifted_sample) {
  auto ds = std::make_shared<CountingDataset>(6, 3, true);
  LoaderConfig cfg;
  cfg.micro_batch_size = 2;
  DataLoader loader(ds, cfg);
  Batch b = loader.next();
  EXPECT_EQ(b.input_ids.shape(), Shape({2, 3}));
  EXPECT_EQ(ints(b.input_ids), (std::vector<int32_t>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(ints(b.labels), (std::vector<int32_t>{1, 2, 3, 11, 12, 13}));
  EXPECT_EQ(floats(b.loss_mask), std::vector<float>(6, 1.0f));
  EXPECT_EQ(loader.next().first_sample, 2);
  EXPECT_EQ(loader.consumed_samples(), 4);
}

TEST(DataLoader, padding_is_masked_and_becomes_token_zero) {
  auto ds = std::make_shared<CountingDataset>(1, 4, true, 3);  // [0 1 2 pad pad]
  DataLoader loader(ds, LoaderConfig{});
  Batch b = loader.next();
  EXPECT_EQ(ints(b.input_ids), (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(ints(b.labels), (std::vector<int32_t>{1, 2, kIgnoreLabel, kIgnoreLabel}));
  EXPECT_EQ(floats(b.loss_mask), (std::vector<float>{1, 1, 0, 0}));
}

TEST(DataLoader, without_the_extra_token_the_last_label_is_ignored) {
  auto ds = std::make_shared<CountingDataset>(1, 3, false);
  DataLoader loader(ds, LoaderConfig{});
  Batch b = loader.next();
  EXPECT_EQ(ints(b.input_ids), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(ints(b.labels), (std::vector<int32_t>{1, 2, kIgnoreLabel}));
}

TEST(DataLoader, eod_mask_loss_masks_positions_whose_input_is_eod) {
  auto ds = std::make_shared<CountingDataset>(1, 4, true);  // [0 1 2 3 4]
  LoaderConfig cfg;
  cfg.eod_mask_loss = true;
  cfg.eod_id = 2;
  Batch b = DataLoader(ds, cfg).next();
  EXPECT_EQ(floats(b.loss_mask), (std::vector<float>{1, 1, 0, 1}));
  EXPECT_EQ(ints(b.labels), (std::vector<int32_t>{1, 2, kIgnoreLabel, 4}));
}

TEST(DataLoader, data_parallel_ranks_take_consecutive_slices_of_each_step) {
  auto ds = std::make_shared<CountingDataset>(12, 2, true);
  LoaderConfig one;
  one.micro_batch_size = 4;
  DataLoader whole(ds, one);
  LoaderConfig r0 = one, r1 = one;
  r0.micro_batch_size = r1.micro_batch_size = 2;
  r0.data_parallel_size = r1.data_parallel_size = 2;
  r1.data_parallel_rank = 1;
  DataLoader a(ds, r0), b(ds, r1);
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> all = ints(whole.next().input_ids), x = ints(a.next().input_ids), y = ints(b.next().input_ids);
    x.insert(x.end(), y.begin(), y.end());
    EXPECT_EQ(x, all) << "step " << step;
  }
  EXPECT_FALSE(a.has_next());
  EXPECT_EQ(input_error([&] { a.next(); }),
            "data: the dataset has 12 samples and 12 are consumed; the next step needs 4 more. Build the dataset with "
            "more samples (train_iters x global_batch_size)");
}

TEST(DataLoader, resumed_run_sees_exactly_the_batches_of_a_continuous_run) {
  GptDataSource src;
  src.mock = MockConfig{};
  src.mock->vocab_size = 97;
  src.mock->num_sequences = 500;
  src.mock->max_sequence_length = 40;
  GptBuildConfig build;
  build.gpt.sequence_length = 16;
  SplitDatasets ds = build_gpt_datasets(src, build, {96, 0, 0}, "test");
  LoaderConfig cfg;
  cfg.micro_batch_size = 4;
  DataLoader continuous(ds[0], cfg);
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(ints(continuous.next().input_ids));

  DataLoader first(ds[0], cfg);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ints(first.next().input_ids), expected[i]);
  const std::string saved = first.state().dump();
  // A new process: datasets rebuilt from the same config, cursor restored from the saved JSON.
  SplitDatasets again = build_gpt_datasets(src, build, {96, 0, 0}, "test");
  DataLoader resumed(again[0], cfg);
  resumed.load_state(nlohmann::json::parse(saved), "ckpt/data.json");
  EXPECT_EQ(resumed.consumed_samples(), 16);
  for (int i = 4; i < 10; ++i) EXPECT_EQ(ints(resumed.next().input_ids), expected[i]) << "step " << i;
}

TEST(DataLoader, state_errors_name_the_file_and_field) {
  auto ds = std::make_shared<CountingDataset>(10, 2, true);
  DataLoader loader(ds, LoaderConfig{});
  nlohmann::json good = loader.state();
  auto err = [&](nlohmann::json s) { return input_error([&] { loader.load_state(s, "ckpt/data.json"); }); };
  nlohmann::json other = DataLoader(std::make_shared<CountingDataset>(11, 2, true), LoaderConfig{}).state();
  EXPECT_EQ(err(other), "ckpt/data.json: dataset.fingerprint: the state was saved for another dataset (expected " +
                            loader.fingerprint() + ", got " + other["dataset"]["fingerprint"].get<std::string>() +
                            "); resume with the same data, sequence length, seed and sample counts");
  nlohmann::json bad = good;
  bad["consumed_samples"] = 11;
  EXPECT_EQ(err(bad), "ckpt/data.json: consumed_samples: expected an integer in [0, 10], got 11");
  bad["consumed_samples"] = "3";
  EXPECT_EQ(err(bad), "ckpt/data.json: consumed_samples: expected an integer in [0, 10], got \"3\"");
  bad = good;
  bad.erase("dataset");
  EXPECT_EQ(err(bad), "ckpt/data.json: dataset.fingerprint: missing");
  bad = good;
  bad["dataset"]["size"] = 9;
  EXPECT_EQ(err(bad), "ckpt/data.json: dataset.size: expected 10, got 9");
}

TEST(LoaderConfig, validation_names_the_key) {
  LoaderConfig c;
  c.micro_batch_size = 0;
  EXPECT_EQ(input_error([&] { c.validate("train"); }), "train.micro_batch_size: expected a positive integer, got 0");
  c = LoaderConfig{};
  c.data_parallel_rank = 2;
  c.data_parallel_size = 2;
  EXPECT_EQ(input_error([&] { c.validate("train"); }),
            "train.data_parallel_rank: expected an integer in [0, 2), got 2");
  c = LoaderConfig{};
  c.eod_mask_loss = true;
  EXPECT_EQ(input_error([&] { c.validate("train"); }), "train.eod_id: eod_mask_loss needs the EOD token id, got -1");
}

}  // namespace
}  // namespace nemotron::data
