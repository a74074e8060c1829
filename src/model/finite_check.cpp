#include "model/finite_check.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace nemotron::model {

namespace {
// -1 until the environment is read (at the first check), then 0 or 1. Read once: a getenv per layer
// is a lock and a scan of the environment on every step.
std::atomic<int> g_checks{-1};
}  // namespace

bool finite_checks_enabled() {
  int on = g_checks.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* v = std::getenv("NEMOTRON_CHECK_FINITE");
    on = v && *v && std::strcmp(v, "0") != 0;
    g_checks.store(on, std::memory_order_relaxed);
  }
  return on != 0;
}

void set_finite_checks(bool on) { g_checks.store(on ? 1 : 0, std::memory_order_relaxed); }

namespace {

struct NonFinite {
  int64_t nan = 0, inf = 0, first = -1;
  void add(int64_t i, bool is_nan) {
    (is_nan ? nan : inf) += 1;
    if (first < 0) first = i;
  }
};

template <class T>
NonFinite scan(const T* p, int64_t n) {
  NonFinite r;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) r.add(i, std::isnan(p[i]));
  return r;
}

NonFinite scan_bf16(const uint16_t* p, int64_t n) {  // exponent all ones: Inf (mantissa 0) or NaN
  NonFinite r;
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & 0x7F80u) == 0x7F80u) r.add(i, (p[i] & 0x007Fu) != 0);
  return r;
}

}  // namespace

std::string nonfinite_summary(const Tensor& t) {
  if (!t.defined() || !is_float(t.dtype())) return "";
  const Tensor& c = t;
  NonFinite r;
  switch (c.dtype()) {
    case DType::f64:
      r = scan(c.data<double>(), c.numel());
      break;
    case DType::f32:
      r = scan(c.data<float>(), c.numel());
      break;
    case DType::bf16:
      r = scan_bf16(static_cast<const uint16_t*>(c.raw()), c.numel());
      break;
    default:
      break;
  }
  if (r.first < 0) return "";
  return fmt::format("{} NaN and {} Inf of {}, first at element {}", r.nan, r.inf, c.numel(), r.first);
}

void check_finite(const Tensor& t, const std::string& what) {
  if (!finite_checks_enabled() || !t.defined() || !is_float(t.dtype())) return;
  const std::string bad = nonfinite_summary(t.device().is_cpu() ? t : t.to(host_backend()));
  if (!bad.empty())
    throw Error(fmt::format("non-finite values (NEMOTRON_CHECK_FINITE): {} {} has {}", what, t.shape().str(), bad));
}

}  // namespace nemotron::model
