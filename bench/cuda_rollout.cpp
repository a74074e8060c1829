// Rollout throughput on one GPU (a benchmark, not a test): the generation engine as GRPO runs it
// (engine::Engine over CachedStepModel: paged KV cache, Mamba conv/SSM state, continuous batching,
// tokens drawn on the GPU (ops/sample_rows.h) and brought back once per step; --host-sampling: the
// logits [S, V] to the host instead, sampling there on all cores) for --batch prompts of
// --prompt-len random tokens and --new-tokens generated each (EOS ignored: no stop tokens; with
// --prompts N > --batch, N requests flow through the --batch slots, refilled as sequences end, as
// vLLM's offline throughput benchmark runs --num-prompts through max_num_seqs), on the
// train-step benchmark's configs with random weights, bf16 by default. Prints prefill tokens/s,
// generated tokens/s, per-step milliseconds, KV + SSM memory per sequence and peak GPU memory;
// then, so one can judge whether decoding is launch-bound, the decode step's time against the
// batch size (the model alone and with the logits copy) and one profiled step at the full batch
// (time inside ops against wall time: the rest is launch gaps and host syncs). Appends one JSON
// line to --results. The sweep also prints each step's share of the memory roofline: the bytes a
// dense decode step must read (every weight but the input embedding, plus the KV / SSM state of
// the batch) over its time, against a device-to-device copy measured in the same run; with
// --sweep-baseline each point is also timed with the skinny GEMM off (cuBLASLt for every linear,
// ops/matmul_cuda.h), interleaved step by step in the same process; --skinny-gemm off runs the
// whole benchmark that way. A profiled step at batch 1 says where a decode step's time goes.
// --generations G asks each prompt G times in a row (GRPO's rollout: N prompts x G requests) and
// --prefix-sharing on|off says whether the engine prefills a shared prompt once
// (engine::EngineOptions::prefix_sharing); the record then carries the prefill tokens shared, the
// engine's prefill time and a hash of every generated token, to compare a run with and without.
// Beside the profiled decode steps, one profiled prefill step of the run's shape (--batch whole prompts of
// --prompt-len tokens in one extend): model TFLOP/s against the bf16 GEMM ceiling, by phase and op.
// --fast-init fills the weights on the device in seconds (an 8B's init(1234) takes ~90 s on the
// host): dense configs only, since a MoE's routing and so its speed depend on the weights.
// --decode-graphs off runs the engine's decode steps eagerly instead of as CUDA graphs
// (engine/decode_graphs.h); the record says which and how many steps a graph replayed.
// --new-tokens-min M spreads the requests' lengths over [M, --new-tokens] (request i: M + 37 i mod
// the range's size), so that with --prompts > --batch sequences end at different steps and each
// refill step mixes new prompts with running decodes, as a rollout with EOS does.
// --prefill-scan off prefills prompts' Mamba layers token by token (ops/ssd_decode.h) rather than
// through the chunked scan (model/prefill_layout.h), for an A/B in one binary.
// usage: cuda_rollout -c bench/configs/hybrid_dense_125m.yaml [--batch 256] [--prompts N] [--prompt-len 128]
//                     [--new-tokens 512] [--dtype bfloat16] [--temperature 1]
//                     [--sweep 1,8,32,64,128,256] [--results bench/results/rollout.jsonl]
//                     [--host-sampling] [--skinny-gemm on|off] [--sweep-baseline]
//                     [--generations G] [--prefix-sharing on|off] [--decode-graphs on|off] [--fast-init]
//                     [--prefill-scan on|off] [--new-tokens-min M]
//                     [--hf-config-out FILE (the config as config.json, for tools/bench_hf_generate.py)]
//                     [--save-weights DIR (the benchmark's random-weight model as a weights-only checkpoint,
//                      model.safetensors + config.yaml, that generate and serve load: bench/run_serve_bench.sh
//                      serves the same model as the rollout it compares with)]
// --tensor-parallel P (under `mpirun -np P`): the model split over P GPUs (model/tensor_split.h),
// every rank running the same engine in lockstep (as generate, serve and GRPO's rollouts do), rank
// 0 printing and appending the record; --tokens-out FILE writes every request's generated tokens
// (one JSON array per line) to compare a TP run with a one-GPU run token for token.
// DeciLM configs run too (bench/configs/llama31_8b.yaml: Llama-3.1-8B's shape as 32 uniform blocks;
// decilm_1b.yaml). --hf-config-out then writes the DeciLM config.json; tools/hf_bench_model.py
// builds a uniform one as LlamaForCausalLM and refuses a heterogeneous one (no transformers class).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "bench_io.h"
#include "gemm_peak.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_op_profiler.h"
#include "bench_models.h"
#include "core/op_profiler.h"
#include "core/version.h"
#include "engine/cached_step_model.h"
#include "engine/engine.h"
#include "model/decode_state.h"
#include "model/hf_convert.h"
#include "model/param.h"
#include "model/shard_sizes.h"
#include "model/weights_io.h"
#include "io/mapped_file.h"
#include "ops/matmul_cuda.h"
#include "parallel/mpi_communicator.h"
#include "parallel/process_groups.h"

