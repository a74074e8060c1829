// Embedding lookup: gradient for the table, with repeated ids in the batch.
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
    Tensor dw = ctx.zeros({V_, D_}, in[1].dtype());
    ops::embedding_backward(ctx, in[0], douts[0], dw);
    return {Tensor(), dw};
  }

 private:
  int64_t N_, V_, D_;
  DType id_dtype_;
};

NM_OP_CASES(embedding_cases) {
  CaseList c;
  c.push_back(std::make_unique<EmbeddingCase>(23, 7, 5, DType::i32));  // N > V: ids repeat
  c.push_back(std::make_unique<EmbeddingCase>(9, 31, 12, DType::i64));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
