// A debugging aid for locating where NaN/Inf first appears: with NEMOTRON_CHECK_FINITE=1 in the
// environment, the model checks each layer's activations and gradients as they are produced and
// stops at the first non-finite one with an error naming it. Each check copies the tensor to the
// host, so it is for hunting a fault, not for training runs; unset, a check is one branch. The
// environment is read once, at the first check; set_finite_checks overrides it (tests, tools).
#pragma once
#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/tensor.h"

namespace nemotron::model {

bool finite_checks_enabled();
void set_finite_checks(bool on);
// Always on, for a host tensor: "" when every value is finite (or the dtype is not a float one),
// else "N NaN and M Inf of K, first at element E". Scans in place (no copy), so it can check
// every tensor a checkpoint load reads.
std::string nonfinite_summary(const Tensor& host);
// Throws Error("non-finite values: <what> has N NaN and M Inf of K, first at element E") when on.
void check_finite(const Tensor& t, const std::string& what);
// The same with `what` formatted only when the check is on (nothing is built on the hot path).
template <class... Args>
void check_finite(const Tensor& t, fmt::format_string<Args...> what, Args&&... args) {
  if (finite_checks_enabled()) check_finite(t, fmt::format(what, std::forward<Args>(args)...));
}

}  // namespace nemotron::model
