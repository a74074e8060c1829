// Loss-side and optimizer kernels on the GPU (a benchmark, not a test).
// usage: cuda_loss [--tokens 8192] [--vocab 131072] [--tp 2] [--params 1.5e9] [--tensors 300] [--reps 10]
// Prints the fused cross-entropy (bf16 logits, forward and forward+backward in place), one rank's
// part of the vocab-parallel cross-entropy (a vocab / tp shard: stats, combine, grad in place), the
// embedding forward/backward, one multi-tensor AdamW step (bf16 values with float32 masters,
// grads and moments) and the global gradient norm, each as a median time and TB/s of the bytes
// the op must move, against the measured device-to-device copy rate (H100: ~3.0 TB/s).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "gemm_peak.h"
#include "core/rng.h"
#include "ops/adamw.h"
#include "ops/cross_entropy.h"
#include "ops/cross_entropy_cuda.h"
#include "ops/embedding.h"
#include "ops/vocab_parallel_cross_entropy.h"

using namespace nemotron;

namespace {

double g_copy_tbs = 3.0;  // the device-to-device copy rate, measured in main (H100: ~3.0 TB/s)

// Random non-zero data: one 16 Mi-element random block per (dtype, range), made once on the host
// and tiled into `t` on the device (starting at a seed-dependent offset of the block).
std::map<std::tuple<DType, double, double>, Tensor>& random_blocks() {  // cleared before the backend goes
  static std::map<std::tuple<DType, double, double>, Tensor> blocks;
  return blocks;
}

void fill_random(Context& ctx, Tensor& t, double lo, double hi, uint64_t seed) {
  constexpr int64_t kBlock = int64_t{1} << 24;
  Tensor& src = random_blocks()[{t.dtype(), lo, hi}];
  if (!src.defined()) {
    Tensor h = Tensor::empty({kBlock}, DType::f64);
    fill_uniform(h, Philox(seed), lo, hi);
    src = h.to_host(t.dtype()).to(*ctx.backend);
  }
  const size_t esz = dtype_size(t.dtype()), total = t.nbytes();
  const size_t start = static_cast<size_t>((seed * 7919) % (kBlock / 2)) * esz, chunk = kBlock * esz - start;
  for (size_t off = 0; off < total; off += chunk)
    ctx.backend->copy_on_device(static_cast<char*>(t.raw()) + off, static_cast<const char*>(src.raw()) + start,
                                std::min(chunk, total - off));
}

void report(const char* name, double ms, double bytes) {
  const double tbs = bytes / (ms * 1e-3) / 1e12;
  std::printf("  %-56s %8.3f ms %6.2f TB/s (%3.0f%% of copy)\n", name, ms, tbs, 100 * tbs / g_copy_tbs);
}

void measure_copy(Context& ctx, int reps) {
  Tensor a = ctx.empty({int64_t{1} << 30}, DType::bf16), b = ctx.empty({int64_t{1} << 30}, DType::bf16);
  fill_random(ctx, a, -1.0, 1.0, 20);
  const double ms = median_cuda_ms(ctx, reps, [&] { ctx.backend->copy_on_device(b.raw(), a.raw(), a.nbytes()); });
  g_copy_tbs = 2.0 * static_cast<double>(a.nbytes()) / (ms * 1e-3) / 1e12;
  std::printf("device-to-device copy of 2 GiB: %.3f ms, %.2f TB/s (read + write): the ceiling below\n", ms, g_copy_tbs);
}

void bench_cross_entropy(Context& ctx, int64_t N, int64_t V, int reps) {
  Tensor logits = ctx.empty({N, V}, DType::bf16);
  fill_random(ctx, logits, -4.0, 4.0, 1);
  Tensor targets = ctx.empty({N}, DType::i32);
  {
    Tensor h = Tensor::empty({N}, DType::i32);
    Philox r(2);
    for (int64_t i = 0; i < N; ++i) h.data<int32_t>()[i] = static_cast<int32_t>(r.uniform(i) * static_cast<double>(V));
    targets.copy_from(h);
  }
  Tensor losses = ctx.empty({N}, DType::f32), d = ctx.empty({N, V}, DType::bf16);
  const double once = static_cast<double>(N) * static_cast<double>(V) * 2;
  std::printf("\nsoftmax_cross_entropy, bf16 logits [%ld, %ld] (%.2f GB), float32 losses\n", static_cast<long>(N),
              static_cast<long>(V), once / 1e9);
  report("forward (1 read)", median_cuda_ms(ctx, reps, [&] {
           ops::softmax_cross_entropy(ctx, logits, targets, Tensor(), 1.0, losses, nullptr);
         }), once);
  report("forward + backward, dlogits separate (1 r + 1 w)", median_cuda_ms(ctx, reps, [&] {
           ops::softmax_cross_entropy(ctx, logits, targets, Tensor(), 1.0 / N, losses, &d);
         }), 2 * once);
  report("forward + backward, in place (1 r + 1 w)", median_cuda_ms(ctx, reps, [&] {
           ops::softmax_cross_entropy(ctx, logits, targets, Tensor(), 1.0 / N, losses, &logits);
         }), 2 * once);
  // The block size (the kernel's default is 512), through the raw kernel entry point.
  for (int threads : {256, 512, 1024}) {
    ops::CrossEntropyCudaArgs a;
    a.logits = logits.raw(), a.targets = targets.raw(), a.losses = static_cast<float*>(losses.raw());
    a.N = N, a.V = V, a.grad_scale = 1.0f / static_cast<float>(N), a.bf16 = true, a.threads = threads;
    int64_t bad = -1;
    const std::string fwd = fmt::format("  {} threads: forward", threads), both = fmt::format("  {} threads: in place", threads);
    report(fwd.c_str(), median_cuda_ms(ctx, reps, [&] { a.dlogits = nullptr; ops::softmax_cross_entropy_cuda(a, cuda::cuda_stream(ctx), &bad); }), once);
    report(both.c_str(), median_cuda_ms(ctx, reps, [&] { a.dlogits = logits.raw(); ops::softmax_cross_entropy_cuda(a, cuda::cuda_stream(ctx), &bad); }), 2 * once);
  }
}

// One rank's work in the vocab-parallel cross-entropy over a [N, V / T] bf16 shard (the
// all-gather between stats and combine is not timed: [T, N, 3] floats, copied here).
void bench_vocab_parallel(Context& ctx, int64_t N, int64_t V, int64_t T, int reps) {
  const int64_t Vl = V / T;
  Tensor logits = ctx.empty({N, Vl}, DType::bf16);
  fill_random(ctx, logits, -4.0, 4.0, 6);
  Tensor targets = ctx.empty({N}, DType::i32);
  {
    Tensor h = Tensor::empty({N}, DType::i32);
    Philox r(7);
    for (int64_t i = 0; i < N; ++i) h.data<int32_t>()[i] = static_cast<int32_t>(r.uniform(i) * static_cast<double>(V));
    targets.copy_from(h);
  }
  Tensor stats = ctx.empty({N, 3}, DType::f32), gathered = ctx.empty({T, N, 3}, DType::f32);
  Tensor lse = ctx.empty({N}, DType::f32), losses = ctx.empty({N}, DType::f32);
  const double once = static_cast<double>(N) * static_cast<double>(Vl) * 2;
  std::printf("\nvocab-parallel cross-entropy, one rank of %ld: bf16 shard [%ld, %ld] (%.2f GB)\n",
              static_cast<long>(T), static_cast<long>(N), static_cast<long>(Vl), once / 1e9);
  report("stats (1 read)", median_cuda_ms(ctx, reps, [&] { ops::vocab_shard_stats(ctx, logits, targets, 0, stats); }),
         once);
  for (int64_t t = 0; t < T; ++t) gathered.select(t).copy_from(stats);
  report("combine (T x N x 3 floats)", median_cuda_ms(ctx, reps, [&] {
           ops::vocab_shard_combine(ctx, gathered, targets, Tensor(), lse, losses);
         }), static_cast<double>(T * N * 12 + N * 16));
  report("grad in place (1 r + 1 w)", median_cuda_ms(ctx, reps, [&] {
           ops::vocab_shard_grad(ctx, logits, targets, Tensor(), lse, 0, 1.0 / N, logits);
         }), 2 * once);
}

void bench_embedding(Context& ctx, int64_t N, int64_t V, int64_t D, int reps) {
  Tensor w = ctx.empty({V, D}, DType::bf16), dy = ctx.empty({N, D}, DType::bf16);
  fill_random(ctx, w, -1.0, 1.0, 3), fill_random(ctx, dy, -1.0, 1.0, 4);
  Tensor dw = ctx.zeros({V, D}, DType::f32), y = ctx.empty({N, D}, DType::bf16);
  Tensor ids = ctx.empty({N}, DType::i32);
  {
    Tensor h = Tensor::empty({N}, DType::i32);
    Philox r(5);
    for (int64_t i = 0; i < N; ++i)  // a skewed draw: low ids repeat often, as frequent tokens do
      h.data<int32_t>()[i] = static_cast<int32_t>(r.uniform(i) * r.uniform(i + N) * static_cast<double>(V));
    ids.copy_from(h);
  }
  const double rows = static_cast<double>(N) * static_cast<double>(D);
  std::printf("\nembedding, bf16 table [%ld, %ld], %ld tokens\n", static_cast<long>(V), static_cast<long>(D),
              static_cast<long>(N));
  report("forward (gather rows: 1 r + 1 w bf16)", median_cuda_ms(ctx, reps, [&] { ops::embedding_forward(ctx, ids, w, y); }),
         2 * rows * 2);
  report("backward (sort + dy read + dw f32 r/w)",
         median_cuda_ms(ctx, reps, [&] { ops::embedding_backward(ctx, ids, dy, dw); }), rows * 2 + rows * 8);
}

void bench_optimizer(Context& ctx, double total_params, int tensors, int reps) {
  // ~300 tensors: most of equal size, a few small odd ones (norms, biases).
  const int small = std::max(1, tensors / 10);
  const int64_t big = static_cast<int64_t>(total_params / (tensors - small));
  std::vector<ops::AdamWParam> ps;
  double n = 0;
  for (int k = 0; k < tensors; ++k) {
    const int64_t size = k < tensors - small ? big + (k % 7) : 4096 + 3 * k;
    ops::AdamWParam p;
    p.value = ctx.empty({size}, DType::bf16);
    p.master = ctx.empty({size}, DType::f32), p.grad = ctx.empty({size}, DType::f32);
    p.m = ctx.empty({size}, DType::f32), p.v = ctx.empty({size}, DType::f32);
    fill_random(ctx, p.master, -1.0, 1.0, 10), fill_random(ctx, p.grad, -1e-3, 1e-3, 11);
    fill_random(ctx, p.m, -1e-4, 1e-4, 12), fill_random(ctx, p.v, 1e-9, 1e-7, 13);
    p.weight_decay = k < tensors - small;
    n += static_cast<double>(size);
    ps.push_back(p);
  }
  ops::AdamWTensors list(ps);
  std::printf("\nmulti-tensor optimizer, %.3g parameters in %d tensors (bf16 values, float32 masters/grads/moments)\n",
              n, tensors);
  int64_t step = 1;
  report("AdamW step (r master,g,m,v; w master,m,v,value: 30 B/p)", median_cuda_ms(ctx, reps, [&] {
           ops::adamw_update(ctx, list, {1e-4, 0.9, 0.95, 1e-8, 0.1, step++});
         }), 30 * n);
  double norm = 0;
  report("grad norm (r g: 4 B/p, one host read)", median_cuda_ms(ctx, reps, [&] { norm = ops::grad_norm(ctx, list); }),
         4 * n);
  report("grad scale (clip: r/w g, 8 B/p)", median_cuda_ms(ctx, reps, [&] { ops::scale_grads(ctx, list, 0.999); }), 8 * n);
  std::printf("  (grad norm %.6g)\n", norm);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cross-entropy, embedding and optimizer kernel throughput on the GPU"};
  int64_t tokens = 8192, vocab = 131072, hidden = 4096, tp = 2;
  double params = 1.5e9;
  int tensors = 300, reps = 10;
  app.add_option("--tokens", tokens);
  app.add_option("--vocab", vocab);
  app.add_option("--hidden", hidden);
  app.add_option("--tp", tp, "ranks the vocabulary is split over (vocab-parallel cross-entropy)");
  app.add_option("--params", params);
  app.add_option("--tensors", tensors);
  app.add_option("--reps", reps);
  CLI11_PARSE(app, argc, argv);
  if (cuda::device_count() == 0) {
    std::printf("no CUDA device visible\n");
    return 0;
  }
  cuda::CudaBackend backend(0);
  Context ctx{&backend, nullptr, DType::bf16};
  measure_copy(ctx, reps);
  bench_cross_entropy(ctx, tokens, vocab, reps);
  bench_vocab_parallel(ctx, tokens, vocab, tp, reps);
  bench_embedding(ctx, tokens, vocab, hidden, reps);
  bench_optimizer(ctx, params, tensors, reps);
  random_blocks().clear();
  return 0;
}
