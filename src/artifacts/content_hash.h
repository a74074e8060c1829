// The content hash that decides whether an artifact changed: a 64-bit FNV-1a over each regular
// file's path relative to the root, its size and its bytes, files in sorted order, so the same
// files give the same hash on any machine and any change to a name or a byte gives another.
// Not cryptographic: it tells versions apart, it does not defend against forgery. A file over
// 64 MiB (token shards, checkpoints) is read in 16 evenly spaced 1 MiB windows besides its size,
// so publishing a terabyte of shards costs seconds: a change inside an unread window of an
// unchanged-size file goes unseen (data prep rewrites whole files, so sizes and windows move).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace nemotron::artifacts {

// `path` is a file or a directory (walked recursively; symlinks followed). Entries whose
// relative path's first component is in `skip` are left out (e.g. "metadata.json", which holds a
// timestamp). 16 hex digits. InputError when `path` does not exist.
std::string content_hash(const std::filesystem::path& path, const std::vector<std::string>& skip = {});

}  // namespace nemotron::artifacts
