// Data-parallel weak scaling on one host's GPUs, under a launcher:
//   mpirun -np 1 build-gpu/bench/cuda_data_parallel -c bench/configs/hybrid_dense_125m.yaml ...
//   mpirun -np 4 -x NCCL_NVLS_ENABLE ... (same arguments)
// Each rank trains the same micro-batch shape on its own GPU (rank i takes GPU i of the node) with
// the trainer's step (train/train_step.h: gradients summed over the data group by NCCL in the
// step, the normaliser and loss sums over MPI), so the per-GPU work is fixed and the only new cost
// is the communication. Rank 0 prints and appends one JSON line:
//  - the bus bandwidth of a plain NCCL all-reduce of --allreduce-mib MiB on this machine (the
//    ceiling), and of the step's gradient all-reduce alone on the flat gradient buffer;
//  - the median step, per-GPU tokens/s and MFU against a bf16 GEMM peak measured in this run;
//  - the gradient reduce's time alone as a share of the step, and how many of its buckets the step
//    queues during the last backward (overlapped on a second stream; the embedding's bucket, whose
//    gradient the backward completes last, never is).
// Compare the -np 1 and -np N lines of one session for weak scaling (per-GPU tokens/s ratio).
// --expert-parallel P splits the MoE layers' experts over groups of P ranks (model/expert_exchange.h:
// the routed rows cross the group by all-to-all, each GPU runs E / P experts on every member's
// rows); the line then also gives the all-to-all's bus bandwidth on one layer's rows.
// --tensor-parallel P splits heads, widths and the vocabulary over groups of P adjacent ranks
// (model/tensor_split.h): the P ranks of a group train the same micro-batches, so tokens/s per GPU
// is the group's over P, and MFU counts each GPU's own part of the model's FLOPs. The line then
// also gives the step with the tensor collectives overlapped (the default, Context::
// overlap_tensor_comm) and without, in the same run, and the collectives' time alone: one of each
// kind on the [B T, H] activations, times how many a step makes (per split layer one in the
// forward and one in the backward, and the embedding's and the head's), their share of the
// unoverlapped step and how much of it the overlap hides. --context-parallel C splits every sequence
// over groups of C ranks (model/context_split.h: two chunks per rank, load-balanced for the causal
// mask; attention all-gathers K/V, the Mamba scan passes its state chunk to chunk): the ranks of a
// group train the same rows, so tokens/s per GPU is the group's over C (and over TP), and each
// GPU's FLOPs are its 1/C of the rows' (the CP target compares --seq-len 4T at C 4 with
// --seq-len T at C 1, per GPU). --tp-gemm-sm-margin N makes the GEMMs
// that run beside a pending tensor collective leave it N multiprocessors (ops/matmul_cuda.h).
// --distributed-optimizer shards the float32 masters and moments over the data group
// (ddp.use_distributed_optimizer, train/adamw.h): each gradient bucket is reduce-scattered (from
// the last backward, as the all-reduce's buckets are) and the values all-gathered after the update;
// the line then gives the reduce-scatters' time alone instead of the all-reduce's.
// --fsdp shards the bf16 weights too (Megatron FSDP's optim_grads_params, train/param_gather.h):
// each layer all-gathered before its forward and its backward, the next one prefetched. Every line
// gives the step's peak device memory (measured from the first step on, after the model's set-up).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_op_profiler.h"
#include "bench_io.h"
#include "bench_models.h"
#include "gemm_peak.h"
#include "core/error.h"
#include "core/version.h"
#include "model/hybrid_model.h"
#include "parallel/mpi_communicator.h"
#include "parallel/nccl_communicator.h"
#include "parallel/process_groups.h"
#include "train/adamw.h"
#include "train/loss.h"
#include "train/train_step.h"

using namespace nemotron;

