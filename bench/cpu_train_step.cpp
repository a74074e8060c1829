// Forward + backward + AdamW throughput of a model config on the CPU (a benchmark, not a test).
// usage: cpu_train_step [-c recipes/super3/pretrain/tiny.yaml] [--batch 4] [--seq-len 128]
//                       [--steps 10] [--dtype float32]
// Prints tokens/s and the achieved GFLOP/s (training FLOPs = 3 x forward matmul FLOPs). The step
// is the trainer's (train/train_step.h): masked cross-entropy, grad-norm clip at 1, AdamW.
#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/cpu/parallel.h"
#include "bench_models.h"
#include "train/adamw.h"
#include "train/train_step.h"

using namespace nemotron;

int main(int argc, char** argv) {
  std::string config = "recipes/super3/pretrain/tiny.yaml", dtype_name = "float32";
  int64_t B = 4, T = 128, steps = 10;
  CLI::App app{"CPU train-step benchmark"};
  app.add_option("-c,--config", config, "model config (recipe YAML or config.json)");
  app.add_option("--batch", B, "micro-batch size");
  app.add_option("--seq-len", T, "sequence length");
  app.add_option("--steps", steps, "timed steps (after one warm-up step)");
  app.add_option("--dtype", dtype_name, "float32 or float64");
  CLI11_PARSE(app, argc, argv);
  try {
    model::ModelConfig cfg = model::load_model_config(config);
    DType dtype = dtype_from_name(dtype_name);
    std::unique_ptr<model::HybridModel> model = bench::make_bench_model(cfg, host_backend(), dtype);
    model::HybridModel& net = *model;
    train::AdamW opt(net.params(), {});
    train::TrainStep step(net, opt, train::StepConfig{/*clip_grad=*/1.0, {}});
    train::MaskedCrossEntropy ce;
    const std::vector<int32_t> ids = bench::random_tokens(B * T, cfg.vocab_size, 99);
    std::vector<int32_t> labels(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) labels[i] = (i + 1) % T == 0 ? -100 : ids[i + 1];
    model::Batch batch{Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels), {}};
    int64_t iteration = 0;
    auto one_step = [&] { return step.run({batch}, ce, 1e-4, ++iteration).loss; };
    one_step();
    auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    for (int64_t s = 0; s < steps; ++s) loss = one_step();
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tokens = static_cast<double>(B * T * steps);
    double flops = 3.0 * net.forward_flops_per_token(T) * tokens;
    std::printf("config %s | %s | params %.3f M | batch %lld x seq %lld | %d threads\n", config.c_str(),
                dtype_name.c_str(), static_cast<double>(net.params().numel()) / 1e6, static_cast<long long>(B),
                static_cast<long long>(T), cpu::num_threads());
    std::printf("%lld steps in %.3f s: %.0f tokens/s, %.2f GFLOP/s (training FLOPs), %.1f ms/step, last loss %.4f\n",
                static_cast<long long>(steps), sec, tokens / sec, flops / sec / 1e9, 1e3 * sec / static_cast<double>(steps),
                loss);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
