#include "parity/parity_check.h"

#include <gtest/gtest.h>

#include <cmath>

#include "io/safetensors.h"
#include "model/hf_checkpoint.h"
#include "model/hybrid_model.h"
#include "train/train_step.h"

namespace nemotron::testing {

double rel_err(const std::vector<double>& ours, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ours.size(); ++i) num += (ours[i] - ref[i]) * (ours[i] - ref[i]), den += ref[i] * ref[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<int64_t> next_token_labels(const Tensor& ids) {
  const int64_t B = ids.dim(0), T = ids.dim(1);
  std::vector<int64_t> labels(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) labels[b * T + t] = t + 1 < T ? ids.data<int64_t>()[b * T + t + 1] : -100;
  return labels;
}

void check_f64_parity(const std::string& checkpoint_dir, const std::string& reference_file, ParityErrors* out) {
  using model::HybridModel;
  model::HfCheckpoint ck = model::HfCheckpoint::open(checkpoint_dir);
  io::SafetensorsFile ref = io::SafetensorsFile::open(reference_file);
  HybridModel net(ck.config(), host_backend(), DType::f64);
  ck.load_into(net.params());
  Context ctx{&host_backend(), nullptr, DType::f64};
  Tensor ids = ref.load("input_ids", DType::i64);
  const int64_t B = ids.dim(0), T = ids.dim(1);

  Tensor logits = net.logits(ctx, ids);
  ASSERT_EQ(logits.shape(), ref.find("logits")->shape);
  out->logits = rel_err(logits.to_f64_vector(), ref.load("logits", DType::f64).to_f64_vector());
  EXPECT_LT(out->logits, 1e-4);

  model::Batch batch{ids, Tensor::from_vector<int64_t>({B, T}, next_token_labels(ids)), Tensor()};
  net.params().zero_grads();
  train::LossSum loss = train::cross_entropy_backward(ctx, net, batch, 1.0 / static_cast<double>(B * (T - 1)));
  const double ref_loss = ref.load("loss", DType::f64).to_f64_vector()[0];
  out->loss = std::fabs(loss.mean() - ref_loss) / std::fabs(ref_loss);
  EXPECT_LT(out->loss, 1e-6) << "ours " << loss.mean() << ", reference " << ref_loss;

  for (const model::Param* p : net.params().all()) {
    const std::string key = "grad." + p->name;
    if (!p->requires_grad) {  // a buffer: no gradient on either side
      EXPECT_EQ(ref.find(key), nullptr) << key;
      EXPECT_FALSE(p->grad.defined()) << p->name;
      continue;
    }
    ASSERT_NE(ref.find(key), nullptr) << "the reference has no " << key;
    ASSERT_EQ(ref.find(key)->shape, p->grad.shape()) << key;
    const double e = rel_err(p->grad.to_f64_vector(), ref.load(key, DType::f64).to_f64_vector());
    EXPECT_LT(e, 1e-3) << key;
    if (e > out->worst_grad) out->worst_grad = e, out->worst_grad_name = p->name;
    ++out->gradients;
  }
  int ref_grads = 0;
  for (const io::StTensorInfo& t : ref.tensors()) ref_grads += t.name.rfind("grad.", 0) == 0;
  EXPECT_EQ(out->gradients, ref_grads) << "the reference has gradients of tensors the model does not have";
}

}  // namespace nemotron::testing
