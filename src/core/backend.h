// The backend interface: where tensor memory lives and how bytes move. Compute is not here:
// each op (src/ops) dispatches on its tensors' device to the CPU reference or a CUDA kernel, so
// a new backend slots in beside the CPU one without touching model code.
#pragma once
#include <cstddef>
#include <string>

namespace nemotron {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  std::string str() const;  // "cpu", "cuda:0"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // Device memory. allocate throws nemotron::Error naming the size asked and what is free.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void fill_zero(void* ptr, size_t bytes) = 0;
  // Copies within this device or between host memory and this device.
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  virtual size_t bytes_in_use() const = 0;
  virtual size_t peak_bytes() const = 0;
  // Device memory free for this process to take now, plus what its own cache holds (0: unknown,
  // e.g. the host): what a planner compares a run's estimate with.
  virtual size_t available_bytes() const { return 0; }
};

// The process's host allocator (64-byte aligned), shared by CPU tensors made without a context.
Backend& host_backend();

}  // namespace nemotron
