// The SFT stage's config and batch source: packed rows become micro-batches with their sequence
// layout and float32 loss mask; the cursor restores exactly (and refuses another stream's state);
// config and dataset problems are InputErrors naming the key or file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/packed_parquet.h"
#include "train/sft_config.h"
#include "train/sft_data_source.h"

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;

class SftData : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / fmt::format("sft_data_source_test_{}", ::getpid());
    fs::remove_all(root);
    for (const char* split : {"train", "valid"}) {
      fs::create_directories(root / "splits" / split);
      io::PackedParquetWriter w((root / "splits" / split / "shard_000.parquet").string());
      for (int r = 0; r < 5; ++r) {
        io::PackedRow row;
        for (int t = 0; t < 7 + r; ++t) row.input_ids.push_back(1 + (t * 3 + r) % 20);
        row.loss_mask.assign(row.input_ids.size(), 1);
        row.loss_mask[0] = 0;
        row.seq_start_id = {0, 4};
        w.add(row);
      }
      w.close();
    }
    write_metadata(12);
  }
  void TearDown() override { fs::remove_all(root); }
  void write_metadata(int pack) {
    std::ofstream(root / "metadata.json") << nlohmann::json{{"eos_token_id", 0}, {"vocab_size", 24}, {"pack_size", pack}}.dump();
  }
  nlohmann::json tree() const {
    return {{"model", {{"vocab_size", 32}, {"hidden_size", 8}, {"hybrid_override_pattern", "-"}, {"intermediate_size", 16}}},
            {"train", {{"global_batch_size", 2}, {"micro_batch_size", 1}, {"train_iters", 4}}},
            {"optimizer", {{"lr", 1e-3}}},
            {"dataset", {{"dataset_root", root.string()}, {"seq_length", 16}}}};
  }
  std::string error_of(const nlohmann::json& t) {
    try {
      train::SftConfig c = train::read_sft_config(t, "sft.yaml");
      train::make_sft_data_sources(c);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path root;
};

TEST_F(SftData, batches_carry_the_packed_layout_and_mask) {
  train::SftConfig c = train::read_sft_config(tree(), "sft.yaml");
  EXPECT_EQ(c.seq_length, 16);
  EXPECT_EQ(c.stage_name, "sft");
  train::SftDataSources d = train::make_sft_data_sources(c);
  EXPECT_EQ(d.pad_id, 0);
  ASSERT_TRUE(d.train);
  EXPECT_FALSE(d.valid);  // eval_iters 0
  model::Batch b = d.train->next();
  ASSERT_EQ(b.input_ids.shape(), Shape({1, 16}));
  ASSERT_TRUE(b.seq_idx.defined() && b.position_ids.defined());
  EXPECT_EQ(b.loss_mask.dtype(), DType::f32);
  const std::vector<double> seq = b.seq_idx.to_f64_vector(), pos = b.position_ids.to_f64_vector();
  // Segments [0, 4) and [4, len): 3 and len-5 inputs, then padding as segment 2.
  EXPECT_EQ(seq[0], 0);
  EXPECT_EQ(seq[2], 0);
  EXPECT_EQ(seq[3], 1);
  EXPECT_EQ(pos[3], 0);
  EXPECT_EQ(pos[4], 1);
  EXPECT_EQ(seq[15], 2);
}

TEST_F(SftData, cursor_restores_exactly_and_refuses_another_stream) {
  train::SftConfig c = train::read_sft_config(tree(), "sft.yaml");
  train::SftDataSources a = train::make_sft_data_sources(c), b = train::make_sft_data_sources(c);
  a.train->next();
  const nlohmann::json st = a.train->state();
  const std::vector<double> want = a.train->next().input_ids.to_f64_vector();
  b.train->restore(st);
  EXPECT_EQ(b.train->next().input_ids.to_f64_vector(), want);
  nlohmann::json other = st;
  other["seed"] = 7;
  EXPECT_THROW(b.train->restore(other), InputError);
  EXPECT_THROW(b.train->restore(nlohmann::json{{"kind", "mock"}}), InputError);
}

TEST_F(SftData, bad_config_and_data_name_the_key_or_file) {
  nlohmann::json t = tree();
  t["dataset"]["packed_sequence_specs"] = {{"packed_sequence_size", 8}};
  EXPECT_NE(error_of(t).find("dataset.packed_sequence_specs.packed_sequence_size: 8 differs from dataset.seq_length 16"),
            std::string::npos)
      << error_of(t);
  t = tree();
  t["dataset"].erase("dataset_root");
  EXPECT_NE(error_of(t).find("dataset.dataset_root: missing"), std::string::npos) << error_of(t);
  t = tree();
  t["dataset"]["dataset_rot"] = "x";
  EXPECT_NE(error_of(t).find("dataset_rot"), std::string::npos) << error_of(t);
  write_metadata(32);
  EXPECT_NE(error_of(tree()).find("pack_size 32 exceeds dataset.seq_length 16"), std::string::npos) << error_of(tree());
  fs::remove(root / "metadata.json");
  EXPECT_NE(error_of(tree()).find("metadata.json: missing"), std::string::npos) << error_of(tree());
}

}  // namespace
}  // namespace nemotron::testing