using namespace nemotron;
using bench::seconds_since;

namespace {

// The engine's model with each step timed (wall clock: the call ends with the logits or the drawn
// tokens on the host, so the GPU work is done) and marked prefill when any slot appends more than
// one token. `device_sampling` false hides the GPU draw from the engine (the host path).
class TimedStepModel : public engine::StepModel {
 public:
  TimedStepModel(engine::CachedStepModel& m, bool device_sampling) : m_(m), device_sampling_(device_sampling) {}
  int64_t vocab_size() const override { return m_.vocab_size(); }
  int64_t max_slots() const override { return m_.max_slots(); }
  int64_t max_seq_len() const override { return m_.max_seq_len(); }
  bool can_admit(std::span<const int64_t> totals) const override { return m_.can_admit(totals); }
  void release(int64_t slot) override { m_.release(slot); }
  std::vector<float> extend(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> out = m_.extend(slots, tokens);
    record(tokens, t0);
    return out;
  }
  bool samples_on_device() const override { return device_sampling_ && m_.samples_on_device(); }
  std::vector<ops::TokenDraw> extend_and_sample(const std::vector<int64_t>& slots,
                                                const std::vector<std::vector<int32_t>>& tokens,
                                                std::span<const ops::RowSampling> rows,
                                                std::span<const int64_t> logits_rows) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<ops::TokenDraw> out = m_.extend_and_sample(slots, tokens, rows, logits_rows);
    record(tokens, t0);
    return out;
  }
  bool can_fork() const override { return m_.can_fork(); }
  void fork(const std::vector<std::pair<int64_t, int64_t>>& pairs) override { m_.fork(pairs); }
  std::vector<double> prefill_s, decode_s;
  int64_t prefill_tokens = 0, decode_tokens = 0;

 private:
  void record(const std::vector<std::vector<int32_t>>& tokens, std::chrono::steady_clock::time_point t0) {
    const double dt = seconds_since(t0);
    bool prefill = false;
    int64_t n = 0;
    for (const auto& t : tokens) prefill |= t.size() > 1, n += static_cast<int64_t>(t.size());
    (prefill ? prefill_s : decode_s).push_back(dt);
    (prefill ? prefill_tokens : decode_tokens) += n;
  }
  engine::CachedStepModel& m_;
  bool device_sampling_;
};

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct SweepPoint {
  int64_t batch = 0;
  // median decode step: the model alone; with the GPU draw (tokens to the host); with the logits
  // [b, V] to the host instead (before sampling there)
  double model_ms = 0, sampled_ms = 0, with_logits_ms = 0;
  double host_ms = 0;           // the model step's host time until extend returns (GPU work queued)
  double model_ms_off = 0;      // the model alone with the skinny GEMM off (--sweep-baseline), else 0
  int64_t context_tokens = 0;   // the sequences' median length during the timed steps
};

// Decode steps of `b` sequences (after a prefill of `prompt` tokens each): the median of `steps`
// steps of HybridModel::extend alone (synchronised), of CachedStepModel::extend_and_sample
// (temperature 1: the tokens on the host) and of CachedStepModel::extend (the logits on the host,
// as the engine's host-sampling path gets them).
SweepPoint sweep_point(model::HybridModel& net, Context& ctx, int64_t b, int64_t prompt, int64_t steps,
                       bool baseline) {
  const model::ModelConfig& cfg = net.config();
  engine::CachedStepModel step(net, ctx, b, prompt + 4 * steps + 8);
  std::vector<int64_t> slots;
  for (int64_t s = 0; s < b; ++s) slots.push_back(s);
  step.extend(slots, bench::random_prompts(b, prompt, cfg.vocab_size, 7));
  const std::vector<std::vector<int32_t>> next(static_cast<size_t>(b), std::vector<int32_t>{1});
  cudaStream_t stream = cuda::cuda_stream(ctx);
  std::vector<double> model_s, sampled_s, full_s, host_s, off_s;
  model::DecodeState& st = step.state();
  const std::vector<ops::RowSampling> rows(static_cast<size_t>(b), ops::RowSampling{1.0, 0.5});
  const bool skinny = ops::skinny_gemm_enabled();
  for (int64_t i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    net.extend(ctx, st, slots, next);
    host_s.push_back(seconds_since(t0));
    NM_CUDA_CHECK(cudaStreamSynchronize(stream));
    model_s.push_back(seconds_since(t0));
    if (baseline) {
      ops::set_skinny_gemm_enabled(false);
      t0 = std::chrono::steady_clock::now();
      net.extend(ctx, st, slots, next);
      NM_CUDA_CHECK(cudaStreamSynchronize(stream));
      off_s.push_back(seconds_since(t0));
      ops::set_skinny_gemm_enabled(skinny);
    }
    t0 = std::chrono::steady_clock::now();
    step.extend_and_sample(slots, next, rows);
    sampled_s.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    step.extend(slots, next);
    full_s.push_back(seconds_since(t0));
  }
  const int64_t per_step = baseline ? 4 : 3;
  return {b,
          1e3 * median(model_s),
          1e3 * median(sampled_s),
          1e3 * median(full_s),
          1e3 * median(host_s),
          baseline ? 1e3 * median(off_s) : 0.0,
          prompt + per_step * steps / 2};
}

