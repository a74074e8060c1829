// AdamW with decoupled weight decay (Loshchilov & Hutter), as Megatron configures it: no decay
// on parameters marked weight_decay = false (norms, biases, 1-D tensors), and frozen parameters
// (requires_grad = false: buffers such as the MoE router's correction bias, LoRA's base weights)
// are never touched and hold no state. State (first/second moments) lives beside each trainable
// parameter in its grad_dtype (float32 in a bf16 store); one unfrozen later starts from zero
// moments. With float32 masters the update applies to the master and writes the bf16 value in the
// same pass. The math is ops/adamw.h (one multi-tensor launch on CUDA).
//
// The distributed optimizer (Megatron's use_distributed_optimizer, ZeRO-1), built with a data
// group of D > 1: the store's gradients live in one flat buffer padded to a multiple of 64 D
// (ParamStore::make_grads_contiguous), cut at parameters' starts into buckets
// (train/grad_buckets.h) that are multiples of 64 D too, and rank r owns the r-th of the D equal
// slices of every bucket (Megatron's layout: each bucket can be reduce-scattered by GradReducer as
// soon as the backward finished it). The rank's slices, bucket after bucket, are its S = buffer / D
// elements: the float32 masters and both moments exist for them only, as three S-element buffers;
// a parameter lies in one bucket, so its part of the rank's slices is one "piece", 1-D views of
// its value, master, gradient and moments that the same multi-tensor AdamW updates (weight decay
// per parameter as before). The gradient norm is sqrt(all-reduce of each rank's sum of squares
// over its pieces); after the update each rank's new values are all-gathered bucket by bucket so
// every rank holds every value. Frozen parameters (the MoE
// correction bias, which the balancer updates identically on every rank) have no gradient, so
// they are in no range: replicated, as without sharding. A multi-rank checkpoint is sharded
// (train/sharded_checkpoint.h): each rank writes its pieces (state_range(), master_piece()) and
// loads the ranges it owns; from a single-file checkpoint set_moments() takes each rank's range of
// the full moments, and a load of weights writes only the rank's pieces of the masters
// (train/shard_weight_sink.h). So any D loads any other. A store whose masters are deferred
// (ParamStore::defer_masters, as the training commands build it) gets only the rank's slices of
// them, made from the values here: the whole masters never exist on a rank.
//
// Gradient sharding (Fsdp::grads, Megatron FSDP's optim_grads): the same layout cut into one
// bucket per trunk layer (grad_buckets' by_layer; every parameter 64 D aligned so each layer's
// start can be cut), computed from the parameters' shapes (ParamStore::grad_layout): the whole
// buffer is never allocated and whole per-parameter gradients are dropped here (a store built with
// defer_grads never has them), so the whole float32 gradients never exist on a rank; each layer's
// live in a layer slot (train/grad_slots.h) only while its backward runs, and shard_grads()
// accumulates the reduce-scattered slices of every micro-batch.
// Full parameter sharding (Fsdp::grads_params, optim_grads_params): that, and the rank's slices
// of the compute-dtype values kept too, as a
// fourth S-element buffer (value_shard()) that the update writes instead of the parameters'
// values; nothing is all-gathered after the update: train/param_gather.h gathers each layer's
// values where the model reads them, when it needs them. take_value_pieces() fills the buffer
// from whole values (construction); a load writes the rank's range into it directly.
//
// Expert parallelism: the experts a rank holds (model::Param::is_expert) are not the other
// ranks'; their gradients live outside the flat buffer (summed over the expert-data group), so
// their state is whole on the rank that holds them, sharded or not, and updated by a second
// multi-tensor list. The gradient norm then adds the expert group's sum of their squares.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/param.h"
#include "ops/adamw.h"
#include "parallel/communicator.h"
#include "train/grad_buckets.h"

namespace nemotron::train {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// The distributed optimizer's state gathered whole (gather_state): full tensors by parameter index
// (the store's order), on the host of the gathering rank. masters: the float32 master of each bf16
// value that trains (undefined otherwise: the value is the truth); moments undefined for frozen
// parameters.
struct FullOptimizerState {
  std::vector<Tensor> masters, exp_avg, exp_avg_sq;
};

// Megatron FSDP's sharding beyond the optimizer state (data_parallel_sharding_strategy).
enum class Fsdp { off, grads, grads_params };

class AdamW {
 public:
  // `shard_over`: the data group to shard the state over (the distributed optimizer, see above);
  // null or a group of one: every rank holds the whole state (today's path, unchanged). With a
  // group of D > 1 the constructor makes the store's gradients contiguous (padded to 64 D), cuts
  // them into buckets of at least bucket_elements (grad_buckets()) and takes the masters' pieces
  // (shard_masters()); every member constructs it.
  // `expert_group`: the ranks that hold different experts (whose squares the norm sums); null or
  // a group of one for a store without expert-parallel experts.
  // `tensor_group`: the tensor-parallel group (null or a group of one without): the norm then sums
  // every rank's parts of the split parameters and counts the whole ones (the same on every
  // member) once.
  // `fsdp`: gradient sharding, or full parameter sharding as well (see above; needs shard_over).
  AdamW(model::ParamStore& params, AdamWConfig cfg, parallel::Communicator* shard_over = nullptr,
        parallel::Communicator* expert_group = nullptr, parallel::Communicator* tensor_group = nullptr,
        int64_t bucket_elements = kDefaultGradBucketElements, Fsdp fsdp = Fsdp::off);
  ~AdamW();
  // One update with learning rate `lr` from the gradients currently in the store (sharded: from
  // the rank's reduce-scattered range, then the values all-gathered; collective).
  void step(double lr);
  int64_t steps_taken() const { return step_; }
  // Moments by parameter, in the store's order; undefined for frozen ones. Sharded: 1-D views of
  // the rank's piece of each parameter (undefined where it holds none): state_range() says which
  // elements; a full tensor goes in through set_moments().
  const std::vector<Tensor>& first_moments() const { return m_; }
  const std::vector<Tensor>& second_moments() const { return v_; }
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  // Zero moments for every parameter that requires a gradient and has none yet (one unfrozen
  // since construction); step() and checkpoint loading call it.
  void ensure_moments();
  // The global gradient norm over this optimizer's parameters (its multi-tensor list). Clipping,
  // when the norm exceeds max_norm, is applied by the next step() as it reads the gradients (one
  // pass over them less); the stored gradients stay unscaled. Sharded: collective (one scalar
  // all-reduce of the ranks' sums of squares).
  double clip_grad_norm(double max_norm);

