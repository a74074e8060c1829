#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/op_profiler.h"
#include "core/rng.h"
#if NM_HARNESS_CUDA
#include "backend/cuda/cuda_backend.h"
#include "ops/cuda_support.h"
#endif

namespace nemotron::testing {

namespace {

std::vector<CaseList (*)()>& factories() {
  static std::vector<CaseList (*)()> list;
  return list;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Host float64 masters (floats) or integer tensors, one per input spec, seeded by the case name.
std::vector<Tensor> make_inputs(const OpCase& c) {
  std::vector<Tensor> out;
  uint64_t seed = fnv1a(c.name());
  int k = 0;
  for (const InputSpec& s : c.inputs()) {
    Philox rng(seed, static_cast<uint64_t>(k++));
    Tensor t = Tensor::empty(s.shape, s.dtype);
    if (is_float(s.dtype)) {
      fill_uniform(t, rng, s.lo, s.hi);
    } else {
      Tensor v = Tensor::empty(s.shape, DType::f64);
      double* p = v.data<double>();
      for (int64_t i = 0; i < v.numel(); ++i)
        p[i] = std::floor(s.lo + (s.hi - s.lo) * rng.uniform(static_cast<uint64_t>(i)));
      t = v.to_host(s.dtype);
    }
    out.push_back(t);
  }
  return out;
}

std::vector<Tensor> cast_inputs(const std::vector<Tensor>& masters, const std::vector<InputSpec>& specs, DType dtype,
                                Backend& backend) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < masters.size(); ++i) {
    const Tensor& m = masters[i];
    DType want = specs[i].stat ? stat_dtype(dtype) : dtype;
    out.push_back(is_float(m.dtype()) ? m.to_host(want).to(backend) : m.to(backend));
  }
  return out;
}

// Output gradients in the dtype of the outputs they belong to (a float32 statistic output of a
// bf16 op gets a float32 gradient).
std::vector<Tensor> cast_like(const std::vector<Tensor>& douts, const std::vector<Tensor>& outs, Backend& backend) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < douts.size(); ++k)
    out.push_back(is_float(outs[k].dtype()) ? douts[k].to_host(outs[k].dtype()).to(backend) : douts[k].to(backend));
  return out;
}

double dot(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vector(), y = b.to_f64_vector();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

std::vector<Tensor> random_douts(const OpCase& c, const std::vector<Tensor>& outs) {
  std::vector<Tensor> d;
  Philox rng(fnv1a(c.name()) ^ 0x5eedull, 1000);
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor t = Tensor::empty(outs[k].shape(), DType::f64);
    if (is_float(outs[k].dtype())) fill_uniform(t, Philox(rng.seed(), 1000 + k), -1.0, 1.0);
    else t.zero_();
    d.push_back(t);
  }
  return d;
}

