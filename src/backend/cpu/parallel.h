// CPU threading for the reference ops: OpenMP over an index range. Small ranges stay serial so
// tiny shapes (gradient checks, decode steps) pay no thread start-up.
#pragma once
#include <cstdint>

#include <omp.h>

namespace nemotron::cpu {

int num_threads();

// Items per thread so that each thread gets at least ~32K multiply-adds of work: tiny shapes
// (gradient checks, decode steps) stay serial instead of paying a thread wake-up per call.
inline int64_t grain_for(int64_t work_per_item) {
  int64_t w = work_per_item > 0 ? work_per_item : 1;
  int64_t g = (int64_t{1} << 15) / w;
  return g > 0 ? g : 1;
}

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
