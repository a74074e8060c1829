// `model info` on the real Llama-3.3-Nemotron-Super-49B-v1 (reference/architectures.md B.5), from
// the super49b recipe's block_configs: 80 blocks, 31 no-op attentions, the FFN width histogram and
// the exact total 49,867,145,216 (the advertised 49.9B).
#include <gtest/gtest.h>

#include <map>

#include "model/layer_spec.h"
#include "model/model_info.h"
#include "test_util.h"

namespace nemotron::model {
namespace {

ModelConfig super49b() {
  return load_model_config((testing::source_root() / "recipes/super49b/sft/default.yaml").string());
}

TEST(DeciLmInfo, the_49b_has_its_published_shape_and_parameter_count) {
  const ModelConfig c = super49b();
  ASSERT_EQ(c.block_configs.size(), 80u);
  int no_op = 0;
  std::map<int64_t, int> widths;
  for (const LayerSpec& s : layer_specs(c)) {
    if (s.kind == LayerKind::mlp) ++widths[s.intermediate_size];
    if (s.kind == LayerKind::attention) EXPECT_EQ(s.num_key_value_heads, 8) << s.prefix;
  }
  for (const DeciBlock& b : c.block_configs) no_op += b.attention == SubBlock::no_op;
  EXPECT_EQ(no_op, 31);
  EXPECT_EQ(widths, (std::map<int64_t, int>{{28672, 49}, {14336, 6}, {17920, 1}, {7168, 10}, {5632, 8}, {2816, 6}}));
  const ModelInfo info = model_info(c, 4096);
  EXPECT_EQ(info.total_params, 49'867'145'216);
  EXPECT_EQ(info.active_params, info.total_params);  // dense
  EXPECT_EQ(info.layers.size(), 80u + 49u);            // 49 attention sub-layers + 80 FFNs
  const std::string text = model_info_text(c, info, "super49b");
  EXPECT_NE(text.find("49,867,145,216"), std::string::npos) << text;
  EXPECT_NE(text.find("    6  no_op              swiglu F=14336 (2.625)"), std::string::npos) << text;
  EXPECT_NE(text.find("   79  gqa kv_heads=8     swiglu F=28672 (5.25)"), std::string::npos) << text;
}

}  // namespace
}  // namespace nemotron::model
