// `nemotron generate`: text from a checkpoint (native, iteration directory or Hugging Face) with
// the generation engine (engine/): one --prompt, one --chat message rendered with the recipe's
// chat template, or a JSONL file of "prompt"/"messages" rows written back as completions with
// their tokens and per-token log-probs. The model runs through CachedStepModel (a paged KV cache
// and the Mamba states: each step computes only the new tokens), or with --recompute through
// RecomputeStepModel (the exact reference: every step recomputes the whole sequence), on the GPU
// (--device cuda, bf16 by default) or the CPU. The model loads through train::load_inference_model,
// as eval and serve load theirs.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/cpu/parallel.h"
#include "core/backend.h"
#include "cli/commands.h"
#include "cli/device_options.h"
#include "cli/inference_ranks.h"
#include "cli/launch.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "core/progress.h"
#include "data/chat_template.h"
#include "data/jsonl.h"
#include "data/prompt_encoding.h"
#include "data/tokenizer.h"
#include "engine/cached_step_model.h"
#include "engine/engine.h"
#include "engine/recompute_step_model.h"
#include "engine/request_codec.h"
#include "model/hybrid_model.h"
#include "train/compute_device.h"
#include "train/inference_model.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct GenerateOptions {
  std::string checkpoint, tokenizer, prompt, chat, input, output, chat_template = "auto", dtype = "auto",
              device = "auto";
  bool enable_thinking = false, ignore_eos = false, recompute = false;
  double temperature = 1.0, top_p = 1.0, presence_penalty = 0, frequency_penalty = 0;
  std::vector<std::string> logit_bias;  // "ID=BIAS" each
  int64_t top_k = 0, max_new_tokens = 128, max_slots = 8, max_seq_len = 4096;
  int tensor_parallel_size = 1;
  int expert_parallel_size = 1;
  std::string run_profile, env_file;  // --run: start the ranks from an env.toml profile
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
};

// --logit-bias ID=BIAS (repeatable), as OpenAI's logit_bias map.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const std::vector<std::string>& items) {
  std::vector<std::pair<int32_t, float>> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    size_t used_id = 0, used_bias = 0;
    int64_t id = -1;
    double bias = 0;
    try {
      if (eq == std::string::npos) throw std::invalid_argument("no =");
      id = std::stoll(item.substr(0, eq), &used_id);
      bias = std::stod(item.substr(eq + 1), &used_bias);
    } catch (const std::exception&) {
      used_id = 0;
    }
    const bool whole = used_id != 0 && used_id == eq && used_bias == item.size() - eq - 1;
    if (!whole || id < 0 || id > std::numeric_limits<int32_t>::max())
      throw InputError(fmt::format("--logit-bias: expected TOKEN_ID=BIAS (e.g. 42=-100), got \"{}\"", item));
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return out;
}

// The tokenizer: --tokenizer, else the one found beside the weights.
std::string tokenizer_path(const GenerateOptions& o, const train::InferenceModel& m) {
  if (!o.tokenizer.empty()) {
    if (!fs::exists(o.tokenizer)) throw InputError(fmt::format("--tokenizer {}: no such file", o.tokenizer));
    return o.tokenizer;
  }
  if (!m.tokenizer_path.empty()) return m.tokenizer_path;
  const fs::path expected = m.kind == "hf" ? fs::path(m.source) / "tokenizer.json"
                                           : fs::path(m.source) / "tokenizer" / "tokenizer.json";
  throw InputError(fmt::format(
      "{}: no tokenizer.json; pass --tokenizer FILE (e.g. the data prep output's tokenizer/tokenizer.json)",
      expected.string()));
}

