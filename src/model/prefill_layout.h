// The packed layout of a step of whole prompts (every sequence of the batch starts empty, one at
// least brings several tokens: never a decode step), built once per step on the host and uploaded
// with the batch's other index arrays (model/decode_state.h), so that the training kernels can
// take the prompts: attention's flash kernel reads the sequence ids, Mamba's chunked SSD scan
// (ops/ssd_scan.h) the padded layout below.
//
// The scan leaves a state only at chunk ends (SsdChunkStates), so each sequence but the last is
// padded with tokens of dt = 0 (which leave the state unchanged: exp(0 A) S + 0 x B^T = S) to a
// multiple of the step's chunk Q; the state after its last chunk is then its final state, written
// straight into its slot. Q is the model's chunk size, halved (down to 16) while the padding
// would exceed a quarter of the prompts' tokens (short prompts beside long ones), since the
// padding costs scan work and a smaller Q only a longer chunk walk.
#pragma once
#include <cstdint>
#include <vector>

namespace nemotron::model {

struct DecodeBatch;

inline constexpr int64_t kPrefillMinChunk = 16;

// Fills batch's host seq_idx (when the batch is whole prompts) and, with scan_chunk > 0 (the
// model's chunk size; 0: Mamba prefills token by token), the scan layout: scan_chunk, scan_tokens
// and the host arrays host_scan_rows, host_scan_seq_idx, host_scan_chunk_slots, host_scan_unpad.
// Reads batch.start, cu, host_slot_ids; leaves a batch that is not whole prompts unchanged.
void plan_whole_prompts(DecodeBatch& batch, int64_t scan_chunk);

// The chunk plan_whole_prompts picks for sequences of these lengths (exposed for its tests).
int64_t prefill_scan_chunk(const std::vector<int64_t>& lengths, int64_t chunk_size);

}  // namespace nemotron::model