void run_grad_check(const OpCase& c) {
  Context ctx = cpu_context(DType::f64);
  std::vector<Tensor> in = make_inputs(c);
  std::vector<Tensor> outs = c.forward(ctx, in);
  std::vector<Tensor> douts = random_douts(c, outs);
  std::vector<Tensor> grads = c.backward(ctx, in, douts);
  std::vector<InputSpec> specs = c.inputs();
  ASSERT_EQ(grads.size(), in.size()) << c.name() << ": backward must return one entry per input";
  auto loss = [&]() {
    std::vector<Tensor> o = c.forward(ctx, in);
    double L = 0;
    for (size_t k = 0; k < o.size(); ++k)
      if (is_float(o[k].dtype())) L += dot(o[k], douts[k]);
    return L;
  };
  const double h = c.fd_step();
  int checked_inputs = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_float(specs[i].dtype) || !specs[i].differentiable) continue;
    ASSERT_TRUE(grads[i].defined()) << c.name() << ": no gradient for input " << specs[i].name;
    ASSERT_EQ(grads[i].shape(), in[i].shape()) << c.name() << ": gradient shape of " << specs[i].name;
    Tensor g = grads[i].to_host(DType::f64);
    double* p = in[i].data<double>();
    int64_t n = in[i].numel(), m = std::min<int64_t>(n, c.grad_max_elements());
    Philox pick(fnv1a(c.name()), 7000 + i);
    double num_sq = 0, diff_sq = 0, ana_sq = 0, worst = 0;
    int64_t worst_at = -1;
    for (int64_t j = 0; j < m; ++j) {
      int64_t e = m == n ? j : static_cast<int64_t>(pick.uniform(static_cast<uint64_t>(j)) * static_cast<double>(n));
      double saved = p[e];
      p[e] = saved + h;
      double lp = loss();
      p[e] = saved - h;
      double lm = loss();
      p[e] = saved;
      double num = (lp - lm) / (2 * h), ana = g.data<double>()[e];
      num_sq += num * num;
      ana_sq += ana * ana;
      diff_sq += (num - ana) * (num - ana);
      if (std::fabs(num - ana) > worst) worst = std::fabs(num - ana), worst_at = e;
    }
    double scale = std::sqrt(std::max(num_sq, ana_sq));
    double rel = scale < 1e-12 ? std::sqrt(diff_sq) : std::sqrt(diff_sq) / scale;
    EXPECT_LT(rel, c.grad_tolerance()) << c.name() << ": d/d" << specs[i].name << " relative error " << rel
                                       << " over " << m << " of " << n << " elements (worst |diff| " << worst
                                       << " at element " << worst_at << ", ||grad|| " << scale << ")";
    ++checked_inputs;
  }
  EXPECT_GT(checked_inputs, 0) << c.name() << ": no differentiable input";
}

struct Target {
  std::string name;
  Backend* (*backend)();  // resolved when the test runs (a CUDA backend only exists with a GPU)
  DType dtype;
};

#if NM_HARNESS_CUDA
// This binary (test_cuda) checks the CUDA kernels against the CPU float64 reference.
Backend* gpu() {
  static std::unique_ptr<cuda::CudaBackend> b = cuda::device_count() > 0 ? std::make_unique<cuda::CudaBackend>(0) : nullptr;
  return b.get();
}
std::vector<Target> targets() { return {{"cuda_f32", gpu, DType::f32}, {"cuda_bf16", gpu, DType::bf16}}; }
constexpr bool kGradMode = false;
#else
Backend* cpu() { return &host_backend(); }
std::vector<Target> targets() { return {{"cpu_f32", cpu, DType::f32}}; }
constexpr bool kGradMode = true;
#endif

// Counts the outermost op scopes a case opens: every op must report its phase to a profiler
// (core/op_profiler.h), and its scopes must close.
struct ScopeCounter final : OpProfiler {
  int begins = 0, ends = 0;
  void begin(Context&, OpPhase, const char*) override { ++begins; }
  void end(Context&) override { ++ends; }
};

void expect_scoped(const ScopeCounter& p, const OpCase& c, const char* pass) {
  EXPECT_GT(p.begins, 0) << c.name() << ": the " << pass << " opened no op scope (add an OpScope to the op)";
  EXPECT_EQ(p.begins, p.ends) << c.name() << ": the " << pass << " left op scopes open";
  EXPECT_EQ(p.open_scopes, 0) << c.name() << ": the " << pass << " left op scopes open";
}

