// Stage "data prep sft": OpenAI-style chat rows (JSONL files, or the bundled arithmetic chat
// data) -> chat template -> tokens with the assistant-only loss mask (sft_conversation.h) ->
// bins of pack_size tokens (sft_packing.h) -> packed Parquet shards (io/packed_parquet.h) in
// Nemotron's layout (reference/data-formats.md §6.6):
//   <output_dir>/blend.json                         {"train": ["1.0", ".../shard_000003", ...], ...}
//   <output_dir>/splits/<split>/NNNNNN__<source>__shard_KKKKKK.parquet  (relative symlinks)
//   <output_dir>/runs/<fingerprint>/datasets/<source>/shard_KKKKKK.parquet
//   <output_dir>/heldout/<source>.jsonl             held-out prompts with answers (bundled data)
//   <output_dir>/metadata.json                      SFTDataArtifact: counts, drops by reason, packing
// Rows go to shard (row index mod num_shards) of their source and are packed per shard; the
// shards are split by the train/valid/test ratios and shuffled with Python's random.Random(seed).
// Rows are processed on all cores. As with pretraining data prep: the directory is built under a
// temporary name and renamed; a matching existing output is left alone; another needs `force`.
#pragma once
#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/jsonl.h"
#include "data/sft_conversation.h"
#include "data/sft_packing.h"
#include "data/synthetic_corpus.h"

namespace nemotron {
class ConfigReader;
}

namespace nemotron::data {

struct SftSource {
  std::string name;                       // names the shard folder and the split links
  std::vector<std::string> files;         // JSONL files of chat rows
  std::optional<CorpusConfig> generator;  // or: the bundled chat data
};

struct SftPrepConfig {
  std::string output_dir;
  std::vector<SftSource> sources;
  std::string tokenizer;  // a tokenizer.json (or a directory holding one)
  SftRowOptions rows;     // messages/tools/used_in fields, the filter, chat template, max_doc_tokens
  int64_t pack_size = 4096;
  PackingAlgorithm algorithm = PackingAlgorithm::first_fit_shuffle;
  uint64_t seed = 42;  // packing shuffle and split assignment (Nemotron: seed, else sample_seed)
  int64_t num_shards = 8;  // per source
  double train_ratio = 0.98, valid_ratio = 0.01, test_ratio = 0.01;
  int64_t row_group_size = 1000;
  bool zstd = true;
  int64_t heldout_examples = 0;  // held-out prompts per generator source
  int64_t max_row_bytes = kDefaultMaxRowBytes;  // a longer JSONL row is an error naming file:line
  // Nemotron's config keys for what our flags do (`sample: N`, `force: true`); the CLI takes the
  // flag when given, else these.
  int64_t sample = 0;
  bool force = false;

  // Top-level keys of an SFT data-prep recipe (validated; unknown keys are errors). The sources
  // come from `sources` or from `blend_path`, a Nemotron raw blend {"datasets": [{"name", "path",
  // "weight"?, "subset"?, "split"?}]} whose paths are local .jsonl files or folders of them. Keys
  // of Nemotron's config that steer its Ray pipeline (run, plan, download, tokenization,
  // observability, execution_mode, config_name) are accepted and have no effect here.
  static SftPrepConfig read(ConfigReader& r);
};

struct SftSplitStats {
  int64_t shards = 0, bins = 0, sequences = 0, tokens = 0, trained_tokens = 0;
};

struct SftPrepResult {
  std::string output_dir, blend_path, splits_dir;
  bool up_to_date = false;
  int64_t rows_in = 0, rows_dropped = 0, rows_without_sequences = 0;
  std::array<int64_t, kNumDropReasons> dropped_by_reason{};
  int64_t sequences = 0, truncated_max_doc_tokens = 0, truncated_pack_size = 0;
  int64_t truncated_untrained = 0;  // sequences whose cut left no trained token (they train nothing)
  int64_t bins = 0, tokens = 0, trained_tokens = 0;
  double packing_efficiency = 0;  // tokens / (bins * pack_size)
  std::array<SftSplitStats, 3> splits{};
};

// `sample` > 0 keeps the first `sample` rows per source and writes to <output_dir>/sample-<N>.
// `resolved_config` (canonical JSON) is hashed with the inputs' sizes and times to decide whether
// the output is up to date.
SftPrepResult prepare_sft_data(const SftPrepConfig& cfg, const std::string& resolved_config, int64_t sample,
                               bool force, std::FILE* log);

// The row files named by `key` of `s`: a path or a list of paths, each a .jsonl/.json or .parquet
// file or a directory of them (sorted); InputError naming the key for anything else. Shared by
// the SFT and RL data preps, which read them with RowReader (data/row_reader.h).
std::vector<std::string> read_row_file_paths(ConfigReader& s, const std::string& key);

// Sources from a Nemotron raw blend file {"datasets": [{"name", "path", "weight"?, "subset"?,
// "split"?}]} (reference/data-formats.md §2.4) whose paths are local .jsonl/.parquet files or folders.
std::vector<SftSource> read_raw_blend_sources(const std::string& path);

// The `sources:` list of a data prep (or `blend_path:`, a raw blend file, instead): each a name and
// either `files` or a `generator`. Shared by the SFT and RL preps, which differ only in what a
// name becomes (SFT: a folder of packed shards, so no "__"; RL: a task name) and in `weight`
// (SFT reads it and keeps only uniform blends; RL has no weights). Failures name the key.
enum class SourceNameUse { folder, task };
std::vector<SftSource> read_prep_sources(ConfigReader& r, SourceNameUse use);

// Nemotron's split shard counts: max(1, round(n * ratio)) for each non-zero valid/test ratio,
// everything to train with <= 2 shards, at least one train shard. Returns {train, valid, test}.
std::array<int64_t, 3> sft_split_counts(int64_t shards, double valid_ratio, double test_ratio);

}  // namespace nemotron::data
