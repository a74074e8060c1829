// Log-likelihood evaluation throughput on one GPU (a benchmark, not a test): --items synthetic
// multiple-choice items (a context of about --context-len random tokens and --choices choices of
// about --choice-len tokens each, as HellaSwag-style lm-eval items are) scored by
// eval::score_tokenized_choices, the code `nemotron <family> eval` scores multiple_choice tasks
// with (one request per choice, packed --row-tokens to a row, --rows-per-forward rows to a forward,
// the log-softmax at the targets on the GPU), on the train-step benchmark's configs with random
// weights, bf16 by default. Prints items/s, tokens/s and the per-forward batch for each entry of
// --sweep (rows per forward), and the peak GPU memory; appends one JSON line to --results.
// usage: cuda_eval_loglik -c bench/configs/hybrid_dense_125m.yaml [--items 2000] [--context-len 96]
//                         [--choice-len 12] [--choices 4] [--row-tokens 2048] [--sweep 1,4,16,32]
//                         [--dtype bfloat16] [--results bench/results/eval_loglik.jsonl]
//                         [--hf-config-out FILE --items-out FILE (for tools/bench_transformers_loglik.py)]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "bench_io.h"
#include "backend/cuda/cuda_backend.h"
#include "bench_models.h"
#include "core/version.h"
#include "eval/task_scoring.h"
#include "model/model_config.h"

using namespace nemotron;
using bench::seconds_since;

