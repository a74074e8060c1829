// CPU threading for the reference ops: OpenMP over an index range. Small ranges stay serial so
// tiny shapes (gradient checks, decode steps) pay no thread start-up.
#pragma once
#include <cstdint>

#include <omp.h>

namespace nemotron::cpu {

int num_threads();

template <class F>
void parallel_for(int64_t n, F&& body, int64_t min_per_thread = 1) {
  if (n <= 0) return;
  if (n < 2 * min_per_thread || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace nemotron::cpu
