// Stage "data prep rl": RL prompts (NeMo Gym JSONL, Nemotron placeholder rows, plain NeMo RL
// JSONL, or the bundled arithmetic problems) -> NeMo Gym rows (rl_rows.h) split into train and
// validation as Nemotron's RL data prep does (reference/data-formats.md §7.2: the last `val_rows`
// rows of each source are held out), in Nemotron's nano3 layout:
//   <output_dir>/train.jsonl, <output_dir>/val.jsonl   NeMo Gym rows, sources in order
//   <output_dir>/manifest.json   {"train": <abs path>, "val": <abs path>, "test": null,
//                                 "source_splits": [{name, train, val, rows_in, rows_dropped}], ...}
//   <output_dir>/metadata.json   SplitJsonlDataArtifact: counts, drops by reason, the config
// Rows that are not JSON stop the prep (InputError "<file>:<line>: ...", exit 2); rows that are JSON
// but fit no format are dropped, counted by reason, and the first of each reason is named. Same
// output rules as the other preps (prep_output.h): --sample, up to date, --force, staged writes.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "data/rl_rows.h"
#include "data/sft_prep.h"

namespace nemotron {
class ConfigReader;
}

namespace nemotron::data {

struct RlPrepConfig {
  std::string output_dir;
  std::vector<SftSource> sources;  // JSONL files, or the bundled problems (generator)
  RlRowOptions rows;               // input/output keys, prompt template, system prompt, agent name
  int64_t val_rows = 100;          // held out at the end of each source (at most half of it)
  int64_t max_row_bytes = kDefaultMaxRowBytes;  // a longer JSONL row is an error naming file:line
  int64_t sample = 0;              // Nemotron's `sample: N` / `force: true`; the flags win
  bool force = false;

  // Keys: output_dir, sources (list of {name, files | generator}) or blend_path (a raw blend),
  // val_rows, input_key, output_key, prompt_template, system_prompt, agent_name, sample, force;
  // Nemotron's pipeline keys (run, plan, download, observability, execution_mode, config_name)
  // are accepted and have no effect.
  static RlPrepConfig read(ConfigReader& r);
};

struct RlSourceStats {
  std::string name;
  int64_t rows_in = 0, rows_dropped = 0, train = 0, val = 0;
};

struct RlPrepResult {
  std::string output_dir, manifest_path, train_path, val_path;
  bool up_to_date = false;
  int64_t rows_in = 0, rows_dropped = 0, train = 0, val = 0;
  std::map<std::string, int64_t> dropped_by_reason;
  std::map<std::string, int64_t> rows_by_kind;  // gym, placeholder, plain, messages, generated
  std::vector<RlSourceStats> sources;
};

// `sample` > 0 keeps the first `sample` rows per source (output in <output_dir>/sample-<N>).
RlPrepResult prepare_rl_data(const RlPrepConfig& cfg, const std::string& resolved_config, int64_t sample, bool force,
                             std::FILE* log);

// The bundled RL rows: problem first_problem + i of the tiny corpus's skill as a NeMo Gym row whose
// prompt is the plain user question the SFT data teaches to answer with "The answer is N.".
std::vector<OrderedJson> generate_rl_rows(const CorpusConfig& cfg);

}  // namespace nemotron::data
