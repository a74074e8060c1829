#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/config_tree.h"
#include "core/error.h"
#include "model/model_config.h"

namespace nemotron::model {

using nlohmann::json;

namespace {

std::string repo_path(const std::string& rel) {
  return (nemotron::testing::source_root() / rel).string();
}

std::string write_temp(const std::string& name, const std::string& text) {
  return testing::write_temp("nemotron_model_config_test", name, text);
}
using testing::input_error;

// A valid recipe `model:` mapping with every layer kind; tests mutate it.
json tiny_model() {
  return json::parse(R"({
    "vocab_size": 256, "hidden_size": 32, "hybrid_override_pattern": "M*M-ME",
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "intermediate_size": 64,
    "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 8, "conv_kernel": 4,
    "chunk_size": 16,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "moe_shared_expert_intermediate_size": 32, "n_shared_experts": 1
  })");
}

// The error of reading `m` as a recipe's model: mapping from "t.yaml".
std::string recipe_error(const json& m) {
  return input_error([&] { model_config_from_json(m, "t.yaml", /*strict=*/true); });
}

json with(json m, const std::string& key, const json& value) {
  m[key] = value;
  return m;
}

json without(json m, const std::string& key) {
  m.erase(key);
  return m;
}

}  // namespace

TEST(ModelConfig, nano_fixture_in_transformers5_form) {
  // layers_block_type with linear_attention/full_attention names, time_step_limit with a
  // {"__float__": "Infinity"} bound, norm_eps next to layer_norm_epsilon, moe_latent_size null.
  ModelConfig c = load_model_config(repo_path("tests/fixtures/configs/nano3-30b-a3b.json"));
  EXPECT_EQ(c.hybrid_override_pattern, "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME");
  EXPECT_EQ(c.num_layers(), 52);
  EXPECT_EQ(c.hidden_size, 2688);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.mamba_d_inner(), 4096);
  EXPECT_EQ(c.mamba_in_proj_dim(), 10304);
  EXPECT_EQ(c.mamba_conv_dim(), 6144);
  EXPECT_EQ(c.n_routed_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_latent_size, 0);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.time_step_limit_min, 0.0);
  EXPECT_TRUE(std::isinf(c.time_step_limit_max));
  EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-5f);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.mtp_hybrid_override_pattern, "*E");  // transformers 5 writes the default list
}

TEST(ModelConfig, legacy_8b_fixture_with_python_infinity) {
  ModelConfig c = load_model_config(repo_path("tests/fixtures/configs/nemotron-h-8b.json"));
  EXPECT_EQ(c.num_layers(), 52);
  EXPECT_EQ(c.head_dim, 128);  // attention_head_dim
  EXPECT_EQ(c.n_groups, 8);    // mamba_n_groups
  EXPECT_EQ(c.conv_kernel, 4);
  EXPECT_EQ(c.mamba_in_proj_dim(), 18560);
  EXPECT_TRUE(std::isinf(c.time_step_limit_max));  // mamba_dt_limit [0.0, Infinity]
}

TEST(ModelConfig, legacy_aliases_map_to_hf_fields) {
  json j = json::parse(R"({
    "vocab_size": 64, "hidden_size": 16, "hybrid_override_pattern": "M*",
    "num_attention_heads": 2, "num_key_value_heads": 1, "attention_head_dim": 12,
    "mamba_num_heads": 4, "mamba_head_dim": 8, "ssm_state_size": 4,
    "mamba_n_groups": 2, "mamba_d_conv": 3, "mamba_expand": 7, "mamba_dt_min": 0.002, "mamba_dt_max": 0.2,
    "mamba_dt_limit": [0.01, 5], "mamba_dt_init_floor": 0.0002, "mamba_conv_bias": false,
    "mamba_chunk_size": 64, "mamba_proj_bias": true, "rms_norm_eps": 1e-6
  })");
  ModelConfig c = model_config_from_json(j, "c.json", /*strict=*/false);
  EXPECT_EQ(c.head_dim, 12);
  EXPECT_EQ(c.n_groups, 2);
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_EQ(c.time_step_min, 0.002);
  EXPECT_EQ(c.time_step_max, 0.2);
  EXPECT_EQ(c.time_step_limit_min, 0.01);
  EXPECT_EQ(c.time_step_limit_max, 5.0);
  EXPECT_EQ(c.time_step_floor, 0.0002);
  EXPECT_FALSE(c.use_conv_bias);
  EXPECT_EQ(c.chunk_size, 64);
  EXPECT_TRUE(c.use_bias);
  EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-6f);
  EXPECT_EQ(c.mamba_d_inner(), 32);  // from nH * P; mamba_expand is ignored
  // The same aliases are accepted in a recipe (strict) too.
  EXPECT_NO_THROW(model_config_from_json(j, "t.yaml", /*strict=*/true));
  // norm_eps is the third spelling.
  j.erase("rms_norm_eps");
  j["norm_eps"] = 1e-4;
  EXPECT_FLOAT_EQ(model_config_from_json(j, "c.json", false).layer_norm_epsilon, 1e-4f);
}

