// Expert parallelism's token exchange (Megatron's all-to-all token dispatcher; the role DeepEP
// plays on NVLink, here on the group's communicator: NCCL between GPUs, MPI between CPU ranks).
// The routed experts split into P contiguous blocks of L = E / P over the expert group; this
// rank runs experts [first, first + L) on the rows every member routed to them.
//
// One exchange is built per MoE forward from the rank's routing (its expert-major slots, counted
// per expert on the host) and reused by the backward (STYLE.md lesson 4), in two parts kept apart:
//  - communication: a table of every member's counts (one host all-reduce of P x E values), then
//    one all-to-all-v of rows each way: slots [S, d] of all E experts are already grouped by
//    destination (expert-major means member-major), so they are sent as they lie;
//  - the local permutation: received rows arrive source-major (member 0's rows for my experts,
//    then member 1's ...); a MoeDispatch handle of top-k 1 regroups them expert-major (sources
//    ascending within an expert), the grouped GEMM's operand, and back.
// to_experts and from_experts are each other's adjoint (a permutation and its inverse through the
// exchange), so each is the other's backward. With P = 1 the model never builds one.
#pragma once
#include <vector>

#include "core/context.h"
#include "ops/moe_dispatch.h"
#include "parallel/communicator.h"

namespace nemotron::model {

class ExpertExchange {
 public:
  // `tokens_per_expert` [E]: this rank's slots per expert. Collective over `group`.
  ExpertExchange(Context& ctx, parallel::Communicator& group, const std::vector<int64_t>& tokens_per_expert);

  int64_t first_expert() const { return first_; }
  int64_t local_experts() const { return L_; }
  int64_t received_rows() const { return regroup_.num_tokens; }  // R
  // Offsets [L + 1] of each local expert's rows in to_experts' output (the grouped GEMM's).
  const std::vector<int64_t>& local_offsets() const { return regroup_.expert_offset; }
  const std::vector<int64_t>& local_counts() const { return regroup_.tokens_per_expert; }

  // slots [S, d] (this rank's routing, expert-major over all E) -> rows [R, d] of this rank's
  // experts from every member, expert-major.
  Tensor to_experts(Context& ctx, const Tensor& slots) const;
  // rows [R, d] (expert-major, as to_experts gave them) -> slots [S, d]: each row back to the
  // member and slot it came from.
  Tensor from_experts(Context& ctx, const Tensor& rows) const;

  // to_experts / from_experts with the all-to-all left running on the group's communication
  // stream (NCCL), so that compute queued meanwhile overlaps it (the MoE layer queues its shared
  // expert, forward and backward, and its weight gradients, none of which need the exchanged
  // rows). finish() makes the compute stream wait and returns the rows (regrouped expert-major)
  // or the slots; the buffers stay held until then. A group without a communication stream (MPI)
  // has exchanged already: the same result, no overlap.
  class InFlight {
   public:
    Tensor finish();

   private:
    friend class ExpertExchange;
    parallel::Communicator* group_ = nullptr;
    Context* ctx_ = nullptr;                     // to_experts: the context to regroup on
    const ops::MoeDispatch* regroup_ = nullptr;  // to_experts: arrival order -> expert-major
    Tensor sent_, arrived_, out_;
  };
  InFlight to_experts_async(Context& ctx, const Tensor& slots) const;
  InFlight from_experts_async(Context& ctx, const Tensor& rows) const;

 private:
  parallel::Communicator* group_;
  int64_t first_ = 0, L_ = 0, slots_ = 0;
  std::vector<int64_t> send_rows_, recv_rows_;  // per member
  ops::MoeDispatch regroup_;                    // received rows (source-major) -> expert-major
};

}  // namespace nemotron::model
