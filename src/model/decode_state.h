// Per-sequence state for incremental decoding (the generation engine's model side): a fixed
// number of slots, each holding one growing sequence. Per layer: attention keeps a paged KV cache
// (one pool of blocks [num_blocks, block_size, nkv, hd] for K and one for V; the blocks of a slot
// are listed in its block table, handed out as the sequence grows and returned by release);
// Mamba keeps its conv window [slots, K-1, C] and SSM state [slots, nH, P, N] (stat_dtype: float32
// under bf16); MLP and MoE keep nothing. Block accounting lives here, shared by every attention
// layer (they all hold the same positions); the tensors live in the layers' LayerDecodeState.
// HybridModel::make_decode_state builds one; HybridModel::extend feeds it.
// Prefix sharing (fork): a slot can take over another's sequence as it stands, so the G
// generations of one prompt prefill it once. KV blocks are reference-counted: the full blocks of
// the shared part are held by both slots (never written again, since a sequence only appends),
// the partially filled last one is copied, as are the Mamba conv windows and SSM states.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "core/context.h"
#include "model/model_config.h"

namespace nemotron::model {

struct DecodeConfig {
  int64_t max_slots = 0;     // sequences held at once
  int64_t max_seq_len = 0;   // tokens per sequence, prompt and generation
  int64_t block_size = 16;   // KV cache positions per block
  int64_t num_blocks = 0;    // KV blocks per attention layer; 0: max_slots * ceil(max_seq_len / block_size)
  // Mamba's prefill of a step's prompts (model/prefill_layout.h): the chunked scan's chunk size, which
  // HybridModel::make_decode_state sets to the model's (0 there, or with
  // HybridModel::set_prefill_by_scan(false): the token-by-token recurrence, ops/ssd_decode.h).
  int64_t scan_chunk = 0;
  // Throws InputError naming `where`.key when a size is not positive.
  void validate(const std::string& where = "decode") const;
  int64_t resolved_num_blocks() const;
};

// What DecodeState::fork asks of each layer: slot to_slots[i] continues from slot from_slots[i]
// (Mamba copies the conv windows and SSM state), and KV block from_blocks[j] is copied onto
// to_blocks[j] (attention: the shared part's partially filled last block).
struct ForkPlan {
  std::vector<int32_t> from_slots, to_slots, from_blocks, to_blocks;
};

// One layer's decoding tensors (attention: KV pools; Mamba: conv windows, SSM states).
struct LayerDecodeState {
  virtual ~LayerDecodeState() = default;
  virtual void release(int64_t slot) = 0;  // forget the slot's sequence (Mamba: zero its state)
  virtual void fork(Context& ctx, const ForkPlan& plan) = 0;
  virtual int64_t bytes() const = 0;
  // Per-slot state tensors, each [slots, ...] (Mamba: the x, B, C conv windows and the SSM state),
  // for comparing two ways of filling them (tests); a layer with none returns none.
  virtual std::vector<Tensor> slot_tensors() const { return {}; }
};

// Copies rows from[i] of t's first dimension onto rows to[i] (t on any device, a float dtype;
// no row both read and written): one gather and one scatter whatever the count, so forking a
// whole rollout batch costs a few launches per tensor, not one copy per slot.
void copy_rows(Context& ctx, Tensor& t, const std::vector<int32_t>& from, const std::vector<int32_t>& to);

// The sequences of one HybridModel::extend call, as every stateful mixer reads them. Sequence i
// (slot slots[i]) appends new_tokens[i] tokens after its start[i] cached ones; its new tokens are
// rows [cu[i], cu[i+1]) of the packed [1, Ntot, H] activations. The tensors (int32, on the
// compute device, uploaded together once per call) feed the ops of ops/*decode*.h; their host
// copies stay here for a caller with its own device buffers (a captured decode step).
struct DecodeBatch {
  std::vector<int64_t> slots, start, new_tokens;
  std::vector<int32_t> cu;  // host copy of cu_seqlens
  int64_t total_tokens = 0;
  Tensor slot_ids;      // [S]
  Tensor cu_seqlens;    // [S+1]
  Tensor context_lens;  // [S], start + new_tokens
  Tensor block_table;   // [S, M] KV blocks of each sequence (attention layers only)
  Tensor slot_mapping;  // [Ntot] cache row block * block_size + offset of each new token
  Tensor position_ids;  // [1, Ntot] position of each new token in its sequence (RoPE)
  // Host copies of the tensors above (slot_ids, context_lens, block_table [S, table_width] row
  // major, slot_mapping, position_ids); cu is cu_seqlens's.
  std::vector<int32_t> host_slot_ids, host_context_lens, host_block_table, host_slot_mapping, host_positions;
  int64_t table_width = 1;
  // A step of whole prompts (model/prefill_layout.h; empty and undefined otherwise, and always in a
  // decode step): seq_idx [1, Ntot], sequence i's tokens hold i (attention's flash path).
  // A step with prompts and a scan chunk: Mamba's layout for the chunked scan of chunk scan_chunk,
  // scan_seqs rows of scan_len (scan_tokens = their product) and after them the step's single
  // tokens: scan_rows [scan_tokens + singles] (the token each row takes, Ntot = padding; empty when
  // the rows are the step's tokens as they are), scan_chunk_slots [scan_seqs, ceil(scan_len /
  // scan_chunk)] (each row's slot at its last chunk, -1 elsewhere), scan_init_slots [scan_seqs]
  // (each row's slot, when one continues a cached sequence; empty when all start empty),
  // scan_unpad [Ntot] (each token's row; empty with scan_rows), decode_slot_ids [singles] and
  // decode_cu [singles + 1] (ops/ssd_decode.h on the single tokens' rows).
  Tensor seq_idx, scan_rows, scan_chunk_slots, scan_init_slots, scan_unpad, decode_slot_ids, decode_cu;
  std::vector<int32_t> host_seq_idx, host_scan_rows, host_scan_chunk_slots, host_scan_init_slots, host_scan_unpad,
      host_decode_slot_ids, host_decode_cu;
  int64_t scan_chunk = 0, scan_seqs = 0, scan_len = 0, scan_tokens = 0;
  int64_t size() const { return static_cast<int64_t>(slots.size()); }
};

// Uploads the batch's host index arrays to `backend` as its tensors, in one copy (on the host:
// views of the host arrays).
void upload_batch(Backend& backend, DecodeBatch& batch);
// The batch's index arrays as one int32 buffer, in this order: slot_ids [S], cu_seqlens [S+1],
// context_lens [S], block_table [S, table_width], slot_mapping [Ntot], position_ids [Ntot], then
// those of a prompt step, sized by their host arrays (none in a decode step): seq_idx, scan_rows,
// scan_chunk_slots, scan_init_slots, scan_unpad, decode_slot_ids, decode_cu.
// batch_index_elements: its length (from the batch's sizes); view_batch_tensors points the
// batch's tensors at their parts of `flat`.
int64_t batch_index_elements(const DecodeBatch& batch);
void view_batch_tensors(const Tensor& flat, DecodeBatch& batch);

class DecodeState {
 public:
  // `layers`: one entry per model layer, null where the layer keeps nothing; `uses_kv_blocks`:
  // whether any layer is attention (else no blocks are counted or needed).
  DecodeState(const DecodeConfig& cfg, std::vector<std::unique_ptr<LayerDecodeState>> layers, bool uses_kv_blocks);
  DecodeState(DecodeState&&) noexcept;
  DecodeState& operator=(DecodeState&&) noexcept;
  ~DecodeState();