TEST(ModelConfig, two_spellings_with_different_values_are_an_error) {
  json m = with(with(tiny_model(), "n_groups", 2), "mamba_n_groups", 4);
  EXPECT_EQ(recipe_error(m), "t.yaml: model.mamba_n_groups: 4 conflicts with n_groups: 2; give only one");
  m = with(with(tiny_model(), "layer_norm_epsilon", 1e-5), "norm_eps", 1e-5);
  EXPECT_NO_THROW(model_config_from_json(m, "t.yaml", true));  // equal values are fine
}

TEST(ModelConfig, layers_block_type_with_either_naming) {
  json m = without(tiny_model(), "hybrid_override_pattern");
  m["layers_block_type"] = {"mamba", "attention", "mamba", "mlp", "mamba", "moe"};
  EXPECT_EQ(model_config_from_json(m, "t.yaml", true).hybrid_override_pattern, "M*M-ME");
  m["layers_block_type"] = {"linear_attention", "full_attention", "linear_attention", "mlp", "linear_attention", "moe"};
  EXPECT_EQ(model_config_from_json(m, "t.yaml", true).hybrid_override_pattern, "M*M-ME");
  // hybrid_override_pattern wins when both are given.
  m["hybrid_override_pattern"] = "MEM*M-";
  EXPECT_EQ(model_config_from_json(m, "t.yaml", true).hybrid_override_pattern, "MEM*M-");
  m.erase("hybrid_override_pattern");
  m["layers_block_type"] = {"mamba", "gated_deltanet"};
  EXPECT_EQ(recipe_error(m),
            "t.yaml: model.layers_block_type: unknown layer type \"gated_deltanet\" at index 1 (expected mamba, "
            "attention, mlp or moe; or linear_attention, full_attention)");
  m["layers_block_type"] = "M*";
  EXPECT_EQ(recipe_error(m), "t.yaml: model.layers_block_type: expected a list of layer types, got \"M*\"");
}

TEST(ModelConfig, time_step_limit_forms) {
  json m = tiny_model();
  m["time_step_limit"] = json::parse(R"([0.0, {"__float__": "Infinity"}])");
  EXPECT_TRUE(std::isinf(model_config_from_json(m, "t.yaml", true).time_step_limit_max));
  m["time_step_limit"] = {0.001, 100};
  EXPECT_EQ(model_config_from_json(m, "t.yaml", true).time_step_limit_max, 100.0);
  m["time_step_limit"] = parse_yaml_text("[0.0, .inf]", "t.yaml");
  EXPECT_TRUE(std::isinf(model_config_from_json(m, "t.yaml", true).time_step_limit_max));
  m["time_step_limit"] = {1.0};
  EXPECT_EQ(recipe_error(m), "t.yaml: model.time_step_limit: expected a list [min, max] of two numbers, got [1.0]");
  m["time_step_limit"] = {1.0, 0.5};
  EXPECT_EQ(recipe_error(m), "t.yaml: model.time_step_limit: expected 0 <= min <= max, got [1, 0.5]");
}

TEST(ModelConfig, recipe_rejects_unknown_keys_and_config_json_ignores_them) {
  json m = with(tiny_model(), "hidden_sze", 8);
  EXPECT_EQ(recipe_error(m), "t.yaml: model.hidden_sze: unknown key (did you mean \"hidden_size\"?)");
  EXPECT_EQ(recipe_error(with(tiny_model(), "torch_dtype", "bfloat16")), "t.yaml: model.torch_dtype: unknown key");
  EXPECT_NO_THROW(model_config_from_json(with(tiny_model(), "torch_dtype", "bfloat16"), "c.json", false));
}