namespace {

// Item i: a context of context_len +- 25% tokens and `choices` choices of choice_len +- 50%, each
// from its own range of one Philox stream (the same items in every run and in the Python reference,
// which reads them from --items-out).
std::vector<eval::TokenizedChoiceItem> synthetic_items(int64_t n, int64_t context_len, int64_t choice_len,
                                                       int64_t choices, int64_t vocab) {
  std::vector<eval::TokenizedChoiceItem> items(static_cast<size_t>(n));
  const Philox lengths(99);
  uint64_t draw = 0, offset = 0;
  auto around = [&](int64_t mean, int64_t spread) {
    return std::max<int64_t>(1, mean - spread + static_cast<int64_t>(lengths.bits(draw++) % static_cast<uint64_t>(2 * spread + 1)));
  };
  for (int64_t i = 0; i < n; ++i) {
    eval::TokenizedChoiceItem& it = items[static_cast<size_t>(i)];
    const int64_t L = around(context_len, context_len / 4);
    const std::vector<int32_t> ctx = bench::random_tokens(L, vocab, 7, offset);
    offset += static_cast<uint64_t>(L);
    for (int64_t c = 0; c < choices; ++c) {
      const int64_t C = around(choice_len, choice_len / 2);
      train::ContinuationRequest r;
      r.tokens = ctx;
      r.prompt_tokens = L;
      const std::vector<int32_t> cont = bench::random_tokens(C, vocab, 7, offset);
      offset += static_cast<uint64_t>(C);
      r.tokens.insert(r.tokens.end(), cont.begin(), cont.end());
      it.choices.push_back(std::move(r));
      it.choice_bytes.push_back(static_cast<double>(4 * C));  // about 4 bytes a token
    }
    it.gold = static_cast<int64_t>(lengths.bits(draw++) % static_cast<uint64_t>(choices));
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "bench/configs/hybrid_dense_125m.yaml", results, dtype_name = "bfloat16", sweep = "1,4,16,32";
  std::string hf_config_out, items_out;
  int64_t n_items = 2000, context_len = 96, choice_len = 12, choices = 4, row_tokens = 2048, reps = 2;
  CLI::App app{"CUDA log-likelihood eval benchmark: multiple-choice items through eval's scoring"};
  app.add_option("-c,--config", config, "model config (YAML with a model: section, or config.json)");
  app.add_option("--items", n_items, "multiple-choice items scored per measurement")->check(CLI::PositiveNumber);
  app.add_option("--context-len", context_len, "mean context tokens per item (+-25%)")->check(CLI::PositiveNumber);
  app.add_option("--choice-len", choice_len, "mean tokens per choice (+-50%)")->check(CLI::PositiveNumber);
  app.add_option("--choices", choices, "choices per item")->check(CLI::PositiveNumber);
  app.add_option("--row-tokens", row_tokens, "tokens per packed row (eval's evaluation.row_tokens)")->check(CLI::PositiveNumber);
  app.add_option("--sweep", sweep, "rows per forward to measure (eval's evaluation.rows_per_forward), comma-separated");
  app.add_option("--reps", reps, "timed passes over the items per sweep point (the best is reported)")->check(CLI::PositiveNumber);
  app.add_option("--dtype", dtype_name, "bfloat16 or float32")->check(CLI::IsMember({"bfloat16", "float32"}));
  app.add_option("--results", results, "append one JSON line with the figures to this file");
  app.add_option("--hf-config-out", hf_config_out, "also write the config as a Hugging Face config.json here");
  app.add_option("--items-out", items_out, "also write the items as JSONL token ids here (context, choices, gold)");
  CLI11_PARSE(app, argc, argv);
  try {
    const model::ModelConfig cfg = model::load_model_config(config);
    const std::vector<eval::TokenizedChoiceItem> items =
        synthetic_items(n_items, context_len, choice_len, choices, cfg.vocab_size);
    if (!hf_config_out.empty()) std::ofstream(hf_config_out) << model::model_config_to_hf_json(cfg).dump(2) << "\n";
    if (!items_out.empty()) {
      std::ofstream f(items_out);
      for (const eval::TokenizedChoiceItem& it : items) {
        const auto& first = it.choices.front();
        nlohmann::json row = {{"context", std::vector<int32_t>(first.tokens.begin(), first.tokens.begin() + first.prompt_tokens)},
                              {"choices", nlohmann::json::array()},
                              {"gold", it.gold}};
        for (const auto& r : it.choices)
          row["choices"].push_back(std::vector<int32_t>(r.tokens.begin() + r.prompt_tokens, r.tokens.end()));
        f << row.dump() << "\n";
      }
    }
    int64_t request_tokens = 0, scored_tokens = 0;
    for (const auto& it : items)
      for (const auto& r : it.choices)
        request_tokens += static_cast<int64_t>(r.tokens.size()) - 1,
            scored_tokens += static_cast<int64_t>(r.tokens.size()) - r.prompt_tokens;
    if (cuda::device_count() == 0) {
      std::fprintf(stderr, "no CUDA device visible\n");
      return 2;
    }
    const DType dt = dtype_name == "bfloat16" ? DType::bf16 : DType::f32;
    cuda::CudaBackend gpu(0);
    auto net = bench::make_bench_model(cfg, gpu, dt);
    std::printf("%s: %.1fM parameters, %s on %s; %lld items x %lld choices: %lld request tokens, %lld scored\n",
                config.c_str(), static_cast<double>(net->params().numel()) / 1e6, dtype_name.c_str(), gpu.name().c_str(),
                static_cast<long long>(n_items), static_cast<long long>(choices), static_cast<long long>(request_tokens),
                static_cast<long long>(scored_tokens));
    // acc: the same at every batch but for bf16 near ties (the rows of a forward do not interact).
    std::printf("%10s %10s %12s %14s %12s %10s %8s %7s\n", "rows/fwd", "items/s", "tokens/s", "scored tok/s", "tokens/fwd",
                "forwards", "filled", "acc");
    nlohmann::json points = nlohmann::json::array();
    double best_items_s = 0;
    int64_t best_rows = 0;
    for (int64_t rows : bench::parse_sizes(sweep)) {
      train::ContinuationStats st;
      eval::LoglikelihoodModel m{net.get(), nullptr, row_tokens, 0, std::nullopt, rows, &st};
      // Warm-up: the caching allocator's blocks and the kernels' first launches, at this shape.
      const std::vector<eval::TokenizedChoiceItem> warm(items.begin(), items.begin() + std::min<int64_t>(n_items, 4 * rows * row_tokens / std::max<int64_t>(1, choices * (context_len + choice_len))));
      eval::score_tokenized_choices(m, "warmup", warm);
      double best = 1e300, acc = 0;
      for (int64_t r = 0; r < reps; ++r) {
        st = {};
        const auto t0 = std::chrono::steady_clock::now();
        const eval::TaskResult res = eval::score_tokenized_choices(m, "synthetic", items);
        best = std::min(best, seconds_since(t0));  // ends with every score on the host
        if (res.items != n_items) throw std::runtime_error("scored a different number of items");
        acc = res.metric("acc")->value;
      }
      const double items_s = static_cast<double>(n_items) / best;
      const double tok_s = static_cast<double>(st.tokens) / best;
      const double per_fwd = static_cast<double>(st.rows * row_tokens) / static_cast<double>(st.forwards);
      const double filled = static_cast<double>(st.tokens) / static_cast<double>(st.rows * row_tokens);
      std::printf("%10lld %10.1f %12.0f %14.0f %12.0f %10lld %7.1f%% %7.4f\n", static_cast<long long>(rows), items_s, tok_s,
                  static_cast<double>(st.scored_tokens) / best, per_fwd, static_cast<long long>(st.forwards), 100 * filled,
                  acc);
      std::fflush(stdout);
      points.push_back({{"rows_per_forward", rows}, {"seconds", best}, {"items_per_s", items_s}, {"tokens_per_s", tok_s},
                        {"scored_tokens_per_s", static_cast<double>(st.scored_tokens) / best},
                        {"tokens_per_forward", per_fwd}, {"forwards", st.forwards}, {"row_fill", filled}, {"acc", acc}});
      if (items_s > best_items_s) best_items_s = items_s, best_rows = rows;
    }
    const double peak_gib = static_cast<double>(gpu.peak_bytes()) / (1ull << 30);
    std::printf("best: %.1f items/s at %lld rows of %lld tokens per forward | peak GPU memory %.2f GiB\n", best_items_s,
                static_cast<long long>(best_rows), static_cast<long long>(row_tokens), peak_gib);
    nlohmann::json rec = {{"bench", "cuda_eval_loglik"}, {"config", config}, {"dtype", dtype_name},
                          {"items", n_items}, {"context_len", context_len}, {"choice_len", choice_len},
                          {"choices", choices}, {"row_tokens", row_tokens}, {"request_tokens", request_tokens},
                          {"scored_tokens", scored_tokens}, {"sweep", points}, {"best_items_per_s", best_items_s},
                          {"best_rows_per_forward", best_rows}, {"peak_gpu_gib", peak_gib}, {"device", gpu.name()},
                          {"params", net->params().numel()}, {"version", NEMOTRON_VERSION},
                          {"commit", bench::commit_or_unknown()}};
    bench::append_result(results, rec);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
