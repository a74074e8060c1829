#include "model/mamba_context.h"

#include "model/context_split.h"
#include "ops/context_scan_states.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {

Shape with_dims(const Tensor& like, int64_t d0, int64_t d1) {
  std::vector<int64_t> d = like.shape().dims();
  d[0] = d0, d[1] = d1;
  return Shape(d);
}

// Every context rank's `local`, rank after rank: [C, ...local's dims] on local's device.
Tensor gather_ranks(Context& ctx, const Tensor& local) {
  parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  std::vector<int64_t> d = local.shape().dims();
  d.insert(d.begin(), cp.size());
  Tensor all = ctx.empty(Shape(d), local.dtype());
  cp.all_gather(local, all);
  return all;
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
  const Tensor all = gather_ranks(ctx, tails);
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
  const Tensor all = gather_ranks(ctx, mine);
  for (int j = 0; j < 2; ++j) {
    const int64_t g = c.chunk(j);
    if (g + 1 == 2 * c.size) continue;  // the row's last chunk: nobody reads its tail
    const auto [q, jj] = c.owner(g + 1);
    add_row_block(ctx, d, j * L + L - halo, all.select(q), jj * halo, halo);
  }
  return d;
}

namespace {

Shape state_shape(const ops::SsdScanArgs& a) { return Shape({a.x.dim(0), a.x.dim(2), a.x.dim(3), a.Bm.dim(3)}); }

}  // namespace

void context_scan_forward(Context& ctx, const ops::SsdScanArgs& args, Tensor& y, ContextScanChain& chain) {
  NM_CHECK(!args.initial_state.defined(), "context-parallel scan: the incoming states are its own");
  const ContextChunks c = context_chunks(ctx, 2 * args.x.dim(1));
  const DType sd = args.dt.dtype();
  Tensor F = ctx.empty(state_shape(args), sd), decay = ctx.empty({args.x.dim(0), args.x.dim(2)}, sd);
  ops::ssd_scan_forward(ctx, args, y, &F);  // from a zero state (y is overwritten below)
  ops::chunk_decay(ctx, args.dt, args.A, decay);
  chain.decay = gather_ranks(ctx, decay);
  chain.seq = args.seq_idx.defined() ? gather_ranks(ctx, args.seq_idx) : Tensor();
  chain.initial_state = ctx.empty(F.shape(), sd);
  ops::context_states_forward(ctx, gather_ranks(ctx, F), chain.decay, chain.seq, c.rank, chain.initial_state);
  ops::SsdScanArgs from_state = args;
  from_state.initial_state = chain.initial_state;
  ops::ssd_scan_forward(ctx, from_state, y);
}

void context_scan_backward(Context& ctx, const ops::SsdScanArgs& args, const ContextScanChain& chain,
                           const Tensor& dy, ops::SsdScanGrads& grads) {
  const ContextChunks c = context_chunks(ctx, 2 * args.x.dim(1));
  const DType sd = args.dt.dtype();
  ops::SsdScanArgs a = args;
  a.initial_state = chain.initial_state;
  // d S_g for a zero final-state gradient (every other gradient of this pass is dropped).
  auto like = [&](const Tensor& t) { return t.defined() ? ctx.empty(t.shape(), t.dtype()) : Tensor(); };
  auto accumulated = [&](const Tensor& t) { return t.defined() ? ctx.zeros(t.shape(), t.dtype()) : Tensor(); };
  ops::SsdScanGrads first{like(grads.dx),           like(grads.ddt),         like(grads.dBm), like(grads.dCm),
                          accumulated(grads.dA), accumulated(grads.dD), ctx.empty(state_shape(args), sd)};
  ops::ssd_scan_backward(ctx, a, dy, nullptr, first);
  // Reverse: dF_g = dS_{g+1} (0 where chunk g+1 starts a sequence), dS_g = d0_g + D_g dF_g.
  Tensor df = ctx.empty(state_shape(args), sd);
  ops::context_states_backward(ctx, gather_ranks(ctx, first.d_initial_state), chain.decay, chain.seq, c.rank, df);
  ops::SsdScanGrads g = grads;
  g.d_initial_state = Tensor();
  ops::ssd_scan_backward(ctx, a, dy, &df, g);
}

}  // namespace nemotron::model
