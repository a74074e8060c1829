// A process-wide count of the times the host waited for a device: a copy back, a stream
// synchronise, a copy from host memory that waits for the stream. Each wait empties the GPU's
// queue, so the kernels after it start only as fast as the host launches them; the training
// step should wait once per step (the gradient norm), not once per op. Benchmarks and tests read
// the count around a step. Global because the waits happen deep in backends and ops that share
// no object; it is a diagnostic counter, never a switch.
#pragma once
#include <atomic>
#include <cstdint>

namespace nemotron {

inline std::atomic<int64_t>& host_wait_counter() {
  static std::atomic<int64_t> n{0};
  return n;
}
inline void note_host_wait() { host_wait_counter().fetch_add(1, std::memory_order_relaxed); }
inline int64_t host_waits() { return host_wait_counter().load(std::memory_order_relaxed); }

}  // namespace nemotron
