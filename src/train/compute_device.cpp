#include "train/compute_device.h"

#include <fmt/format.h>

#if NEMOTRON_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#endif

namespace nemotron::train {

std::string ComputeDevice::describe() const {
  return fmt::format("{}, {}", backend->name(),
                     dtype == DType::bf16 ? "bf16 weights and activations, fp32 masters, gradients and optimizer state"
                                          : fmt::format("{} throughout", dtype_name(dtype)));
}

ComputeDevice open_compute_device(const std::string& source, const std::string& device,
                                  const std::string& mixed_precision) {
  ComputeDevice d;
  if (device.rfind("cuda", 0) != 0) return d;
#if NEMOTRON_CUDA
  const int n = cuda::device_count(), index = cuda_device_index(device);
  if (index >= n)
    throw InputError(fmt::format("{}: device: {} asked, but {} CUDA device(s) are visible{}", source, device, n,
                                 n == 0 ? " (no GPU or no driver; use device=cpu)" : ""));
  d.owned = std::make_unique<cuda::CudaBackend>(index);
  d.backend = d.owned.get();
  d.dtype = mixed_precision == "bf16_mixed" ? DType::bf16 : DType::f32;
  return d;
#else
  (void)mixed_precision;
  throw InputError(fmt::format("{}: device: {} asked, but this nemotron was built without CUDA (configure with "
                               "-DNEMOTRON_CUDA=ON on a machine with nvcc)",
                               source, device));
#endif
}

void bind_to_calling_thread(const Backend& backend) {
#if NEMOTRON_CUDA
  if (backend.device().is_cuda()) NM_CUDA_CHECK(cudaSetDevice(backend.device().index));
#else
  (void)backend;
#endif
}

model::Batch batch_on(const model::Batch& b, Backend& backend) {
  if (backend.device().is_cpu()) return b;
  auto move = [&](const Tensor& t) { return !t.defined() || t.device() == backend.device() ? t : t.to(backend); };
  model::Batch out{move(b.input_ids), move(b.labels), move(b.loss_mask), move(b.seq_idx), move(b.position_ids)};
  out.context_split = b.context_split;
  out.ahead = b.ahead;  // read on the host (MTP targets)
  return out;
}

}  // namespace nemotron::train
