// A content hash for checkpoint files (train_state.json records one per file; loads verify it):
// XXH64 (seed 0) over every byte, written "xxh64:<16 hex digits>". Fast enough to cover whole
// files (several GB/s, about a disk's read rate), so a flipped byte anywhere is caught, unlike a
// size check; not cryptographic (it detects corruption, not forgery).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nemotron::io {

uint64_t xxh64(const void* data, size_t size, uint64_t seed = 0);
// "xxh64:..." of the file at `path` (memory-mapped); InputError naming the path when unreadable.
std::string file_hash(const std::string& path);

}  // namespace nemotron::io
