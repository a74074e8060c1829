// The output directory of a data-prep stage (data prep pretrain, data prep sft), shared so every
// stage keeps the same rules: `--sample N` writes to <output_dir>/sample-N; the directory is
// fingerprinted by the resolved config, the sample size and each input file's size and time;
// a directory made from the same fingerprint is up to date (nothing to do); one made from anything
// else is replaced only with --force; the new one is written under a staging name and swapped in
// whole (io::StagedDir), carrying the existing --sample outputs over.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/file_lock.h"

namespace nemotron::io {
class StagedDir;
}

namespace nemotron::data {

// <output_dir>/sample-<sample> when sample > 0, else output_dir; absolute and normalised.
std::filesystem::path prep_output_dir(const std::string& output_dir, int64_t sample);

// Hex fingerprint of resolved_config, sample and each file's path, size and modification time.
// `required` files must exist (InputError naming the file); `optional` ones count when present.
std::string prep_fingerprint(const std::string& resolved_config, int64_t sample,
                             const std::vector<std::string>& required,
                             const std::vector<std::string>& optional = {});

// True for <output_dir>/sample-<N> directories (the outputs of --sample runs).
bool is_sample_dir(const std::filesystem::path& p);

// Locks the output directory for one prep at a time (as training runs lock theirs): an exclusive
// lock on <output_dir>.lock beside it (the directory itself is swapped whole), taken for `out` and
// for its --sample outputs alike, held until the returned lock is destroyed, its file then removed.
// A second prep into the same output_dir fails at once with an InputError naming the holder; take
// the lock before up_to_date_output so the check and the write see the same directory. `stage`
// ("data prep sft") is recorded in the lock; a file system that cannot lock gets a warning on `log`.
io::FileLock lock_prep_output(const std::filesystem::path& out, const std::string& stage, std::FILE* log);

// Decides what to do with an existing `out` (staging leftovers of dead runs are removed first):
// returns its metadata.json when it was made from `fingerprint` and `must_exist` is there too
// (up to date: the caller reports it and stops, unless `force`); nullopt when `out` is missing,
// empty, holds only --sample outputs, or `force` is set; otherwise InputError (pass --force).
std::optional<nlohmann::json> up_to_date_output(const std::filesystem::path& out, const std::string& fingerprint,
                                                const std::filesystem::path& must_exist, bool force);

// Finishes a prep: writes `metadata` as staged/metadata.json (last: its fingerprint marks the
// directory complete), moves the --sample outputs of `out` into it, and swaps it in for `out`.
void commit_prep_output(io::StagedDir& staged, const std::filesystem::path& out, const nlohmann::json& metadata);

}  // namespace nemotron::data