  // Parameter k's moments from full tensors of its shape (a checkpoint's): copied whole, or the
  // rank's piece of them when sharded.
  void set_moments(size_t k, const Tensor& exp_avg, const Tensor& exp_avg_sq);

  // The part of parameter k whose state this rank holds, as flat elements [begin, end) of its
  // value (sharded checkpoints write each piece once, by its owner): the whole tensor without
  // sharding (and for an expert-parallel expert, whole on its rank), this rank's piece with it
  // ({0, 0}: none, or frozen). first_moments()[k] and
  // second_moments()[k] hold exactly these elements.
  std::pair<int64_t, int64_t> state_range(size_t k) const;
  // The float32 master of that piece (1-D), where this optimizer shards masters; undefined otherwise
  // (the store's truth is then whole on every rank).
  Tensor master_piece(size_t k) const;
  // The truth of that piece where this optimizer shards it: the master piece, or under full
  // parameter sharding without masters (a float32 store) the value piece; undefined otherwise.
  Tensor truth_piece(size_t k) const;
  bool shards_truth() const { return shards_masters() || shards_values(); }

  // The distributed optimizer (all no-ops / null without sharding).
  bool sharded() const { return shard_ != nullptr; }
  int shard_count() const;
  // Where the data group's reduce-scatters write this rank's summed gradients (S elements), and
  // the buckets whose slices they are (GradBucket::shard_at), in the backward's order.
  Tensor shard_grads() const;
  const std::vector<GradBucket>& shard_buckets() const;
  // Bytes of float32 masters + moments this rank holds, and what one unsharded process holds.
  int64_t state_bytes() const;
  int64_t unsharded_state_bytes() const;
  bool shards_masters() const;  // the store has float32 masters (a bf16 store), sharded here
  // Full parameter sharding: the rank's slices of the values (S elements in the compute dtype,
  // laid out as shard_grads()), and the flat buffer's offset of parameter k's value (-1: not in
  // it). take_value_pieces() copies them from whole parameter values.
  bool shards_values() const;
  // Gradient sharding (Fsdp::grads and above): one bucket per trunk layer, the whole gradients in
  // layer slots (train/grad_slots.h), no flat buffer; the parameters' gradients are undefined
  // until GradSlots points them at the slots.
  bool shards_grads() const;
  Tensor value_shard() const;
  // Parameter k's piece of the value shard (1-D; undefined where it has none or values are not
  // sharded), the elements state_range(k) names.
  Tensor value_piece(size_t k) const;
  int64_t buffer_offset(size_t k) const;
  void take_value_pieces();
  // Collective: every parameter's full master (as without sharding) in param.master (what a load
  // wrote into before train/shard_weight_sink.h; tests compare against it); shard_masters() takes
  // the ranges back and drops the full ones. shard_masters() also adopts masters made after construction.
  void unshard_masters();
  void shard_masters();
  // Collective: the full masters and moments on the data group's rank `root` (host tensors; what
  // the sharded layout is checked against in tests/parallel/mpi); null on the other ranks and
  // without sharding. Expert-parallel experts: only those `root` holds.
  std::shared_ptr<const FullOptimizerState> gather_state(int root) const;

 private:
  struct Shard;
  ops::AdamWTensors& list();  // built on first use, rebuilt when masters or the frozen set changed
  ops::AdamWTensors& shard_list();
  ops::AdamWTensors* expert_list();  // the expert-parallel experts (null: none)
  // Sum of squares of the gradients of `list` (its entries' parameters: `owners`) that this rank
  // counts: under tensor parallelism a whole parameter only on tensor rank 0.
  double counted_square_sum(Context& ctx, const ops::AdamWTensors& list, const std::vector<const model::Param*>& owners);
  std::vector<const model::Param*> owners(bool experts) const;  // the entries of list()/shard_list(), expert_list()
  void gather_values();
  void take_deferred_masters();
  model::ParamStore* params_;
  AdamWConfig cfg_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
  double pending_grad_scale_ = 1;  // from clip_grad_norm, used by the next step()
  std::unique_ptr<ops::AdamWTensors> list_, expert_list_;
  std::vector<const void*> list_key_, expert_key_;  // the masters and gradients the lists were built with
  parallel::Communicator* expert_group_;
  parallel::Communicator* tensor_group_;
  std::unique_ptr<Shard> shard_;
};

// Global L2 norm of the gradients of all parameters that require one; when max_norm > 0 and the norm exceeds it, scales
// every gradient by max_norm / (norm + 1e-6). Returns the norm before clipping. One multi-tensor
// reduction and one host read on CUDA.
double clip_grad_norm(model::ParamStore& params, double max_norm);

// The start-up line of a sharded optimizer ("distributed optimizer (KEY): fp32 masters + moments
// 1/D per rank: X MiB of Y MiB"), "" when `opt` is not sharded; `key` is the config key that
// turned it on in the stage's schema.
std::string sharded_state_line(const AdamW& opt, const std::string& key);

}  // namespace nemotron::train
