#include "model/expert_exchange.h"

#include <fmt/format.h>

#include "core/error.h"

namespace nemotron::model {

ExpertExchange::ExpertExchange(Context& ctx, parallel::Communicator& group, const std::vector<int64_t>& tokens_per_expert)
    : group_(&group) {
  const int P = group.size(), me = group.rank();
  const int64_t E = static_cast<int64_t>(tokens_per_expert.size());
  NM_CHECK(P >= 1 && E % P == 0, "expert exchange: {} experts over {} ranks", E, P);
  L_ = E / P;
  first_ = static_cast<int64_t>(me) * L_;
  // Every member's counts per expert: a P x E table, this rank's row filled, summed.
  std::vector<double> table(static_cast<size_t>(P * E), 0.0);
  for (int64_t e = 0; e < E; ++e) {
    table[static_cast<size_t>(me * E + e)] = static_cast<double>(tokens_per_expert[static_cast<size_t>(e)]);
    slots_ += tokens_per_expert[static_cast<size_t>(e)];
  }
  group.all_reduce_host(table);
  auto count = [&](int m, int64_t e) { return static_cast<int64_t>(table[static_cast<size_t>(m * E + e)]); };
  send_rows_.assign(static_cast<size_t>(P), 0);
  recv_rows_.assign(static_cast<size_t>(P), 0);
  std::vector<int32_t> expert_of_row;  // the received rows in arrival order: source-major
  for (int m = 0; m < P; ++m)
    for (int64_t l = 0; l < L_; ++l) {
      send_rows_[static_cast<size_t>(m)] += tokens_per_expert[static_cast<size_t>(m * L_ + l)];
      const int64_t c = count(m, first_ + l);
      recv_rows_[static_cast<size_t>(m)] += c;
      expert_of_row.insert(expert_of_row.end(), static_cast<size_t>(c), static_cast<int32_t>(l));
    }
  regroup_ = ops::moe_make_dispatch_host(ctx, expert_of_row, static_cast<int64_t>(expert_of_row.size()), 1, L_);
}

namespace {

std::vector<int64_t> elements(const std::vector<int64_t>& rows, int64_t d) {
  std::vector<int64_t> out(rows);
  for (int64_t& n : out) n *= d;
  return out;
}

}  // namespace

Tensor ExpertExchange::to_experts(Context& ctx, const Tensor& slots) const {
  return to_experts_async(ctx, slots).finish();
}

ExpertExchange::InFlight ExpertExchange::to_experts_async(Context& ctx, const Tensor& slots) const {
  NM_CHECK(slots.rank() == 2 && slots.dim(0) == slots_, "expert exchange: slots {} for {} routed rows",
           slots.shape().str(), slots_);
  const int64_t d = slots.dim(1), R = received_rows();
  InFlight f;
  f.group_ = group_;
  f.ctx_ = &ctx;
  f.regroup_ = &regroup_;
  f.sent_ = slots;
  // Not from the workspace: the buffer outlives the ops queued while the exchange runs.
  f.arrived_ = Tensor::empty({R, d}, slots.dtype(), *ctx.backend);
  group_->all_to_all_v_async(slots, elements(send_rows_, d), f.arrived_, elements(recv_rows_, d));
  return f;
}

Tensor ExpertExchange::from_experts(Context& ctx, const Tensor& rows) const {
  return from_experts_async(ctx, rows).finish();
}

ExpertExchange::InFlight ExpertExchange::from_experts_async(Context& ctx, const Tensor& rows) const {
  const int64_t R = received_rows();
  NM_CHECK(rows.rank() == 2 && rows.dim(0) == R, "expert exchange: rows {} for {} received", rows.shape().str(), R);
  const int64_t d = rows.dim(1);
  InFlight f;
  f.group_ = group_;
  // Not from the workspace: the buffers outlive the ops queued while the exchange runs.
  f.arrived_ = Tensor::empty({R, d}, rows.dtype(), *ctx.backend);
  ops::moe_dispatch_backward(ctx, regroup_, rows, f.arrived_);  // top-k 1: a row copy back to arrival order
  f.out_ = Tensor::empty({slots_, d}, rows.dtype(), *ctx.backend);
  group_->all_to_all_v_async(f.arrived_, elements(recv_rows_, d), f.out_, elements(send_rows_, d));
  return f;
}

Tensor ExpertExchange::InFlight::finish() {
  group_->wait_pending();
  sent_ = Tensor();
  if (regroup_) {  // to_experts: the rows of each held expert together
    out_ = ctx_->empty(arrived_.shape(), arrived_.dtype());
    ops::moe_dispatch_forward(*ctx_, *regroup_, arrived_, out_);
  }
  arrived_ = Tensor();
  return std::move(out_);
}

}  // namespace nemotron::model
