#include "data/sft_prep.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "core/progress.h"
#include "data/blend.h"
#include "data/jsonl.h"
#include "data/row_reader.h"
#include "data/prep_output.h"
#include "data/python_random.h"
#include "data/synthetic_chat.h"
#include "data/tokenizer.h"
#include "io/staged_dir.h"
#include "io/mapped_file.h"
#include "io/packed_parquet.h"

namespace nemotron::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kBatchRows = 4096;
constexpr const char* kSplitNames[3] = {"train", "valid", "test"};

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string tokenizer_file(const std::string& path) {
  return fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
}

// Rows of one source in order, a batch at a time, each with where it came from ("file:line").
class RowStream {
 public:
  RowStream(const SftSource& src, int64_t limit, int64_t max_row_bytes)
      : src_(src), limit_(limit), max_row_bytes_(max_row_bytes) {
    if (src.generator) generated_ = generate_chat_rows(*src.generator);
  }
  bool next(OrderedJson& row, std::string& where) {
    if (limit_ > 0 && served_ >= limit_) return false;
    if (src_.generator) {
      if (pos_ >= generated_.size()) return false;
      where = fmt::format("{} row {}", src_.name, pos_);
      row = std::move(generated_[pos_++]);
      ++served_;
      return true;
    }
    while (file_ < src_.files.size()) {
      if (!reader_) reader_ = std::make_unique<RowReader>(src_.files[file_], max_row_bytes_);
      if (reader_->next_row(row)) {
        where = reader_->where();
        ++served_;
        return true;
      }
      reader_.reset();
      ++file_;
    }
    return false;
  }

 private:
  const SftSource& src_;
  int64_t limit_, served_ = 0, max_row_bytes_;
  std::vector<OrderedJson> generated_;
  size_t pos_ = 0, file_ = 0;
  std::unique_ptr<RowReader> reader_;
};

struct ShardOut {
  std::string source, rel_path;  // rel_path: runs/<fp>/datasets/<source>/shard_KKKKKK.parquet
  int64_t index = 0;
  std::vector<MaskedSequence> sequences;
  int64_t bins = 0, tokens = 0, trained_tokens = 0, truncated = 0;
};

// True when `s` was cut (by max_doc_tokens: `max_doc_cut` and it is that long; or it is longer than
// pack_size, which materialize_bin cuts to) and what is left trains no token (the loss mask is
// shifted in the bin: tokens 1..n-1 count).
bool cut_to_untrained(const MaskedSequence& s, bool max_doc_cut, const SftPrepConfig& cfg) {
  const int64_t len = static_cast<int64_t>(s.input_ids.size());
  const bool cut = len > cfg.pack_size || (max_doc_cut && len == cfg.rows.max_doc_tokens);
  if (!cut) return false;
  const size_t n = static_cast<size_t>(std::min(len, cfg.pack_size));
  for (size_t j = 1; j < n; ++j)
    if (s.loss_mask[j]) return false;
  return true;
}

void pack_and_write(ShardOut& shard, const SftPrepConfig& cfg, const fs::path& tmp) {
  std::vector<int64_t> lengths;
  for (const MaskedSequence& s : shard.sequences) lengths.push_back(static_cast<int64_t>(s.input_ids.size()));
  for (int64_t l : lengths) shard.truncated += l > cfg.pack_size;
  const auto bins = pack_sequences(lengths, cfg.pack_size, cfg.algorithm, cfg.seed);
  io::PackedParquetOptions opts;
  opts.zstd = cfg.zstd;
  opts.rows_per_row_group = cfg.row_group_size;
  io::PackedParquetWriter writer((tmp / shard.rel_path).string(), opts);
  for (const auto& bin : bins) {
    io::PackedRow row = materialize_bin(shard.sequences, bin, cfg.pack_size);
    shard.tokens += static_cast<int64_t>(row.input_ids.size());
    for (uint8_t m : row.loss_mask) shard.trained_tokens += m;
    writer.add(row);
  }
  writer.close();
  shard.bins = static_cast<int64_t>(bins.size());
  shard.sequences.clear();
  shard.sequences.shrink_to_fit();
}

}  // namespace

