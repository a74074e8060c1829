#include "model/finite_check.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace nemotron::model {

bool finite_checks_enabled() {
  const char* v = std::getenv("NEMOTRON_CHECK_FINITE");  // read per call: cheap next to a layer
  return v && *v && std::strcmp(v, "0") != 0;
}

void check_finite(const Tensor& t, const std::string& what) {
  if (!finite_checks_enabled() || !t.defined() || !is_float(t.dtype())) return;
  const std::vector<double> v = t.to_f64_vector();
  int64_t nan = 0, inf = 0, first = -1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i])) continue;
    (std::isnan(v[i]) ? nan : inf) += 1;
    if (first < 0) first = static_cast<int64_t>(i);
  }
  if (first >= 0)
    throw Error(fmt::format("non-finite values (NEMOTRON_CHECK_FINITE): {} {} has {} NaN and {} Inf of {}, first at "
                            "element {}",
                            what, t.shape().str(), nan, inf, v.size(), first));
}

}  // namespace nemotron::model
