// The op harness (STYLE.md lesson 2): every op, block and model is a case with printable
// parameters, random non-zero inputs, a forward and a backward. One harness checks
//   grad:    backward against float64 central finite differences on the CPU,
//   backend: each other backend/dtype (CPU float32 in test_ops/test_model, CUDA float32 and
//            bfloat16 in test_cuda) against the CPU float64 reference, forward outputs and
//            gradients, with a tolerance per dtype.
// Adding a backend means adding a Target in harness.cpp; adding an op means one file of cases
// (tests/ops/foo_cases.cpp), a block likewise (tests/model/foo_cases.cpp).
// Rerun one case with --gtest_filter='*rmsnorm(B=2*'.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"

namespace nemotron::testing {

struct InputSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::f64;   // f64 = a float input (cast to the dtype under test); i32/i64 = integer
  bool differentiable = true; // float inputs only
  double lo = -1.0, hi = 1.0; // uniform range for floats; integers are drawn from [lo, hi)
  bool stat = false;          // a statistic-like input (dt, A, the MoE bias): cast to
                              // stat_dtype(dtype under test), i.e. float32 on a bf16 target
};

class OpCase {
 public:
  virtual ~OpCase() = default;
  virtual std::string op() const = 0;      // "rmsnorm"
  virtual std::string params() const = 0;  // "B=2,T=5,D=7"
  std::string name() const { return op() + "(" + params() + ")"; }
  virtual std::vector<InputSpec> inputs() const = 0;
  // Float inputs arrive in the dtype under test on ctx's backend (stat inputs in its stat_dtype);
  // outputs are what is compared. Parameter gradients a case returns are made in
  // grad_dtype(dtype) (float32 on a bf16 target), as the model's parameter store makes them.
  virtual std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const = 0;
  // Gradients of L = sum_k <out_k, dout_k> with respect to each input (same order; an undefined
  // Tensor for integer or non-differentiable inputs). Empty = the op has no backward.
  virtual std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                                       const std::vector<Tensor>& douts) const {
    (void)ctx, (void)in, (void)douts;
    return {};
  }
  virtual bool has_backward() const { return true; }
  virtual double grad_tolerance() const { return 1e-6; }   // relative error, float64
  virtual double fd_step() const { return 1e-6; }
  virtual int64_t grad_max_elements() const { return 96; } // per input; larger inputs are sampled
  virtual double tolerance(DType dtype) const;             // backend mode, relative Frobenius error
  // Backend mode bound for the gradient of one input (by name); tolerance(dtype) unless a case
  // knows one gradient to be worse conditioned than the rest.
  virtual double input_tolerance(DType dtype, const std::string& input) const {
    (void)input;
    return tolerance(dtype);
  }
  // A block (mixer, whole model) built from many ops: it runs on every backend whose ops it uses,
  // without being an op of its own in ops::cuda_supported_ops (and does not count as an op's case).
  virtual bool is_block() const { return false; }
  // false: backend mode only (realistic sizes at which finite differences would take minutes).
  virtual bool grad_check() const { return true; }
  // Non-empty: the backend check in this dtype is skipped, printing this reason.
  virtual std::string skip_reason(DType dtype) const {
    (void)dtype;
    return {};
  }
};

using CaseList = std::vector<std::unique_ptr<OpCase>>;
int register_cases(CaseList (*factory)());

// Helpers for cases.
Context cpu_context(DType dtype);
double relative_error(const Tensor& got, const Tensor& want);  // ||got - want|| / max(||want||, tiny)

}  // namespace nemotron::testing

#define NM_OP_CASES(fn)                                                       \
  static ::nemotron::testing::CaseList fn();                                  \
  [[maybe_unused]] static int fn##_registered = ::nemotron::testing::register_cases(fn); \
  static ::nemotron::testing::CaseList fn()
