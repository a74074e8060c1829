#include "test_util.h"
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "model/model_config.h"
#include "model/model_info.h"

namespace nemotron::model {

namespace {

std::string repo_path(const std::string& rel) {
  return (nemotron::testing::source_root() / rel).string();
}

ModelConfig fixture(const std::string& name) { return load_model_config(repo_path("tests/fixtures/configs/" + name)); }

// Every tensor of a Hub checkpoint by name and shape (reference/architectures.md A.1.2, A.3.1, A.5,
// A.6, A.7.1), written out independently of model_info's arithmetic.
std::map<std::string, std::vector<int64_t>> hub_tensors(const ModelConfig& c) {
  std::map<std::string, std::vector<int64_t>> t;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  t["backbone.embeddings.weight"] = {V, H};
  // Every layer by its prefix: the trunk's, then the MTP blocks' inner layers (A.8.2: flattened
  // mtp.layers.{b * P + i}, with enorm/hnorm/eh_proj on a block's first, final_layernorm on its last).
  std::vector<std::pair<std::string, LayerKind>> layers;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    layers.emplace_back("backbone.layers." + std::to_string(i) + ".", c.layer_kind(i));
  const int64_t P = static_cast<int64_t>(c.mtp_hybrid_override_pattern.size());
  for (int64_t b = 0; b < c.num_nextn_predict_layers; ++b) {
    const std::string first = "mtp.layers." + std::to_string(b * P) + ".";
    t[first + "enorm.weight"] = {H};
    t[first + "hnorm.weight"] = {H};
    t[first + "eh_proj.weight"] = {H, 2 * H};
    t["mtp.layers." + std::to_string(b * P + P - 1) + ".final_layernorm.weight"] = {H};
    for (int64_t i = 0; i < P; ++i)
      layers.emplace_back("mtp.layers." + std::to_string(b * P + i) + ".",
                          static_cast<LayerKind>(c.mtp_hybrid_override_pattern[static_cast<size_t>(i)]));
  }
  for (const auto& [p, kind] : layers) {
    t[p + "norm.weight"] = {H};
    switch (kind) {
      case LayerKind::mamba: {
        const int64_t d = c.mamba_num_heads * c.mamba_head_dim, GN = c.n_groups * c.ssm_state_size;
        t[p + "mixer.in_proj.weight"] = {2 * d + 2 * GN + c.mamba_num_heads, H};
        t[p + "mixer.conv1d.weight"] = {d + 2 * GN, 1, c.conv_kernel};
        if (c.use_conv_bias) t[p + "mixer.conv1d.bias"] = {d + 2 * GN};
        t[p + "mixer.dt_bias"] = {c.mamba_num_heads};
        t[p + "mixer.A_log"] = {c.mamba_num_heads};
        t[p + "mixer.D"] = {c.mamba_num_heads};
        t[p + "mixer.norm.weight"] = {d};
        t[p + "mixer.out_proj.weight"] = {H, d};
        if (c.use_bias) t[p + "mixer.in_proj.bias"] = {2 * d + 2 * GN + c.mamba_num_heads};
        if (c.use_bias) t[p + "mixer.out_proj.bias"] = {H};
        break;
      }
      case LayerKind::attention: {
        const int64_t q = c.num_attention_heads * c.attn_head_dim(), kv = c.num_key_value_heads * c.attn_head_dim();
        t[p + "mixer.q_proj.weight"] = {q, H};
        t[p + "mixer.k_proj.weight"] = {kv, H};
        t[p + "mixer.v_proj.weight"] = {kv, H};
        t[p + "mixer.o_proj.weight"] = {H, q};
        if (c.attention_bias) {
          t[p + "mixer.q_proj.bias"] = {q};
          t[p + "mixer.k_proj.bias"] = {kv};
          t[p + "mixer.v_proj.bias"] = {kv};
          t[p + "mixer.o_proj.bias"] = {H};
        }
        break;
      }
      case LayerKind::mlp:
        t[p + "mixer.up_proj.weight"] = {c.intermediate_size, H};
        t[p + "mixer.down_proj.weight"] = {H, c.intermediate_size};
        if (c.mlp_bias) t[p + "mixer.up_proj.bias"] = {c.intermediate_size};
        if (c.mlp_bias) t[p + "mixer.down_proj.bias"] = {H};
        break;
      case LayerKind::moe: {
        const int64_t de = c.moe_latent_size > 0 ? c.moe_latent_size : H;
        t[p + "mixer.gate.weight"] = {c.n_routed_experts, H};
        t[p + "mixer.gate.e_score_correction_bias"] = {c.n_routed_experts};
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
          t[p + "mixer.experts." + std::to_string(e) + ".up_proj.weight"] = {c.moe_intermediate_size, de};
          t[p + "mixer.experts." + std::to_string(e) + ".down_proj.weight"] = {de, c.moe_intermediate_size};
          if (c.mlp_bias) t[p + "mixer.experts." + std::to_string(e) + ".up_proj.bias"] = {c.moe_intermediate_size};
          if (c.mlp_bias) t[p + "mixer.experts." + std::to_string(e) + ".down_proj.bias"] = {de};  // MLPs too
        }
        const int64_t fsh = c.moe_shared_expert_intermediate_size * c.n_shared_experts;
        t[p + "mixer.shared_experts.up_proj.weight"] = {fsh, H};
        t[p + "mixer.shared_experts.down_proj.weight"] = {H, fsh};
        if (c.mlp_bias) t[p + "mixer.shared_experts.up_proj.bias"] = {fsh};  // an MLP, like "-" layers
        if (c.mlp_bias) t[p + "mixer.shared_experts.down_proj.bias"] = {H};
        if (c.moe_latent_size > 0) {
          t[p + "mixer.fc1_latent_proj.weight"] = {c.moe_latent_size, H};
          t[p + "mixer.fc2_latent_proj.weight"] = {H, c.moe_latent_size};
        }
        break;
      }
    }
  }
  t["backbone.norm_f.weight"] = {H};
  if (!c.tie_word_embeddings) t["lm_head.weight"] = {V, H};
  return t;
}

int64_t numel_sum(const std::map<std::string, std::vector<int64_t>>& tensors, const std::string& prefix = "") {
  int64_t n = 0;
  for (const auto& [name, shape] : tensors) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    int64_t k = 1;
    for (int64_t d : shape) k *= d;
    n += k;
  }
  return n;
}

}  // namespace