namespace {

// {phase: GPU ms} of a profiled step, and "outside_ops": the rest of its wall time.
nlohmann::json phase_json(const cuda::OpPhaseTimes& t, double step_ms) {
  nlohmann::json j = nlohmann::json::object();
  for (OpPhase p : all_op_phases())
    if (t.calls_of(p) > 0) j[op_phase_name(p)] = t.ms_of(p);
  j["outside_ops"] = step_ms - t.total_ms();
  return j;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Bus bandwidth (NCCL's convention for all-reduce: 2 (n - 1) / n x bytes / time) in GB/s.
double bus_gbps(double bytes, double ms, int n) { return n > 1 ? 2.0 * (n - 1) / n * bytes / (ms * 1e-3) / 1e9 : 0.0; }

}  // namespace

int main(int argc, char** argv) {
  std::string config = "bench/configs/hybrid_dense_125m.yaml", results;
  int64_t B = 4, T = 4096, allreduce_mib = 1024, bucket_mib = 0;
  int steps = 10, accum = 1, ep = 1, tp = 1, cp = 1;
  double peak_given = 0;
  bool sp = false, dist_opt = false, fsdp = false;
  int sm_margin = 0;
  CLI::App app{"CUDA data-parallel train-step benchmark (bf16, fp32 masters, NCCL)"};
  app.add_option("-c,--config", config, "model config (YAML with a model: section, or config.json)");
  app.add_option("--batch", B, "micro-batch size per GPU");
  app.add_option("--seq-len", T, "sequence length");
  app.add_option("--steps", steps, "timed steps (median; after warm-up)");
  app.add_option("--grad-accum", accum, "micro-batches per GPU per optimizer step")->check(CLI::PositiveNumber);
  app.add_option("--allreduce-mib", allreduce_mib, "size of the plain NCCL all-reduce that sets the ceiling");
  app.add_option("--bucket-mib", bucket_mib, "gradient bucket size (MiB of float32; Megatron: 40M elements)");
  app.add_option("--expert-parallel", ep, "expert_model_parallel_size (divides the GPUs and the routed experts)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tensor-parallel", tp, "tensor_model_parallel_size (divides the GPUs, heads, groups, widths)")
      ->check(CLI::PositiveNumber);
  app.add_option("--context-parallel", cp, "context_parallel_size (divides the GPUs; --seq-len a multiple of 2 C)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--sequence-parallel", sp, "model.sequence_parallel (with --tensor-parallel > 1)");
  app.add_flag("--distributed-optimizer", dist_opt, "ddp.use_distributed_optimizer: state sharded over the data group");
  app.add_flag("--fsdp", fsdp,
               "ddp.data_parallel_sharding_strategy=optim_grads_params: the weights sharded too (data parallelism only)");
  app.add_option("--tp-gemm-sm-margin", sm_margin,
                 "multiprocessors the GEMMs leave to a pending overlapped tensor collective (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--peak-tflops", peak_given,
                 "bf16 GEMM peak measured earlier in the same session (skips the ~30 s measurement)");
  app.add_option("--results", results, "append one JSON line with the figures to this file (rank 0)");
  CLI11_PARSE(app, argc, argv);
  parallel::MpiRuntime mpi;
  const int rank = mpi.world_rank(), world = mpi.world_size();
  try {
    cuda::CudaBackend gpu(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0));
    Context ctx{&gpu, nullptr, DType::bf16};
    std::unique_ptr<parallel::MpiCommunicator> world_comm;
    if (world > 1) world_comm = std::make_unique<parallel::MpiCommunicator>(MPI_COMM_WORLD);
    model::ModelConfig cfg = model::load_model_config(config);
    parallel::ParallelSizes sizes;
    sizes.expert = ep;
    sizes.tensor = tp;
    sizes.context = cp;
    sizes.sequence_parallel = sp;
    const parallel::RankLayout layout(sizes, world, {cfg.n_routed_experts}, "cuda_data_parallel");
    auto groups = parallel::ProcessGroups::create(layout, world_comm.get(), &gpu);
    parallel::Communicator& dp = *groups->data;
    if (auto* nccl = dynamic_cast<parallel::NcclCommunicator*>(groups->tensor.get())) nccl->set_overlap_sm_margin(sm_margin);
    const double peak = peak_given > 0 ? peak_given : measure_gemm_peak_tflops(ctx);

    // The ceiling: a plain all-reduce of allreduce_mib MiB of float32.
    double plain_ms = 0, plain_bus = 0;
    if (dp.size() > 1) {
      Tensor big = random_device_tensor(ctx, {allreduce_mib << 18}, DType::f32, 7);
      plain_ms = median_cuda_ms(ctx, 10, [&] { dp.all_reduce(big); }, 3);
      plain_bus = bus_gbps(static_cast<double>(big.nbytes()), plain_ms, dp.size());
    }

    const parallel::RankCoords coords = groups->coords();
    model::HybridModel net(cfg, gpu, DType::bf16, {coords.expert, layout.expert(), coords.tensor, layout.tensor(), sp});
    net.init(1234);
    net.params().create_masters();
    train::StepConfig sc{1.0, {}, 1234, groups};
    if (bucket_mib > 0) sc.grad_bucket_elements = bucket_mib << 18;
    if (fsdp && (tp > 1 || ep > 1 || cp > 1)) throw InputError("--fsdp runs with data parallelism only");
    train::AdamW opt(net.params(), {}, dist_opt || fsdp ? &dp : nullptr, groups->expert.get(), groups->tensor.get(),
                     sc.grad_bucket_elements,
                     fsdp && dp.size() > 1 ? train::Fsdp::grads_params : train::Fsdp::off);
    train::TrainStep step(net, opt, sc);
    train::MaskedCrossEntropy ce;
    // The ranks of a tensor or context group train the same rows (the step cuts a context rank's
    // chunks out of them): a batch per data coordinate.
    model::Batch batch = bench::random_train_batch(cfg, B, T, 99 + static_cast<uint64_t>(coords.data));
    batch.input_ids = batch.input_ids.to(gpu);
    batch.labels = batch.labels.to(gpu);
    const std::vector<model::Batch> micro(static_cast<size_t>(accum), batch);
    double loss = 0;
    int64_t iteration = 0;
    auto run = [&] { loss = step.run(micro, ce, 1e-4, ++iteration).loss; };
    gpu.reset_peak();  // the step's peak, not the set-up's (whole values before sharding)
    run();
    const double step_ms = median_cuda_ms(ctx, steps, run, 1);
    const size_t step_peak_bytes = gpu.peak_bytes();
    // One profiled step (a second one: the first fills the event pool): GPU ms per op phase
    // (core/op_profiler.h); the rest of the step is outside ops: collectives, copies, launch gaps.
    cuda::CudaOpProfiler profiler;
    ctx.profiler = step.context().profiler = &profiler;
    cuda::OpPhaseTimes phases;
    double profiled_ms = 0;
    for (int i = 0; i < 2; ++i) {
      profiled_ms = median_cuda_ms(ctx, 1, run, 0);
      phases = profiler.collect();
    }
    ctx.profiler = step.context().profiler = nullptr;
    // Tensor parallelism: the same step with the collectives where they fall (the baseline), and
    // the collectives of the [B T, H] activations alone.
    double base_ms = step_ms, tp_comm_ms = 0;
    int64_t split_layers = 0;
    if (tp > 1) {
      step.context().overlap_tensor_comm = false;
      run();
      base_ms = median_cuda_ms(ctx, steps, run, 1);
      step.context().overlap_tensor_comm = true;
      for (const auto& m : net.mixers()) split_layers += m->split_over_tensor() ? 1 : 0;
      parallel::Communicator& tg = *groups->tensor;
      Tensor whole = random_device_tensor(ctx, {B * T, cfg.hidden_size}, DType::bf16, 13);
      Tensor part = Tensor::empty({B * T / tp, cfg.hidden_size}, DType::bf16, gpu);
      // Per micro-batch: 2 per split layer, the embedding's and the head's.
      const double per_step = static_cast<double>((2 * split_layers + 2) * accum);
      if (sp)
        tp_comm_ms = per_step * (median_cuda_ms(ctx, 10, [&] { tg.all_gather(part, whole); }, 2) +
                                 median_cuda_ms(ctx, 10, [&] { tg.reduce_scatter(whole, part); }, 2));
      else
        tp_comm_ms = per_step * median_cuda_ms(ctx, 10, [&] { tg.all_reduce(whole); }, 2);
    }
    // The step's gradient all-reduce alone, on the same buffer (sharded: its buckets' reduce-scatters;
    // NCCL's bus bandwidth for those is (n - 1) / n x bytes / time, half the all-reduce's factor).
    Tensor grads = net.params().grad_buffer();
    double grad_ms = 0;
    if (dp.size() > 1 && opt.sharded()) {
      Tensor into = opt.shard_grads();
      grad_ms = median_cuda_ms(ctx, 10, [&] {
        for (const train::GradBucket& b : opt.shard_buckets()) {
          Tensor mine = into.slice(b.shard_at, b.shard_at + (b.end - b.begin) / dp.size());
          dp.reduce_scatter(grads.slice(b.begin, b.end), mine);
        }
      }, 2);
    } else if (dp.size() > 1) {
      grad_ms = median_cuda_ms(ctx, 10, [&] { dp.all_reduce(grads); }, 2);
    }
    const double grad_bus = bus_gbps(static_cast<double>(grads.nbytes()), grad_ms, dp.size()) / (opt.sharded() ? 2 : 1);
    // Expert parallelism: one all-to-all of one MoE layer's routed rows (B T K slots of the expert
    // width in bf16, spread evenly), as the exchange sends them four times per layer and step.
    double a2a_ms = 0, a2a_bus = 0;
    int64_t a2a_bytes = 0;
    if (ep > 1) {
      parallel::Communicator& eg = *groups->expert;
      const int64_t rows = B * T * cfg.num_experts_per_tok, d = cfg.moe_expert_dim();
      Tensor send = random_device_tensor(ctx, {rows, d}, DType::bf16, 11), recv = Tensor::empty({rows, d}, DType::bf16, gpu);
      const std::vector<int64_t> counts(static_cast<size_t>(ep), rows * d / ep);
      a2a_ms = median_cuda_ms(ctx, 10, [&] { eg.all_to_all_v(send, counts, recv, counts); }, 2);
      a2a_bytes = static_cast<int64_t>(send.nbytes());
      // NCCL's convention for all-to-all: (n - 1) / n x bytes / time.
      a2a_bus = static_cast<double>(ep - 1) / ep * static_cast<double>(a2a_bytes) / (a2a_ms * 1e-3) / 1e9;
    }

    // A tensor x context group's ranks share its tokens: per GPU, the group's tokens over TP x CP;
    // each GPU's FLOPs are its own part of the model (forward_flops_per_token counts it) on its
    // 1/CP of the rows' tokens (attention over the whole row: the causal work is balanced).
    const double tokens_group = static_cast<double>(B * T * accum), tokens_gpu = tokens_group / (tp * cp);
    const double tok_s_gpu = tokens_gpu / (step_ms * 1e-3);
    const double tflops_gpu = 3.0 * net.forward_flops_per_token(T) * tokens_group / cp / (step_ms * 1e-3) / 1e12;
    // Every rank's figures, so the slowest GPU is seen.
    std::vector<double> worst{step_ms};
    groups->world->all_reduce_host(worst, parallel::ReduceOp::max);
    const char* max_connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (rank == 0) {
      std::printf("device: %s x %d (%s) | nemotron %s | config %s | %.1f M params on rank 0 | per GPU: micro-batch "
                  "%lld x seq %lld, %d per step = %.0f tokens\n",
                  gpu.name().c_str(), world, layout.describe().c_str(), NEMOTRON_VERSION, config.c_str(),
                  static_cast<double>(net.params().numel()) / 1e6, static_cast<long long>(B),
                  static_cast<long long>(T), accum, tokens_gpu);
      std::printf("bf16 GEMM peak (rank 0): %.1f TFLOP/s\n", peak);
      if (dp.size() > 1)
        std::printf("NCCL all-reduce of %lld MiB float32: %.2f ms, bus bandwidth %.1f GB/s (the ceiling)\n",
                    static_cast<long long>(allreduce_mib), plain_ms, plain_bus);
      std::printf("train step (median of %d, slowest rank %.2f ms): %.2f ms | %.0f tokens/s per GPU, %.0f in all | "
                  "MFU %.1f%% | loss %.4f\n",
                  steps, worst[0], step_ms, tok_s_gpu, tok_s_gpu * world, 100.0 * tflops_gpu / peak, loss);
      std::printf("step peak device memory (rank 0): %.2f GiB (%s)\n", static_cast<double>(step_peak_bytes) / (1 << 30),
                  opt.shards_values() ? "FSDP: weights sharded" : opt.sharded() ? "distributed optimizer" : "plain data parallel");
      std::printf("op phases of one profiled step on rank 0 (%.2f ms):", profiled_ms);
      for (OpPhase p : all_op_phases())
        if (phases.calls_of(p) > 0) std::printf(" %s %.2f ms", op_phase_name(p), phases.ms_of(p));
      std::printf(" | outside ops %.2f ms\n", profiled_ms - phases.total_ms());
      if (dp.size() > 1)
        std::printf("gradient %s (%.1f MiB float32 buffer, alone): %.2f ms = %.1f%% of the step, bus %.1f GB/s "
                    "= %.0f%% of the plain all-reduce's; in the step %lld of %lld buckets start during the last "
                    "backward (a second stream), the rest after it\n",
                    opt.sharded() ? "reduce-scatter (distributed optimizer)" : "all-reduce",
                    static_cast<double>(grads.nbytes()) / (1 << 20), grad_ms, 100.0 * grad_ms / step_ms, grad_bus,
                    100.0 * grad_bus / plain_bus, static_cast<long long>(step.grad_reducer().overlapped_buckets()),
                    static_cast<long long>(step.grad_reducer().bucket_count()));
      if (tp > 1)
        std::printf("tensor collectives of the activations (%s on [%lld, %lld] bf16, %lld split layers; alone): %.2f "
                    "ms = %.1f%% of the step without overlap (%.2f ms); overlapped: %.2f ms, %.0f%% of them hidden "
                    "(CUDA_DEVICE_MAX_CONNECTIONS %s, GEMMs leave %d SMs)\n",
                    sp ? "all-gather + reduce-scatter" : "all-reduce", static_cast<long long>(B * T),
                    static_cast<long long>(cfg.hidden_size), static_cast<long long>(split_layers), tp_comm_ms,
                    100.0 * tp_comm_ms / base_ms, base_ms, step_ms, 100.0 * (base_ms - step_ms) / tp_comm_ms,
                    max_connections ? max_connections : "default", sm_margin);
      if (ep > 1)
        std::printf("expert all-to-all of one layer's routed rows (%.1f MiB bf16 per GPU, alone): %.2f ms, bus %.1f GB/s; "
                    "4 per MoE layer and step (3 of them beside compute: the shared expert forward and backward, the expert weight gradients)\n",
                    static_cast<double>(a2a_bytes) / (1 << 20), a2a_ms, a2a_bus);
      nlohmann::json rec = {{"bench", "cuda_data_parallel"}, {"config", config}, {"gpus", world},
                            {"expert_parallel", ep}, {"tensor_parallel", tp}, {"context_parallel", cp}, {"sequence_parallel", sp}, {"layout", layout.describe()},
                            {"distributed_optimizer", opt.sharded()}, {"optimizer_state_bytes", opt.state_bytes()},
                            {"fsdp", opt.shards_values()}, {"step_peak_device_bytes", step_peak_bytes},
                            {"weight_bytes_per_gpu", step.param_gather() ? step.param_gather()->shard_bytes() +
                                                                               step.param_gather()->buffer_bytes()
                                                                         : static_cast<int64_t>(net.params().numel() * 2)},
                            {"a2a_ms", a2a_ms},
                            {"a2a_bytes_per_gpu", a2a_bytes}, {"a2a_bus_gbps", a2a_bus},
                            {"batch", B}, {"seq_len", T}, {"grad_accum", accum}, {"step_ms", step_ms},
                            {"slowest_rank_step_ms", worst[0]}, {"tokens_per_s_per_gpu", tok_s_gpu},
                            {"mfu", tflops_gpu / peak}, {"gemm_peak_tflops", peak},
                            {"allreduce_mib", allreduce_mib}, {"plain_allreduce_ms", plain_ms},
                            {"plain_allreduce_bus_gbps", plain_bus}, {"grad_allreduce_ms", grad_ms},
                            {"grad_buffer_bytes", grads.nbytes()}, {"grad_allreduce_bus_gbps", grad_bus},
                            {"grad_allreduce_share", grad_ms / step_ms},
                            {"overlapped_buckets", step.grad_reducer().overlapped_buckets()},
                            {"buckets", step.grad_reducer().bucket_count()},
                            {"bucket_elements", sc.grad_bucket_elements},
                            {"tp_overlap", tp > 1}, {"step_ms_no_tp_overlap", base_ms},
                            {"tokens_per_s_per_gpu_no_tp_overlap", tokens_gpu / (base_ms * 1e-3)},
                            {"mfu_no_tp_overlap", tflops_gpu * step_ms / base_ms / peak},
                            {"tp_comm_ms", tp_comm_ms}, {"tp_comm_share", tp_comm_ms / base_ms},
                            {"tp_comm_hidden", tp > 1 ? (base_ms - step_ms) / tp_comm_ms : 0.0},
                            {"split_layers", split_layers}, {"tp_gemm_sm_margin", sm_margin},
                            // CUDA's hardware queues per device (Megatron's TP overlap sets 1); "" = the default.
                            {"cuda_device_max_connections", max_connections ? max_connections : ""},
                            {"profiled_step_ms", profiled_ms}, {"phases_ms", phase_json(phases, profiled_ms)},
                            {"device", gpu.name()}, {"version", NEMOTRON_VERSION},
                            {"commit", bench::commit_or_unknown()}, {"params", net.params().numel()}};
      bench::append_result(results, rec);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return 0;
}