TEST(ModelConfig, every_validation_error_names_the_field) {
  const json base = tiny_model();
  EXPECT_NO_THROW(model_config_from_json(base, "t.yaml", true));
  EXPECT_EQ(recipe_error(with(base, "hybrid_override_pattern", "M-M*-X")),
            "t.yaml: model.hybrid_override_pattern: unknown layer symbol 'X' at position 5 in \"M-M*-X\" "
            "(expected M, *, - or E)");
  EXPECT_EQ(recipe_error(with(base, "hybrid_override_pattern", "ME/*E")),
            "t.yaml: model.hybrid_override_pattern: unknown layer symbol '/' at position 2 in \"ME/*E\" (expected "
            "M, *, - or E; Megatron's MTP separator '/' is not accepted here: put the MTP part in "
            "mtp_hybrid_override_pattern)");
  EXPECT_EQ(recipe_error(without(base, "hybrid_override_pattern")),
            "t.yaml: model.hybrid_override_pattern: missing (give hybrid_override_pattern, one of M * - E per "
            "layer, or layers_block_type)");
  EXPECT_EQ(recipe_error(with(base, "num_hidden_layers", 5)),
            "t.yaml: model.num_hidden_layers: 5 does not match the 6 layers of the pattern \"M*M-ME\"");
  EXPECT_NO_THROW(model_config_from_json(with(base, "num_hidden_layers", 6), "t.yaml", true));
  EXPECT_EQ(recipe_error(with(base, "num_key_value_heads", 3)),
            "t.yaml: model.num_attention_heads: 4 is not divisible by num_key_value_heads 3");
  EXPECT_EQ(recipe_error(with(base, "n_groups", 3)), "t.yaml: model.mamba_num_heads: 4 is not divisible by n_groups 3");
  EXPECT_EQ(recipe_error(without(base, "mamba_num_heads")),
            "t.yaml: model.mamba_num_heads: missing (the pattern has M layers; expected a positive integer)");
  EXPECT_EQ(recipe_error(without(base, "num_attention_heads")),
            "t.yaml: model.num_attention_heads: missing (the pattern has * layers; expected a positive integer)");
  EXPECT_EQ(recipe_error(without(base, "intermediate_size")),
            "t.yaml: model.intermediate_size: missing (the pattern has - layers; expected a positive integer)");
  EXPECT_EQ(recipe_error(without(base, "moe_intermediate_size")),
            "t.yaml: model.moe_intermediate_size: missing (the pattern has E layers; expected a positive integer)");
  EXPECT_EQ(recipe_error(without(base, "vocab_size")),
            "t.yaml: model.vocab_size: missing (every model has an embedding; expected a positive integer)");
  // Sizes of kinds the pattern does not use are not required.
  json mamba_only = with(base, "hybrid_override_pattern", "MM");
  for (const char* k : {"num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
                        "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"})
    mamba_only.erase(k);
  EXPECT_NO_THROW(model_config_from_json(mamba_only, "t.yaml", true));

  EXPECT_EQ(recipe_error(with(base, "num_experts_per_tok", 5)),
            "t.yaml: model.num_experts_per_tok: 5 exceeds n_routed_experts 4");
  EXPECT_EQ(recipe_error(with(base, "n_group", 3)), "t.yaml: model.n_routed_experts: 4 is not divisible by n_group 3");
  EXPECT_EQ(recipe_error(with(with(base, "n_group", 2), "topk_group", 3)), "t.yaml: model.topk_group: 3 exceeds n_group 2");
  EXPECT_EQ(recipe_error(with(with(with(base, "n_group", 2), "topk_group", 1), "num_experts_per_tok", 3)),
            "t.yaml: model.num_experts_per_tok: 3 exceeds the 2 experts of the topk_group 1 selected groups "
            "(n_routed_experts 4 / n_group 2 per group)");
  EXPECT_EQ(recipe_error(with(base, "n_shared_experts", 0)),
            "t.yaml: model.n_shared_experts: is 0 but moe_shared_expert_intermediate_size is 32 (set "
            "n_shared_experts: 1, or the size to 0 for no shared expert)");
  EXPECT_EQ(recipe_error(with(base, "moe_shared_expert_intermediate_size", 0)),
            "t.yaml: model.moe_shared_expert_intermediate_size: missing (n_shared_experts is 1; expected a positive "
            "integer)");
  EXPECT_EQ(recipe_error(with(base, "hidden_size", 0)), "t.yaml: model.hidden_size: expected a positive integer, got 0");
  EXPECT_EQ(recipe_error(with(base, "hidden_size", "eight")),
            "t.yaml: model.hidden_size: expected a positive integer, got \"eight\"");
  EXPECT_EQ(recipe_error(with(base, "chunk_size", -16)), "t.yaml: model.chunk_size: expected a positive integer, got -16");
  EXPECT_EQ(recipe_error(with(base, "moe_latent_size", -1)),
            "t.yaml: model.moe_latent_size: expected a non-negative integer, got -1");
  EXPECT_EQ(recipe_error(with(base, "layer_norm_epsilon", 0)),
            "t.yaml: model.layer_norm_epsilon: expected a positive number, got 0");
  EXPECT_EQ(recipe_error(with(base, "routed_scaling_factor", -1.5)),
            "t.yaml: model.routed_scaling_factor: expected a positive number, got -1.5");
  EXPECT_EQ(recipe_error(with(base, "time_step_min", 0.5)),
            "t.yaml: model.time_step_min: expected 0 < time_step_min <= time_step_max, got 0.5 and 0.1");
  EXPECT_EQ(recipe_error(with(base, "model_type", "llama")),
            "t.yaml: model.model_type: unsupported model type \"llama\" (expected \"nemotron_h\" or \"nemotron-nas\")");
  // A DeciLM model_type reads block_configs instead of the pattern (decilm_config_test.cpp).
  EXPECT_EQ(recipe_error(with(base, "model_type", "nemotron-nas")),
            "t.yaml: model.block_configs: expected a non-empty list of {attention: ..., ffn: ...}, got null");
  EXPECT_EQ(recipe_error(with(base, "mlp_hidden_act", "gelu")),
            "t.yaml: model.mlp_hidden_act: unknown activation \"gelu\" (expected relu2, silu or swiglu)");
  EXPECT_EQ(recipe_error(with(base, "mamba_hidden_act", "relu")),
            "t.yaml: model.mamba_hidden_act: unsupported activation \"relu\" (the Mamba-2 conv uses silu)");
  EXPECT_EQ(recipe_error(with(base, "position_embedding_type", "alibi")),
            "t.yaml: model.position_embedding_type: unknown value \"alibi\" (expected \"none\" or \"rope\")");
  json no_hd = with(with(without(base, "head_dim"), "num_attention_heads", 5), "num_key_value_heads", 5);
  EXPECT_EQ(recipe_error(no_hd),
            "t.yaml: model.head_dim: missing, and hidden_size 32 is not divisible by num_attention_heads 5");
  EXPECT_EQ(recipe_error(with(base, "num_nextn_predict_layers", 1)),
            "t.yaml: model.mtp_hybrid_override_pattern: missing (num_nextn_predict_layers is 1; give the MTP "
            "block's pattern, e.g. \"*E\")");
  EXPECT_EQ(recipe_error(with(with(base, "num_nextn_predict_layers", 1), "mtp_hybrid_override_pattern", "*Q")),
            "t.yaml: model.mtp_hybrid_override_pattern: unknown layer symbol 'Q' at position 1 in \"*Q\" "
            "(expected M, *, - or E)");
  json mtp = with(with(base, "num_nextn_predict_layers", 2), "mtp_hybrid_override_pattern", "*-");
  EXPECT_EQ(recipe_error(with(mtp, "mtp_num_layers", 3)),
            "t.yaml: model.mtp_num_layers: 3 depths for 2 MTP blocks (num_nextn_predict_layers); expected one block "
            "reused at every depth (num_nextn_predict_layers: 1) or one block per depth");
  EXPECT_EQ(recipe_error(with(mtp, "mtp_loss_scaling_factor", -0.1)),
            "t.yaml: model.mtp_loss_scaling_factor: expected a non-negative number, got -0.1");
  EXPECT_EQ(recipe_error(with(base, "mtp_num_layers", 2)),
            "t.yaml: model.mtp_num_layers: is 2 but num_nextn_predict_layers is 0 (no MTP block to run; set "
            "num_nextn_predict_layers: 1 and mtp_hybrid_override_pattern)");
}

