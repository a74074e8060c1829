// DeciLM configs (reference/architectures.md B.2): block_configs parsed and validated once into
// the layer stack (model/layer_spec.h); the FFN width rule at the 49B's values; bad input naming
// the key.
#include <gtest/gtest.h>

#include "block_configs.h"
#include "core/error.h"
#include "model/layer_spec.h"
#include "test_util.h"

namespace nemotron::model {
namespace {

using nlohmann::json;
using testing::input_error;

std::string load_error(const json& j) {
  return input_error([&] { model_config_from_json(j, "config.json", false); });
}

TEST(DeciLmConfig, block_configs_become_a_stack_of_sub_layers) {
  ModelConfig c = testing::decilm_config();
  EXPECT_TRUE(c.is_decilm());
  EXPECT_EQ(c.hybrid_override_pattern, "*-LL*-");
  EXPECT_EQ(c.position_embedding_type, "rope");
  EXPECT_DOUBLE_EQ(c.rope_scaling_factor, 4.0);
  EXPECT_EQ(c.rope_original_max_position_embeddings, 16);
  std::vector<LayerSpec> s = layer_specs(c);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].kind, LayerKind::attention);
  EXPECT_EQ(s[0].norm, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(s[0].prefix, "model.layers.0.self_attn.");
  EXPECT_EQ(s[0].num_key_value_heads, 2);
  EXPECT_EQ(s[1].kind, LayerKind::mlp);
  EXPECT_EQ(s[1].norm, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(s[1].intermediate_size, 256);
  EXPECT_EQ(s[2].kind, LayerKind::linear);
  EXPECT_EQ(s[2].prefix + s[2].linear, "model.layers.1.mlp.linear_mlp.");
  EXPECT_EQ(s[2].norm, "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(s[3].prefix + s[3].linear, "model.layers.2.self_attn.linear_attn.");
  EXPECT_EQ(s[3].norm, "model.layers.2.input_layernorm.weight");
  EXPECT_EQ(s[4].num_key_value_heads, 1);
  EXPECT_EQ(s[4].block, 3);
  EXPECT_EQ(s[5].intermediate_size, 512);
  EXPECT_EQ(stack_names(c).embedding, "model.embed_tokens.weight");
  EXPECT_EQ(stack_names(c).final_norm, "model.norm.weight");
}

// B.2's table for H = 8192, and the rounding up to 256 of a small width.
TEST(DeciLmConfig, ffn_width_rule) {
  EXPECT_EQ(decilm_ffn_width(5.25, 8192), 28672);
  EXPECT_EQ(decilm_ffn_width(3.28125, 8192), 17920);
  EXPECT_EQ(decilm_ffn_width(2.625, 8192), 14336);
  EXPECT_EQ(decilm_ffn_width(1.3125, 8192), 7168);
  EXPECT_EQ(decilm_ffn_width(1.0, 8192), 5632);
  EXPECT_EQ(decilm_ffn_width(0.5, 8192), 2816);
  EXPECT_EQ(decilm_ffn_width(39.0, 16384), 425984);  // the 253B's widest (B.5)
  EXPECT_EQ(decilm_ffn_width(1.0, 16), 256);          // int(10.67) = 10 -> 256
}

// What we write reads back to the same config.
TEST(DeciLmConfig, hf_json_round_trips) {
  ModelConfig c = testing::decilm_config();
  json j = model_config_to_hf_json(c);
  EXPECT_EQ(j["architectures"][0], "DeciLMForCausalLM");
  EXPECT_EQ(j["model_type"], "nemotron-nas");
  EXPECT_TRUE(j["num_key_value_heads"].is_null());
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");
  ModelConfig back = model_config_from_json(j, "written.json", false);
  EXPECT_EQ(back.hybrid_override_pattern, c.hybrid_override_pattern);
  ASSERT_EQ(back.block_configs.size(), c.block_configs.size());
  for (size_t i = 0; i < c.block_configs.size(); ++i) {
    EXPECT_EQ(back.block_configs[i].attention, c.block_configs[i].attention) << i;
    EXPECT_EQ(back.block_configs[i].n_heads_in_group, c.block_configs[i].n_heads_in_group) << i;
    EXPECT_EQ(back.block_configs[i].ffn, c.block_configs[i].ffn) << i;
    EXPECT_EQ(back.block_configs[i].ffn_mult, c.block_configs[i].ffn_mult) << i;
  }
  EXPECT_EQ(back.rope_freq().factor, 4.0);
}

TEST(DeciLmConfig, bad_input_names_the_key) {
  json base = json::parse(testing::kTinyDeciLmJson);
  json j = base;
  j["num_hidden_layers"] = 5;
  EXPECT_EQ(load_error(j), "config.json: block_configs: has 4 entries but num_hidden_layers is 5 (one entry per layer)");
  j = base;
  j["block_configs"][3]["attention"]["n_heads_in_group"] = 3;
  EXPECT_EQ(load_error(j),
            "config.json: block_configs[3].attention.n_heads_in_group: 3 does not divide num_attention_heads 4");
  j = base;
  j["block_configs"][0]["ffn"]["ffn_mult"] = -1.0;
  EXPECT_EQ(load_error(j), "config.json: block_configs[0].ffn.ffn_mult: expected a positive number, got -1");
  j = base;
  j["block_configs"][1]["attention"]["replace_with_linear"] = true;
  EXPECT_NE(load_error(j).find("block_configs[1].attention.no_op: no_op and replace_with_linear are both true"),
            std::string::npos)
      << load_error(j);
  j = base;
  j["block_configs"][0]["attention"]["window_length"] = 4096;
  EXPECT_NE(load_error(j).find("block_configs[0].attention.window_length: unsupported"), std::string::npos)
      << load_error(j);
  j = base;
  j["rope_scaling"]["rope_type"] = "yarn";
  EXPECT_NE(load_error(j).find("rope_scaling.rope_type: supported: \"llama3\""), std::string::npos) << load_error(j);
  j = base;
  j.erase("num_hidden_layers");
  EXPECT_NE(load_error(j).find("num_hidden_layers: missing"), std::string::npos) << load_error(j);
  j = base;
  j["block_configs"] = json::array();
  EXPECT_NE(load_error(j).find("block_configs: expected a non-empty list"), std::string::npos) << load_error(j);
  j = base;  // MTP blocks are built from a Nemotron-H pattern: a DeciLM model has none
  j["num_nextn_predict_layers"] = 1;
  EXPECT_EQ(load_error(j), "config.json: num_nextn_predict_layers: multi-token prediction is not part of a "
                           "nemotron-nas (DeciLM) model; expected 0");
}

}  // namespace
}  // namespace nemotron::model