// The prompt text of a chat: the messages rendered by the template, then its generation prompt.
std::string render(const data::ChatTemplate& f, const data::OrderedJson& messages, const data::OrderedJson& tools,
                   bool enable_thinking, const std::string& where) {
  data::ChatRenderOptions opt;
  opt.add_generation_prompt = true;
  opt.enable_thinking = enable_thinking;
  try {
    return data::render_chat(f, messages, tools, opt);
  } catch (const data::ChatTemplateError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
}

// A row of --input: its prompt text (and whether the template made it: then the tokenizer adds
// no special tokens, as HF apply_chat_template(tokenize=True) does not).
struct PromptRow {
  std::string text;
  bool chat = false;
  data::OrderedJson row;
};

std::vector<PromptRow> read_rows(const GenerateOptions& o, const data::ChatTemplate& f) {
  std::vector<PromptRow> rows;
  data::JsonlReader in(o.input);
  data::OrderedJson row;
  while (in.next_row(row)) {
    PromptRow r;
    if (row.contains("prompt")) {
      if (!row["prompt"].is_string())
        throw InputError(fmt::format("{}: \"prompt\": expected a string, got {}", in.where(), row["prompt"].type_name()));
      r.text = row["prompt"].get<std::string>();
    } else if (row.contains("messages")) {
      if (!row["messages"].is_array() || row["messages"].empty())
        throw InputError(fmt::format("{}: \"messages\": expected a non-empty array of messages", in.where()));
      r.text = render(f, row["messages"], row.contains("tools") ? row["tools"] : data::OrderedJson(), o.enable_thinking,
                      in.where());
      r.chat = true;
    } else {
      throw InputError(fmt::format("{}: expected a \"prompt\" string or a \"messages\" array", in.where()));
    }
    if (r.text.empty()) throw InputError(fmt::format("{}: empty prompt", in.where()));
    r.row = std::move(row);
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw InputError(fmt::format("{}: no rows", o.input));
  return rows;
}

void run_generate(const GenerateOptions& o) {
  const int given = !o.prompt.empty() + !o.chat.empty() + !o.input.empty();
  if (given != 1) throw InputError("generate: give exactly one of --prompt TEXT, --chat TEXT and --input FILE.jsonl");
  if (!o.input.empty() && o.output.empty()) throw InputError("--input needs --output FILE.jsonl");
  if (o.input.empty() && !o.output.empty()) throw InputError("--output goes with --input FILE.jsonl");
  if (o.max_new_tokens <= 0)
    throw InputError(fmt::format("--max-new-tokens: expected a positive integer, got {}", o.max_new_tokens));
  if (o.max_slots <= 0) throw InputError(fmt::format("--max-slots: expected a positive integer, got {}", o.max_slots));
  if (o.max_seq_len <= 1) throw InputError(fmt::format("--max-seq-len: expected an integer > 1, got {}", o.max_seq_len));
  const data::ChatTemplate chat_template = [&] {
    try {
      return data::ChatTemplate::for_model(o.chat_template, o.checkpoint);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--chat-template: {}", e.what()));
    }
  }();
  engine::SamplingParams params;
  params.temperature = o.temperature;
  params.top_p = o.top_p;
  params.top_k = o.top_k;
  params.max_new_tokens = o.max_new_tokens;
  params.stop = o.stop;
  params.seed = o.seed;
  params.presence_penalty = o.presence_penalty;
  params.frequency_penalty = o.frequency_penalty;
  params.logit_bias = parse_logit_bias(o.logit_bias);
  engine::validate(params, "sampling flags");
  InferenceRanks ranks = inference_ranks(o.tensor_parallel_size, o.expert_parallel_size);
  // Under tensor parallelism rank 0 alone reads the prompts (and writes the outputs); the others
  // get the requests it queues.
  std::vector<PromptRow> rows;
  if (!ranks.leader()) {
  } else if (!o.input.empty()) {
    rows = read_rows(o, chat_template);  // bad rows fail before the model loads
  } else if (!o.chat.empty()) {
    data::OrderedJson messages = data::OrderedJson::array({{{"role", "user"}, {"content", o.chat}}});
    rows.push_back({render(chat_template, messages, data::OrderedJson(), o.enable_thinking, "--chat"), true, {}});
  } else {
    rows.push_back({o.prompt, false, {}});
  }

  if (!fs::exists(o.checkpoint)) throw InputError(fmt::format("--checkpoint {}: no such directory", o.checkpoint));
  train::ComputeDevice dev = inference_device(o.device, ranks);
  const DType dt = train::inference_dtype(o.dtype, dev, "--dtype");
  train::InferenceModel m =
      train::load_inference_model(o.checkpoint, *dev.backend, dt, inference_shard_of(ranks, *dev.backend, o.checkpoint));
  const data::Tokenizer tok = data::Tokenizer::load(tokenizer_path(o, m));
  const model::ModelConfig& cfg = m.net->config();
  const std::string where_run = dev.backend->device().is_cpu()
                                    ? fmt::format("on {} CPU threads", cpu::num_threads())
                                    : fmt::format("on {}", dev.backend->name());
  std::printf("model: %s, %lld layers \"%s\", %lld parameters, %s %s (MTP heads, if any, unused)\n",
              m.source.c_str(), static_cast<long long>(cfg.num_layers()), cfg.hybrid_override_pattern.c_str(),
              static_cast<long long>(whole_parameter_count(m.net->params(), ranks.expert_size)), dtype_name(dt),
              where_run.c_str());
  for (const std::string& n : m.notes) std::printf("note: %s\n", n.c_str());
  if (ranks.expert_size > 1)
    std::printf("expert parallel: %d data ranks (each its share of the prompts, the routed experts split over them) "
                "x %d tensor ranks, each holding %lld parameters (its part of the model)\n",
                ranks.expert_size, ranks.tensor_size, static_cast<long long>(m.net->params().numel()));
  else if (ranks.distributed())
    std::printf("tensor parallel: %d ranks, each holding %lld parameters (its part of the model)\n", ranks.tensor_size,
                static_cast<long long>(m.net->params().numel()));

  params.stop_token_ids = o.stop_token_ids;
  if (!o.ignore_eos) {
    if (std::optional<int32_t> eos = tok.eos_token_id()) params.stop_token_ids.push_back(*eos);
    // The chat templates end an assistant turn with <|im_end|> (nano3).
    if (std::any_of(rows.begin(), rows.end(), [](const PromptRow& r) { return r.chat; }))
      if (std::optional<int32_t> end = tok.token_to_id("<|im_end|>")) params.stop_token_ids.push_back(*end);
  }

  Context run_ctx{dev.backend, nullptr, dt};
  run_ctx.groups = ranks.groups.get();
  std::unique_ptr<engine::StepModel> step;
  const engine::CachedStepModel* cached_step = nullptr;  // its decode graph replays go in the summary
  if (o.recompute) step = std::make_unique<engine::RecomputeStepModel>(*m.net, run_ctx, o.max_slots, o.max_seq_len);
  else {
    auto cached = std::make_unique<engine::CachedStepModel>(*m.net, run_ctx, o.max_slots, o.max_seq_len);
    std::printf("cache: %.1f MiB of KV blocks and Mamba states for %lld slots of up to %lld tokens (%.2f MiB per "
                "full-length sequence)\n",
                static_cast<double>(cached->state().bytes()) / (1 << 20), static_cast<long long>(o.max_slots),
                static_cast<long long>(o.max_seq_len),
                static_cast<double>(model::DecodeState::bytes_per_sequence(cfg, o.max_seq_len, dt)) / (1 << 20));
    cached_step = cached.get();
    step = std::move(cached);
  }
  engine::Engine engine(*step, &tok);
  // Rank 0 checks and queues each request; the others queue the same ones, as rank 0 sends them.
  // Under expert parallelism each data rank queues request i when i % E is its data coordinate
  // (rank 0 checks every request first, in an engine that never runs).
  const auto mine = [&](size_t i) { return static_cast<int>(i % static_cast<size_t>(ranks.expert_size)) == ranks.data_rank(); };
  engine::Engine checker(*step, &tok);
  nlohmann::json queued = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where =
        o.input.empty() ? (o.chat.empty() ? "--prompt" : "--chat") : fmt::format("{}: row {}", o.input, i + 1);
    engine::Request r;
    r.prompt = rows[i].chat ? tok.encode(rows[i].text) : data::encode_prompt(tok, rows[i].text);
    if (r.prompt.empty()) throw InputError(where + ": the prompt encodes to no tokens");
    r.params = params;
    r.id = i;
    if (ranks.distributed()) queued.push_back(engine::request_to_json(r));
    try {
      if (mine(i)) engine.add(std::move(r));
      else checker.add(std::move(r));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    }
  }
  if (ranks.distributed()) {
    std::string message = queued.dump();
    parallel::broadcast_text(*ranks.host, message);
    if (!ranks.leader()) {
      const nlohmann::json all = nlohmann::json::parse(message);
      for (size_t i = 0; i < all.size(); ++i)
        if (mine(i)) engine.add(engine::request_from_json(all[i]));
    }
  }

  std::unique_ptr<ProgressBar> bar;
  if (!o.input.empty() && ranks.leader()) bar = std::make_unique<ProgressBar>("generate", static_cast<int64_t>(rows.size()), "prompts");
  std::vector<engine::Result> results = engine.run([&](const engine::Result& r, const engine::EngineStats&) {
    if (bar) bar->advance(1, static_cast<int64_t>(r.tokens.size()));
  });
  if (bar) bar->finish();
  if (ranks.expert_size > 1) results = gather_results(ranks, std::move(results), rows.size());
  engine::EngineStats s = engine.stats();
  if (ranks.expert_size > 1) s = summed_stats(ranks, s);  // collective: before the other ranks leave

  if (!ranks.leader()) return;
  if (!o.input.empty()) {
    std::vector<json> out;
    for (size_t i = 0; i < results.size(); ++i) {
      const engine::Result& r = results[i];
      json row = parse_json<json>(rows[i].row.dump(), o.input);  // the input row's fields, then ours
      row["completion"] = r.text;
      row["prompt_tokens"] = r.prompt.size();
      row["tokens"] = r.tokens;
      row["logprobs"] = r.logprobs;
      row["finish_reason"] = engine::finish_reason_name(r.finish);
      out.push_back(std::move(row));
    }
    data::write_jsonl(o.output, out);
    std::printf("wrote %zu completions to %s\n", out.size(), o.output.c_str());
  } else {
    const engine::Result& r = results.front();
    std::printf("%s\n", r.text.c_str());
    std::printf("finish_reason: %s, %zu prompt tokens, %zu generated\n", engine::finish_reason_name(r.finish),
                r.prompt.size(), r.tokens.size());
  }
  const int64_t replays = cached_step ? cached_step->graph_replays() : 0;
  std::printf("generated %lld tokens for %lld prompts in %.2f s: %.1f tokens/s (prefill %lld tokens%s), %lld steps%s, "
              "batch up to %lld\n",
              static_cast<long long>(s.decode_tokens), static_cast<long long>(s.requests), s.seconds,
              s.tokens_per_second(), static_cast<long long>(s.prefill_tokens),
              s.shared_prefill_tokens > 0 ? fmt::format(", {} more shared", s.shared_prefill_tokens).c_str() : "",
              static_cast<long long>(s.steps),
              replays > 0 ? fmt::format(" ({} decode steps replayed as CUDA graphs)", replays).c_str() : "",
              static_cast<long long>(s.peak_running));
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* c = app.add_subcommand(
      "generate",
      "Generate text from a checkpoint (KV/SSM cache, continuous batching, on the GPU or the CPU). Multi-token "
      "prediction (MTP, Nemotron 3 Super) is a training-time head: its blocks are loaded with the checkpoint but "
      "generation never runs them (one token per step from the main head)");
  c->add_option("--checkpoint", o->checkpoint,
                "A native checkpoint (directory with latest_checkpointed_iteration.txt, an iteration directory, a "
                "`convert import` output) or a Hugging Face directory (config.json + safetensors)")
      ->required();
  c->add_option("--tokenizer", o->tokenizer,
                "tokenizer.json (default: the checkpoint's tokenizer.json or tokenizer/tokenizer.json)");
  c->add_option("--prompt", o->prompt,
                "Text to continue (after the BOS the tokenizer's post-processor template adds, when it adds one)");
  c->add_option("--chat", o->chat, "A user message, rendered with --chat-template and its generation prompt");
  c->add_option("--input", o->input, "JSONL file: one row per prompt, with \"prompt\" (text) or \"messages\" (chat)");
  c->add_option("--output", o->output,
                "JSONL file written with each input row plus completion, prompt_tokens, tokens, logprobs, "
                "finish_reason");
  c->add_option("--chat-template", o->chat_template,
                "auto (the checkpoint's own if it has one, else nano3), checkpoint, nano3, nemotron-h, nano-v2, "
                "a .jinja file or a tokenizer_config.json")
      ->capture_default_str();
  c->add_flag("--enable-thinking", o->enable_thinking, "Open a <think> block in the generation prompt (nano3)");
  c->add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
  c->add_option("--top-p", o->top_p, "Nucleus sampling: keep the smallest set of tokens reaching this probability")
      ->capture_default_str();
  c->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0 = all)")->capture_default_str();
  c->add_option("--max-new-tokens", o->max_new_tokens, "Tokens to generate at most per prompt")->capture_default_str();
  c->add_option("--seed", o->seed, "Sampling seed (prompt i draws from its own stream: the batch size changes nothing)")
      ->capture_default_str();
  c->add_option("--presence-penalty", o->presence_penalty,
                "In [-2, 2]: subtracted from the logit of every token generated so far (OpenAI's presence_penalty)")
      ->capture_default_str();
  c->add_option("--frequency-penalty", o->frequency_penalty,
                "In [-2, 2]: times its count so far, subtracted from each token's logit (OpenAI's frequency_penalty)")
      ->capture_default_str();
  c->add_option("--logit-bias", o->logit_bias,
                "TOKEN_ID=BIAS (repeatable; bias in [-100, 100]) added to that token's logit");
  c->add_option("--stop", o->stop, "Stop string (repeatable); the text ends before it");
  c->add_option("--stop-token-id", o->stop_token_ids, "Stop token id (repeatable), besides the tokenizer's eos");
  c->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the tokenizer's eos (nor <|im_end|> in chat)");
  c->add_option("--max-slots,--batch", o->max_slots, "Sequences generated at once (continuous batching)")
      ->capture_default_str();
  c->add_option("--max-seq-len", o->max_seq_len, "Prompt plus generated tokens at most")->capture_default_str();
  CLI::Option* tp_opt = c->add_option("--tensor-parallel-size", o->tensor_parallel_size,
                "Split the model over this many ranks (vLLM's flag): start as many with `mpirun -np N` or srun; "
                "each rank takes the GPU of its local rank. Sizes that do not divide the heads, KV heads, Mamba "
                "groups or vocabulary are refused")
      ->capture_default_str();
  c->add_option("--expert-parallel-size", o->expert_parallel_size,
                "Split a mixture-of-experts model's routed experts over this many data ranks, each generating its "
                "share of the prompts (vLLM's --enable-expert-parallel over its data-parallel ranks); start "
                "--tensor-parallel-size x this many ranks")
      ->capture_default_str();
  add_inference_launch_options(c, o->run_profile, o->env_file);
  c->add_flag("--recompute", o->recompute,
              "Recompute every sequence from scratch at each step (the exact reference of the cached model; slow)");
  add_inference_device_options(c, o->device, o->dtype);
  c->callback([o, tp_opt] {
    if (!o->run_profile.empty())
      launch_inference(o->run_profile, o->env_file, tp_opt->count() > 0 ? o->tensor_parallel_size : 0,
                       o->expert_parallel_size);
    run_generate(*o);
  });
}

}  // namespace nemotron::cli
