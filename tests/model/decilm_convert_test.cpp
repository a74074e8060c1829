// DeciLM checkpoints in and out without remote code (issue 15 item 3): a Hub-style directory
// (config.json with block_configs + model.safetensors under the B.4 names) written from a random
// tiny model with every sub-block kind is opened from the files alone, imported, exported and
// compared byte for byte, and the imported model computes the same logits as the original.
// (Numerical parity with a transformers-built reference: tests/parity/decilm_parity_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "block_configs.h"
#include "core/rng.h"
#include "model/hf_checkpoint.h"
#include "model/hf_convert.h"
#include "model/hybrid_model.h"
#include "model/weights_io.h"
#include "test_util.h"

namespace nemotron::model {
namespace {

namespace fs = std::filesystem;

// A Hub-style DeciLM directory from a random float32 model; returns the model.
std::unique_ptr<HybridModel> write_hub_dir(const fs::path& dir, const ModelConfig& cfg) {
  auto net = std::make_unique<HybridModel>(cfg, host_backend(), DType::f32);
  for (Param* p : net->params().all())
    fill_uniform(p->value, Philox(5, name_stream(p->name)), p->name.ends_with("norm.weight") ? 0.5 : -0.5,
                          p->name.ends_with("norm.weight") ? 1.5 : 0.5);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << nlohmann::json::parse(testing::kTinyDeciLmJson).dump(2);
  save_weights(dir.string(), net->params());
  return net;
}

TEST(DeciLmConvert, hub_directory_opens_with_the_b4_names_and_round_trips_losslessly) {
  const fs::path root = fs::temp_directory_path() / fmt::format("nm_decilm_convert_{}", ::getpid());
  const ModelConfig cfg = testing::decilm_config();
  auto net = write_hub_dir(root / "hf", cfg);

  HfCheckpoint ck = HfCheckpoint::open((root / "hf").string());
  EXPECT_TRUE(ck.config().is_decilm());
  std::set<std::string> names;
  for (const HfTensor& t : ck.tensors()) names.insert(t.name);
  for (const char* n : {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                        "model.layers.1.post_attention_layernorm.weight", "model.layers.1.mlp.linear_mlp.weight",
                        "model.layers.2.self_attn.linear_attn.weight", "model.layers.3.self_attn.v_proj.weight",
                        "model.norm.weight", "lm_head.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("model.layers.1.input_layernorm.weight")) << "no-op attention has no norm";
  EXPECT_FALSE(names.count("model.layers.2.post_attention_layernorm.weight")) << "no-op FFN has no norm";
  EXPECT_EQ(ck.tensor("model.layers.3.self_attn.k_proj.weight").shape, Shape({4, 16}));  // 1 KV head of 4
  EXPECT_EQ(ck.tensor("model.layers.3.mlp.up_proj.weight").shape, Shape({512, 16}));

  HybridModel back(ck.config(), host_backend(), DType::f32);
  ck.load_into(back.params());
  Context ctx{&host_backend(), nullptr, DType::f32};
  Tensor ids = Tensor::from_vector<int32_t>({1, 6}, {1, 5, 22, 3, 0, 9});
  EXPECT_EQ(back.logits(ctx, ids).to_f64_vector(), net->logits(ctx, ids).to_f64_vector());

  RoundtripReport r = roundtrip((root / "hf").string(), (root / "work").string(), [](const std::string&) {});
  EXPECT_TRUE(r.lossless()) << roundtrip_table(r);
  EXPECT_EQ(r.rows.size(), ck.tensors().size());
  // The export's config.json is a DeciLM one that reads back to the same model.
  const ModelConfig exported = load_model_config((root / "work" / "hf" / "config.json").string());
  EXPECT_EQ(exported.hybrid_override_pattern, cfg.hybrid_override_pattern);
  fs::remove_all(root);
}

TEST(DeciLmConvert, a_checkpoint_that_disagrees_with_block_configs_is_named) {
  const fs::path root = fs::temp_directory_path() / fmt::format("nm_decilm_missing_{}", ::getpid());
  ModelConfig cfg = testing::decilm_config();
  write_hub_dir(root / "hf", cfg);
  // Block 1 FFN made normal in config.json: the stored linear_mlp no longer belongs.
  nlohmann::json j = nlohmann::json::parse(testing::kTinyDeciLmJson);
  j["block_configs"][1]["ffn"] = {{"ffn_mult", 1.0}, {"no_op", false}, {"replace_with_linear", false}};
  std::ofstream(root / "hf" / "config.json") << j.dump(2);
  const std::string err = testing::input_error([&] { HfCheckpoint::open((root / "hf").string()); });
  EXPECT_NE(err.find("model.layers.1.mlp.linear_mlp.weight\" is not part of the model config.json describes"),
            std::string::npos)
      << err;
  fs::remove_all(root);
}

}  // namespace
}  // namespace nemotron::model