std::vector<std::string> read_row_file_paths(ConfigReader& s, const std::string& key) {
  const nlohmann::json& v = s.get_raw(key);
  std::vector<std::string> out;
  if (v.is_string()) out.push_back(v.get<std::string>());
  else if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) s.fail(key, fmt::format("entry {} is {}, expected a path", i, describe_value(v[i])));
      out.push_back(v[i].get<std::string>());
    }
  else if (!v.is_null()) s.fail(key, "expected a path or a list of paths, got " + describe_value(v));
  std::vector<std::string> files;
  for (const std::string& p : out) {
    if (fs::is_directory(p)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p))
        if (e.path().extension() == ".jsonl" || is_parquet_path(e.path().string())) found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty()) s.fail(key, fmt::format("{}: no .jsonl or .parquet files in this directory", p));
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p)) {
      if (!p.ends_with(".jsonl") && !p.ends_with(".json") && !is_parquet_path(p))
        s.fail(key, fmt::format("{}: expected a file of rows: .jsonl (or .json) or .parquet", p));
      files.push_back(p);
    } else {
      s.fail(key, fmt::format("{}: no such file or directory", p));
    }
  }
  return files;
}

std::vector<SftSource> read_raw_blend_sources(const std::string& path) {
  nlohmann::json j = load_config_file(path);
  ConfigReader top(j, path);
  const nlohmann::json& list = top.get_raw("datasets");
  if (!list.is_array() || list.empty()) top.fail("datasets", "expected a non-empty list of {name, path}");
  std::vector<SftSource> out;
  for (size_t i = 0; i < list.size(); ++i) {
    ConfigReader d(list[i], path, fmt::format("datasets[{}]", i));
    SftSource s;
    s.name = d.get_string("name", "");
    if (s.name.empty() || s.name.find('/') != std::string::npos || s.name.find("__") != std::string::npos)
      d.fail("name", fmt::format("\"{}\" cannot name a folder", s.name));
    const std::string p = d.get_string("path", "");
    if (p.find("://") != std::string::npos)
      d.fail("path", fmt::format("\"{}\" is remote; download it first and give the local path", p));
    const double weight = d.get_number("weight", 1.0);
    if (weight != 1.0) d.fail("weight", "only uniform weights are supported (every source kept whole)");
    d.ignore("subset"), d.ignore("split");
    s.files = read_row_file_paths(d, "path");
    if (s.files.empty()) d.fail("path", "missing");
    d.check_unknown_keys();
    for (const SftSource& other : out)
      if (other.name == s.name) d.fail("name", fmt::format("\"{}\" is used by two datasets", s.name));
    out.push_back(std::move(s));
  }
  return out;
}

std::array<int64_t, 3> sft_split_counts(int64_t shards, double valid_ratio, double test_ratio) {
  if (shards <= 2) return {shards, 0, 0};
  auto count = [&](double ratio) {
    return ratio > 0 ? std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(shards) * ratio))) : 0;
  };
  int64_t valid = count(valid_ratio), test = count(test_ratio);
  while (valid + test >= shards) (valid >= test && valid > 0 ? valid : test) -= 1;
  return {shards - valid - test, valid, test};
}

std::vector<SftSource> read_prep_sources(ConfigReader& r, SourceNameUse use) {
  std::vector<SftSource> out;
  if (r.has("blend_path")) {
    if (r.has("sources")) r.fail("blend_path", "give either blend_path or sources, not both");
    const std::string blend = r.get_string("blend_path", "");
    if (blend.find("://") != std::string::npos || blend.starts_with("hf:"))
      r.fail("blend_path", fmt::format("\"{}\" is remote; download the blend first and give its local raw blend JSON", blend));
    if (!fs::is_regular_file(blend)) r.fail("blend_path", fmt::format("{}: no such file", blend));
    out = read_raw_blend_sources(blend);
  }
  const nlohmann::json& sources = r.get_raw("sources");
  if (out.empty() && (!sources.is_array() || sources.empty()))
    r.fail("sources", "expected a non-empty list of sources (files or generator), or blend_path: a raw blend JSON");
  for (size_t i = 0; sources.is_array() && i < sources.size(); ++i) {
    ConfigReader s(sources[i], r.source(), r.key_path("sources") + fmt::format("[{}]", i));
    SftSource src;
    src.name = s.get_string("name", fmt::format("source{}", i));
    const bool folder = use == SourceNameUse::folder;
    if (src.name.empty() || src.name.find('/') != std::string::npos || src.name[0] == '.' ||
        (folder && src.name.find("__") != std::string::npos))
      s.fail("name", folder ? fmt::format("\"{}\" cannot name a folder (no '/', no leading '.', no \"__\")", src.name)
                            : fmt::format("\"{}\" cannot name a task (no '/', no leading '.')", src.name));
    if (folder && s.get_number("weight", 1.0) != 1.0)
      s.fail("weight", "only uniform weights are supported (every source kept whole); non-uniform blends are not yet");
    src.files = read_row_file_paths(s, "files");
    if (s.has("generator")) src.generator = CorpusConfig::read(s.section("generator"));
    if (src.files.empty() == !src.generator.has_value())
      s.fail(src.generator ? "files" : "generator", "give either files or generator (exactly one)");
    s.check_unknown_keys();
    for (const SftSource& other : out)
      if (other.name == src.name) s.fail("name", fmt::format("\"{}\" is used by two sources", src.name));
    out.push_back(std::move(src));
  }
  return out;
}

