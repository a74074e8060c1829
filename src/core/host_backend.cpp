// Host memory: 64-byte aligned allocations with byte accounting. This is the CPU backend's
// allocator and the home of every tensor made without a device.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend.h"
#include "core/error.h"

namespace nemotron {
namespace {

class HostBackend final : public Backend {
 public:
  Device device() const override { return Device{}; }
  std::string name() const override { return "cpu"; }
  void* allocate(size_t bytes) override {
    // A 0-byte request still gets a real block (as the CUDA allocator's 512-byte minimum does), so a
    // tensor of 0 elements is defined: a rank whose experts received no rows passes empty tensors on.
    size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr)
      throw Error(fmt::format("out of host memory: asked for {} bytes with {} already in use", bytes, in_use_.load()));
    size_t now = in_use_ += bytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {}
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    std::free(ptr);
    in_use_ -= bytes;
  }
  void fill_zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void synchronize() override {}
  size_t bytes_in_use() const override { return in_use_.load(); }
  size_t peak_bytes() const override { return peak_.load(); }

 private:
  std::atomic<size_t> in_use_{0};
  std::atomic<size_t> peak_{0};
};

}  // namespace

Backend& host_backend() {
  static HostBackend backend;  // stateless apart from counters; lives for the whole process
  return backend;
}

}  // namespace nemotron
