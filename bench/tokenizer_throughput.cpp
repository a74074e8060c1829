// Tokenizer throughput: tokens/s of encode() on one thread and of encode_batch() on all OpenMP
// threads, over real text files (a folder of source code or docs, a JSON list of strings, JSONL
// with a "text" field), with a tokenizer.json or one trained here (the training time is reported).
// Each measurement starts from a freshly loaded tokenizer (cold word cache) unless marked warm.
//
//   tokenizer_throughput --text /usr/lib/python3.11 --mb 20 --train-vocab 32000 --train-mb 5
//   tokenizer_throughput --text corpus.jsonl --tokenizer tokenizer.json
// --save-tokenizer / --save-docs write the tokenizer and the documents (a JSON list) so that another
// implementation can be timed on the same input; "ids fnv1a" hashes every id in order, to compare.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/bpe_trainer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_utf8.h"

namespace fs = std::filesystem;
using nemotron::data::Tokenizer;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Appends documents from `path` until `budget` bytes are collected.
void collect(const fs::path& path, std::vector<std::string>& docs, size_t& bytes, size_t budget) {
  auto add = [&](std::string s) {
    if (bytes >= budget || s.empty() || nemotron::data::utf8_invalid_at(s) != std::string::npos) return;
    bytes += s.size();
    docs.push_back(std::move(s));
  };
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".py" || ext == ".txt" || ext == ".md" || ext == ".rst" || ext == ".c" ||
                                  ext == ".h" || ext == ".html"))
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) add(read_file(f));
  } else if (path.extension() == ".json") {
    for (auto& s : nlohmann::json::parse(read_file(path))) add(s.get<std::string>());
  } else if (path.extension() == ".jsonl") {
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) add(nlohmann::json::parse(line).at("text").get<std::string>());
  } else {
    add(read_file(path));
  }
}

uint64_t fnv1a(uint64_t h, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  return h;
}

void report(const char* what, size_t tokens, size_t bytes, double secs) {
  std::printf("%-34s %10.0f tokens/s  %7.2f MB/s  (%zu tokens, %.3f s)\n", what, tokens / secs, bytes / secs / 1e6,
              tokens, secs);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> texts;
  std::string tokenizer_path, save_tokenizer, save_docs;
  double mb = 20, train_mb = 5;
  int train_vocab = 32000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--text") texts.push_back(next());
    else if (a == "--tokenizer") tokenizer_path = next();
    else if (a == "--save-tokenizer") save_tokenizer = next();
    else if (a == "--save-docs") save_docs = next();
    else if (a == "--mb") mb = std::stod(next());
    else if (a == "--train-mb") train_mb = std::stod(next());
    else if (a == "--train-vocab") train_vocab = std::stoi(next());
    else {
      std::fprintf(stderr, "usage: %s --text PATH... [--mb N] [--tokenizer tokenizer.json | --train-vocab V "
                           "--train-mb M] [--save-tokenizer P] [--save-docs P]\n", argv[0]);
      return 2;
    }
  }
  if (texts.empty()) texts.push_back("/usr/lib/python3.11");
  std::vector<std::string> docs;
  size_t bytes = 0;
  for (const std::string& t : texts) collect(t, docs, bytes, static_cast<size_t>(mb * 1e6));
  if (docs.empty()) {
    std::fprintf(stderr, "error: no UTF-8 text found\n");
    return 2;
  }
  std::printf("text: %zu documents, %.2f MB; %d OpenMP threads\n", docs.size(), bytes / 1e6, omp_get_max_threads());
  if (!save_docs.empty()) std::ofstream(save_docs) << nlohmann::json(docs).dump() << "\n";

  std::string json_text;
  try {
    if (!tokenizer_path.empty()) {
      json_text = Tokenizer::load(tokenizer_path).to_json_text();
      std::printf("tokenizer: %s\n", tokenizer_path.c_str());
    } else {
      std::vector<std::string> train_docs;
      size_t train_bytes = 0;
      for (const std::string& d : docs) {
        if (train_bytes >= train_mb * 1e6) break;
        train_docs.push_back(d);
        train_bytes += d.size();
      }
      nemotron::data::BpeTrainConfig cfg;
      cfg.vocab_size = train_vocab;
      cfg.special_tokens = {"<s>", "</s>"};
      const double t0 = now_s();
      const Tokenizer trained = nemotron::data::train_bpe(train_docs, cfg);
      std::printf("train_bpe: vocab %d on %.2f MB in %.2f s\n", trained.vocab_size(), train_bytes / 1e6, now_s() - t0);
      json_text = trained.to_json_text();
    }
    if (!save_tokenizer.empty()) std::ofstream(save_tokenizer) << json_text;

    {
      const Tokenizer tok = Tokenizer::from_json_text(json_text);
      size_t tokens = 0;
      const double t0 = now_s();
      for (const std::string& d : docs) tokens += tok.encode(d).size();
      report("encode, 1 thread (cold cache)", tokens, bytes, now_s() - t0);
      const double t1 = now_s();
      tokens = 0;
      for (const std::string& d : docs) tokens += tok.encode(d).size();
      report("encode, 1 thread (warm cache)", tokens, bytes, now_s() - t1);
    }
    {
      const Tokenizer tok = Tokenizer::from_json_text(json_text);
      double t0 = now_s();
      auto out = tok.encode_batch(docs);
      double secs = now_s() - t0;
      size_t tokens = 0;
      for (const auto& v : out) tokens += v.size();
      char label[64];
      std::snprintf(label, sizeof label, "encode_batch, %d threads (cold)", omp_get_max_threads());
      report(label, tokens, bytes, secs);
      uint64_t h = 0xCBF29CE484222325ull;
      for (const auto& v : out) h = fnv1a(h, v);
      std::printf("ids fnv1a: %016llx\n", static_cast<unsigned long long>(h));
      t0 = now_s();
      out = tok.encode_batch(docs);
      secs = now_s() - t0;
      std::snprintf(label, sizeof label, "encode_batch, %d threads (warm)", omp_get_max_threads());
      report(label, tokens, bytes, secs);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