SftPrepConfig SftPrepConfig::read(ConfigReader& r) {
  SftPrepConfig c;
  c.output_dir = r.get_string("output_dir", "");
  if (c.output_dir.empty()) r.fail("output_dir", "missing (where the packed shards, splits and blend.json go)");
  c.sources = read_prep_sources(r, SourceNameUse::folder);
  ConfigReader& t = r.section("tokenizer");
  c.tokenizer = t.get_string("model", "");
  if (c.tokenizer.empty()) t.fail("model", "missing (a tokenizer.json or a directory holding one)");
  if (!fs::is_regular_file(tokenizer_file(c.tokenizer)))
    t.fail("model", fmt::format("{}: no such tokenizer.json (the tiny recipe takes the one `data prep pretrain -c tiny` "
                                "writes; run that first)",
                                tokenizer_file(c.tokenizer)));
  t.ignore("add_bos"), t.ignore("add_eos");  // Nemotron's keys; chat chunks are tokenized without special tokens
  t.check_unknown_keys();
  c.rows.messages_field = r.get_string("messages_field", c.rows.messages_field);
  c.rows.tools_field = r.get_string("tools_field", c.rows.tools_field);
  c.rows.used_in_field = r.get_string("used_in_field", c.rows.used_in_field);
  // Absent or null: every row is kept (the recipes set nano_v3, as Nemotron's configs do).
  c.rows.used_in_filter = r.get_string("used_in_filter", "");
  // A built-in name, a .jinja file, a tokenizer_config.json or a checkpoint directory.
  const std::string tmpl = r.get_string("chat_template", "nano3");
  try {
    c.rows.chat_template = ChatTemplate::load(tmpl, tokenizer_file(c.tokenizer));
  } catch (const InputError& e) {
    r.fail("chat_template", e.what());
  }
  c.rows.max_doc_tokens = r.get_nonnegative_int("max_doc_tokens", 0);
  c.pack_size = r.get_positive_int("pack_size", c.pack_size);
  const std::string algo = r.get_string("algorithm", "first_fit_shuffle");
  auto a = packing_algorithm_from_name(algo);
  if (!a) r.fail("algorithm", fmt::format("unknown packing algorithm \"{}\" (expected one of {})", algo, kPackingAlgorithmNames));
  c.algorithm = *a;
  const int64_t sample_seed = r.get_nonnegative_int("sample_seed", 42);
  c.seed = static_cast<uint64_t>(r.get_nonnegative_int("seed", sample_seed));
  c.num_shards = r.get_positive_int("num_shards", c.num_shards);
  auto ratio = [&](const char* key, double fallback) {
    const double v = r.get_number(key, fallback);
    if (!(v >= 0 && v <= 1)) r.fail(key, fmt::format("expected a number in [0, 1], got {}", v));
    return v;
  };
  c.train_ratio = ratio("train_ratio", c.train_ratio);
  c.valid_ratio = ratio("valid_ratio", c.valid_ratio);
  c.test_ratio = ratio("test_ratio", c.test_ratio);
  if (!(c.train_ratio > 0)) r.fail("train_ratio", "must be positive (training needs shards)");
  c.row_group_size = r.get_positive_int("parquet_row_group_size", c.row_group_size);
  const std::string comp = r.get_string("parquet_compression", "zstd");
  if (comp != "zstd" && comp != "none")
    r.fail("parquet_compression", fmt::format("expected zstd or none, got \"{}\"", comp));
  c.zstd = comp == "zstd";
  c.heldout_examples = r.get_nonnegative_int("heldout_examples", 0);
  c.max_row_bytes = r.get_positive_int("max_row_bytes", c.max_row_bytes);
  c.sample = r.get_nonnegative_int("sample", 0);
  c.force = r.get_bool("force", false);
  for (const char* key : {"run", "plan", "download", "tokenization", "observability", "execution_mode", "config_name"})
    r.ignore(key);
  return c;
}

