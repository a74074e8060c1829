// Incremental-decoding throughput of a model config on the CPU (a benchmark, not a test):
// prefill of `--slots` prompts in one extend call, then `--gen` single-token steps of all slots
// together (HybridModel::extend, model/decode_state.h), against the training-style forward over
// the same prompts as a yardstick for the prefill.
// usage: cpu_decode [-c recipes/nano3/pretrain/tiny.yaml] [--slots 1] [--prompt-len 128]
//                   [--gen 64] [--dtype float32]
#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/cpu/parallel.h"
#include "bench_models.h"

using namespace nemotron;
using bench::seconds_since;

int main(int argc, char** argv) {
  std::string config = "recipes/nano3/pretrain/tiny.yaml", dtype_name = "float32";
  int64_t slots = 1, prompt = 128, gen = 64;
  CLI::App app{"CPU incremental-decoding benchmark"};
  app.add_option("-c,--config", config, "model config (recipe YAML or config.json)");
  app.add_option("--slots", slots, "sequences decoded together");
  app.add_option("--prompt-len", prompt, "prompt tokens per sequence");
  app.add_option("--gen", gen, "generated tokens per sequence (timed single-token steps)");
  app.add_option("--dtype", dtype_name, "float32 or float64");
  CLI11_PARSE(app, argc, argv);
  try {
    model::ModelConfig cfg = model::load_model_config(config);
    DType dtype = dtype_from_name(dtype_name);
    std::unique_ptr<model::HybridModel> model = bench::make_bench_model(cfg, host_backend(), dtype);
    model::HybridModel& net = *model;
    Context ctx{&host_backend(), nullptr, dtype};
    const std::vector<std::vector<int32_t>> prompts = bench::random_prompts(slots, prompt, cfg.vocab_size, 99);
    std::vector<int64_t> slot_ids;
    std::vector<int32_t> flat;
    for (int64_t s = 0; s < slots; ++s) {
      slot_ids.push_back(s);
      flat.insert(flat.end(), prompts[static_cast<size_t>(s)].begin(), prompts[static_cast<size_t>(s)].end());
    }
    model::DecodeState st = net.make_decode_state({slots, prompt + gen + 1, 16});
    // Warm-up: one short sequence in and out.
    net.extend(ctx, st, {0}, {{1, 2, 3}});
    st.release(0);

    auto t0 = std::chrono::steady_clock::now();
    Tensor logits = net.extend(ctx, st, slot_ids, prompts);
    const double prefill_s = seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    net.logits(ctx, Tensor::from_vector<int32_t>({slots, prompt}, flat));
    const double forward_s = seconds_since(t0);

    std::vector<std::vector<int32_t>> next(static_cast<size_t>(slots));
    t0 = std::chrono::steady_clock::now();
    for (int64_t g = 0; g < gen; ++g) {
      std::vector<double> z = logits.to_f64_vector();  // greedy: the host read a sampler does
      for (int64_t s = 0; s < slots; ++s) {
        int64_t best = 0;
        for (int64_t v = 1; v < cfg.vocab_size; ++v)
          if (z[s * cfg.vocab_size + v] > z[s * cfg.vocab_size + best]) best = v;
        next[s] = {static_cast<int32_t>(best)};
      }
      logits = net.extend(ctx, st, slot_ids, next);
    }
    const double decode_s = seconds_since(t0);
    const double ptok = static_cast<double>(slots * prompt), gtok = static_cast<double>(slots * gen);
    std::printf("config %s | %s | params %.3f M | %lld slots | prompt %lld | gen %lld | %d threads | state %.2f MiB\n",
                config.c_str(), dtype_name.c_str(), static_cast<double>(net.params().numel()) / 1e6,
                static_cast<long long>(slots), static_cast<long long>(prompt), static_cast<long long>(gen),
                cpu::num_threads(), static_cast<double>(st.bytes()) / (1 << 20));
    std::printf("prefill: %.0f tokens/s (%.1f ms) | training-style forward over the same prompts: %.0f tokens/s\n",
                ptok / prefill_s, 1e3 * prefill_s, ptok / forward_s);
    std::printf("decode:  %.0f tokens/s (%.2f ms per step of %lld tokens)\n", gtok / decode_s,
                1e3 * decode_s / static_cast<double>(gen), static_cast<long long>(slots));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