  int64_t max_slots() const { return cfg_.max_slots; }
  int64_t max_seq_len() const { return cfg_.max_seq_len; }
  int64_t block_size() const { return cfg_.block_size; }
  int64_t length(int64_t slot) const;  // tokens held
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Whether a new sequence of that many tokens (prompt + generation) fits: not longer than
  // max_seq_len and, with attention layers, enough free KV blocks for all of it.
  bool can_admit(int64_t total_tokens) const;
  // Whether new sequences of totals[i] tokens each fit together (each within max_seq_len, their
  // blocks summed).
  bool can_admit(std::span<const int64_t> totals) const;
  // KV blocks that `tokens` positions take, and those the slot holds now: a scheduler that admits
  // by can_admit(prompt + max_new_tokens) keeps, for each running sequence, its final
  // blocks_for(...) - blocks_held(slot) in reserve (sequences take blocks as they grow).
  int64_t blocks_for(int64_t tokens) const;
  int64_t blocks_held(int64_t slot) const;
  // Frees the slot's blocks (those it shares only when no other slot holds them), zeroes its
  // Mamba state, length 0. Releasing an empty slot is a no-op.
  void release(int64_t slot);
  // Prefix sharing: each empty slot pairs[i].second takes over slot pairs[i].first's sequence as
  // it stands after the last commit (same length; full KV blocks shared, the partial last block
  // and the Mamba states copied on ctx's device). Throws Error (changing nothing) for a target
  // that is not empty, a source that is, a slot used twice, or too few free blocks for the copies.
  void fork(Context& ctx, const std::vector<std::pair<int64_t, int64_t>>& pairs);
  int64_t bytes() const;  // device memory held by the layers' tensors
  // KV + conv + SSM bytes of one sequence of seq_len tokens (KV in `dtype`, SSM in its
  // stat_dtype), for sizing (--dry-run); block rounding not included.
  static int64_t bytes_per_sequence(const ModelConfig& cfg, int64_t seq_len, DType dtype);

  // For HybridModel::extend: checks the call (distinct slots in range, at least one token each,
  // within max_seq_len), hands out the KV blocks the new tokens need (all or none: a refusal
  // throws Error and changes nothing) and uploads the batch tensors to `backend`. Lengths move on
  // only with commit().
  DecodeBatch begin(Backend& backend, const std::vector<int64_t>& slots, const std::vector<int64_t>& new_tokens);
  // begin() without the upload: the host arrays only, the tensors undefined.
  DecodeBatch begin_host(const std::vector<int64_t>& slots, const std::vector<int64_t>& new_tokens);
  void commit(const DecodeBatch& batch);
  LayerDecodeState* layer(size_t i) { return layers_.at(i).get(); }
  size_t num_layers() const { return layers_.size(); }

 private:
  void check_slot(int64_t slot, const char* what) const;

  DecodeConfig cfg_;
  std::vector<std::unique_ptr<LayerDecodeState>> layers_;
  bool uses_kv_blocks_;
  std::vector<int64_t> length_;
  std::vector<std::vector<int32_t>> table_;  // per slot: its blocks in position order
  std::vector<int32_t> free_;                // free block ids, a stack
  std::vector<int32_t> refs_;                // per block: the slots whose tables hold it
};

}  // namespace nemotron::model
