// Packing SFT sequences into bins of `pack_size` tokens (reference/data-formats.md §6.4, §6.5),
// as Nemotron's data prep does per output shard:
//   first_fit_shuffle     (length, index) pairs shuffled by Python's random.Random(seed), then first fit
//   first_fit_decreasing  stable sort by length, longest first, then first fit
//   concatenative         input order, a new bin whenever the next sequence does not fit
// First fit puts a sequence into the lowest-numbered open bin with room (found through a max
// tree over the bins' free space: the same bins as the linear scan, in O(n log n)). Lengths above
// pack_size count as pack_size (the sequence is truncated when the bin is materialized). A bin
// becomes one packed row: its sequences concatenated, seq_start_id their offsets, and the loss
// mask shifted left by one inside each sequence (the last token of each gets 0).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "data/sft_conversation.h"
#include "io/packed_parquet.h"

namespace nemotron::data {

enum class PackingAlgorithm { first_fit_shuffle, first_fit_decreasing, concatenative };
std::optional<PackingAlgorithm> packing_algorithm_from_name(std::string_view name);
const char* packing_algorithm_name(PackingAlgorithm a);
inline constexpr std::string_view kPackingAlgorithmNames = "first_fit_shuffle, first_fit_decreasing, concatenative";

// Bins as lists of indices into `lengths`, in the order the algorithm opened them.
std::vector<std::vector<int64_t>> pack_sequences(std::span<const int64_t> lengths, int64_t pack_size,
                                                 PackingAlgorithm algorithm, uint64_t seed);

// The packed row of one bin (§6.5): sequences truncated to pack_size, mask shifted per sequence.
io::PackedRow materialize_bin(std::span<const MaskedSequence> sequences, std::span<const int64_t> bin, int64_t pack_size);

}  // namespace nemotron::data
