// Generation's memory check (train/inference_model.h weights_shortfall): a model whose weights at
// this rank's tensor share exceed the GPU's free memory is refused in one line naming the tensor
// size that fits (checked against the model's heads and widths), and models that fit pass; a
// model built for generation holds no gradients.
#include <gtest/gtest.h>

#include "core/backend.h"
#include "model/hybrid_model.h"
#include "model/model_config.h"
#include "train/inference_model.h"
#include "test_util.h"

namespace nemotron::testing {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

model::ModelConfig llama_8b() {
  return model::load_model_config(source_root().string() + "/bench/configs/llama31_8b.yaml");
}

TEST(WeightsShortfall, HostAndFittingModelsPass) {
  const model::ModelConfig c = llama_8b();  // 8.03 B parameters: 14.96 GiB in bf16
  EXPECT_EQ(train::weights_shortfall("ck", c, {}, DType::bf16, 0), "");  // the host: nothing to check
  EXPECT_EQ(train::weights_shortfall("ck", c, {}, DType::bf16, 80 * kGiB), "");
  model::ModelShard half;
  half.tensor_size = 2;
  EXPECT_EQ(train::weights_shortfall("ck", c, half, DType::bf16, 8 * kGiB), "");  // 7.5 GiB at TP 2
}

TEST(WeightsShortfall, NamesTheTensorSizeThatFits) {
  const model::ModelConfig c = llama_8b();
  // One GPU with 10 GiB free: TP 2 holds ~7.5 GiB (> 90% of 10 is 9, so it fits).
  std::string why = train::weights_shortfall("ck/dir", c, {}, DType::bf16, 10 * kGiB);
  EXPECT_NE(why.find("ck/dir: the model's bfloat16 weights need about 15.0 GiB per GPU at tensor size 1"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("--tensor-parallel-size 2 "), std::string::npos) << why;
  // 3 GiB free: TP 4 (~3.7 GiB) does not fit 90% of it, TP 8 (~1.9 GiB) does.
  why = train::weights_shortfall("ck", c, {}, DType::bf16, 3 * kGiB);
  EXPECT_NE(why.find("--tensor-parallel-size 8 "), std::string::npos) << why;
  // float32 doubles the bytes.
  why = train::weights_shortfall("ck", c, {}, DType::f32, 20 * kGiB);
  EXPECT_NE(why.find("float32 weights need about 29.9 GiB"), std::string::npos) << why;
  EXPECT_NE(why.find("--tensor-parallel-size 2 "), std::string::npos) << why;
}

TEST(WeightsShortfall, SkipsTensorSizesTheModelCannotTake) {
  // Llama-3.1-8B's 32 query heads stop the search at tensor size 32 (64 does not divide them):
  // with almost nothing free no size the model takes fits, and the line says so instead.
  const model::ModelConfig c = llama_8b();
  const std::string why = train::weights_shortfall("ck", c, {}, DType::bf16, 0.01 * kGiB);
  EXPECT_NE(why.find("a GPU with more memory"), std::string::npos) << why;
}

TEST(InferenceModel, LoadsWithoutGradients) {
  // generate, eval and serve build the model frozen: no float32 gradient beside the weights.
  train::InferenceModel m =
      train::load_inference_model(source_root().string() + "/tests/fixtures/hf/dense", host_backend(), DType::f32);
  ASSERT_GT(m.net->params().numel(), 0);
  for (model::Param* p : m.net->params().all()) {
    EXPECT_FALSE(p->requires_grad) << p->name;
    EXPECT_FALSE(p->grad.defined()) << p->name;
  }
}

}  // namespace
}  // namespace nemotron::testing
