// The layout of a step that brings prompts (one sequence at least with several new tokens), built
// once per step on the host and uploaded with the batch's other index arrays
// (model/decode_state.h), so that the training kernels can take the prompts: attention's flash
// kernel reads the sequence ids of a step of whole prompts, Mamba's chunked SSD scan
// (ops/ssd_scan.h) the padded rows below in any prompt step (new, continued after cached tokens,
// forked, or beside running sequences).
//
// Mamba: one scan row per prompt sequence (several new tokens), each padded to the step's longest
// with tokens of dt = 0, which leave the state unchanged (exp(0 A) S + 0 x B^T = S), so the state
// after a row's last chunk is its sequence's final state, written straight into its slot
// (SsdChunkStates). A row starts from its slot's state (the scan's initial_state, gathered only
// when a sequence continues: a fresh slot is zero). Rows rather than one packed row: the scan's
// serial state pass then walks one prompt's chunks, not every prompt's (a packed 256 x 200-token
// step was 1,792 chunks in a row at Q 32, twice the per-token cost). The cost is padding when
// lengths differ. The single-token sequences of the step (decodes, one-token prompts) take
// ops/ssd_decode.h on a compact copy of their tokens, placed after the scan rows; one gather puts
// every output back in the step's token order.
#pragma once
#include <cstdint>

namespace nemotron::model {

struct DecodeBatch;

// Fills batch's host seq_idx (when the batch is whole prompts) and, with scan_chunk > 0 (the
// model's chunk size; 0: Mamba prefills token by token) and a sequence of several new tokens, the
// scan layout (DecodeBatch's scan_* and decode_* fields). Reads batch.start, new_tokens, cu,
// host_slot_ids; leaves a decode step (one token per sequence) unchanged.
void plan_prefill(DecodeBatch& batch, int64_t scan_chunk);

}  // namespace nemotron::model
