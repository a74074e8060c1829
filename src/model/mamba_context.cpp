#include "model/mamba_context.h"

#include "model/context_split.h"
#include "ops/elementwise.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {

Shape with_dims(const Tensor& like, int64_t d0, int64_t d1) {
  std::vector<int64_t> d = like.shape().dims();
  d[0] = d0, d[1] = d1;
  return Shape(d);
}

// dst[b, d0 : d0 + n] += src[b, s0 : s0 + n] for every b.
void add_row_block(Context& ctx, Tensor& dst, int64_t d0, const Tensor& src, int64_t s0, int64_t n) {
  const int64_t B = dst.dim(0), Td = dst.dim(1), Ts = src.dim(1), R = dst.numel() / (B * Td);
  Tensor d = dst.view({B * Td, R});
  const Tensor s = src.view({B * Ts, R});
  for (int64_t b = 0; b < B; ++b) {
    Tensor rows = d.slice(b * Td + d0, b * Td + d0 + n);
    ops::add_inplace(ctx, rows, s.slice(b * Ts + s0, b * Ts + s0 + n));
  }
}

// Every context rank's `local` (same shape) as host float64 values, rank after rank.
std::vector<double> gather_to_host(Context& ctx, const Tensor& local) {
  parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  std::vector<int64_t> d = local.shape().dims();
  d.insert(d.begin(), cp.size());
  Tensor all = ctx.empty(Shape(d), local.dtype());
  cp.all_gather(local, all);
  return all.to_f64_vector();
}

Tensor device_state(Context& ctx, const Shape& shape, const std::vector<double>& v, DType dtype) {
  return Tensor::from_vector<double>(shape, v).to_host(dtype).to(*ctx.backend);
}

}  // namespace

Tensor context_halo_extend(Context& ctx, const Tensor& raw, int64_t halo) {
  const int64_t B = raw.dim(0);
  const ContextChunks c = context_chunks(ctx, raw.dim(1));
  const int64_t L = c.L, E = halo + L;
  if (halo == 0) return raw.view(with_dims(raw, 2 * B, L));
  if (L < halo)
    throw InputError(fmt::format("model.context_parallel_size: {} cuts each row into chunks of {} tokens, fewer than "
                                 "the {} inputs before a token that Mamba's conv1d reads (model.conv_kernel - 1)",
                                 c.size, L, halo));
  Tensor tails = ctx.empty(with_dims(raw, B, 2 * halo), raw.dtype());  // each local chunk's last rows
  for (int j = 0; j < 2; ++j) copy_row_block(tails, j * halo, raw, j * L + L - halo, halo);
  parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  std::vector<int64_t> d = tails.shape().dims();
  d.insert(d.begin(), c.size);
  Tensor all = ctx.empty(Shape(d), raw.dtype());
  cp.all_gather(tails, all);
  Tensor ext = ctx.zeros(with_dims(raw, B, 2 * E), raw.dtype());
  for (int j = 0; j < 2; ++j) {
    copy_row_block(ext, j * E + halo, raw, j * L, L);
    const int64_t g = c.chunk(j);
    if (g == 0) continue;  // the row's start: zeros, as the unsplit conv reads
    const auto [q, jj] = c.owner(g - 1);
    copy_row_block(ext, j * E, all.select(q), jj * halo, halo);
  }
  return ext.view(with_dims(raw, 2 * B, E));
}

Tensor context_halo_drop(Context& ctx, const Tensor& ext, int64_t halo) {
  const int64_t B = ext.dim(0) / 2, L = ext.dim(1) - halo, E = ext.dim(1);
  const Tensor rows = ext.view(with_dims(ext, B, 2 * E));
  Tensor out = ctx.empty(with_dims(ext, B, 2 * L), ext.dtype());
  for (int j = 0; j < 2; ++j) copy_row_block(out, j * L, rows, j * E + halo, L);
  return out;
}

Tensor context_halo_pad(Context& ctx, const Tensor& d, int64_t halo) {
  const int64_t B = d.dim(0), L = d.dim(1) / 2, E = halo + L;
  Tensor ext = ctx.zeros(with_dims(d, B, 2 * E), d.dtype());
  for (int j = 0; j < 2; ++j) copy_row_block(ext, j * E + halo, d, j * L, L);
  return ext.view(with_dims(d, 2 * B, E));
}

