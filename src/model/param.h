// Parameters by their Hugging Face names (Hub layout, `backbone.*`), each with its gradient.
// Blocks register their tensors at construction; the store owns them. Gradients accumulate
// (+=) across micro-batches until zero_grads(). A frozen parameter (requires_grad = false: a
// buffer such as the MoE correction bias, or a base weight under LoRA) costs nothing beyond its
// value: no gradient, no float32 master, no optimizer moments, and the blocks skip its dW work.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace nemotron::model {

struct LoraAdapter;  // model/lora.h

// Which ranks hold copies of a parameter (issue 22), and so which group sums its gradient,
// shards its optimizer state and writes it into a checkpoint.
enum class ParamReplicas : uint8_t {
  data,         // every rank of the data group: dense weights, norms, the router, shared experts
  expert_data,  // a routed expert's weight: one rank of each expert group holds it (the rank whose
                // expert coordinate owns that expert); its copies are the expert-data group
};

// Local rows [local_row, local_row + rows) of a value are the global rows [global_row, + rows)
// (every other dim whole): one block of a fused tensor that tensor parallelism splits block by
// block (Mamba's in_proj: z, x, B, C and dt each split by heads or groups).
struct ShardRowBlock {
  int64_t local_row = 0, rows = 0, global_row = 0;
};

// One box of a value in its global tensor: local rows [local_row, local_row + box[0]) are the
// box [offset, offset + box) of the global tensor.
struct ParamBox {
  int64_t local_row = 0;
  Shape box;
  std::vector<int64_t> offset;
};

// This rank's part of a parameter whose whole ("global") tensor may be split over ranks: the value
// is the box [offset, offset + value shape) of global_shape, or, with row_blocks, several row
// boxes of it. A tensor that is not split (an expert under expert parallelism is held whole by its
// rank) has an empty global_shape and offset, read through the accessors as its own shape and
// zeros. Checkpoints record both, so a tensor written at one layout loads at another.
struct ParamShard {
  Shape global_shape;           // empty: the value's shape
  std::vector<int64_t> offset;  // per dim; empty: all 0 (unused with row_blocks)
  std::vector<ShardRowBlock> row_blocks;  // empty: the value is one box at `offset`
  ParamReplicas replicas = ParamReplicas::data;
  // Tensor parallelism with sequence parallelism: this replicated parameter (a norm in the
  // sequence-split region) sees only this rank's rows, so its gradient is a partial sum over the
  // tensor group (Megatron's `sequence_parallel` parameter attribute).
  bool grad_partial_over_tensor = false;
};

// Mixed precision (Megatron's scheme): a bf16 store keeps `value` in bf16 for compute, `grad` in
// float32 (grad_dtype) and, once create_masters() ran, a float32 `master` that the optimizer
// updates and writes back into `value`. Full-precision stores have no master.
struct Param {
  std::string name;
  Tensor value;
  Tensor grad;    // in grad_dtype(value); undefined while frozen
  Tensor master;  // float32 copy of a bf16 value (undefined otherwise, and while frozen)
  bool weight_decay = true;  // false for norms, biases and other 1-D tensors
  // False: frozen (ParamStore::set_requires_grad). Blocks then compute no gradient for it and
  // the optimizer neither holds state for it nor touches it.
  bool requires_grad = true;
  // The trunk layer that registered it (LayerStack: layer i's norm and mixer), -1 for the rest
  // (embedding, final norm, head, the MTP blocks): the unit data parallelism's buckets and full
  // parameter sharding cut at, and the layer whose backward completes its gradient.
  int64_t trunk_layer = -1;
  // A LoRA adapter on this weight (model/lora.h): Linear adds its term in forward and backward.
  std::shared_ptr<const LoraAdapter> lora;
  ParamShard shard;
  Shape global_shape() const { return shard.global_shape.rank() ? shard.global_shape : value.shape(); }
  std::vector<int64_t> global_offset() const {
    return shard.offset.empty() ? std::vector<int64_t>(value.rank(), 0) : shard.offset;
  }
  bool is_expert() const { return shard.replicas == ParamReplicas::expert_data; }
  // Split over the tensor-parallel group (each member holds another part); otherwise every member
  // of that group holds the same whole value.
  bool tensor_split() const { return shard.global_shape.rank() > 0 && shard.global_shape != value.shape(); }
  // The value's boxes in the global tensor, in local row order (one unless row_blocks).
  std::vector<ParamBox> boxes() const;
  // The global flat index of each local element (row-major both), for initialisers and tests.
  std::vector<int64_t> global_indices() const;
  // The values that are the truth (saved in checkpoints, updated by the optimizer).
  Tensor& truth() { return master.defined() ? master : value; }
  const Tensor& truth() const { return master.defined() ? master : value; }
  // After the truth changed outside the optimizer (load, bias update): value = cast(master).
  void refresh_value();
};

// Where each gradient of the store's flat buffer starts (ParamStore::grad_layout), computed from
// the parameters' shapes alone, so a sharded optimizer can cut its slices without the whole
// buffer ever existing.
struct GradLayout {
  std::vector<int64_t> offset;  // by parameter (the store's order): element offset, -1 = not in the buffer
  int64_t numel = 0;            // the buffer's length, padding included
  DType dtype = DType::f32;     // the gradients' dtype (grad_dtype of the store's)
};

