// `nemotron serve`: an OpenAI-compatible HTTP server (serve/) over a checkpoint, on the generation
// engine (engine/: continuous batching over the KV/SSM cache) on a GPU (--device cuda[:N], bf16 by
// default; tokens drawn on the GPU unless a request asks for log-probs or host-only sampling) or
// the CPU, the device and dtype chosen as generate chooses them. At start it prints what the KV
// pages and Mamba states of --max-slots x --max-seq-len cost and the most that fit, and refuses
// (exit 2) a cache the GPU cannot hold (engine/cache_budget.h). SIGINT or SIGTERM
// stops it gracefully: no new connections, running generations end with 503 (a stream with an
// error event), then the process ends by the signal (130 / 143), as the training commands do.
// The API key comes from --api-key or NEMOTRON_API_KEY (read here only: nothing below cli/ reads
// the environment). Under mpirun the model splits over --tensor-parallel-size x
// --expert-parallel-size ranks (cli/inference_ranks.h); rank 0 alone serves HTTP.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "backend/cpu/parallel.h"
#include "cli/commands.h"
#include "cli/device_options.h"
#include "cli/host_memory.h"
#include "cli/inference_ranks.h"
#include "cli/launch.h"
#include "cli/stop_signals.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "engine/cache_budget.h"
#include "engine/cached_step_model.h"
#include "serve/engine_worker.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "train/compute_device.h"
#include "train/inference_model.h"
#include "train/plan.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;

struct ServeOptions {
  std::string checkpoint, tokenizer, host = "127.0.0.1", served_model_name, chat_template = "auto", dtype = "auto",
              device = "auto";
  int port = 8000;
  int64_t max_slots = 8, max_seq_len = 0;
  int tensor_parallel_size = 1;
  int expert_parallel_size = 1;  // data ranks, each running its share of the requests (cli/inference_ranks.h)
  std::string run_profile, env_file;  // --run: start the ranks from an env.toml profile
  int max_connections = -1;     // -1: 256, or 4 per slot when that is more
  double scheduler_delay_factor = 0;  // engine::EngineOptions::admission_delay_factor
  bool async_scheduling = true;       // engine::EngineOptions::async_scheduling, where decode graphs run
  serve::ServerOptions server;  // timeouts, body limit, API key, CORS
};

// The name clients send: the checkpoint directory's name (its parent's for an iteration directory).
std::string default_model_name(const std::string& checkpoint) {
  fs::path p = fs::absolute(checkpoint).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.filename().string().rfind("iter_", 0) == 0) p = p.parent_path();
  return p.filename().string();
}

// The start line of what --max-slots x --max-seq-len cost in KV pages and Mamba states, and the
// most that fit; a cache larger than its share of the memory left after the weights (the GPU's
// free memory, or the machine's physical memory) is refused here (InputError), before it is
// allocated, with the values that would fit.
std::string cache_budget_line(const model::ModelConfig& cfg, DType dt, int64_t slots, int64_t len, Backend& backend,
                              int tensor_size) {
  const bool gpu = !backend.device().is_cpu();
  const auto weights = static_cast<int64_t>(backend.bytes_in_use());
  const auto available = gpu ? static_cast<int64_t>(backend.available_bytes())
                             : std::max<int64_t>(0, static_cast<int64_t>(physical_memory_bytes()) - weights);
  const engine::CacheBudget b =
      engine::cache_budget(cfg, dt, slots, len, available, engine::CachedStepModel::kBlockSize, tensor_size);
  auto bytes = [](int64_t n) { return train::human_bytes(static_cast<double>(n)); };
  const std::string cost = fmt::format("KV pages and Mamba states: {} for --max-slots {} x --max-seq-len {} ({} per slot)",
                                       bytes(b.total_bytes), slots, len, bytes(b.per_slot_bytes));
  if (b.budget_bytes == 0) return cost + " (host memory: its size unknown)";
  const std::string longest = b.max_seq_len_that_fits < 0    ? fmt::format(", or any --max-seq-len at --max-slots {}", slots)
                              : b.max_seq_len_that_fits == 0 ? fmt::format(" (at --max-slots {}, no length fits)", slots)
                                                             : fmt::format(", or --max-seq-len {} at --max-slots {}",
                                                                           b.max_seq_len_that_fits, slots);
  const std::string most =
      fmt::format("the most that fit: --max-slots {} at --max-seq-len {}{}", b.max_slots_that_fit, len, longest);
  const std::string budget =
      fmt::format("{} may hold them on {} ({:.0f}% of the {} {} after {} of weights; the rest is for the steps' "
                  "activations)",
                  bytes(b.budget_bytes), gpu ? backend.name() : "the host", 100 * engine::kCacheMemoryFraction,
                  bytes(available), gpu ? "free" : "of physical memory left", bytes(weights));
  if (!b.fits())
    throw InputError(fmt::format("--max-slots {} x --max-seq-len {}: the KV pages and Mamba states need {}, but only {}; "
                                 "{}",
                                 slots, len, bytes(b.total_bytes), budget, most));
  return fmt::format("{}; {}; {}", cost, budget, most);
}

