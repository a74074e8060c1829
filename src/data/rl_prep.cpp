#include "data/rl_prep.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "core/progress.h"
#include "data/corpus_skills.h"
#include "data/jsonl.h"
#include "data/row_reader.h"
#include "data/prep_output.h"
#include "io/staged_dir.h"

namespace nemotron::data {

namespace fs = std::filesystem;

namespace {

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

class JsonlOut {
 public:
  explicit JsonlOut(const fs::path& path) : path_(path), out_(path, std::ios::binary) {
    if (!out_) throw Error(fmt::format("{}: cannot open for writing", path.string()));
  }
  void write(const OrderedJson& row) { out_ << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n'; }
  void close() {
    out_.close();
    if (!out_) throw Error(fmt::format("{}: write failed (disk full?)", path_.string()));
  }

 private:
  fs::path path_;
  std::ofstream out_;
};

}  // namespace

std::vector<OrderedJson> generate_rl_rows(const CorpusConfig& cfg) {
  cfg.validate("generator");
  std::vector<OrderedJson> rows;
  rows.reserve(static_cast<size_t>(cfg.num_examples));
  for (int64_t i = 0; i < cfg.num_examples; ++i) {
    const Problem p = make_problem(cfg.seed, cfg.first_problem + i, cfg.knobs);
    OrderedJson row;
    row["responses_create_params"] = {
        {"input", OrderedJson::array({OrderedJson{{"role", "user"}, {"content", p.question}}})}};
    row["question"] = p.question;
    row["expected_answer"] = std::to_string(p.answer);
    row["skill"] = skill_name(p.skill);
    row["problem_index"] = p.index;
    rows.push_back(std::move(row));
  }
  return rows;
}

RlPrepConfig RlPrepConfig::read(ConfigReader& r) {
  RlPrepConfig c;
  c.output_dir = r.get_string("output_dir", "");
  if (c.output_dir.empty()) r.fail("output_dir", "missing (where train.jsonl, val.jsonl and manifest.json go)");
  c.sources = read_prep_sources(r, SourceNameUse::task);
  c.val_rows = r.get_nonnegative_int("val_rows", c.val_rows);
  c.max_row_bytes = r.get_positive_int("max_row_bytes", c.max_row_bytes);
  c.rows.input_key = r.get_string("input_key", c.rows.input_key);
  c.rows.output_key = r.get_string("output_key", c.rows.output_key);
  if (c.rows.input_key.empty() || c.rows.output_key.empty() || c.rows.input_key == c.rows.output_key)
    r.fail("output_key", fmt::format("input_key and output_key must be two different names, got \"{}\" and \"{}\"",
                                     c.rows.input_key, c.rows.output_key));
  c.rows.prompt_template = r.get_string("prompt_template", "");
  c.rows.system_prompt = r.get_string("system_prompt", "");
  c.rows.agent_name = r.get_string("agent_name", "");
  c.sample = r.get_nonnegative_int("sample", 0);
  c.force = r.get_bool("force", false);
  for (const char* key : {"run", "plan", "download", "observability", "execution_mode", "config_name"}) r.ignore(key);
  return c;
}

RlPrepResult prepare_rl_data(const RlPrepConfig& cfg, const std::string& resolved_config, int64_t sample, bool force,
                             std::FILE* log) {
  const auto t0 = std::chrono::steady_clock::now();
  RlPrepResult res;
  const fs::path out = prep_output_dir(cfg.output_dir, sample);
  res.output_dir = out.string();
  res.manifest_path = (out / "manifest.json").string();
  res.train_path = (out / "train.jsonl").string();
  res.val_path = (out / "val.jsonl").string();

  std::vector<std::string> inputs;
  for (const SftSource& s : cfg.sources) inputs.insert(inputs.end(), s.files.begin(), s.files.end());
  const std::string fingerprint = prep_fingerprint(resolved_config, sample, inputs);
  const io::FileLock lock = lock_prep_output(out, "data prep rl", log);
  if (auto meta = up_to_date_output(out, fingerprint, res.manifest_path, force)) {
    res.rows_in = meta->value("rows_in", int64_t{0});
    res.rows_dropped = meta->value("rows_dropped", int64_t{0});
    res.train = meta->value("train_rows", int64_t{0});
    res.val = meta->value("val_rows", int64_t{0});
    res.up_to_date = true;
    return res;
  }

  io::StagedDir staged(out);  // also removes the staging directories of killed earlier runs
  JsonlOut train(staged.path() / "train.jsonl"), val(staged.path() / "val.jsonl");
  std::map<std::string, std::string> first_drop;
  for (const SftSource& src : cfg.sources) {
    RlSourceStats st;
    st.name = src.name;
    RlRowOptions opts = cfg.rows;
    opts.task_name = src.name;
    // The last val_rows kept rows are held back in `tail`; older ones go to train as they come.
    std::deque<OrderedJson> tail;
    const size_t hold = static_cast<size_t>(cfg.val_rows);
    auto keep = [&](OrderedJson row) {
      tail.push_back(std::move(row));
      if (tail.size() > hold) {
        train.write(tail.front());
        tail.pop_front();
        ++st.train;
      }
    };
    std::vector<OrderedJson> generated;
    if (src.generator) generated = generate_rl_rows(*src.generator);
    const int64_t total = src.generator ? (sample > 0 ? std::min<int64_t>(sample, static_cast<int64_t>(generated.size()))
                                                     : static_cast<int64_t>(generated.size()))
                                        : 0;
    ProgressBar bar(fmt::format("converting {}", src.name), total, "rows", log);
    auto take = [&](OrderedJson row, const std::string& where, bool from_generator) {
      ++st.rows_in;
      RlRowResult r = from_generator ? RlRowResult{std::move(row), "generated", "", ""} : convert_rl_row(std::move(row), opts);
      if (from_generator) (*r.row)["task_name"] = src.name;
      if (!r.row) {
        ++st.rows_dropped;
        ++res.dropped_by_reason[r.drop_reason];
        if (!first_drop.contains(r.drop_reason)) first_drop[r.drop_reason] = where + ": " + r.detail;
      } else {
        ++res.rows_by_kind[r.kind];
        keep(std::move(*r.row));
      }
      bar.advance(1);
    };
    if (src.generator) {
      for (int64_t i = 0; i < total; ++i) take(std::move(generated[static_cast<size_t>(i)]), fmt::format("{} row {}", src.name, i), true);
    } else {
      for (const std::string& file : src.files) {
        RowReader reader(file, cfg.max_row_bytes);
        OrderedJson row;
        while ((sample == 0 || st.rows_in < sample) && reader.next_row(row)) take(std::move(row), reader.where(), false);
      }
    }
    bar.finish();
    // Nemotron holds out the last val_rows of each source; a source with fewer than 2 * val_rows
    // rows keeps at least half of them for training.
    const int64_t kept = st.train + static_cast<int64_t>(tail.size());
    const int64_t held_out = std::min(static_cast<int64_t>(tail.size()), kept / 2);
    while (static_cast<int64_t>(tail.size()) > held_out) {
      train.write(tail.front());
      tail.pop_front();
      ++st.train;
    }
    for (const OrderedJson& row : tail) val.write(row);
    st.val = static_cast<int64_t>(tail.size());
    if (log && held_out < cfg.val_rows && cfg.val_rows > 0)
      std::fprintf(log, "note: %s has %lld rows; %lld held out for validation instead of val_rows=%lld\n", src.name.c_str(),
                   static_cast<long long>(kept), static_cast<long long>(held_out), static_cast<long long>(cfg.val_rows));
    res.rows_in += st.rows_in;
    res.rows_dropped += st.rows_dropped;
    res.train += st.train;
    res.val += st.val;
    res.sources.push_back(st);
  }
  train.close();
  val.close();
  if (log)
    for (const auto& [reason, n] : res.dropped_by_reason)
      std::fprintf(log, "dropped %lld rows: %s (first: %s)\n", static_cast<long long>(n), reason.c_str(), first_drop[reason].c_str());
  if (res.train == 0)
    throw InputError(fmt::format("sources: no training rows: {} rows read, {} dropped (see the counts above)", res.rows_in,
                                 res.rows_dropped));

  nlohmann::json source_splits = nlohmann::json::array(), source_datasets = nlohmann::json::array();
  for (size_t i = 0; i < res.sources.size(); ++i) {
    const RlSourceStats& st = res.sources[i];
    source_splits.push_back({{"name", st.name}, {"train", st.train}, {"val", st.val}, {"rows_in", st.rows_in},
                             {"rows_dropped", st.rows_dropped}});
    nlohmann::json files = nlohmann::json::array();
    for (const std::string& f : cfg.sources[i].files) files.push_back(fs::absolute(f).lexically_normal().string());
    source_datasets.push_back({{"name", st.name},
                               {"uri", cfg.sources[i].generator ? nlohmann::json("generated:arithmetic") : nlohmann::json(files)},
                               {"num_rows", st.rows_in}});
  }
  nlohmann::json manifest = {{"train", res.train_path},   {"val", res.val_path},         {"test", nullptr},
                             {"source_splits", source_splits}, {"train_rows", res.train}, {"val_rows", res.val},
                             {"format", "nemo_gym_jsonl"}};
  {
    const std::string text = manifest.dump(2) + "\n";
    std::ofstream m(staged.path() / "manifest.json", std::ios::binary);
    m << text;
    if (!m.flush()) throw Error(fmt::format("{}: write failed", (staged.path() / "manifest.json").string()));
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json meta = {{"type", "SplitJsonlDataArtifact"},
                         {"path", res.manifest_path},
                         {"created_at", iso_time_now()},
                         {"producer", "local"},
                         {"fingerprint", fingerprint},
                         {"total_sequences", res.train + res.val},
                         {"elapsed_sec", std::round(elapsed * 1000) / 1000},
                         {"train", res.train_path},
                         {"val", res.val_path},
                         {"test", nullptr},
                         {"rows_in", res.rows_in},
                         {"rows_dropped", res.rows_dropped},
                         {"rows_dropped_by_reason", res.dropped_by_reason},
                         {"rows_by_format", res.rows_by_kind},
                         {"train_rows", res.train},
                         {"val_rows", res.val},
                         {"source_datasets", source_datasets},
                         {"config", parse_json<nlohmann::json>(resolved_config, "the resolved config")}};
  commit_prep_output(staged, out, meta);
  return res;
}

}  // namespace nemotron::data