TEST(ModelConfig, mtp_depths_default_to_the_blocks_and_one_block_is_reused) {
  ModelConfig c;
  EXPECT_EQ(c.mtp_depths(), 0);
  EXPECT_DOUBLE_EQ(c.mtp_loss_scaling_factor, 0.3);  // Megatron-Bridge's Nemotron-H value (A.8.3)
  c.num_nextn_predict_layers = 1;
  EXPECT_EQ(c.mtp_depths(), 1);
  c.mtp_num_layers = 2;
  EXPECT_EQ(c.mtp_depths(), 2);
  EXPECT_EQ(c.mtp_block_of_depth(1), 0);
  EXPECT_EQ(c.mtp_block_of_depth(2), 0);
  c.num_nextn_predict_layers = 2;
  EXPECT_EQ(c.mtp_block_of_depth(2), 1);
}

TEST(ModelConfig, validate_uses_top_level_keys_for_config_json) {
  ModelConfig c = model_config_from_json(tiny_model(), "c.json", false);
  c.num_key_value_heads = 3;
  EXPECT_EQ(input_error([&] { validate(c, "config.json", ""); }),
            "config.json: num_attention_heads: 4 is not divisible by num_key_value_heads 3");
  EXPECT_EQ(input_error([&] { model_config_from_json(with(tiny_model(), "n_groups", 3), "c.json", false); }),
            "c.json: mamba_num_heads: 4 is not divisible by n_groups 3");
}