// NEMOTRON_TEST_ENGINE_FAIL=RANK:STEP (tests): rank RANK's engine throws before its STEP-th step,
// so that a test can see a failure on one rank end every rank with its message.
serve::StepFault test_engine_fault(int rank) {
  const char* spec = std::getenv("NEMOTRON_TEST_ENGINE_FAIL");
  if (!spec || !*spec) return {};
  int fail_rank = -1;
  long long step = 0;
  char rest = 0;
  if (std::sscanf(spec, "%d:%lld%c", &fail_rank, &step, &rest) != 2 || fail_rank < 0 || step < 1)
    throw InputError(fmt::format("NEMOTRON_TEST_ENGINE_FAIL: expected RANK:STEP (STEP >= 1), got \"{}\"", spec));
  if (fail_rank != rank) return {};
  auto steps = std::make_shared<long long>(0);
  return [steps, rank, step] {
    if (++*steps == step)
      throw std::runtime_error(fmt::format("NEMOTRON_TEST_ENGINE_FAIL: rank {} fails at its engine step {}", rank, step));
  };
}

int run_serve(const ServeOptions& o) {
  if (o.port < 0 || o.port > 65535) throw InputError(fmt::format("--port: expected 0..65535, got {}", o.port));
  if (o.max_slots <= 0) throw InputError(fmt::format("--max-slots: expected a positive integer, got {}", o.max_slots));
  if (o.max_seq_len < 0 || o.max_seq_len == 1)
    throw InputError(fmt::format("--max-seq-len: expected an integer > 1, got {}", o.max_seq_len));
  const serve::TransportOptions& t = o.server.transport;
  if (o.max_connections != -1 && o.max_connections <= 0)
    throw InputError(fmt::format("--max-connections: expected a positive integer, got {}", o.max_connections));
  if (o.server.transport.max_request_bytes <= 0)
    throw InputError(fmt::format("--max-request-bytes: expected a positive integer, got {}", o.server.transport.max_request_bytes));
  if (!(t.read_timeout_s > 0)) throw InputError(fmt::format("--read-timeout: expected seconds > 0, got {}", t.read_timeout_s));
  if (!(t.idle_timeout_s > 0)) throw InputError(fmt::format("--idle-timeout: expected seconds > 0, got {}", t.idle_timeout_s));
  const data::ChatTemplate chat_template = [&] {
    try {
      return data::ChatTemplate::for_model(o.chat_template, o.checkpoint);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--chat-template: {}", e.what()));
    }
  }();
  InferenceRanks ranks = inference_ranks(o.tensor_parallel_size, o.expert_parallel_size);
  train::ComputeDevice dev = inference_device(o.device, ranks);
  const DType dt = train::inference_dtype(o.dtype, dev, "--dtype");
  train::InferenceModel m =
      train::load_inference_model(o.checkpoint, *dev.backend, dt, inference_shard_of(ranks, *dev.backend, o.checkpoint));
  const std::string tok_path = o.tokenizer.empty() ? m.tokenizer_path : o.tokenizer;
  if (tok_path.empty() || !fs::exists(tok_path))
    throw InputError(fmt::format("{}: no tokenizer.json; pass --tokenizer FILE (e.g. the data prep output's "
                                 "tokenizer/tokenizer.json)",
                                 tok_path.empty() ? o.checkpoint : tok_path));
  const data::Tokenizer tok = data::Tokenizer::load(tok_path);
  const model::ModelConfig& cfg = m.net->config();
  // The KV pool holds every slot's whole context (engine/cached_step_model.h): the default
  // keeps it to generate's 4096 tokens rather than a long-context model's full window.
  const int64_t max_len = o.max_seq_len > 0 ? o.max_seq_len : std::min<int64_t>(4096, cfg.max_position_embeddings);
  if (max_len > cfg.max_position_embeddings)
    std::fprintf(stderr,
                 "warning: --max-seq-len %lld exceeds the model's max_position_embeddings %lld: positions past what "
                 "it was trained on may give poor output\n",
                 static_cast<long long>(max_len), static_cast<long long>(cfg.max_position_embeddings));

  serve::ServedModel served;
  served.name = o.served_model_name.empty() ? default_model_name(o.checkpoint) : o.served_model_name;
  served.tok = &tok;
  served.chat_format = chat_template;
  served.max_model_len = max_len;
  served.vocab_size = cfg.vocab_size;
  if (std::optional<int32_t> eos = tok.eos_token_id()) served.stop_token_ids.push_back(*eos);
  served.chat_stop_token_ids = served.stop_token_ids;
  if (std::optional<int32_t> end = tok.token_to_id("<|im_end|>")) served.chat_stop_token_ids.push_back(*end);
  served.max_token_bytes = serve::longest_token_bytes(tok);

  const bool gpu = !dev.backend->device().is_cpu();
  const std::string where_run =
      gpu ? dev.backend->name() : fmt::format("{} CPU threads", cpu::num_threads());
  const std::string memory_line = cache_budget_line(cfg, dt, o.max_slots, max_len, *dev.backend, ranks.tensor_size);
  Context run_ctx{dev.backend, nullptr, dt};
  run_ctx.groups = ranks.groups.get();
  engine::CachedStepModel step(*m.net, run_ctx, o.max_slots, max_len);
  serve::WorkerRanks worker_ranks{ranks.host, ranks.groups.get(), ranks.expert_size, ranks.tensor_size, ranks.rank};
  engine::EngineOptions engine_options;
  engine_options.admission_delay_factor = o.scheduler_delay_factor;
  // Only where a step can be in flight while the host works (decode graphs on one GPU rank);
  // elsewhere it would only hold each token back a step. Several ranks follow rank 0's step
  // messages in lockstep, which the step in flight would run ahead of.
  engine_options.async_scheduling = o.async_scheduling && step.uses_decode_graphs() && !ranks.distributed();
  serve::StepFault fault = test_engine_fault(ranks.rank);
  if (!ranks.leader()) {
    // No HTTP here: this rank runs its part of the model at each step rank 0 broadcasts, until
    // rank 0 stops (its signal, or mpirun's forwarded to every rank, ends the server there). An
    // engine failure here throws: main() prints it and ends every rank (rank 0's clients lose
    // their connections rather than wait for tokens that will not come).
    const StopSignals signals("stopping when rank 0 has stopped the server");
    serve::follow_worker(step, *m.net, tok, engine_options, worker_ranks, fault);
    return StopSignals::signal_number();
  }
  serve::ServerMetrics metrics;
  serve::WorkerObservers observers;
  observers.metrics = &metrics;
  // Memory of the running sequences: each one's KV blocks (whole blocks) and its Mamba state. It
  // runs before every step, so the sizes are worked out once here: a sequence's bytes are its
  // fixed Mamba state plus a KV cost per token (bytes_per_sequence walks the layers' specs,
  // ~0.5 ms a step at 128 sequences when called per sequence).
  const int64_t seq_fixed_bytes = model::DecodeState::bytes_per_sequence(cfg, 0, dt);
  const int64_t token_bytes = model::DecodeState::bytes_per_sequence(cfg, 1, dt) - seq_fixed_bytes;
  const int64_t state_total_bytes = step.state().bytes();
  observers.state_bytes = [&step, seq_fixed_bytes, token_bytes, state_total_bytes] {
    const model::DecodeState& st = step.state();
    int64_t in_use = 0;
    for (int64_t slot = 0; slot < st.max_slots(); ++slot)
      if (st.length(slot) > 0) in_use += seq_fixed_bytes + token_bytes * st.blocks_held(slot) * st.block_size();
    return std::pair<int64_t, int64_t>{in_use, state_total_bytes};
  };
  // Several ranks: the others wait in this engine's collectives after it failed, so the server
  // stops (its clients answered 500 with the error) and every rank ends with the error. One
  // process keeps serving, every request answered 500.
  std::atomic<bool> engine_failed{false};
  if (ranks.distributed()) observers.engine_failed = [&engine_failed] { engine_failed = true; };
  serve::EngineWorker worker(step, *m.net, tok, observers, [&dev] { train::bind_to_calling_thread(*dev.backend); },
                             engine_options, worker_ranks, fault);
  serve::ServerOptions sopt = o.server;
  sopt.host = o.host;
  sopt.port = o.port;
  sopt.transport.max_connections =
      o.max_connections > 0 ? o.max_connections : static_cast<int>(std::max<int64_t>(256, 4 * o.max_slots));
  serve::OpenAiServer server(worker, served, sopt, metrics);
  const int port = server.bind();

  std::printf("model: %s, %lld layers \"%s\", %lld parameters, %s on %s; %lld slots, context %lld tokens\n",
              m.source.c_str(), static_cast<long long>(cfg.num_layers()), cfg.hybrid_override_pattern.c_str(),
              static_cast<long long>(whole_parameter_count(m.net->params(), ranks.expert_size)), dtype_name(dt),
              where_run.c_str(),
              static_cast<long long>(o.max_slots), static_cast<long long>(max_len));
  std::printf("%s\n", memory_line.c_str());
  std::printf("async scheduling: %s\n", engine_options.async_scheduling ? "on (a step's tokens stream while the next step runs)"
                                         : gpu && o.async_scheduling && ranks.distributed() ? "off (several ranks step in lockstep)"
                                         : gpu && o.async_scheduling ? "off (decode steps do not replay CUDA graphs here)"
                                                                     : "off");
  if (ranks.expert_size > 1)
    std::printf("expert parallel: %d data ranks x %d tensor ranks (rank 0 serves HTTP and hands each request to the "
                "data rank running the fewest; each data rank has its own %lld slots, the routed experts split over "
                "them; each rank holds %lld parameters and 1/%d of its data rank's KV pages and Mamba states: the "
                "figures above are one rank's)\n",
                ranks.expert_size, ranks.tensor_size, static_cast<long long>(o.max_slots),
                static_cast<long long>(m.net->params().numel()), ranks.tensor_size);
  else if (ranks.distributed())
    std::printf("tensor parallel: %d ranks (rank 0 serves HTTP; every rank runs its part of each step and holds 1/%d "
                "of the KV pages and Mamba states: the figures above are one rank's)\n",
                ranks.tensor_size, ranks.tensor_size);
  std::printf("serving \"%s\" at http://%s:%d/v1 (OpenAI API: /v1/completions, /v1/chat/completions, /v1/models, "
              "/v1/health; /tokenize, /detokenize, /metrics); Ctrl-C stops\n",
              served.name.c_str(), o.host.c_str(), port);
  std::printf("limits: %d connections, request bodies up to %lld bytes, %g s to send a request, %g s idle; %s%s\n",
              sopt.transport.max_connections, static_cast<long long>(sopt.transport.max_request_bytes),
              sopt.transport.read_timeout_s, sopt.transport.idle_timeout_s,
              sopt.api_key.empty() ? "no API key" : "API key required (Authorization: Bearer)",
              sopt.allowed_origins.empty() ? "" : ", CORS for the allowed origins");
  std::fflush(stdout);

  const StopSignals signals("stopping the server: no new connections, running requests end with 503");
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && StopSignals::signal_number() == 0 && !engine_failed)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (done) return;
    server.stop();  // no new connections
    worker.stop();  // running generations end ("abort"), so their handlers return
  });
  server.listen();
  done = true;
  watcher.join();
  worker.stop();
  const serve::WorkerStats st = worker.stats();
  std::string by_data_rank;  // under expert parallelism: how the generating requests were spread
  for (size_t d = 0; d < st.requests_by_data_rank.size(); ++d)
    by_data_rank += fmt::format("{}{}", d == 0 ? "; generating requests by data rank: " : ", ", st.requests_by_data_rank[d]);
  // After an engine failure the line names it: the run is no clean stop (main() then ends every
  // rank with the failure as its error line, which mpirun may print before or after this one).
  const std::string stopped_by = engine_failed                  ? " by the engine failure"
                                 : StopSignals::signal_number() ? " by " + StopSignals::requested().substr(9)
                                                                : "";
  std::printf("stopped%s: served %lld requests (%lld cancelled), %lld prompt tokens, %lld generated tokens%s\n",
              stopped_by.c_str(),
              static_cast<long long>(st.requests), static_cast<long long>(st.cancelled),
              static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.generated_tokens), by_data_rank.c_str());
  std::fflush(stdout);
  if (engine_failed) throw std::runtime_error(worker.failure());  // main() ends every rank with it
  return StopSignals::signal_number();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* c = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server on a checkpoint (completions, chat, streaming; continuous batching, GPU or CPU)");
  c->add_option("--checkpoint", o->checkpoint,
                "A native checkpoint (directory with latest_checkpointed_iteration.txt, an iteration directory) or a "
                "Hugging Face directory (config.json + safetensors)")
      ->required();
  c->add_option("--tokenizer", o->tokenizer,
                "tokenizer.json (default: the checkpoint's tokenizer.json or tokenizer/tokenizer.json)");
  c->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  c->add_option("--port", o->port, "Port to listen on (0: any free port, printed at start)")->capture_default_str();
  c->add_option("--served-model-name", o->served_model_name,
                "The model name clients send (default: the checkpoint directory's name)");
  c->add_option("--chat-template", o->chat_template,
                "auto (the checkpoint's own if it has one, else nano3), checkpoint, nano3, nemotron-h, nano-v2, "
                "a .jinja file or a tokenizer_config.json")
      ->capture_default_str();
  c->add_option("--max-slots", o->max_slots, "Sequences generated at once (continuous batching)")->capture_default_str();
  c->add_option("--scheduler-delay-factor", o->scheduler_delay_factor,
                "While sequences decode, admit queued requests once the oldest has waited this many times the last "
                "prefilling step (vLLM's option): arrivals are prefilled together instead of one prefill per step")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--async-scheduling,!--no-async-scheduling", o->async_scheduling,
              "Stream each step's tokens while the next step runs on the GPU (vLLM's option; on by default where "
              "decode steps replay CUDA graphs: one GPU): the server's per-token work then no longer adds to "
              "every decode step, and each token streams one step later");
  c->add_option("--max-seq-len", o->max_seq_len,
                "Prompt plus generated tokens at most (default: 4096, or the model's max_position_embeddings if smaller)");
  add_inference_device_options(c, o->device, o->dtype);
  CLI::Option* tp_opt = c->add_option("--tensor-parallel-size", o->tensor_parallel_size,
                "Split the model over this many ranks (vLLM's flag): start as many with `mpirun -np N` or srun; rank "
                "0 serves HTTP, each rank takes the GPU of its local rank")
      ->capture_default_str();
  c->add_option("--expert-parallel-size", o->expert_parallel_size,
                "Split a mixture-of-experts model's routed experts over this many data ranks, each generating the "
                "requests rank 0 hands it (the one running the fewest) with its own --max-slots (vLLM's "
                "--enable-expert-parallel over its data-parallel ranks); start --tensor-parallel-size x this many ranks")
      ->capture_default_str();
  add_inference_launch_options(c, o->run_profile, o->env_file);
  c->add_option("--max-connections", o->max_connections,
                "Connections served at once (one thread each); more are answered 503 at once (default: 256, or 4 "
                "per slot when that is more)");
  c->add_option("--max-request-bytes", o->server.transport.max_request_bytes, "Largest request body; larger ones get 413")
      ->capture_default_str();
  c->add_option("--read-timeout", o->server.transport.read_timeout_s,
                "Seconds a client has to send a request's headers and body")
      ->capture_default_str();
  c->add_option("--idle-timeout", o->server.transport.idle_timeout_s,
                "Seconds a kept-alive connection waits for its next request")
      ->capture_default_str();
  c->add_option("--api-key", o->server.api_key,
                "Require `Authorization: Bearer KEY` on every route but /health (default: $NEMOTRON_API_KEY; none if "
                "unset)");
  c->add_option("--allowed-origins", o->server.allowed_origins,
                "Origins (comma-separated, or *) allowed to call the API from a browser (CORS); default: none")
      ->delimiter(',');
  c->callback([o, tp_opt] {
    if (!o->run_profile.empty())
      launch_inference(o->run_profile, o->env_file, tp_opt->count() > 0 ? o->tensor_parallel_size : 0,
                       o->expert_parallel_size);
    if (o->server.api_key.empty())
      if (const char* k = std::getenv("NEMOTRON_API_KEY")) o->server.api_key = k;
    if (int sig = run_serve(*o)) reraise(sig);  // after every destructor: the socket closed
  });
}

}  // namespace nemotron::cli