void run_backend_check(const OpCase& c, const Target& t) {
  Backend* backend = t.backend();
  if (!backend) GTEST_SKIP() << "no CUDA device visible: " << t.name << " checks need a GPU";
#if NM_HARNESS_CUDA
  if (!c.is_block() && !ops::cuda_supports(c.op())) GTEST_SKIP() << c.op() << " has no CUDA kernel yet";
#endif
  if (std::string why = c.skip_reason(t.dtype); !why.empty()) GTEST_SKIP() << c.name() << " on " << t.name << ": " << why;
  Target target{t.name, t.backend, t.dtype};
  Context ref_ctx = cpu_context(DType::f64);
  Context ctx{backend, nullptr, target.dtype};
  ScopeCounter forward_scopes, backward_scopes;
  ctx.profiler = &forward_scopes;
  std::vector<Tensor> masters = make_inputs(c);
  std::vector<Tensor> want = c.forward(ref_ctx, masters);
  std::vector<InputSpec> specs = c.inputs();
  std::vector<Tensor> in = cast_inputs(masters, specs, target.dtype, *backend);
  std::vector<Tensor> got = c.forward(ctx, in);
  expect_scoped(forward_scopes, c, "forward");
  ASSERT_EQ(got.size(), want.size());
  double tol = c.tolerance(target.dtype);
  for (size_t k = 0; k < got.size(); ++k) {
    double err = relative_error(got[k], want[k]);
    EXPECT_LT(err, tol) << c.name() << " on " << target.name << ": output " << k << " relative error " << err;
  }
  if (!c.has_backward()) return;
  std::vector<Tensor> douts = random_douts(c, want);
  std::vector<Tensor> want_g = c.backward(ref_ctx, masters, douts);
  ctx.profiler = &backward_scopes;
  std::vector<Tensor> got_g = c.backward(ctx, in, cast_like(douts, got, *backend));
  expect_scoped(backward_scopes, c, "backward");
  for (size_t i = 0; i < want_g.size(); ++i) {
    if (!want_g[i].defined()) continue;
    ASSERT_TRUE(i < got_g.size() && got_g[i].defined()) << c.name() << ": no gradient for " << specs[i].name;
    double err = relative_error(got_g[i], want_g[i]), gtol = c.input_tolerance(target.dtype, specs[i].name);
    EXPECT_LT(err, gtol) << c.name() << " on " << target.name << ": d/d" << specs[i].name << " relative error " << err;
  }
}

class FnTest : public ::testing::Test {
 public:
  explicit FnTest(std::function<void()> fn) : fn_(std::move(fn)) {}
  void TestBody() override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace

double OpCase::tolerance(DType dtype) const {
  switch (dtype) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    default: return 2e-2;
  }
}

int register_cases(CaseList (*factory)()) {
  factories().push_back(factory);
  return 0;
}

Context cpu_context(DType dtype) { return Context{&host_backend(), nullptr, dtype}; }

double relative_error(const Tensor& got, const Tensor& want) {
  std::vector<double> a = got.to_f64_vector(), b = want.to_f64_vector();
  if (a.size() != b.size()) return INFINITY;
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
  return n < 1e-300 ? std::sqrt(d) : std::sqrt(d / n);
}

// Registers every case with GoogleTest: OpGrad.<case> and OpCheck_<target>.<case>.
void register_all_cases() {
  static std::vector<std::shared_ptr<OpCase>> keep;
  for (auto factory : factories()) {
    for (auto& uc : factory()) {
      std::shared_ptr<OpCase> c(std::move(uc));
      keep.push_back(c);
      std::string name = c->name();
      if (kGradMode && c->has_backward() && c->grad_check())
        ::testing::RegisterTest("OpGrad", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [c]() -> ::testing::Test* { return new FnTest([c] { run_grad_check(*c); }); });
      for (const Target& t : targets())
        ::testing::RegisterTest(("OpCheck_" + t.name).c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [c, t]() -> ::testing::Test* { return new FnTest([c, t] { run_backend_check(*c, t); }); });
    }
  }
#if NM_HARNESS_CUDA
  // Support mode: every op with a CUDA kernel must have at least one case here (a block's case
  // covers no op by itself).
  std::vector<std::string> case_ops;
  for (const auto& c : keep)
    if (!c->is_block()) case_ops.push_back(c->op());
  ::testing::RegisterTest("OpSupport", "every_cuda_kernel_has_a_case", nullptr, nullptr, __FILE__, __LINE__,
                          [case_ops]() -> ::testing::Test* {
                            return new FnTest([case_ops] {
                              for (const std::string& op : ops::cuda_supported_ops())
                                EXPECT_NE(std::find(case_ops.begin(), case_ops.end(), op), case_ops.end())
                                    << "CUDA kernel " << op << " has no harness case";
                            });
                          });
#endif
}

}  // namespace nemotron::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  nemotron::testing::register_all_cases();
  return RUN_ALL_TESTS();
}