TEST(ModelConfig, recipes_load_with_overrides_and_report_bad_files) {
  for (const char* r : {"recipes/super3/pretrain/tiny.yaml", "recipes/super3/pretrain/default.yaml",
                        "recipes/nano3/pretrain/tiny.yaml", "recipes/nano3/pretrain/default.yaml"})
    EXPECT_NO_THROW(load_model_config(repo_path(r))) << r;
  const std::string tiny = repo_path("recipes/super3/pretrain/tiny.yaml");
  ModelConfig c = load_model_config(tiny, {"model.hidden_size=128", "model.num_experts_per_tok=1"});
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_experts_per_tok, 1);
  EXPECT_EQ(input_error([&] { load_model_config(tiny, {"model.hidden_size=eight"}); }),
            tiny + ": model.hidden_size: expected a positive integer, got \"eight\"");
  EXPECT_EQ(input_error([&] { load_model_config(tiny, {"model.hidden_sze=8"}); }),
            tiny + ": model.hidden_sze: unknown key (did you mean \"hidden_size\"?)");

  // Other top-level sections belong to other stages and are not checked here.
  std::string other = write_temp("other.yaml", "train:\n  anything: 1\nmodel:\n  vocab_size: 16\n  hidden_size: 8\n"
                                               "  hybrid_override_pattern: \"-\"\n  intermediate_size: 16\n");
  EXPECT_EQ(load_model_config(other).num_layers(), 1);
  std::string no_model = write_temp("no_model.yaml", "train:\n  steps: 3\n");
  EXPECT_EQ(input_error([&] { load_model_config(no_model); }),
            no_model + ": model: missing (a recipe holds the model's shape in its model: section)");
  std::string not_map = write_temp("not_map.yaml", "model: 5\n");
  EXPECT_EQ(input_error([&] { load_model_config(not_map); }), not_map + ": model: expected a mapping of keys, got 5");
  std::string txt = write_temp("c.txt", "{}");
  EXPECT_EQ(input_error([&] { load_model_config(txt); }),
            txt + ": expected a recipe (.yaml/.yml) or a Hugging Face config.json (.json)");
  std::string arr = write_temp("arr.json", "[1]");
  EXPECT_EQ(input_error([&] { load_model_config(arr); }), arr + ": expected a JSON object, got [1]");
}

TEST(ModelConfig, hf_json_round_trips_and_has_what_transformers_needs) {
  for (const char* f : {"recipes/super3/pretrain/tiny.yaml", "recipes/nano3/pretrain/default.yaml",
                        "tests/fixtures/configs/nano3-30b-a3b.json", "tests/fixtures/configs/nemotron-h-8b.json",
                        "tests/fixtures/configs/super3-120b-a12b.json"}) {
    ModelConfig c = load_model_config(repo_path(f));
    json hf = model_config_to_hf_json(c);
    EXPECT_EQ(hf["model_type"], "nemotron_h") << f;
    EXPECT_EQ(hf["architectures"], json::array({"NemotronHForCausalLM"})) << f;
    EXPECT_EQ(hf["hybrid_override_pattern"], c.hybrid_override_pattern) << f;
    EXPECT_EQ(hf["num_hidden_layers"], c.num_layers()) << f;
    // Written through text, as a file would be, and read back as a config.json.
    ModelConfig back = model_config_from_json(parse_json_text(hf.dump(2), "x.json"), "x.json", false);
    EXPECT_EQ(model_config_to_hf_json(back), hf) << f;
  }
  ModelConfig nano = load_model_config(repo_path("tests/fixtures/configs/nano3-30b-a3b.json"));
  json hf = model_config_to_hf_json(nano);
  EXPECT_TRUE(hf["moe_latent_size"].is_null());
  EXPECT_FALSE(hf.contains("time_step_limit"));  // the default (0, inf) is left to transformers
  EXPECT_EQ(hf["layer_norm_epsilon"].dump(), "1e-05");
  EXPECT_EQ(hf["head_dim"], 128);
  nano.time_step_limit_min = 0.01;
  EXPECT_EQ(model_config_to_hf_json(nano)["time_step_limit"], json::parse(R"([0.01, {"__float__": "Infinity"}])"));
}

}  // namespace nemotron::model