SftPrepResult prepare_sft_data(const SftPrepConfig& cfg, const std::string& resolved_config, int64_t sample,
                               bool force, std::FILE* log) {
  SftPrepResult res;
  const fs::path out = prep_output_dir(cfg.output_dir, sample);
  res.output_dir = out.string();
  res.blend_path = (out / "blend.json").string();
  res.splits_dir = (out / "splits").string();

  std::vector<std::string> inputs = {tokenizer_file(cfg.tokenizer)};
  for (const SftSource& s : cfg.sources) inputs.insert(inputs.end(), s.files.begin(), s.files.end());
  if (!cfg.rows.chat_template.builtin()) inputs.push_back(cfg.rows.chat_template.name());  // its text can change
  const std::string fingerprint = prep_fingerprint(resolved_config, sample, inputs);
  const io::FileLock lock = lock_prep_output(out, "data prep sft", log);
  if (auto meta = up_to_date_output(out, fingerprint, res.blend_path, force)) {
    res.rows_in = meta->value("rows_in", int64_t{0});
    res.sequences = meta->value("total_sequences", int64_t{0});
    res.bins = meta->value("bins", int64_t{0});
    res.tokens = meta->value("total_tokens", int64_t{0});
    res.packing_efficiency = meta->value("packing_efficiency", 0.0) / 100;
    res.up_to_date = true;
    return res;
  }

  io::StagedDir staged(out);  // also removes the staging directories of killed earlier runs
  const fs::path& tmp = staged.path();

  Tokenizer tok = Tokenizer::load(tokenizer_file(cfg.tokenizer));
  if (cfg.rows.chat_template.builtin() == ChatFormat::nano3 && log)
    for (const char* special : {"<|im_start|>", "<|im_end|>"})
      if (!tok.token_to_id(special))
        std::fprintf(log, "warning: the tokenizer has no %s token; the chat markup is tokenized as plain text\n", special);

  std::array<std::string, kNumDropReasons> first_drop;
  std::string first_untrained;  // where the first sequence cut to no trained token came from
  std::vector<ShardOut> shards;
  const std::string run_dir = fmt::format("runs/{}/datasets", fingerprint);
  for (const SftSource& src : cfg.sources) {
    const size_t first = shards.size();
    fs::create_directories(tmp / run_dir / src.name);
    for (int64_t k = 0; k < cfg.num_shards; ++k) {
      ShardOut s;
      s.source = src.name, s.index = k;
      s.rel_path = fmt::format("{}/{}/shard_{:06d}.parquet", run_dir, src.name, k);
      shards.push_back(std::move(s));
    }
    RowStream stream(src, sample, cfg.max_row_bytes);
    ProgressBar bar(fmt::format("templating {}", src.name), 0, "rows", log);
    int64_t row_index = 0;
    for (;;) {
      std::vector<OrderedJson> batch;
      std::vector<std::string> where;
      OrderedJson row;
      std::string w;
      while (static_cast<int64_t>(batch.size()) < kBatchRows && stream.next(row, w)) {
        batch.push_back(std::move(row));
        where.push_back(w);
      }
      if (batch.empty()) break;
      std::vector<SftRowResult> results(batch.size());
      std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 16)
      for (int64_t i = 0; i < static_cast<int64_t>(batch.size()); ++i) {
        try {
          results[static_cast<size_t>(i)] = process_sft_row(batch[static_cast<size_t>(i)], tok, cfg.rows);
        } catch (...) {
#pragma omp critical
          if (!failure) failure = std::current_exception();
        }
      }
      if (failure) std::rethrow_exception(failure);
      int64_t batch_tokens = 0;
      for (size_t i = 0; i < results.size(); ++i, ++row_index) {
        SftRowResult& r = results[i];
        ++res.rows_in;
        if (r.dropped) {
          const int reason = static_cast<int>(*r.dropped);
          ++res.rows_dropped;
          ++res.dropped_by_reason[static_cast<size_t>(reason)];
          if (first_drop[static_cast<size_t>(reason)].empty())
            first_drop[static_cast<size_t>(reason)] = where[i] + ": " + r.detail;
          continue;
        }
        if (r.sequences.empty()) ++res.rows_without_sequences;
        res.truncated_max_doc_tokens += r.truncated;
        ShardOut& shard = shards[first + static_cast<size_t>(row_index % cfg.num_shards)];
        for (MaskedSequence& s : r.sequences) {
          if (cut_to_untrained(s, r.truncated > 0, cfg) && res.truncated_untrained++ == 0) first_untrained = where[i];
          batch_tokens += static_cast<int64_t>(s.input_ids.size());
          shard.sequences.push_back(std::move(s));
          ++res.sequences;
        }
      }
      bar.advance(static_cast<int64_t>(batch.size()), batch_tokens);
    }
    bar.finish();
  }
  if (log && res.truncated_untrained > 0)  // packed, yet they train nothing: say so where it is seen
    std::fprintf(log, "warning: %lld sequences cut by max_doc_tokens (%lld) or pack_size (%lld) lost every trained token "
                      "and train nothing (first: %s); raise the limit to keep their answers\n",
                 static_cast<long long>(res.truncated_untrained), static_cast<long long>(cfg.rows.max_doc_tokens),
                 static_cast<long long>(cfg.pack_size), first_untrained.c_str());
  if (res.sequences == 0)
    throw InputError(fmt::format("sources: no training sequences: all {} rows were dropped or empty (see the counts "
                                 "above; used_in_filter is \"{}\")",
                                 res.rows_in, cfg.rows.used_in_filter));
  if (log) {
    for (int k = 0; k < kNumDropReasons; ++k)
      if (res.dropped_by_reason[static_cast<size_t>(k)] > 0)
        std::fprintf(log, "dropped %lld rows: %s (first: %s)\n", static_cast<long long>(res.dropped_by_reason[static_cast<size_t>(k)]),
                     drop_reason_name(static_cast<DropReason>(k)), first_drop[static_cast<size_t>(k)].c_str());
  }

  // Pack and write every non-empty shard, on all cores.
  std::vector<size_t> filled;
  for (size_t i = 0; i < shards.size(); ++i)
    if (!shards[i].sequences.empty()) filled.push_back(i);
  {
    ProgressBar bar("packing", static_cast<int64_t>(filled.size()), "shards", log);
    std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t k = 0; k < static_cast<int64_t>(filled.size()); ++k) {
      try {
        pack_and_write(shards[filled[static_cast<size_t>(k)]], cfg, tmp);
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
#pragma omp critical
      bar.advance(1);
    }
    if (failure) std::rethrow_exception(failure);
    bar.finish();
  }
  for (size_t i : filled) {
    res.bins += shards[i].bins;
    res.tokens += shards[i].tokens;
    res.trained_tokens += shards[i].trained_tokens;
    res.truncated_pack_size += shards[i].truncated;
  }
  res.packing_efficiency = static_cast<double>(res.tokens) / static_cast<double>(res.bins * cfg.pack_size);

  // Splits: shard counts from the ratios, the pool shuffled with random.Random(seed): test, valid, train.
  std::vector<size_t> pool = filled;
  PythonRandom(cfg.seed).shuffle(std::span<size_t>(pool));
  const std::array<int64_t, 3> counts = sft_split_counts(static_cast<int64_t>(pool.size()), cfg.valid_ratio, cfg.test_ratio);
  std::array<std::vector<size_t>, 3> members;  // positions in `pool`
  size_t at = 0;
  for (int s : {2, 1, 0})
    for (int64_t k = 0; k < counts[static_cast<size_t>(s)]; ++k) members[static_cast<size_t>(s)].push_back(at++);
  BlendPerSplit blends;
  for (int s = 0; s < 3; ++s) {
    const fs::path dir = tmp / "splits" / kSplitNames[s];
    fs::create_directories(dir);
    Blend b;
    std::vector<double> w;
    for (size_t pos : members[static_cast<size_t>(s)]) {
      const ShardOut& shard = shards[pool[pos]];
      const std::string link = fmt::format("{:06d}__{}__shard_{:06d}.parquet", pos, shard.source, shard.index);
      fs::create_symlink(fs::path("../..") / shard.rel_path, dir / link);
      std::string prefix = (out / shard.rel_path).string();
      b.prefixes.push_back(prefix.substr(0, prefix.size() - std::string(".parquet").size()));
      w.push_back(1.0);
      SftSplitStats& st = res.splits[static_cast<size_t>(s)];
      ++st.shards;
      st.bins += shard.bins;
      st.tokens += shard.tokens;
      st.trained_tokens += shard.trained_tokens;
    }
    b.weights = w;
    if (!b.prefixes.empty()) blends[static_cast<size_t>(s)] = std::move(b);
  }
  write_blend_json((tmp / "blend.json").string(), blends);

  // Held-out prompts of the bundled data, for measuring the answers after SFT.
  nlohmann::json heldout = nlohmann::json::object();
  for (const SftSource& src : cfg.sources) {
    if (!src.generator || cfg.heldout_examples == 0) continue;
    fs::create_directories(tmp / "heldout");
    std::vector<nlohmann::json> rows;
    for (const OrderedJson& r : generate_chat_heldout(*src.generator, cfg.heldout_examples)) rows.push_back(parse_json<nlohmann::json>(r.dump(), "heldout row"));
    const std::string rel = fmt::format("heldout/{}.jsonl", src.name);
    write_jsonl((tmp / rel).string(), rows);
    heldout[src.name] = rel;
  }

  nlohmann::json dropped = nlohmann::json::object();
  for (int k = 0; k < kNumDropReasons; ++k)
    dropped[drop_reason_name(static_cast<DropReason>(k))] = res.dropped_by_reason[static_cast<size_t>(k)];
  nlohmann::json splits = nlohmann::json::object();
  for (int s = 0; s < 3; ++s) {
    const SftSplitStats& st = res.splits[static_cast<size_t>(s)];
    splits[kSplitNames[s]] = {{"shards", st.shards}, {"bins", st.bins}, {"tokens", st.tokens}, {"trained_tokens", st.trained_tokens},
                              {"path", fmt::format("splits/{}", kSplitNames[s])}};
  }
  std::optional<int32_t> eos = tok.eos_token_id();
  nlohmann::json meta = {
      {"type", "SFTDataArtifact"},
      {"path", (out / "splits").string()},
      {"created_at", iso_time_now()},
      {"producer", "local"},
      {"fingerprint", fingerprint},
      {"data_format", "packed_sft_parquet"},
      {"blend_path", res.blend_path},
      {"tokenizer_uri", fs::absolute(tokenizer_file(cfg.tokenizer)).lexically_normal().string()},
      {"eos_token_id", eos ? *eos : -1},
      {"vocab_size", tok.vocab_size()},
      {"chat_template", cfg.rows.chat_template.name()},
      {"pack_size", cfg.pack_size},
      {"algorithm", packing_algorithm_name(cfg.algorithm)},
      {"seed", cfg.seed},
      {"num_shards", static_cast<int64_t>(filled.size())},
      {"rows_in", res.rows_in},
      {"rows_dropped", res.rows_dropped},
      {"rows_dropped_by_reason", dropped},
      {"rows_without_sequences", res.rows_without_sequences},
      {"total_sequences", res.sequences},
      {"sequences_truncated_max_doc_tokens", res.truncated_max_doc_tokens},
      {"sequences_truncated_pack_size", res.truncated_pack_size},
      {"sequences_truncated_to_no_trained_tokens", res.truncated_untrained},
      {"bins", res.bins},
      {"total_tokens", res.tokens},
      {"trained_tokens", res.trained_tokens},
      // As Nemotron's packing stats: sequences per bin, and tokens / capacity in percent.
      {"packing_factor", std::round(100.0 * static_cast<double>(res.sequences) / static_cast<double>(res.bins)) / 100},
      {"packing_efficiency", std::round(1000.0 * res.packing_efficiency) / 10},
      {"splits", splits},
      {"heldout", heldout},
      {"config", parse_json<nlohmann::json>(resolved_config, "the resolved config")}};
  commit_prep_output(staged, out, meta);
  return res;
}

}  // namespace nemotron::data
