// Embedding lookup: gradient for the table (grad_dtype, accumulated), with repeated ids in the
// batch; the large-N cases run the CUDA sort's global merge stages.
#include <gtest/gtest.h>

#include "harness.h"
#include "ops/embedding.h"

namespace nemotron::testing {
namespace {

class EmbeddingCase : public OpCase {
 public:
  EmbeddingCase(int64_t N, int64_t V, int64_t D, DType id_dtype) : N_(N), V_(V), D_(D), id_dtype_(id_dtype) {}
  std::string op() const override { return "embedding"; }
  std::string params() const override { return fmt::format("N={},V={},D={},ids={}", N_, V_, D_, dtype_name(id_dtype_)); }
  std::vector<InputSpec> inputs() const override {
    return {{"ids", {N_}, id_dtype_, false, 0, static_cast<double>(V_)}, {"weight", {V_, D_}}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = ctx.empty({N_, D_}, in[1].dtype());
    ops::embedding_forward(ctx, in[0], in[1], y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    // dw starts non-zero: the backward accumulates (+=) into what is there.
    Tensor dw = in[1].to_host(DType::f64).to_host(grad_dtype(in[1].dtype())).to(*ctx.backend);
    ops::embedding_backward(ctx, in[0], douts[0], dw);
    std::vector<double> a = dw.to_f64_vector(), w = in[1].to_f64_vector();
    for (size_t i = 0; i < a.size(); ++i) a[i] -= w[i];
    return {Tensor(), Tensor::from_vector<double>({V_, D_}, a)};
  }

 private:
  int64_t N_, V_, D_;
  DType id_dtype_;
};

NM_OP_CASES(embedding_cases) {
  CaseList c;
  c.push_back(std::make_unique<EmbeddingCase>(23, 7, 5, DType::i32));  // N > V: ids repeat
  c.push_back(std::make_unique<EmbeddingCase>(9, 31, 12, DType::i64));
  c.push_back(std::make_unique<EmbeddingCase>(37, 1007, 45, DType::i32));
  c.push_back(std::make_unique<EmbeddingCase>(5000, 53, 19, DType::i64));  // sort beyond one block
  c.push_back(std::make_unique<EmbeddingCase>(3001, 4099, 130, DType::i32));
  return c;
}

TEST(Embedding, out_of_range_id_names_its_position) {
  Context ctx = cpu_context(DType::f64);
  Tensor w = Tensor::zeros({5, 3}, DType::f64), y = Tensor::empty({3, 3}, DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({3}, {0, 5, 1});
  EXPECT_THROW(ops::embedding_forward(ctx, ids, w, y), InputError);
  EXPECT_THROW(ops::embedding_backward(ctx, ids, y, w), InputError);
}

}  // namespace
}  // namespace nemotron::testing
