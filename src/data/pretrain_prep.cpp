#include "data/pretrain_prep.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "core/progress.h"
#include "core/rng.h"
#include "data/blend.h"
#include "data/indexed_dataset_builder.h"
#include "data/jsonl.h"
#include "data/prep_output.h"
#include "data/tokenizer.h"
#include "data/tokenizer_utf8.h"
#include "io/mapped_file.h"
#include "io/staged_dir.h"

namespace nemotron::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kBatchDocuments = 2048;
constexpr int64_t kMaxUnigramCells = int64_t{1} << 24;  // shards x vocab counters kept for the entropy

std::vector<std::string> read_string_list(ConfigReader& r, const std::string& key) {
  const nlohmann::json& v = r.get_raw(key);
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) r.fail(key, "expected a list of strings, got " + describe_value(v));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) r.fail(key, fmt::format("entry {} is {}, expected a string", i, describe_value(v[i])));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

// Documents of one source, in a fixed order, a batch at a time.
class DocumentStream {
 public:
  DocumentStream(const PrepSource& src, const std::string& text_field, int64_t limit, int64_t max_row_bytes)
      : src_(src), field_(text_field), limit_(limit), max_row_bytes_(max_row_bytes) {
    if (src.generator) {
      for (Document& d : generate_pretrain_corpus(*src.generator)) generated_.push_back(std::move(d.text));
    }
  }
  // Up to `n` more documents; empty at the end.
  std::vector<std::string> next(int64_t n) {
    std::vector<std::string> out;
    while (static_cast<int64_t>(out.size()) < n && (limit_ <= 0 || served_ < limit_)) {
      std::string text;
      if (!next_one(text)) break;
      out.push_back(std::move(text));
      ++served_;
    }
    return out;
  }

 private:
  bool next_one(std::string& text) {
    if (src_.generator) {
      if (gen_pos_ >= generated_.size()) return false;
      text = generated_[gen_pos_++];
      return true;
    }
    while (file_ < src_.files.size()) {
      const std::string& path = src_.files[file_];
      bool jsonl = path.ends_with(".jsonl") || path.ends_with(".json");
      if (!jsonl) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw InputError(fmt::format("{}: cannot open", path));
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
        if (const size_t bad = utf8_invalid_at(text); bad != std::string_view::npos)  // file:line, as editors read it
          throw InputError(fmt::format("{}:{}: not valid UTF-8 (byte {} of the file); a text source must be UTF-8 "
                                       "(convert it, e.g. with iconv)",
                                       path, 1 + std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n'),
                                       bad));
        ++file_;
        return true;
      }
      if (!reader_) reader_ = std::make_unique<JsonlReader>(path, max_row_bytes_);
      if (reader_->next_text(text, field_)) return true;
      reader_.reset();
      ++file_;
    }
    return false;
  }

  const PrepSource& src_;
  std::string field_;
  int64_t limit_, served_ = 0, max_row_bytes_;
  std::vector<std::string> generated_;
  size_t gen_pos_ = 0, file_ = 0;
  std::unique_ptr<JsonlReader> reader_;
};

struct Shard {
  std::string source, prefix;  // prefix = final (absolute) path without .bin/.idx
  double weight = 1;
  int64_t documents = 0, tokens = 0;
  std::vector<int64_t> unigram;  // token counts (empty when too large to keep)
};

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