// --fast-init: each weight matrix from one random block tiled over it on the device (gemm_peak.h's
// random_device_tensor, U(-a, a) of std 0.02), vectors 1 (norms) or 0: seconds where init(1234)
// draws every value on the host (~90 s for the 8B on 16 cores). Other values than init's, so for
// dense throughput only: a MoE's routing, hence its speed, depends on the weights.
void fast_init(model::HybridModel& net, Context& ctx) {
  uint64_t seed = 1;
  for (model::Param* p : net.params().all()) {
    if (p->value.rank() < 2) {
      model::init_constant(*p, p->name.find("norm") != std::string::npos ? 1.0 : 0.0);
      continue;
    }
    const double a = 0.02 * std::sqrt(3.0);
    const Tensor t = random_device_tensor(ctx, p->value.shape(), p->value.dtype(), seed++, -a, a);
    NM_CUDA_CHECK(cudaMemcpy(p->value.raw(), t.raw(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()),
                             cudaMemcpyDeviceToDevice));
  }
}

// The costliest ops of a profiled step by name, with their share of the ops' time.
void print_top_ops(const cuda::OpPhaseTimes& ph, size_t top) {
  std::vector<std::pair<std::string, cuda::OpPhaseTimes::Op>> ops(ph.ops.begin(), ph.ops.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::printf("  by op:");
  for (size_t i = 0; i < std::min(top, ops.size()); ++i)
    std::printf(" %s %.2f ms (%lld, %.0f%%)", ops[i].first.c_str(), ops[i].second.ms,
                static_cast<long long>(ops[i].second.calls), 100.0 * ops[i].second.ms / ph.total_ms());
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "bench/configs/hybrid_dense_125m.yaml", results = "bench/results/rollout.jsonl";
  std::string dtype_name = "bfloat16", sweep = "1,8,32,64,128,256", hf_config_out, save_weights_dir;
  int64_t B = 256, num_prompts = 0, prompt = 128, new_tokens = 512, sweep_steps = 24, generations = 1, new_min = 0;
  std::string prefix_sharing = "on", tokens_out;
  int tp = 1;
  double temperature = 1.0;
  bool host_sampling = false, sweep_baseline = false, fast = false;
  std::string skinny = "on", graphs = "on", prefill_scan = "on";
  CLI::App app{"CUDA rollout benchmark: the generation engine, prefill + decode, continuous batching"};
  app.add_option("-c,--config", config, "model config (YAML with a model: section, or config.json)");
  app.add_option("--batch", B, "prompts generated together (engine slots)")->check(CLI::PositiveNumber);
  app.add_option("--prompts", num_prompts, "requests in all (default: --batch); more than --batch refill the slots")
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt-len", prompt, "random prompt tokens per sequence")->check(CLI::PositiveNumber);
  app.add_option("--new-tokens", new_tokens, "tokens generated per prompt (EOS ignored)")->check(CLI::PositiveNumber);
  app.add_option("--new-tokens-min", new_min, "spread the requests' lengths over [this, --new-tokens] (0: all equal)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dtype", dtype_name, "bfloat16 or float32")->check(CLI::IsMember({"bfloat16", "float32"}));
  app.add_option("--temperature", temperature, "sampling temperature (0 = greedy); top-p 1, top-k off");
  app.add_option("--sweep", sweep, "batch sizes for the decode step-time sweep (comma-separated; empty: none)");
  app.add_option("--sweep-steps", sweep_steps, "timed decode steps per sweep point")->check(CLI::PositiveNumber);
  app.add_option("--results", results, "append one JSON line with the figures to this file (empty: none)");
  app.add_flag("--host-sampling", host_sampling, "bring the logits [S, V] to the host and sample there (the engine's path before GPU sampling)");
  app.add_option("--hf-config-out", hf_config_out, "also write the config as a Hugging Face config.json here");
  app.add_option("--save-weights", save_weights_dir,
                 "also write the benchmark's model (its random weights, in --dtype) as a weights-only checkpoint "
                 "here (model.safetensors + config.yaml: generate and serve load it)");
  app.add_option("--skinny-gemm", skinny, "the skinny GEMM for decode-size linears (off: cuBLASLt for all)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--sweep-baseline", sweep_baseline, "also time each sweep point with the skinny GEMM off");
  app.add_option("--generations", generations, "requests per prompt, in a row (GRPO's G): --prompts x G in all")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefix-sharing", prefix_sharing, "prefill a prompt shared by requests admitted together once")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--tensor-parallel", tp, "tensor_model_parallel_size: the GPUs the model is split over (mpirun -np P)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tokens-out", tokens_out, "write each request's generated tokens here, one JSON array per line");
  app.add_option("--decode-graphs", graphs, "the engine's decode steps as CUDA graphs (engine/decode_graphs.h)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--fast-init", fast,
               "weights tiled from one random block on the device (seconds, not ~90 s for an 8B; dense configs: a "
               "MoE's speed depends on its weights)");
  app.add_option("--prefill-scan", prefill_scan,
                 "whole prompts' Mamba layers through the chunked scan (off: token by token, the old path)")
      ->check(CLI::IsMember({"on", "off"}));
  CLI11_PARSE(app, argc, argv);
  if (new_min > new_tokens) {
    std::fprintf(stderr, "cuda_rollout: --new-tokens-min %lld exceeds --new-tokens %lld\n",
                 static_cast<long long>(new_min), static_cast<long long>(new_tokens));
    return 2;
  }
  engine::set_decode_graphs_default(graphs == "on");
  parallel::MpiRuntime mpi;
  const int rank = mpi.world_rank();
  if (rank != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;  // rank 0 prints
  try {
    if (mpi.world_size() != tp)
      throw InputError(fmt::format("--tensor-parallel {} under {} ranks (start it with mpirun -np {})", tp,
                                   mpi.world_size(), tp));
    const model::ModelConfig cfg = model::load_model_config(config);
    if (!hf_config_out.empty()) std::ofstream(hf_config_out) << model::model_config_to_hf_json(cfg).dump(2) << "\n";
    if (cuda::device_count() == 0) {
      std::fprintf(stderr, "no CUDA device visible\n");
      return 2;
    }
    const DType dt = dtype_name == "bfloat16" ? DType::bf16 : DType::f32;
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cuda::CudaBackend gpu(local ? std::atoi(local) : 0);
    Context ctx{&gpu, nullptr, dt};
    std::unique_ptr<parallel::MpiCommunicator> world_comm;
    if (tp > 1) world_comm = std::make_unique<parallel::MpiCommunicator>(MPI_COMM_WORLD);
    parallel::ParallelSizes split;
    split.tensor = tp;
    const parallel::RankLayout layout(split, tp, model::layout_facts(cfg), config);
    const auto groups = parallel::ProcessGroups::create(layout, world_comm.get(), &gpu);
    ctx.groups = groups.get();
    ops::set_skinny_gemm_enabled(skinny == "on");
    const double copy_tbs = measure_copy_tbs(ctx);  // the memory ceiling, before the weights take room
    gpu.release_cache();
    std::unique_ptr<model::HybridModel> model =
        bench::make_bench_model(cfg, gpu, dt, {0, 1, groups->coords().tensor, tp, false}, !fast, /*trainable=*/false);
    model::HybridModel& net = *model;
    net.set_prefill_by_scan(prefill_scan == "on");
    if (fast) fast_init(net, ctx);
    // Generation only: every parameter built frozen, as train::load_inference_model builds them for
    // generate, eval and serve, so no float32 gradient is ever allocated (for an 8B in bf16 they
    // would be 32 GB beside 16 GB of weights; a 70B at TP 4 would not fit at all). The reported
    // peak starts from the weights.
    if (!save_weights_dir.empty()) {
      if (tp > 1) throw InputError("--save-weights writes a whole model: run it without --tensor-parallel");
      std::filesystem::create_directories(save_weights_dir);
      model::save_weights(save_weights_dir, net.params());
      const std::string yaml = model::checkpoint_config_yaml(cfg, {{"bench_config", config}, {"init_seed", 1234}});
      io::write_file_atomically(save_weights_dir + "/config.yaml", yaml.data(), yaml.size());
      std::printf("wrote the model's weights (%s) and config.yaml to %s\n", dtype_name.c_str(), save_weights_dir.c_str());
    }
    gpu.release_cache();
    gpu.reset_peak();
    const size_t weights_bytes = gpu.bytes_in_use();
    // What a dense decode step must read: every weight once but the input embedding table (it
    // reads only the batch's rows), plus each sequence's KV / SSM state (bytes_per_sequence).
    const double streamed_weight_bytes =
        static_cast<double>(weights_bytes) -
        (cfg.tie_word_embeddings ? 0.0 : static_cast<double>(cfg.vocab_size * cfg.hidden_size * dtype_size(dt)));

    // Warm-up: a few short sequences through the engine (allocator, cuBLASLt plans, kernels).
    {
      engine::CachedStepModel warm(net, ctx, 4, prompt + 16);
      engine::Engine e(warm);
      for (int i = 0; i < 4; ++i) {
        engine::Request r;
        r.prompt = bench::random_tokens(prompt, cfg.vocab_size, 5, static_cast<uint64_t>(i * prompt));
        r.params.max_new_tokens = 8;
        e.add(r);
      }
      e.run();
    }

    // The rollout: N requests through B slots, each holding prompt + new tokens (N = B: all
    // admitted at once; N > B: a finished slot takes the next request).
    const int64_t N = (num_prompts > 0 ? num_prompts : B) * generations;
    engine::CachedStepModel cached(net, ctx, B, prompt + new_tokens);
    TimedStepModel timed(cached, !host_sampling);
    engine::Engine engine(timed, nullptr, engine::EngineOptions{prefix_sharing == "on"});
    const std::vector<std::vector<int32_t>> prompts = bench::random_prompts(N / generations, prompt, cfg.vocab_size, 99);
    for (int64_t i = 0; i < N; ++i) {
      engine::Request r;
      r.prompt = prompts[static_cast<size_t>(i / generations)];
      r.params.temperature = temperature;
      r.params.max_new_tokens = new_min > 0 ? new_min + (37 * i) % (new_tokens - new_min + 1) : new_tokens;
      r.params.seed = 1;
      engine.add(r);
    }
    const std::vector<engine::Result> out = engine.run();
    if (!tokens_out.empty() && rank == 0) {
      std::ofstream f(tokens_out);
      for (const engine::Result& r : out) f << nlohmann::json(r.tokens).dump() << "\n";
    }
    const engine::EngineStats& s = engine.stats();
    int64_t generated = 0;
    uint64_t tokens_hash = 1469598103934665603ull;  // FNV-1a over every request's tokens, in order
    for (const engine::Result& r : out) {
      generated += static_cast<int64_t>(r.tokens.size());
      for (int32_t t : r.tokens) tokens_hash = (tokens_hash ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    }
    const double prefill_s = sum(timed.prefill_s), decode_model_s = sum(timed.decode_s);
    const double decode_wall_s = s.seconds - prefill_s;  // decode steps with sampling and bookkeeping
    const int64_t decode_steps = static_cast<int64_t>(timed.decode_s.size());
    const double prefill_tok_s = static_cast<double>(timed.prefill_tokens) / prefill_s;
    const double gen_tok_s = static_cast<double>(generated) / s.seconds;
    const double decode_tok_s = static_cast<double>(timed.decode_tokens) / decode_wall_s;
    const int64_t seq_len = prompt + new_tokens;
    const double per_seq_bytes = static_cast<double>(model::DecodeState::bytes_per_sequence(cfg, seq_len, dt));
    const double state_bytes = static_cast<double>(cached.state().bytes());
    const double peak_gib = static_cast<double>(gpu.peak_bytes()) / (1ull << 30);

    std::printf("device: %s | nemotron %s | config %s | %.1f M params | %s | weights %.2f GiB%s\n", gpu.name().c_str(),
                NEMOTRON_VERSION, config.c_str(), static_cast<double>(net.params().numel()) / 1e6, dtype_name.c_str(),
                static_cast<double>(weights_bytes) / (1ull << 30),
                tp > 1 ? fmt::format(" per GPU, tensor parallel over {} GPUs", tp).c_str() : "");
    std::printf("memory ceiling: device-to-device copy %.3f TB/s (measured now) | skinny GEMM %s | a decode step "
                "reads >= %.2f GB of weights\n",
                copy_tbs, skinny.c_str(), streamed_weight_bytes / 1e9);
    std::printf("rollout: %lld prompts x %lld tokens through %lld slots, %lld new tokens each (EOS ignored), "
                "temperature %g: %lld tokens generated in %.2f s, %lld engine steps\n",
                static_cast<long long>(N), static_cast<long long>(prompt), static_cast<long long>(B),
                static_cast<long long>(new_tokens), temperature, static_cast<long long>(generated), s.seconds,
                static_cast<long long>(s.steps));
    if (N > B)
      std::printf("  (slots refilled: a step that admits a prompt counts as prefill with the decode tokens beside it)\n");
    std::printf("prefill: %.0f tokens/s (%lld tokens in %.1f ms, the first draw included)\n", prefill_tok_s,
                static_cast<long long>(timed.prefill_tokens), 1e3 * prefill_s);
    std::printf("prefix sharing %s, %lld requests per prompt: %lld prompt tokens prefilled, %lld shared; the engine's "
                "prefill steps %.1f ms (forks included) | tokens hash %016llx\n",
                prefix_sharing.c_str(), static_cast<long long>(generations), static_cast<long long>(s.prefill_tokens),
                static_cast<long long>(s.shared_prefill_tokens), 1e3 * s.prefill_seconds,
                static_cast<unsigned long long>(tokens_hash));
    std::printf("generated: %.0f tokens/s end to end (prefill included) | decode phase %.0f tokens/s\n", gen_tok_s,
                decode_tok_s);
    std::printf("decode step: %.2f ms median model step (%s) | %.2f ms per step with sampling and bookkeeping "
                "(mean of %lld)\n",
                1e3 * median(timed.decode_s),
                host_sampling ? fmt::format("extend + logits [{}, {}] to the host", B, cfg.vocab_size).c_str()
                              : "extend + the draw on the GPU, tokens to the host",
                1e3 * decode_wall_s / static_cast<double>(std::max<int64_t>(decode_steps, 1)),
                static_cast<long long>(decode_steps));
    std::printf("memory: KV + SSM state %.2f MiB per sequence of %lld tokens (%.2f GiB for %lld slots as allocated, "
                "KV blocks rounded) | peak GPU memory %.2f GiB\n",
                per_seq_bytes / (1 << 20), static_cast<long long>(seq_len), state_bytes / (1ull << 30),
                static_cast<long long>(B), peak_gib);

    // Decode step time against the batch size: flat at small batches means launch- or
    // latency-bound (CUDA graphs would help), growing with the batch means bandwidth/compute-bound.
    nlohmann::json sweep_json = nlohmann::json::array();
    const std::vector<int64_t> sizes = bench::parse_sizes(sweep);
    if (!sizes.empty()) {
      std::printf("decode step vs batch (%lld-token prompts, median of %lld steps; roofline = bytes the step must "
                  "read / time / the copy's %.3f TB/s):\n",
                  static_cast<long long>(prompt), static_cast<long long>(sweep_steps), copy_tbs);
      std::printf("  %6s %10s %9s %8s %14s %16s %16s %14s", "batch", "model ms", "roofline", "host ms", "+ GPU draw ms",
                  "+ logits ms", "tokens/s (draw)", "reads GB");
      if (sweep_baseline) std::printf(" %16s %9s %8s", "cuBLASLt-only ms", "roofline", "speedup");
      std::printf("\n");
      for (int64_t b : sizes) {
        const SweepPoint p = sweep_point(net, ctx, b, prompt, sweep_steps, sweep_baseline);
        const double bytes =
            streamed_weight_bytes +
            static_cast<double>(b * model::DecodeState::bytes_per_sequence(cfg, p.context_tokens, dt));
        auto roofline = [&](double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e12 / copy_tbs : 0.0; };
        std::printf("  %6lld %10.3f %8.1f%% %8.3f %14.3f %16.3f %16.0f %14.2f", static_cast<long long>(b), p.model_ms,
                    100 * roofline(p.model_ms), p.host_ms, p.sampled_ms, p.with_logits_ms,
                    static_cast<double>(b) / (p.sampled_ms * 1e-3), bytes / 1e9);
        if (sweep_baseline)
          std::printf(" %16.3f %8.1f%% %7.2fx", p.model_ms_off, 100 * roofline(p.model_ms_off),
                      p.model_ms_off / p.model_ms);
        std::printf("\n");
        nlohmann::json pt = {{"batch", b}, {"model_ms", p.model_ms}, {"sampled_ms", p.sampled_ms},
                             {"with_logits_ms", p.with_logits_ms}, {"host_ms", p.host_ms},
                             {"bytes_read", bytes}, {"roofline_fraction", roofline(p.model_ms)}};
        if (sweep_baseline) {
          pt["model_ms_skinny_off"] = p.model_ms_off;
          pt["roofline_fraction_skinny_off"] = roofline(p.model_ms_off);
        }
        sweep_json.push_back(pt);
      }
    }

    // One decode step (at the full batch, then at batch 1) with an event pair per op: the time
    // inside ops against the step's wall time; the difference is launch gaps, host syncs (MoE
    // token counts, one per MoE layer) and the per-step uploads of the batch's index tensors.
    auto profile_step = [&](int64_t b) {
      engine::CachedStepModel step(net, ctx, b, prompt + 16);
      std::vector<int64_t> slots;
      for (int64_t i = 0; i < b; ++i) slots.push_back(i);
      step.extend(slots, bench::random_prompts(b, prompt, cfg.vocab_size, 7));
      model::DecodeState& st = step.state();
      const std::vector<std::vector<int32_t>> next(static_cast<size_t>(b), std::vector<int32_t>{1});
      cuda::CudaOpProfiler profiler;
      ctx.profiler = &profiler;
      cuda::OpPhaseTimes ph;
      double wall_ms = 0;
      for (int i = 0; i < 2; ++i) {  // the first fills the event pool
        const auto t0 = std::chrono::steady_clock::now();
        net.extend(ctx, st, slots, next);
        NM_CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_stream(ctx)));
        wall_ms = 1e3 * seconds_since(t0);
        ph = profiler.collect();
      }
      ctx.profiler = nullptr;
      int64_t calls = 0;
      for (OpPhase p : all_op_phases()) calls += ph.calls_of(p);
      std::printf("one profiled decode step at batch %lld: %.2f ms wall, %.2f ms inside %lld ops (%.0f%%); the rest "
                  "is launch gaps and host syncs\n",
                  static_cast<long long>(b), wall_ms, ph.total_ms(), static_cast<long long>(calls),
                  100.0 * ph.total_ms() / wall_ms);
      std::printf("  by phase:");
      for (OpPhase p : all_op_phases())
        if (ph.calls_of(p) > 0)
          std::printf(" %s %.2f ms (%lld)", op_phase_name(p), ph.ms_of(p), static_cast<long long>(ph.calls_of(p)));
      std::printf("\n");
      print_top_ops(ph, 8);
      // The GEMMs' share of the roofline: at decode sizes they read the weights (all but the
      // input embedding), once per step.
      const double gemm_ms = ph.ms_of(OpPhase::gemm);
      const double gemm_frac = gemm_ms > 0 ? streamed_weight_bytes / (gemm_ms * 1e-3) / 1e12 / copy_tbs : 0.0;
      std::printf("  what is left: the GEMMs read the weights at %.1f%% of the copy's bandwidth (%.2f ms; %.2f ms at "
                  "100%%), other ops %.2f ms, outside ops (launch gaps, host work, syncs) %.2f ms\n",
                  100 * gemm_frac, gemm_ms, streamed_weight_bytes / (copy_tbs * 1e12) * 1e3, ph.total_ms() - gemm_ms,
                  wall_ms - ph.total_ms());
      return nlohmann::json{{"batch", b}, {"wall_ms", wall_ms}, {"ops_ms", ph.total_ms()}, {"op_calls", calls},
                            {"gemm_ms", gemm_ms}, {"gemm_roofline_fraction", gemm_frac}};
    };
    // One prefill step of the run's shape (B whole prompts of `prompt` tokens in one extend, as the
    // engine admits a wave), profiled the same way: its model TFLOP/s (the FLOPs a token's forward
    // takes, model_info's count) against the bf16 GEMM ceiling measured now and the H100's 989
    // dense, the GEMMs' own TFLOP/s, and where the rest goes.
    const double gemm_peak = dt == DType::bf16 ? measure_gemm_peak_tflops(ctx) : 0.0;
    gpu.release_cache();
    auto profile_prefill = [&](int64_t b) {
      engine::CachedStepModel step(net, ctx, b, prompt + 16);
      std::vector<int64_t> slots;
      for (int64_t i = 0; i < b; ++i) slots.push_back(i);
      const auto prompts = bench::random_prompts(b, prompt, cfg.vocab_size, 11);
      cuda::CudaOpProfiler profiler;
      ctx.profiler = &profiler;
      const auto t0 = std::chrono::steady_clock::now();
      net.extend(ctx, step.state(), slots, prompts);
      NM_CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_stream(ctx)));
      const double wall_ms = 1e3 * seconds_since(t0);
      const cuda::OpPhaseTimes ph = profiler.collect();
      ctx.profiler = nullptr;
      const double tokens = static_cast<double>(b * prompt), gemm_ms = ph.ms_of(OpPhase::gemm);
      const double gemm_tflops = gemm_ms > 0 ? ph.gemm_flops / (gemm_ms * 1e-3) / 1e12 : 0.0;
      // The head runs for each prompt's last token only.
      const double head = 2.0 * static_cast<double>(cfg.hidden_size * cfg.vocab_size);
      const double flops = (net.forward_flops_per_token(prompt) - head) * tokens + head * static_cast<double>(b);
      const double model_tflops = flops / (wall_ms * 1e-3) / 1e12;
      std::printf("one profiled prefill step, %lld prompts x %lld tokens: %.1f ms wall (%.0f tokens/s, %.0f model "
                  "TFLOP/s = %.1f%% of the measured bf16 GEMM ceiling %.0f, %.1f%% of 989), %.1f ms inside ops; GEMMs "
                  "%.1f ms at %.0f TFLOP/s\n",
                  static_cast<long long>(b), static_cast<long long>(prompt), wall_ms, tokens / (wall_ms * 1e-3),
                  model_tflops, gemm_peak > 0 ? 100 * model_tflops / gemm_peak : 0.0, gemm_peak,
                  100 * model_tflops / 989.0, ph.total_ms(), gemm_ms, gemm_tflops);
      std::printf("  by phase:");
      for (OpPhase p : all_op_phases())
        if (ph.calls_of(p) > 0)
          std::printf(" %s %.1f ms (%lld)", op_phase_name(p), ph.ms_of(p), static_cast<long long>(ph.calls_of(p)));
      std::printf("\n");
      print_top_ops(ph, 10);
      return nlohmann::json{{"batch", b}, {"prompt_len", prompt}, {"wall_ms", wall_ms}, {"ops_ms", ph.total_ms()},
                            {"model_tflops", model_tflops}, {"gemm_peak_tflops", gemm_peak},
                            {"gemm_ms", gemm_ms}, {"gemm_tflops", gemm_tflops},
                            {"attention_ms", ph.ms_of(OpPhase::attention)},
                            {"elementwise_ms", ph.ms_of(OpPhase::elementwise)}};
    };
    const nlohmann::json prefill_profile_json = profile_prefill(B);
    const nlohmann::json profile_json = profile_step(B);
    const nlohmann::json profile_b1_json = B > 1 ? profile_step(1) : profile_json;

    nlohmann::json rec = {{"config", config},
                          {"device", gpu.name()},
                          {"dtype", dtype_name},
                          {"batch", B},
                          {"prompts", N},
                          {"prompt_len", prompt},
                          {"new_tokens", new_tokens},
                          {"new_tokens_min", new_min},
                          {"temperature", temperature},
                          {"sampling", host_sampling ? "host" : "device"},
                          {"params", net.params().numel()},
                          {"generated_tokens", generated},
                          {"seconds", s.seconds},
                          {"prefill_tokens_per_s", prefill_tok_s},
                          {"generated_tokens_per_s", gen_tok_s},
                          {"decode_tokens_per_s", decode_tok_s},
                          {"decode_step_ms_median", 1e3 * median(timed.decode_s)},
                          {"decode_step_wall_ms_mean", 1e3 * decode_wall_s / static_cast<double>(std::max<int64_t>(decode_steps, 1))},
                          {"decode_model_seconds", decode_model_s},
                          {"state_bytes_per_sequence", per_seq_bytes},
                          {"state_bytes_allocated", state_bytes},
                          {"peak_gpu_gib", peak_gib},
                          {"sweep", sweep_json},
                          {"profiled_step", profile_json},
                          {"profiled_prefill", prefill_profile_json},
                          {"profiled_step_batch1", profile_b1_json},
                          {"copy_tbs", copy_tbs},
                          {"skinny_gemm", skinny},
                          {"decode_graphs", graphs == "on"},
                          {"prefill_scan", prefill_scan == "on"},
                          {"fast_init", fast},
                          {"decode_graph_replays", cached.graph_replays()},
                          {"generations", generations},
                          {"prefix_sharing", prefix_sharing == "on"},
                          {"prefill_tokens", s.prefill_tokens},
                          {"prefill_tokens_shared", s.shared_prefill_tokens},
                          {"engine_prefill_seconds", s.prefill_seconds},
                          {"tokens_hash", fmt::format("{:016x}", tokens_hash)},
                          {"version", NEMOTRON_VERSION},
                          {"commit", bench::commit_or_unknown()}};
    rec["tensor_parallel"] = tp;
    bench::stamp_date(rec);
    // The last line of output, for scripts (bench/run_rollout_comparison.sh).
    std::printf("%s\n", nlohmann::json({{"nemotron_rollout", rec}}).dump().c_str());
    if (rank == 0) bench::append_line(results, rec);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
