// Generation's memory check (train/inference_model.h weights_shortfall): a model whose weights at
// this rank's tensor share exceed the GPU's free memory is refused in one line naming the tensor
// size that fits (checked against the model's heads and widths), and models that fit pass; a
// model loaded for generation never allocates gradients, and one too large for the device is
// refused before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/backend.h"
#include "core/error.h"
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

// The host allocator, metered, with a device-like free-memory figure: what load_inference_model
// allocates and what it sees as free.
class MeteredHost : public Backend {
 public:
  explicit MeteredHost(size_t available) : available_(available) {}
  Device device() const override { return host_backend().device(); }
  std::string name() const override { return "metered host"; }
  void* allocate(size_t bytes) override {
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return host_backend().allocate(bytes);
  }
  void deallocate(void* ptr, size_t bytes) override {
    in_use_ -= bytes;
    host_backend().deallocate(ptr, bytes);
  }
  void fill_zero(void* ptr, size_t bytes) override { host_backend().fill_zero(ptr, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { host_backend().copy_to_host(dst, src, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    host_backend().copy_from_host(dst, src, bytes);
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) override {
    host_backend().copy_on_device(dst, src, bytes);
  }
  void synchronize() override {}
  size_t bytes_in_use() const override { return in_use_; }
  size_t peak_bytes() const override { return peak_; }
  size_t available_bytes() const override { return available_; }

 private:
  size_t available_, in_use_ = 0, peak_ = 0;
};

const std::string kDense = "/tests/fixtures/hf/dense";

TEST(InferenceModel, LoadsWithoutEverAllocatingGradients) {
  // generate, eval and serve build the model frozen: the peak is the weights (float32 here), not
  // weights + float32 gradients (twice the weights), as it was when gradients were made and dropped.
  MeteredHost dev(size_t{1} << 40);
  train::InferenceModel m = train::load_inference_model(source_root().string() + kDense, dev, DType::f32);
  const size_t weights = static_cast<size_t>(m.net->params().numel()) * sizeof(float);
  ASSERT_GT(weights, 0u);
  EXPECT_GE(dev.peak_bytes(), weights);  // the weights themselves went through the metered backend
  EXPECT_LT(dev.peak_bytes(), weights + weights / 2) << "weights " << weights;
  for (model::Param* p : m.net->params().all()) {
    EXPECT_FALSE(p->requires_grad) << p->name;
    EXPECT_FALSE(p->grad.defined()) << p->name;
  }
}

TEST(InferenceModel, RefusesWeightsLargerThanTheFreeMemoryBeforeAllocating) {
  MeteredHost dev(1024);  // 1 KiB "free"
  try {
    train::load_inference_model(source_root().string() + kDense, dev, DType::f32);
    FAIL() << "loaded into 1 KiB";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("float32 weights need about"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dev.peak_bytes(), 0u);
}

}  // namespace
}  // namespace nemotron::testing