Tokenizer make_tokenizer(const PretrainPrepConfig& cfg, int64_t sample, std::FILE* log) {
  if (!cfg.tokenizer_train) return Tokenizer::load(cfg.tokenizer_path);
  std::vector<std::string> texts;
  for (const PrepSource& src : cfg.sources) {
    int64_t limit = cfg.tokenizer_train_documents;
    if (sample > 0) limit = limit > 0 ? std::min(limit, sample) : sample;
    DocumentStream docs(src, cfg.text_field, limit, cfg.max_row_bytes);
    for (std::vector<std::string> b = docs.next(kBatchDocuments); !b.empty(); b = docs.next(kBatchDocuments))
      for (std::string& t : b) texts.push_back(std::move(t));
  }
  if (log) std::fprintf(log, "training a BPE tokenizer (vocab %d) on %zu documents\n", cfg.tokenizer_train->vocab_size, texts.size());
  auto t0 = std::chrono::steady_clock::now();
  Tokenizer tok = train_bpe(texts, *cfg.tokenizer_train);
  if (log)
    std::fprintf(log, "  trained in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return tok;
}

// Sources from a Nemotron raw blend file (reference/data-formats.md §2.4), single mode:
// {"datasets": [{"name", "path", "weight", "text_field"}, ...]}; a path is a local file or a
// directory of .jsonl files; weight 0 leaves the dataset out; keys starting with '_' are comments.
std::vector<PrepSource> read_raw_blend(const std::string& path, const std::string& text_field) {
  nlohmann::json j = load_config_file(path);
  if (!j.is_object() || !j.contains("datasets"))
    throw InputError(fmt::format("{}: datasets: missing (pretraining data prep takes the single-blend form "
                                 "{{\"datasets\": [...]}})",
                                 path));
  ConfigReader top(j, path);
  const nlohmann::json& list = top.get_raw("datasets");
  if (!list.is_array() || list.empty()) top.fail("datasets", "expected a non-empty list");
  std::vector<PrepSource> out;
  for (size_t i = 0; i < list.size(); ++i) {
    ConfigReader d(list[i], path, fmt::format("datasets[{}]", i));
    PrepSource s;
    s.name = d.get_string("name", "");
    if (s.name.empty()) d.fail("name", "missing");
    std::string p = d.get_string("path", "");
    if (p.find("://") != std::string::npos)
      d.fail("path", fmt::format("\"{}\" is remote; download it first and give the local path", p));
    s.weight = d.get_number("weight", 1.0);
    if (d.get_string("text_field", text_field) != text_field)
      d.fail("text_field", fmt::format("differs from the config's text_field \"{}\"", text_field));
    d.ignore("split"), d.ignore("subset");
    for (const auto& [key, v] : list[i].items())
      if (!key.empty() && key[0] == '_') d.ignore(key);
    d.check_unknown_keys();
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.path().extension() == ".jsonl") s.files.push_back(e.path().string());
      std::sort(s.files.begin(), s.files.end());
      if (s.files.empty()) d.fail("path", fmt::format("{}: no .jsonl files in this directory", p));
    } else if (fs::is_regular_file(p)) {
      s.files.push_back(p);
    } else {
      d.fail("path", fmt::format("{}: no such file or directory", p));
    }
    if (s.weight > 0) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

PretrainPrepConfig PretrainPrepConfig::read(ConfigReader& r) {
  PretrainPrepConfig c;
  c.output_dir = r.get_string("output_dir", "");
  if (c.output_dir.empty()) r.fail("output_dir", "missing (where the shards, blend.json and tokenizer go)");
  c.text_field = r.get_string("text_field", c.text_field);
  if (r.has("blend_path")) {
    if (r.has("sources")) r.fail("blend_path", "give either blend_path or sources, not both");
    c.blend_path = r.get_string("blend_path", "");
    c.sources = read_raw_blend(c.blend_path, c.text_field);
  }
  const nlohmann::json& sources = r.get_raw("sources");
  if (c.sources.empty() && (!sources.is_array() || sources.empty()))
    r.fail("sources", "expected a non-empty list of sources (or blend_path: a raw blend JSON)");
  for (size_t i = 0; sources.is_array() && i < sources.size(); ++i) {
    ConfigReader s(sources[i], r.source(), r.key_path("sources") + fmt::format("[{}]", i));
    PrepSource src;
    src.name = s.get_string("name", fmt::format("source{}", i));
    if (src.name.empty() || src.name.find('/') != std::string::npos || src.name[0] == '.')
      s.fail("name", fmt::format("\"{}\" cannot name a folder", src.name));
    src.weight = s.get_number("weight", 1.0);
    if (!(src.weight > 0)) s.fail("weight", fmt::format("expected a positive number, got {}", src.weight));
    src.files = read_string_list(s, "files");
    if (s.has("generator")) src.generator = CorpusConfig::read(s.section("generator"));
    if (src.files.empty() == !src.generator.has_value())
      s.fail(src.generator ? "files" : "generator", "give either files or generator (exactly one)");
    for (const std::string& f : src.files)
      if (!fs::is_regular_file(f)) s.fail("files", fmt::format("{}: no such file", f));
    s.check_unknown_keys();
    for (const PrepSource& other : c.sources)
      if (other.name == src.name) s.fail("name", fmt::format("\"{}\" is used by two sources", src.name));
    c.sources.push_back(std::move(src));
  }
  ConfigReader& t = r.section("tokenizer");
  c.tokenizer_path = t.get_string("path", "");
  if (t.has("train")) {
    ConfigReader& tr = t.section("train");
    BpeTrainConfig b;
    b.vocab_size = static_cast<int32_t>(tr.get_positive_int("vocab_size", b.vocab_size));
    b.min_frequency = tr.get_nonnegative_int("min_frequency", b.min_frequency);
    b.special_tokens = read_string_list(tr, "special_tokens");
    b.pattern = tr.get_string("pattern", b.pattern);
    b.bos_token = tr.get_string("bos_token", b.bos_token);
    c.tokenizer_train_documents = tr.get_nonnegative_int("documents", 0);
    tr.check_unknown_keys();
    b.validate();
    c.tokenizer_train = b;
  }
  if (c.tokenizer_path.empty() == !c.tokenizer_train.has_value())
    t.fail(c.tokenizer_train ? "path" : "train", "give either path (a tokenizer.json) or train (exactly one)");
  c.eos_token = t.get_string("eos_token", "");
  c.add_bos = t.get_bool("add_bos", c.add_bos);
  c.add_eos = t.get_bool("add_eos", c.add_eos);
  t.check_unknown_keys();
  c.num_shards = r.get_positive_int("num_shards", c.num_shards);
  c.valid_shards = r.get_nonnegative_int("valid_shards", c.valid_shards);
  c.test_shards = r.get_nonnegative_int("test_shards", c.test_shards);
  c.min_doc_chars = r.get_nonnegative_int("min_doc_chars", c.min_doc_chars);
  c.max_row_bytes = r.get_positive_int("max_row_bytes", c.max_row_bytes);
  c.max_doc_tokens = r.get_nonnegative_int("max_doc_tokens", c.max_doc_tokens);
  c.seed = static_cast<uint64_t>(r.get_nonnegative_int("seed", static_cast<int64_t>(c.seed)));
  if (c.valid_shards + c.test_shards >= c.num_shards * static_cast<int64_t>(c.sources.size()))
    r.fail("num_shards", fmt::format("{} shards in all leave none for training after valid_shards {} + test_shards {}",
                                     c.num_shards * static_cast<int64_t>(c.sources.size()), c.valid_shards, c.test_shards));
  return c;
}

PretrainPrepResult prepare_pretrain_data(const PretrainPrepConfig& cfg, const std::string& resolved_config,
                                         int64_t sample, bool force, std::FILE* log) {
  PretrainPrepResult res;
  const fs::path out = prep_output_dir(cfg.output_dir, sample);
  res.output_dir = out.string();
  res.blend_path = (out / "blend.json").string();
  res.tokenizer_path = (out / "tokenizer" / "tokenizer.json").string();

  std::vector<std::string> inputs;
  for (const PrepSource& s : cfg.sources) inputs.insert(inputs.end(), s.files.begin(), s.files.end());
  const std::string fingerprint =
      prep_fingerprint(resolved_config, sample, inputs, {cfg.tokenizer_path, cfg.blend_path});
  const io::FileLock lock = lock_prep_output(out, "data prep pretrain", log);
  if (auto meta = up_to_date_output(out, fingerprint, res.blend_path, force)) {
    res.documents = meta->value("num_documents", int64_t{0});
    res.tokens = meta->value("num_tokens", int64_t{0});
    res.unigram_entropy_nats = meta->value("unigram_entropy_nats", 0.0);
    res.up_to_date = true;
    return res;
  }

  io::StagedDir staged(out);  // also removes the staging directories of killed earlier runs
  const fs::path& tmp = staged.path();
  fs::create_directories(tmp / "tokenizer");

  Tokenizer tok = make_tokenizer(cfg, sample, log);
  if (!cfg.eos_token.empty()) tok.set_eos_token(cfg.eos_token);
  std::optional<int32_t> eos = tok.eos_token_id(), bos = tok.bos_token_id();
  if (cfg.add_eos && !eos) throw InputError("tokenizer: no EOS token (set tokenizer.eos_token or add_eos: false)");
  if (cfg.add_bos && !bos) throw InputError("tokenizer: no BOS token (set add_bos: false)");
  tok.save((tmp / "tokenizer" / "tokenizer.json").string());
  const int64_t V = tok.vocab_size();
  const TokenDType token_dtype = optimal_token_dtype(V);
  const bool keep_unigrams = V * cfg.num_shards * static_cast<int64_t>(cfg.sources.size()) <= kMaxUnigramCells;

  std::vector<Shard> shards;
  for (const PrepSource& src : cfg.sources) {
    fs::create_directories(tmp / "datasets" / src.name);
    std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders;
    size_t first = shards.size();
    for (int64_t k = 0; k < cfg.num_shards; ++k) {
      std::string rel = fmt::format("datasets/{}/shard_{:06d}", src.name, k);
      builders.push_back(std::make_unique<IndexedDatasetBuilder>((tmp / rel).string(), token_dtype));
      Shard s;
      s.source = src.name, s.prefix = (out / rel).string(), s.weight = src.weight;
      if (keep_unigrams) s.unigram.assign(static_cast<size_t>(V), 0);
      shards.push_back(std::move(s));
    }
    DocumentStream docs(src, cfg.text_field, sample, cfg.max_row_bytes);
    ProgressBar bar(fmt::format("tokenizing {}", src.name), 0, "docs", log);
    int64_t index = 0;
    for (std::vector<std::string> batch = docs.next(kBatchDocuments); !batch.empty(); batch = docs.next(kBatchDocuments)) {
      std::vector<std::string> kept;
      for (std::string& t : batch) {
        if (static_cast<int64_t>(t.size()) < cfg.min_doc_chars) {
          ++res.skipped_documents;
          continue;
        }
        kept.push_back(std::move(t));
      }
      std::vector<std::vector<int32_t>> ids = tok.encode_batch(kept);
      int64_t batch_tokens = 0;
      for (std::vector<int32_t>& d : ids) {
        if (cfg.add_bos) d.insert(d.begin(), *bos);
        if (cfg.add_eos && !d.empty()) d.push_back(*eos);
        if (cfg.max_doc_tokens > 0 && static_cast<int64_t>(d.size()) > cfg.max_doc_tokens)
          d.resize(static_cast<size_t>(cfg.max_doc_tokens));  // after the EOS, as Nemotron's data prep does
        if (d.empty()) {
          ++res.skipped_documents;
          continue;
        }
        size_t k = static_cast<size_t>(index++ % cfg.num_shards);
        builders[k]->add_document(std::span<const int32_t>(d));
        Shard& s = shards[first + k];
        ++s.documents;
        s.tokens += static_cast<int64_t>(d.size());
        for (int32_t id : d)
          if (keep_unigrams) ++s.unigram[static_cast<size_t>(id)];
        batch_tokens += static_cast<int64_t>(d.size());
      }
      bar.advance(static_cast<int64_t>(batch.size()), batch_tokens);
    }
    bar.finish();
    for (auto& b : builders) b->finalize();
    if (index == 0) throw InputError(fmt::format("sources: {}: no documents (after filters)", src.name));
  }

  // Splits: shuffle the non-empty shards, then test, valid, and the rest for training.
  std::vector<size_t> pool;
  for (size_t i = 0; i < shards.size(); ++i)
    if (shards[i].documents > 0) pool.push_back(i);
  if (static_cast<int64_t>(pool.size()) <= cfg.valid_shards + cfg.test_shards)
    throw InputError(fmt::format("num_shards: only {} shard(s) received documents, too few for valid_shards {} + "
                                 "test_shards {} + training (use fewer shards or more documents)",
                                 pool.size(), cfg.valid_shards, cfg.test_shards));
  Philox rng(cfg.seed, 77);
  for (size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[rng.bits(i) % i]);
  BlendPerSplit blends;
  auto take = [&](size_t begin, size_t end) {
    Blend b;
    std::vector<double> w;
    for (size_t i = begin; i < end; ++i) b.prefixes.push_back(shards[pool[i]].prefix), w.push_back(shards[pool[i]].weight);
    b.weights = w;
    return b;
  };
  size_t nt = static_cast<size_t>(cfg.test_shards), nv = static_cast<size_t>(cfg.valid_shards);
  if (nt > 0) blends[2] = take(0, nt);
  if (nv > 0) blends[1] = take(nt, nt + nv);
  blends[0] = take(nt + nv, pool.size());
  write_blend_json((tmp / "blend.json").string(), blends);

  // Statistics and the unigram baseline of the training split.
  std::vector<int64_t> train_counts(keep_unigrams ? static_cast<size_t>(V) : 0, 0);
  int64_t train_tokens = 0;
  for (size_t i = nt + nv; i < pool.size(); ++i) {
    const Shard& s = shards[pool[i]];
    train_tokens += s.tokens;
    for (size_t v = 0; v < train_counts.size(); ++v) train_counts[v] += s.unigram[v];
  }
  double entropy = 0;
  for (int64_t c : train_counts)
    if (c > 0) {
      double p = static_cast<double>(c) / static_cast<double>(train_tokens);
      entropy -= p * std::log(p);
    }
  nlohmann::json per_source = nlohmann::json::object();
  for (const Shard& s : shards) {
    res.documents += s.documents;
    res.tokens += s.tokens;
    auto& e = per_source[s.source];
    if (e.is_null()) e = {{"documents", 0}, {"tokens", 0}, {"weight", s.weight}};
    e["documents"] = e["documents"].get<int64_t>() + s.documents;
    e["tokens"] = e["tokens"].get<int64_t>() + s.tokens;
  }
  res.unigram_entropy_nats = entropy;
  nlohmann::json meta = {
      {"type", "PretrainBlendsArtifact"},
      {"path", out.string()},
      {"created_at", iso_time_now()},
      {"producer", "local"},
      {"fingerprint", fingerprint},
      {"blend", "blend.json"},
      {"tokenizer", {{"path", "tokenizer/tokenizer.json"}, {"vocab_size", V}, {"eos_token_id", eos ? *eos : -1},
                     {"bos_token_id", bos ? *bos : -1}, {"add_bos", cfg.add_bos}, {"add_eos", cfg.add_eos}}},
      {"token_dtype", token_dtype_name(token_dtype)},
      {"num_documents", res.documents},
      {"num_tokens", res.tokens},
      {"skipped_documents", res.skipped_documents},
      {"train_tokens", train_tokens},
      {"unigram_entropy_nats", keep_unigrams ? nlohmann::json(entropy) : nlohmann::json(nullptr)},
      {"sources", per_source},
      {"config", parse_json<nlohmann::json>(resolved_config, "the resolved config")}};
  commit_prep_output(staged, out, meta);
  return res;
}

}  // namespace nemotron::data
