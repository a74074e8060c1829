// SFT data-prep throughput (a benchmark, not a test): the whole `data prep sft` path on the
// bundled chat data (generate rows, template, mask, tokenize on all cores, pack, write zstd
// Parquet shards, splits, blend.json), with a BPE tokenizer trained first on the bundled
// pretraining corpus like the tiny recipe's (not timed). Prints rows/s, tokens/s, the packing
// efficiency, and the sequence lengths per kind of row.
// usage: sft_data_prep_throughput [--rows 20000] [--pack-size 512] [--shards 8] [--algorithm first_fit_shuffle]
//                                 [--vocab 1024] [--threads N] [--tokenizer tokenizer.json]
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/config_tree.h"
#include "data/bpe_trainer.h"
#include "data/sft_prep.h"
#include "data/synthetic_chat.h"
#include "data/tokenizer.h"

using namespace nemotron;

namespace {

std::string row_kind(const data::OrderedJson& row) {
  const auto& m = row["messages"];
  bool reasoning = false, calls = false;
  int users = 0, results = 0;
  for (const auto& x : m) {
    reasoning = reasoning || x.contains("reasoning_content");
    calls = calls || x.contains("tool_calls");
    users += x["role"] == "user";
    results += x["role"] == "tool";
  }
  if (calls) return fmt::format("{} call{}{}", results > 1 ? "parallel" : "tool", results > 1 ? "s" : "",
                                row.contains("tools") ? " + schema" : "");
  if (reasoning) return "reasoning";
  return users > 1 ? "two turns" : "one turn";
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 20000, pack_size = 512, vocab = 1024, shards = 8;
  std::string algorithm = "first_fit_shuffle", tokenizer;
  int threads = omp_get_max_threads();
  CLI::App app{"SFT data prep throughput"};
  app.add_option("--rows", rows, "chat rows of the bundled data");
  app.add_option("--pack-size", pack_size, "bin capacity in tokens");
  app.add_option("--shards", shards, "output shards (each packed on its own)");
  app.add_option("--algorithm", algorithm, "first_fit_shuffle, first_fit_decreasing or concatenative");
  app.add_option("--vocab", vocab, "BPE vocabulary trained first (not timed) when no --tokenizer is given");
  app.add_option("--tokenizer", tokenizer, "an existing tokenizer.json (e.g. the tiny pretraining data prep's)");
  app.add_option("--threads", threads, "OpenMP threads");
  CLI11_PARSE(app, argc, argv);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("nm_sft_prep_bench_{}", ::getpid());
  fs::create_directories(dir);
  try {
    if (tokenizer.empty()) {
      data::CorpusConfig corpus;
      corpus.num_documents = 2000;
      std::vector<std::string> texts;
      for (data::Document& d : data::generate_pretrain_corpus(corpus)) texts.push_back(std::move(d.text));
      data::BpeTrainConfig b;
      b.vocab_size = static_cast<int32_t>(vocab);
      b.special_tokens = {"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"};
      b.min_frequency = 2;
      tokenizer = (dir / "tokenizer.json").string();
      data::train_bpe(texts, b).save(tokenizer);
    }
    std::string yaml = fmt::format(R"(output_dir: {}/out
sources:
  - name: arithmetic_chat
    generator: {{seed: 1234, first_problem: 1000000, num_examples: {}, max_digits: 3}}
tokenizer: {{model: {}}}
pack_size: {}
algorithm: {}
used_in_filter: nano_v3
num_shards: {}
)", dir.string(), rows, tokenizer, pack_size, algorithm, shards);
    nlohmann::json tree = parse_yaml_text(yaml, "bench");
    ConfigReader r(tree, "bench");
    data::SftPrepConfig cfg = data::SftPrepConfig::read(r);
    r.check_unknown_keys();
    omp_set_num_threads(threads);
    auto t0 = std::chrono::steady_clock::now();
    data::SftPrepResult res = data::prepare_sft_data(cfg, tree.dump(), 0, true, nullptr);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("sft data prep: %lld rows (%lld dropped by the used_in filter), %lld sequences, %lld tokens, %d threads: "
                "%.2f s end to end, %.0f rows/s, %.2f M tokens/s (row generation included)\n",
                static_cast<long long>(res.rows_in), static_cast<long long>(res.rows_dropped),
                static_cast<long long>(res.sequences), static_cast<long long>(res.tokens), threads, sec,
                static_cast<double>(res.rows_in) / sec, static_cast<double>(res.tokens) / sec / 1e6);
    std::printf("packing (%s, pack_size %lld): %lld bins, %.2f sequences per bin, efficiency %.2f%%, %lld sequences "
                "truncated to pack_size\n",
                algorithm.c_str(), static_cast<long long>(pack_size), static_cast<long long>(res.bins),
                static_cast<double>(res.sequences) / static_cast<double>(res.bins), 100 * res.packing_efficiency,
                static_cast<long long>(res.truncated_pack_size));

    // Sequence lengths per kind of row (tokens, before truncation).
    const data::Tokenizer tok = data::Tokenizer::load(tokenizer);
    std::map<std::string, std::vector<int64_t>> lengths;
    data::CorpusConfig gen = *cfg.sources[0].generator;
    gen.num_examples = std::min<int64_t>(rows, 4000);
    data::SftRowOptions opt = cfg.rows;
    opt.used_in_filter.clear();
    for (const data::OrderedJson& row : data::generate_chat_rows(gen))
      for (const data::MaskedSequence& s : data::process_sft_row(row, tok, opt).sequences)
        lengths[row_kind(row)].push_back(static_cast<int64_t>(s.input_ids.size()));
    for (auto& [kind, v] : lengths) {
      std::sort(v.begin(), v.end());
      std::printf("  %-20s %5zu sequences, tokens: median %lld, p90 %lld, max %lld\n", kind.c_str(), v.size(),
                  static_cast<long long>(v[v.size() / 2]), static_cast<long long>(v[v.size() * 9 / 10]),
                  static_cast<long long>(v.back()));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}