TEST(ModelInfo, published_totals_of_the_real_configs) {
  // reference/architectures.md A.10.
  EXPECT_EQ(model_info(fixture("nemotron-h-8b.json"), 4096).total_params, 8'100'852'736);
  EXPECT_EQ(model_info(fixture("nano-9b-v2.json"), 4096).total_params, 8'888'227'328);
  ModelInfo nano = model_info(fixture("nano3-30b-a3b.json"), 4096);
  EXPECT_EQ(nano.total_params, 31'577'940'288);
  EXPECT_EQ(nano.active_params, 3'580'076'352);  // "about 3.58 B": 6 of 128 routed experts
  EXPECT_EQ(nano.mtp_params, 0);
  EXPECT_EQ(model_info(load_model_config(repo_path("recipes/nano3/pretrain/default.yaml")), 4096).total_params,
            31'577'940'288);
}

TEST(ModelInfo, super_with_its_mtp_block_is_the_card_total) {
  // The card's 123,611,033,088 includes one MTP block of pattern *E (A.8.2, A.10).
  ModelInfo sup = model_info(fixture("super3-120b-a12b.json"), 4096);
  EXPECT_EQ(sup.mtp_params, 2'942'325'248);
  EXPECT_EQ(sup.total_params, 123'611'033'088);
  EXPECT_EQ(sup.total_params - sup.mtp_params, 120'668'707'840);
  EXPECT_EQ(sup.active_params, 12'770'237'440);  // "about 12.77 B without MTP"
  // "about 13.0 B incl. MTP": one MTP block's active part (the head is shared, counted once).
  EXPECT_NEAR(static_cast<double>(sup.active_params + sup.mtp_active_params), 13.0e9, 0.05e9);
  // The recipe trains it as the seeds do: the same block, two depths, weight 0.3.
  ModelConfig rc = load_model_config(repo_path("recipes/super3/pretrain/default.yaml"));
  ModelInfo recipe = model_info(rc, 4096);
  EXPECT_EQ(recipe.total_params, 123'611'033'088);
  EXPECT_EQ(recipe.mtp_params, 2'942'325'248);
  EXPECT_EQ(rc.mtp_depths(), 2);
  EXPECT_DOUBLE_EQ(rc.mtp_loss_scaling_factor, 0.3);
  EXPECT_GT(recipe.mtp_forward_flops_per_token, 0.0);
  EXPECT_DOUBLE_EQ(recipe.training_flops_per_token,
                   3.0 * (recipe.forward_flops_per_token + recipe.mtp_forward_flops_per_token));
}

// The tiny recipe: M*M-ME with one "*E" MTP block run at 2 depths, as super3 trains it (set here as
// well, so these cases do not depend on the recipe keeping MTP on).
namespace {
ModelConfig tiny_with_mtp() {
  ModelConfig c = load_model_config(repo_path("recipes/super3/pretrain/tiny.yaml"));
  c.num_nextn_predict_layers = 1, c.mtp_hybrid_override_pattern = "*E", c.mtp_num_layers = 2;
  return c;
}
}  // namespace

TEST(ModelInfo, counts_match_the_listed_hub_tensors_with_every_option) {
  ModelConfig c = tiny_with_mtp();
  for (int variant = 0; variant < 3; ++variant) {
    if (variant == 1) c.use_bias = c.attention_bias = c.mlp_bias = true, c.use_conv_bias = false;
    if (variant == 2) c.tie_word_embeddings = true, c.moe_latent_size = 0, c.n_shared_experts = 2;
    const auto tensors = hub_tensors(c);
    ModelInfo info = model_info(c, 16);
    EXPECT_EQ(info.total_params, numel_sum(tensors)) << "variant " << variant;
    EXPECT_GT(info.mtp_params, 0);
    EXPECT_EQ(info.mtp_params, numel_sum(tensors, "mtp.")) << "variant " << variant;
    for (const LayerInfo& l : info.layers)
      EXPECT_EQ(l.params, numel_sum(tensors, "backbone.layers." + std::to_string(l.index) + "."))
          << "variant " << variant << " layer " << l.index;
  }
}

TEST(ModelInfo, active_params_and_flops_follow_the_documented_formula) {
  const ModelConfig c = tiny_with_mtp();  // M*M-ME, MTP "*E" at 2 depths
  const int64_t H = 64, V = 1024, T = 100;
  ModelInfo info = model_info(c, T);
  // Active: the MoE layer uses 2 of its 4 routed experts; expert = up [64, 32] + down [32, 64].
  const int64_t expert = 2 * 64 * 32;
  EXPECT_EQ(info.total_params - info.mtp_params - info.active_params, 2 * expert);
  // Matmul MACs per token, by hand: Mamba in_proj rows 2*128 + 2*2*16 + 8 = 328, out_proj [64, 128].
  const int64_t mamba = 328 * H + H * 128;
  const int64_t attn = (4 * 16 + 2 * 2 * 16) * H + H * 4 * 16;
  const int64_t mlp = 2 * 128 * H;
  const int64_t moe = 4 * H + 2 * expert + 2 * 128 * H + 2 * 32 * H;  // router, 2 experts, shared, latent
  const int64_t macs = 3 * mamba + attn + mlp + moe + V * H;           // + lm_head
  EXPECT_EQ(info.matmul_flops_per_token, 2.0 * macs);
  EXPECT_EQ(info.attention_flops_per_token, 2.0 * 4 * 16 * (T + 1));  // one * layer
  EXPECT_EQ(info.forward_flops_per_token, 2.0 * macs + 2.0 * 4 * 16 * (T + 1));
  // Its MTP ("*E" at 2 depths): per depth eh_proj, attention, the MoE and the shared head.
  const int64_t mtp_macs = 2 * H * H + attn + moe + V * H;
  EXPECT_EQ(info.mtp_forward_flops_per_token, 2.0 * (2.0 * mtp_macs + 2.0 * 4 * 16 * (T + 1)));
  EXPECT_EQ(info.training_flops_per_token, 3 * (info.forward_flops_per_token + info.mtp_forward_flops_per_token));
  EXPECT_EQ(info.layers[1].forward_flops, 2.0 * attn + 2.0 * 4 * 16 * (T + 1));
  EXPECT_EQ(info.layers[5].matmul_macs, moe);
}

TEST(ModelInfo, human_units) {
  EXPECT_EQ(format_count(31'577'940'288), "31,577,940,288");
  EXPECT_EQ(format_count(64), "64");
  EXPECT_EQ(format_count(-1234), "-1,234");
  EXPECT_EQ(human_count(31'577'940'288.0), "31.58 B");
  EXPECT_EQ(human_count(3'580'076'352.0), "3.58 B");
  EXPECT_EQ(human_count(288'204.0), "288.20 K");
  EXPECT_EQ(human_count(64), "64");
  EXPECT_EQ(human_count(1.5e12), "1.50 T");
  EXPECT_EQ(human_flops(6.29e9), "6.29 GFLOP");
}

TEST(ModelInfo, text_and_json_reports) {
  ModelConfig sup = fixture("super3-120b-a12b.json");
  ModelInfo info = model_info(sup, 4096);
  std::string text = model_info_text(sup, info, "super.json");
  EXPECT_NE(text.find("config:   super.json"), std::string::npos);
  EXPECT_NE(text.find("88 layers, hidden 4096, vocab 131072"), std::string::npos);
  EXPECT_NE(text.find("123,611,033,088  (123.61 B)"), std::string::npos);
  EXPECT_NE(text.find("\n  mtp                   2,942,325,248  (2.94 B)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("12,770,237,440  (12.77 B; MoE routes 22 of 512 experts)"), std::string::npos);
  EXPECT_NE(text.find("note: MTP: 1 block of pattern \"*E\" (2,942,325,248 params = 2.94 B, counted in the total) "
                      "run at 1 depth in training"),
            std::string::npos);
  EXPECT_NE(text.find("    87 E    2.87 B"), std::string::npos);  // the last layer is listed
  nlohmann::json j = model_info_json(sup, info, "super.json");
  EXPECT_EQ(j["params"]["total"], 123'611'033'088);
  EXPECT_EQ(j["params"]["mtp"], 2'942'325'248);
  EXPECT_EQ(j["layers"].size(), 88u);
  EXPECT_EQ(j["layers"][7]["symbol"], "*");
  EXPECT_EQ(j["layers"][7]["dims"]["kv_heads"], 2);
  EXPECT_EQ(j["layers"][1]["dims"]["latent"], 1024);
  EXPECT_EQ(j["flops_per_token"]["seq_len"], 4096);
}

}  // namespace nemotron::model