class ParamStore {
 public:
  // `trainable` false: a store to run, never to train (a generator's copy of a policy at another
  // layout): every parameter is added frozen, so no gradient is ever allocated.
  // `defer_grads`: parameters are added trainable but without a gradient; whoever lays the
  // gradients out gives them storage (make_grads_contiguous, allocate_grads, or the layer slots of
  // sharded gradients, train/grad_slots.h), so a store whose whole gradients would not fit one
  // device never holds them (Megatron FSDP's optim_grads). Every AdamW allocates what it needs.
  ParamStore(Backend& backend, DType dtype, bool trainable = true, bool defer_grads = false)
      : backend_(&backend), dtype_(dtype), trainable_(trainable), defer_grads_(defer_grads) {}
  // A new zero-initialised parameter with a zero gradient (frozen, without, in a store not
  // trainable; trainable without one yet under defer_grads). Names must be unique. `stat` keeps the
  // value in stat_dtype(dtype) (float32 in a bf16 store), for buffers whose small updates bf16
  // would lose (the MoE correction bias).
  Param& add(const std::string& name, Shape shape, bool weight_decay, bool stat = false);
  Param& add(const std::string& name, Shape shape) { return add(name, shape, shape.rank() >= 2); }
  Param& get(const std::string& name);
  const Param* find(const std::string& name) const;
  const std::vector<Param*>& all() const { return order_; }
  void zero_grads();
  // Freezes (false: drops the gradient and the master; the value keeps bf16(master)) or unfreezes
  // (true: a zero gradient, and a master when this store has masters) one parameter. An
  // optimizer built before gives an unfrozen parameter fresh moments at its next step.
  void set_requires_grad(Param& p, bool requires_grad);
  // Float32 masters for every bf16 value that requires a gradient (call once, after init or
  // load; no-op otherwise).
  void create_masters();
  // Marks the store as one with float32 masters without making them: the optimizer that lays the
  // state out makes them (train/adamw.h: whole ones without sharding, only the rank's slices
  // under the distributed optimizer, from the values), so a rank of a sharded optimizer never
  // holds the whole masters, start-up included. create_masters() makes them whole instead.
  void defer_masters() { masters_ = masters_deferred_ = true; }
  bool masters_deferred() const { return masters_deferred_; }
  // What an optimizer calls once it took the deferred masters over (its own slices of them).
  void masters_taken() { masters_deferred_ = false; }
  bool has_masters() const;
  int64_t numel() const;
  int64_t trainable_numel() const;  // of the parameters that require a gradient
  // Moves every gradient into one flat zeroed buffer (Megatron DDP's grad buffer), each
  // parameter's a view at an offset rounded up to `align` elements, the buffer padded to a
  // multiple of `pad_to` elements. Gradient values are dropped (call it between steps: a step
  // zeroes them first anyway), and the old ones are freed first, so memory never holds both. Collectives then run on the buffer (or buckets of it) in place,
  // and zero_grads() clears it in one pass. A parameter unfrozen later gets a gradient of its own
  // outside the buffer (in_grad_buffer says which). Call again after freezing or unfreezing.
  // The buffer holds the parameters the data group replicates: an expert-parallel expert's
  // gradient (is_expert()) is summed over another group, so it keeps a tensor of its own.
  void make_grads_contiguous(int64_t align = 64, int64_t pad_to = 1);
  // The layout make_grads_contiguous(align, pad_to) gives, from shapes alone: every parameter that
  // requires a gradient, expert-parallel experts excepted, in the store's order. Allocates nothing.
  GradLayout grad_layout(int64_t align = 64, int64_t pad_to = 1) const;
  // A zero gradient of its own for every parameter that requires one and has none (deferred).
  void allocate_grads();
  bool defers_grads() const { return defer_grads_; }
  const Tensor& grad_buffer() const { return grad_buffer_; }  // undefined until made
  // Frees the flat buffer once no gradient points into it any more (a sharded-gradient layout
  // drops them first, train/adamw.h); in_grad_buffer() is false from then on.
  void release_grad_buffer() { grad_buffer_ = Tensor(); }
  bool in_grad_buffer(const Param& p) const;
  Backend& backend() const { return *backend_; }
  DType dtype() const { return dtype_; }

 private:
  Backend* backend_;
  DType dtype_;
  bool trainable_ = true;
  bool defer_grads_ = false;
  bool masters_ = false;  // create_masters() or defer_masters() ran
  bool masters_deferred_ = false;  // defer_masters() ran and no optimizer made them yet
  Tensor grad_buffer_;    // make_grads_contiguous()
  std::map<std::string, std::unique_ptr<Param>> by_name_;
  std::vector<Param*> order_;
};

// Initialisers draw from a Philox stream keyed by the parameter's name, so a parameter's initial
// value depends on (seed, name) only, never on construction order or device.
uint64_t name_stream(const std::string& name);

// The tensor a block's backward accumulates p's gradient into: p.grad, or for a frozen p a zeroed
// scratch from ctx that is dropped after the op (for small tensors whose gradient comes out of a
// fused kernel together with activation gradients: norms, conv, dt_bias, D). Large frozen
// weights skip their dW work instead (Linear, LM head, embedding, experts).
Tensor grad_sink(Context& ctx, Param& p);
void init_normal(Param& p, uint64_t seed, double std);
void init_uniform(Param& p, uint64_t seed, double lo, double hi);
void init_constant(Param& p, double value);
// This rank's part of p's whole tensor `whole` (global shape, on the host): `whole` itself when p
// is not split, else a new host tensor of p's value shape in whole's dtype (loaders of whole-tensor
// files at a tensor-parallel layout).
Tensor local_part(const Param& p, const Tensor& whole);

}  // namespace nemotron::model