Tensor context_halo_reduce(Context& ctx, const Tensor& d_ext, int64_t halo) {
  Tensor d = context_halo_drop(ctx, d_ext, halo);
  if (halo == 0) return d;
  const int64_t B = d.dim(0), L = d.dim(1) / 2, E = halo + L;
  const ContextChunks c = context_chunks(ctx, 2 * L);
  const Tensor rows = d_ext.view(with_dims(d_ext, B, 2 * E));
  Tensor mine = ctx.empty(with_dims(d, B, 2 * halo), d.dtype());  // the gradient of each chunk's halo
  for (int j = 0; j < 2; ++j) copy_row_block(mine, j * halo, rows, j * E, halo);
  parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  std::vector<int64_t> dims = mine.shape().dims();
  dims.insert(dims.begin(), c.size);
  Tensor all = ctx.empty(Shape(dims), d.dtype());
  cp.all_gather(mine, all);
  for (int j = 0; j < 2; ++j) {
    const int64_t g = c.chunk(j);
    if (g + 1 == 2 * c.size) continue;  // the row's last chunk: nobody reads its tail
    const auto [q, jj] = c.owner(g + 1);
    add_row_block(ctx, d, j * L + L - halo, all.select(q), jj * halo, halo);
  }
  return d;
}

namespace {

// [2C, B]: whether chunk g continues chunk g-1's sequence in row b (never for chunk 0). seq_idx:
// the local chunks as [2B, L] rows, or undefined (one sequence per row).
std::vector<char> chunk_links(Context& ctx, const Tensor& seq_idx, const ContextChunks& c, int64_t B) {
  std::vector<char> link(static_cast<size_t>(2 * c.size * B), 1);
  for (int64_t b = 0; b < B; ++b) link[static_cast<size_t>(b)] = 0;
  if (!seq_idx.defined()) return link;
  const std::vector<double> ids = gather_context(ctx, seq_idx.view({B, 2 * c.L})).to_f64_vector();
  const int64_t T = 2 * c.size * c.L;
  for (int64_t g = 1; g < 2 * c.size; ++g)
    for (int64_t b = 0; b < B; ++b)
      link[static_cast<size_t>(g * B + b)] = ids[static_cast<size_t>(b * T + g * c.L - 1)] ==
                                             ids[static_cast<size_t>(b * T + g * c.L)];
  return link;
}

struct ScanSizes {
  ContextChunks c;
  int64_t B, S;  // rows of the unsplit call, state elements per row
  Shape state;   // [2B, nH, P, N]
  // Offset of (chunk g, row b) in a gathered [C, 2B, S] array.
  size_t gathered(int64_t g, int64_t b) const {
    const auto [q, jj] = c.owner(g);
    return static_cast<size_t>(((q * 2 * B) + 2 * b + jj) * S);
  }
  size_t chunk(int64_t g, int64_t b) const { return static_cast<size_t>((g * B + b) * S); }
};

ScanSizes scan_sizes(Context& ctx, const ops::SsdScanArgs& a) {
  ScanSizes z;
  const int64_t B2 = a.x.dim(0), nH = a.x.dim(2), P = a.x.dim(3), N = a.Bm.dim(3);
  z.c = context_chunks(ctx, 2 * a.x.dim(1));
  z.B = B2 / 2;
  z.S = nH * P * N;
  z.state = Shape({B2, nH, P, N});
  return z;
}

// This rank's rows [2B, S] of a per-chunk host array [2C, B, S].
std::vector<double> local_rows(const ScanSizes& z, const std::vector<double>& per_chunk) {
  std::vector<double> out(static_cast<size_t>(2 * z.B * z.S));
  for (int j = 0; j < 2; ++j)
    for (int64_t b = 0; b < z.B; ++b)
      std::copy_n(per_chunk.begin() + static_cast<std::ptrdiff_t>(z.chunk(z.c.chunk(j), b)), z.S,
                  out.begin() + (2 * b + j) * z.S);
  return out;
}

}  // namespace

