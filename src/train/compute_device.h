// The device and precision a run computes on, from the config's `device:` and `mixed_precision:`
// keys: the host backend in float32, or a CUDA backend in bf16 with float32 masters.
#pragma once
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/dtype.h"
#include "model/hybrid_model.h"
#include "train/train_loop_config.h"

namespace nemotron::train {

struct ComputeDevice {
  std::unique_ptr<Backend> owned;  // the CUDA backend, when there is one
  Backend* backend = &host_backend();
  DType dtype = DType::f32;  // parameter values and activations
  std::string describe() const;  // "cuda:0 (NVIDIA H100 80GB HBM3), bf16 weights + fp32 masters"
};

// From the checked `device` and `mixed_precision` keys (read_device_keys); `source` names the config
// in errors. Throws InputError when CUDA is asked of a build without it or of a machine without a GPU.
ComputeDevice open_compute_device(const std::string& source, const std::string& device,
                                  const std::string& mixed_precision);
inline ComputeDevice open_compute_device(const TrainLoopConfig& cfg) {
  return open_compute_device(cfg.source, cfg.device, cfg.mixed_precision);
}

// Makes `backend`'s device the calling thread's current one (CUDA binds the device per thread: a
// thread other than the one that opened the backend, e.g. the server's engine thread, calls this
// before its first op). A no-op on the host.
void bind_to_calling_thread(const Backend& backend);

// The batch's tensors on `backend` (a no-op on the host).
model::Batch batch_on(const model::Batch& batch, Backend& backend);

}  // namespace nemotron::train
