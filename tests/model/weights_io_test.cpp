#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "model/hybrid_model.h"
#include "model/weights_io.h"

namespace nemotron::model {
namespace {

ModelConfig small(int64_t hidden) {
  ModelConfig c;
  c.vocab_size = 11, c.hidden_size = hidden, c.hybrid_override_pattern = "M*-";
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 4, c.intermediate_size = 6;
  c.mamba_num_heads = 2, c.mamba_head_dim = 4, c.n_groups = 1, c.ssm_state_size = 4, c.chunk_size = 4;
  return c;
}

TEST(WeightsIo, save_then_load_restores_every_weight_and_rejects_another_shape) {
  auto dir = std::filesystem::temp_directory_path() / ("nm_wio_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  HybridModel a(small(8), host_backend(), DType::f32);
  a.init(3);
  save_weights(dir.string(), a.params(), 2048);  // small shards: exercises the index
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  HybridModel b(small(8), host_backend(), DType::f64);
  load_weights(io::SafetensorsSet::open(dir.string()), b.params(), dir.string());
  for (const Param* p : a.params().all())
    EXPECT_EQ(p->value.to_f64_vector(), b.params().get(p->name).value.to_f64_vector()) << p->name;
  HybridModel c(small(12), host_backend(), DType::f32);
  try {
    load_weights(io::SafetensorsSet::open(dir.string()), c.params(), "ckpt");
    FAIL() << "expected a shape error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ckpt: tensor \"backbone.embeddings.weight\" has shape [11, 8] but the model expects [11, 12] (a "
              "checkpoint of another model shape?)");
  }
  ModelConfig fewer = small(8);
  fewer.hybrid_override_pattern = "M*";
  HybridModel d(fewer, host_backend(), DType::f32);
  EXPECT_THROW(load_weights(io::SafetensorsSet::open(dir.string()), d.params(), "ckpt"), InputError);
  EXPECT_EQ(load_weights(io::SafetensorsSet::open(dir.string()), d.params(), "ckpt", false).unused.size(), 3u);
  std::filesystem::remove_all(dir);
}

TEST(WeightsIo, non_finite_weights_are_refused_at_load_naming_the_tensor) {
  // A checkpoint saved after a run diverged: training from it stopped at iteration 1 with "lm loss
  // nan ... (try a lower optimizer.lr)", blaming the learning rate for weights that were NaN.
  auto dir = std::filesystem::temp_directory_path() / ("nm_wio_nan_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (DType stored : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(stored));
    HybridModel a(small(8), host_backend(), DType::f32);
    a.init(3);
    const std::string name = "backbone.layers.1.mixer.o_proj.weight";
    const Shape shape = a.params().get(name).value.shape();
    Tensor bad;
    if (stored == DType::f32) {
      std::vector<float> v(static_cast<size_t>(shape.numel()), 0.5f);
      v[5] = std::numeric_limits<float>::quiet_NaN();
      v[7] = -std::numeric_limits<float>::infinity();
      bad = Tensor::from_vector<float>(shape, v);
    } else {  // bf16 bits: 0.5, NaN, -Inf
      std::vector<uint16_t> v(static_cast<size_t>(shape.numel()), 0x3F00);
      v[5] = 0x7FC0;
      v[7] = 0xFF80;
      bad = Tensor::from_vector<uint16_t>(shape, v);
    }
    std::vector<io::NamedTensor> named = named_weights(a.params());
    for (io::NamedTensor& t : named)
      if (t.name == name) t.tensor = bad;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    io::save_sharded_safetensors(dir.string(), named, size_t{1} << 30, {{"format", "pt"}});
    HybridModel b(small(8), host_backend(), DType::f32);
    try {
      load_weights(io::SafetensorsSet::open(dir.string()), b.params(), "ckpt/model.safetensors");
      FAIL() << "expected a non-finite error";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "ckpt/model.safetensors: tensor \"backbone.layers.1.mixer.o_proj.weight\" [8, 8] holds non-finite "
                "values (1 NaN and 1 Inf of 64, first at element 5): the weights were saved by a run that had "
                "diverged, or the file is corrupt; load an earlier checkpoint");
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nemotron::model
