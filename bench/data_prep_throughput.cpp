// Data-prep throughput (a benchmark, not a test): the whole `data prep pretrain` path (generate,
// tokenize on all cores, append EOD, write .bin/.idx shards and the blend) on the bundled corpus.
// usage: data_prep_throughput [--documents 50000] [--vocab 4096] [--threads N]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include "core/config_tree.h"
#include "data/pretrain_prep.h"

using namespace nemotron;

int main(int argc, char** argv) {
  int64_t documents = 50000, vocab = 4096;
  int threads = omp_get_max_threads();
  CLI::App app{"data prep throughput"};
  app.add_option("--documents", documents, "documents of the bundled corpus");
  app.add_option("--vocab", vocab, "BPE vocabulary trained first (not timed)");
  app.add_option("--threads", threads, "OpenMP threads for tokenization");
  CLI11_PARSE(app, argc, argv);
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / fmt::format("nm_prep_bench_{}", ::getpid());
  std::string yaml = fmt::format(R"(output_dir: {}/out
sources:
  - name: arithmetic
    generator: {{seed: 1, num_documents: {}, problems_per_document: 8, max_digits: 4}}
tokenizer:
  train: {{vocab_size: {}, special_tokens: ["</s>"], documents: 2000}}
  eos_token: "</s>"
num_shards: 8
)", dir.string(), documents, vocab);
  try {
    nlohmann::json tree = parse_yaml_text(yaml, "bench");
    ConfigReader r(tree, "bench");
    data::PretrainPrepConfig cfg = data::PretrainPrepConfig::read(r);
    omp_set_num_threads(threads);
    auto t0 = std::chrono::steady_clock::now();
    data::PretrainPrepResult res = data::prepare_pretrain_data(cfg, tree.dump(), 0, true, nullptr);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("data prep: %lld documents, %lld tokens, %d threads: %.2f s end to end, %.2f M tokens/s "
                "(includes corpus generation and a %lld-vocab BPE training on 2000 documents)\n",
                static_cast<long long>(res.documents), static_cast<long long>(res.tokens), threads, sec,
                static_cast<double>(res.tokens) / sec / 1e6, static_cast<long long>(vocab));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}
