// NEMOTRON_CHECK_FINITE: off, a NaN passes silently; on, the first non-finite tensor stops the
// run with an error that names it and counts NaN and Inf; the model's forward names the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "model/finite_check.h"
#include "model/hybrid_model.h"

namespace nemotron::model {
namespace {

struct CheckFiniteOn {
  CheckFiniteOn() { set_finite_checks(true); }
  ~CheckFiniteOn() { set_finite_checks(false); }
};

TEST(FiniteCheck, off_by_default_and_names_the_tensor_when_on) {
  set_finite_checks(false);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor t = Tensor::from_vector<float>({2, 3}, {1.0f, static_cast<float>(nan), 2.0f, static_cast<float>(inf), 0.0f,
                                                 static_cast<float>(nan)});
  EXPECT_NO_THROW(check_finite(t, "x"));
  CheckFiniteOn on;
  try {
    check_finite(t, "layer 3 (moe) output");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 3 (moe) output [2, 3] has 2 NaN and 1 Inf of 6, first at element 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(check_finite(Tensor::from_vector<float>({2}, {1.0f, -2.0f}), "finite"));
}

TEST(FiniteCheck, model_forward_names_the_first_bad_layer) {
  ModelConfig c;
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.hybrid_override_pattern = "-*-";
  c.intermediate_size = 12;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  HybridModel net(c, host_backend(), DType::f32);
  net.init(1);
  // A NaN in the second MLP's down projection poisons layer 2's output first.
  for (Param* p : net.params().all())
    if (p->name == "backbone.layers.2.mixer.down_proj.weight") p->value.data<float>()[0] = std::nanf("");
  Tensor ids = Tensor::from_vector<int32_t>({1, 4}, {1, 2, 3, 4});
  Context ctx{&host_backend(), nullptr, DType::f32};
  EXPECT_NO_THROW(net.logits(ctx, ids));  // off: nothing is checked
  CheckFiniteOn on;
  try {
    net.logits(ctx, ids);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2 (mlp) output"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nemotron::model
