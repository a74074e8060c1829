// Stage "data prep pretrain": raw text (JSONL rows, text files, or the bundled arithmetic
// corpus) -> a tokenizer (given, or trained on the sources) -> Megatron `.bin/.idx` shards with
// an EOD after every document -> `blend.json` (per-split blends, reference/data-formats.md §2.3)
// and `metadata.json`. Tokenization runs on all cores. The output directory is built under a
// temporary name and renamed into place; a run whose configuration and inputs match the
// existing output skips the work, and overwriting a different output needs `force`.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "data/bpe_trainer.h"
#include "data/jsonl.h"
#include "data/synthetic_corpus.h"

namespace nemotron {
class ConfigReader;
}

namespace nemotron::data {

struct PrepSource {
  std::string name;                       // names the shard folder: datasets/<name>/
  double weight = 1.0;                    // relative sampling weight in the blend
  std::vector<std::string> files;         // .jsonl (one document per row) or any other file (one document)
  std::optional<CorpusConfig> generator;  // or: the bundled corpus
};

struct PretrainPrepConfig {
  std::string output_dir;
  std::vector<PrepSource> sources;
  std::string blend_path;                           // the raw blend the sources came from, if any
  std::string text_field = "text";
  std::string tokenizer_path;                       // an existing tokenizer.json, or
  std::optional<BpeTrainConfig> tokenizer_train;    // train one on the sources
  int64_t tokenizer_train_documents = 0;            // documents per source the trainer sees (0 = all)
  std::string eos_token;                            // override of the tokenizer's EOS ("" = its own)
  bool add_bos = false, add_eos = true;
  int64_t num_shards = 4, valid_shards = 1, test_shards = 1;
  int64_t min_doc_chars = 0, max_doc_tokens = 0;    // 0 = no filter / no truncation
  int64_t max_row_bytes = kDefaultMaxRowBytes;      // a longer JSONL line is an error naming file:line
  uint64_t seed = 42;                               // assigns shards to splits

  // Top-level keys of a data-prep recipe (validated; unknown keys are errors).
  static PretrainPrepConfig read(ConfigReader& r);
};

struct PretrainPrepResult {
  std::string output_dir, blend_path, tokenizer_path;
  bool up_to_date = false;  // nothing was done: the output matched
  int64_t documents = 0, tokens = 0, skipped_documents = 0;
  double unigram_entropy_nats = 0;  // of the train split's tokens: the loss of a unigram model
};

// `sample` > 0 keeps only the first `sample` documents per source and writes to
// <output_dir>/sample-<N>. `resolved_config` (the canonical JSON text of the run's config) is
// hashed with the inputs' sizes and times to decide whether the output is up to date.
PretrainPrepResult prepare_pretrain_data(const PretrainPrepConfig& cfg, const std::string& resolved_config,
                                         int64_t sample, bool force, std::FILE* log);

}  // namespace nemotron::data
