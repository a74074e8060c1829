// Throughput of the pretraining data layer: writing and reading Megatron `.bin/.idx` files
// (tokens/s), building GPTDataset indices (document, sample, shuffle), drawing samples, and
// building blending indices. Usage: data_index_throughput [million_tokens=20] [dir=/tmp]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/indexed_dataset_builder.h"

using namespace nemotron;
using namespace nemotron::data;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Documents of 1..2048 tokens (mean ~1024) holding ids below 50000, `total` tokens in all.
std::vector<std::vector<int32_t>> make_documents(int64_t total) {
  Philox rng(1);
  std::vector<std::vector<int32_t>> docs;
  uint64_t k = 0;
  for (int64_t n = 0; n < total;) {
    const int64_t len = std::min<int64_t>(1 + rng.bits(k++) % 2048, total - n);
    std::vector<int32_t> doc(static_cast<size_t>(len));
    for (auto& t : doc) t = static_cast<int32_t>(rng.bits(k++) % 50000);
    docs.push_back(std::move(doc));
    n += len;
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t total = static_cast<int64_t>((argc > 1 ? std::atof(argv[1]) : 20.0) * 1e6);
  const std::string dir = (argc > 2 ? argv[2] : "/tmp") + std::string("/nemotron_data_bench");
  std::filesystem::create_directories(dir);
  const auto docs = make_documents(total);
  std::printf("data_index_throughput: %lld tokens in %zu documents\n", static_cast<long long>(total), docs.size());

  for (TokenDType dtype : {TokenDType::i32, TokenDType::u16}) {
    const std::string prefix = dir + "/bench_" + token_dtype_name(dtype);
    auto t0 = std::chrono::steady_clock::now();
    {
      IndexedDatasetBuilder b(prefix, dtype);
      for (const auto& d : docs) b.add_document(d);
      b.finalize();
    }
    const double write_s = seconds_since(t0);
    const double mb = static_cast<double>(std::filesystem::file_size(prefix + ".bin")) / 1e6;
    std::printf("  write %-6s  %8.1f M tokens/s  %7.1f MB/s  (%.2f s, incl. fsync)\n", token_dtype_name(dtype),
                total / write_s / 1e6, mb / write_s, write_s);

    t0 = std::chrono::steady_clock::now();
    IndexedDataset ds = IndexedDataset::open(prefix);
    const double open_s = seconds_since(t0);
    std::vector<int32_t> buf;
    int64_t checksum = 0;
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < ds.num_sequences(); ++i) {
      buf.resize(static_cast<size_t>(ds.sequence_length(i)));
      ds.get(i, 0, -1, buf.data());
      checksum += buf.empty() ? 0 : buf.back();
    }
    const double read_s = seconds_since(t0);
    std::printf("  read  %-6s  %8.1f M tokens/s  (open + validate %.1f ms, %lld sequences; checksum %lld)\n",
                token_dtype_name(dtype), total / read_s / 1e6, open_s * 1e3,
                static_cast<long long>(ds.num_sequences()), static_cast<long long>(checksum));
  }

  auto source = std::make_shared<IndexedDataset>(IndexedDataset::open(dir + "/bench_int32"));
  for (double epochs : {1.0, 2.5}) {
    GptDatasetConfig cfg;
    cfg.sequence_length = 4096;
    const auto n = static_cast<int64_t>(epochs * static_cast<double>(total - 1) / 4096);
    auto t0 = std::chrono::steady_clock::now();
    GptDataset ds(source, 0, source->num_sequences(), n, Split::train, cfg);
    const double build_s = seconds_since(t0);
    std::printf("  GPT indices, L=4096, %lld samples (%lld epoch%s, separate last: %s): %.1f ms\n",
                static_cast<long long>(ds.size()), static_cast<long long>(ds.indices().num_epochs),
                ds.indices().num_epochs > 1 ? "s" : "", ds.indices().separate_final_epoch ? "yes" : "no",
                build_s * 1e3);
    std::vector<int64_t> text(static_cast<size_t>(ds.sample_length()));
    const int64_t draws = std::min<int64_t>(ds.size(), 2000);
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < draws; ++i) ds.sample(i, text.data());
    const double sample_s = seconds_since(t0);
    std::printf("  GPT samples (shuffled order): %8.1f k samples/s, %8.1f M tokens/s\n", draws / sample_s / 1e3,
                draws * 4097.0 / sample_s / 1e6);
  }

  std::vector<double> raw(128);
  for (size_t k = 0; k < raw.size(); ++k) raw[k] = 1.0 + static_cast<double>(k % 7);
  const auto weights = normalize_weights(raw);
  auto t0 = std::chrono::steady_clock::now();
  const BlendingIndices ix = build_blending_indices(weights, 1000000);
  std::printf("  blending indices, 128 datasets x 1M samples: %.1f ms (first dataset %d)\n", seconds_since(t0) * 1e3,
              static_cast<int>(ix.dataset_index[0]));
  std::filesystem::remove_all(dir);
  return 0;
}