void context_scan_forward(Context& ctx, const ops::SsdScanArgs& args, Tensor& y, ContextScanChain& chain) {
  NM_CHECK(!args.initial_state.defined(), "context-parallel scan: the incoming states are its own");
  const ScanSizes z = scan_sizes(ctx, args);
  const DType sd = args.dt.dtype();
  const int64_t G = 2 * z.c.size;
  Tensor scratch = ctx.empty(y.shape(), y.dtype());
  Tensor F = ctx.empty(z.state, sd), D = ctx.empty(z.state, sd);
  ops::ssd_scan_forward(ctx, args, scratch, &F);  // from a zero state
  ops::SsdScanArgs no_input = args;
  no_input.x = ctx.zeros(args.x.shape(), args.x.dtype());
  no_input.initial_state = device_state(ctx, z.state, std::vector<double>(static_cast<size_t>(2 * z.B * z.S), 1.0), sd);
  ops::ssd_scan_forward(ctx, no_input, scratch, &D);  // the decay of a state through the chunk
  const std::vector<double> f = gather_to_host(ctx, F), d = gather_to_host(ctx, D);
  chain.link = chunk_links(ctx, args.seq_idx, z.c, z.B);
  chain.decay.assign(static_cast<size_t>(G * z.B * z.S), 0.0);
  std::vector<double> incoming(chain.decay.size(), 0.0);  // S_0 = 0
  for (int64_t g = 0; g < G; ++g)
    for (int64_t b = 0; b < z.B; ++b) {
      std::copy_n(d.begin() + static_cast<std::ptrdiff_t>(z.gathered(g, b)), z.S,
                  chain.decay.begin() + static_cast<std::ptrdiff_t>(z.chunk(g, b)));
      if (g + 1 == G || !chain.link[static_cast<size_t>((g + 1) * z.B + b)]) continue;
      const size_t at = z.chunk(g, b), next = z.chunk(g + 1, b), from = z.gathered(g, b);
      for (int64_t i = 0; i < z.S; ++i)
        incoming[next + i] = f[from + i] + chain.decay[at + i] * incoming[at + i];
    }
  chain.initial_state = device_state(ctx, z.state, local_rows(z, incoming), sd);
  ops::SsdScanArgs from_state = args;
  from_state.initial_state = chain.initial_state;
  ops::ssd_scan_forward(ctx, from_state, y);
}

void context_scan_backward(Context& ctx, const ops::SsdScanArgs& args, const ContextScanChain& chain,
                           const Tensor& dy, ops::SsdScanGrads& grads) {
  const ScanSizes z = scan_sizes(ctx, args);
  const DType sd = args.dt.dtype();
  const int64_t G = 2 * z.c.size;
  ops::SsdScanArgs a = args;
  a.initial_state = chain.initial_state;
  // d S_g for a zero final-state gradient (every other gradient of this pass is dropped).
  auto like = [&](const Tensor& t) { return t.defined() ? ctx.zeros(t.shape(), t.dtype()) : Tensor(); };
  ops::SsdScanGrads first{like(grads.dx), like(grads.ddt), like(grads.dBm), like(grads.dCm),
                          like(grads.dA), like(grads.dD), ctx.empty(z.state, sd)};
  ops::ssd_scan_backward(ctx, a, dy, nullptr, first);
  const std::vector<double> d0 = gather_to_host(ctx, first.d_initial_state);
  // Reverse: dF_g = dS_{g+1} (0 where chunk g+1 starts a sequence), dS_g = d0_g + D_g dF_g.
  std::vector<double> d_incoming(static_cast<size_t>(G * z.B * z.S), 0.0), d_final(d_incoming.size(), 0.0);
  for (int64_t g = G; g-- > 0;)
    for (int64_t b = 0; b < z.B; ++b) {
      const size_t at = z.chunk(g, b), from = z.gathered(g, b);
      if (g + 1 < G && chain.link[static_cast<size_t>((g + 1) * z.B + b)])
        std::copy_n(d_incoming.begin() + static_cast<std::ptrdiff_t>(z.chunk(g + 1, b)), z.S,
                    d_final.begin() + static_cast<std::ptrdiff_t>(at));
      for (int64_t i = 0; i < z.S; ++i) d_incoming[at + i] = d0[from + i] + chain.decay[at + i] * d_final[at + i];
    }
  const Tensor df = device_state(ctx, z.state, local_rows(z, d_final), sd);
  ops::SsdScanGrads g = grads;
  g.d_initial_state = Tensor();
  ops::ssd_scan_backward(ctx, a, dy, &df, g);
}

}  // namespace nemotron::model
