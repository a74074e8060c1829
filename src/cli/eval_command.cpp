// `nemotron <family> eval [-c tiny|default|PATH] [key=value ...]`: stage 3 (reference/
// pipeline-and-rl.md §8) in process: scores one model, or several side by side
// (run.model=a,b,c: artifact references, each resolved in its own copy of the config), on the
// recipe's tasks (eval/eval_config.h), writes <output_dir>/<model>/results.json and
// <output_dir>/results.json (every model), prints the table, and publishes the results as an
// artifact whose input is the model artifact.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "artifacts/art_resolver.h"
#include "artifacts/artifact_store.h"
#include "artifacts/content_hash.h"
#include "cli/artifact_publish.h"
#include "cli/artifact_refs.h"
#include "cli/commands.h"
#include "cli/eval_generation.h"
#include "cli/recipe_paths.h"
#include "core/config_tree.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "data/prompt_encoding.h"
#include "data/tokenizer.h"
#include "eval/eval_config.h"
#include "eval/eval_results.h"
#include "eval/task_scoring.h"
#include "io/mapped_file.h"
#include "train/compute_device.h"
#include "train/inference_model.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;

struct EvalOptions {
  std::string family, config = "default";
  std::vector<std::string> overrides;
};

// One model to score: its resolved config and what names it.
struct ModelRun {
  eval::EvalConfig cfg;
  nlohmann::json tree;
  std::string label, artifact;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<ModelRun> model_runs(const std::string& path, nlohmann::json tree) {
  std::vector<std::string> refs;
  if (tree.contains("run") && tree["run"].is_object() && tree["run"].contains("model") && tree["run"]["model"].is_string())
    refs = split_commas(tree["run"]["model"].get<std::string>());
  if (refs.empty()) refs.push_back("");
  std::vector<ModelRun> runs;
  for (const std::string& ref : refs) {
    ModelRun r;
    r.tree = tree;
    if (!ref.empty()) r.tree["run"]["model"] = ref;
    std::vector<std::string> used;
    if (artifacts::has_artifact_refs(r.tree)) {
      const artifacts::ArtifactStore store(default_artifact_root());
      used = artifacts::resolve_artifact_refs(r.tree, store, path);
      if (!ref.empty()) r.artifact = store.get(artifacts::ArtifactRef::parse(ref, path + ": run.model")).ref();
    }
    r.cfg = eval::read_eval_config(r.tree, path);
    r.label = !r.artifact.empty() ? r.artifact : fs::path(r.cfg.checkpoint_path).filename().string();
    runs.push_back(std::move(r));
  }
  return runs;
}

eval::VerifyFn verifier(const std::string& name) {
  if (name == "exact")
    return [](const std::string& completion, const eval::EvalItem& item) {
      std::string c = completion;
      c.erase(0, c.find_first_not_of(" \t\r\n"));
      c.erase(c.find_last_not_of(" \t\r\n") + 1);
      return c == item.answer;
    };
  return answer_verifier(name);
}

// A task's items and few-shot pool, read before any model loads (bad rows fail first).
struct LoadedTask {
  std::vector<eval::EvalItem> items, pool;
};

std::vector<LoadedTask> load_tasks(const eval::EvalConfig& cfg) {
  std::vector<LoadedTask> out;
  for (const eval::TaskSpec& t : cfg.tasks) out.push_back({eval::load_task_items(t, cfg), eval::load_fewshot_pool(t)});
  return out;
}

// "super3-tiny-sft:v2" -> "super3-tiny-sft-v2": a directory name.
std::string label_dir(const std::string& label) {
  std::string s = artifacts::artifact_name(label);
  for (char& c : s)
    if (c == ':') c = '-';
  return s;
}

eval::ModelResults evaluate(const ModelRun& run, const eval::EvalConfig& cfg, std::vector<LoadedTask> tasks) {
  const auto t0 = std::chrono::steady_clock::now();
  // Forward only: bf16_mixed here means bf16 weights, with no masters made.
  train::ComputeDevice dev =
      train::open_compute_device(cfg.source, cfg.device, cfg.dtype == "bfloat16" ? "bf16_mixed" : "fp32");
  train::InferenceModel m = train::load_inference_model(cfg.checkpoint_path, *dev.backend, dev.dtype);
  const std::string tok_path = !cfg.tokenizer.empty() ? cfg.tokenizer : m.tokenizer_path;
  if (tok_path.empty())
    throw InputError(fmt::format("{}: tokenizer.model: required: {} holds no tokenizer.json", cfg.source, m.source));
  const data::Tokenizer tok = data::Tokenizer::load(tok_path);
  const data::ChatTemplate chat_template = [&] {
    try {
      return data::ChatTemplate::for_model(cfg.chat_template, cfg.checkpoint_path);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: chat_template: {}", cfg.source, e.what()));
    }
  }();
  std::printf("model %s: %s (%s%s), %s\n", run.label.c_str(), m.source.c_str(), m.kind.c_str(),
              m.kind == "native" ? fmt::format(", iteration {}", m.iteration).c_str() : "",
              fmt::format("{}, {}", dev.backend->name(), dtype_name(dev.dtype)).c_str());
  std::fflush(stdout);
  train::ContinuationStats scoring;
  eval::LoglikelihoodModel ll{m.net.get(), &tok, cfg.row_tokens, tok.eos_token_id().value_or(0), data::prompt_bos(tok),
                              cfg.rows_per_forward, &scoring};
  eval::ModelResults res{run.label, m.source, run.artifact, {}, 0};
  for (size_t ti = 0; ti < cfg.tasks.size(); ++ti) {
    const eval::TaskSpec& t = cfg.tasks[ti];
    std::vector<eval::EvalItem>& items = tasks[ti].items;
    const std::vector<eval::EvalItem>* shots = tasks[ti].pool.empty() ? nullptr : &tasks[ti].pool;
    eval::TaskResult r;
    switch (t.type) {
      case eval::TaskType::multiple_choice: r = eval::score_multiple_choice(ll, t.name, items, shots, t.shots); break;
      case eval::TaskType::perplexity: r = eval::score_perplexity(ll, t.name, items); break;
      case eval::TaskType::generate: {
        if (t.chat) {
          // The prompt is a user turn in the chat template; shots are not turns, so none.
          if (t.shots.num_fewshot > 0)
            throw InputError(fmt::format("{}: {}.num_fewshot: chat tasks take no few-shot examples", cfg.source, t.where));
          for (eval::EvalItem& it : items)
            it.context = chat_template.render(data::OrderedJson::array({{{"role", "user"}, {"content", it.context}}}),
                                              nullptr, {.add_generation_prompt = true, .enable_thinking = false});
        }
        r = eval::score_generation(make_generate_fn(*m.net, tok, t, cfg.row_tokens), verifier(t.verifier), t.name, items,
                                   shots, t.shots, t.samples);
        break;
      }
    }
    std::printf("  %-24s %4lld items in %6.1f s:", t.name.c_str(), static_cast<long long>(r.items), r.seconds);
    for (const eval::MetricValue& v : r.metrics) std::printf(" %s %.4f ± %.4f", v.name.c_str(), v.value, v.stderr_);
    std::printf("\n");
    std::fflush(stdout);
    res.tasks.push_back(std::move(r));
    if (t.type != eval::TaskType::generate && scoring.forwards > 0) {  // how full the scoring forwards ran
      std::printf("  %-24s %lld forwards of %.1f rows x %lld tokens (%.0f%% filled), %lld tokens scored\n", "",
                  static_cast<long long>(scoring.forwards),
                  static_cast<double>(scoring.rows) / static_cast<double>(scoring.forwards),
                  static_cast<long long>(cfg.row_tokens),
                  100.0 * static_cast<double>(scoring.tokens) / static_cast<double>(scoring.rows * cfg.row_tokens),
                  static_cast<long long>(scoring.scored_tokens));
      scoring = {};
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

void write_json(const fs::path& p, const nlohmann::json& j) {
  fs::create_directories(p.parent_path());
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomically(p.string(), text.data(), text.size());
}

void run_eval(const EvalOptions& o) {
  const std::string path = resolve_recipe(o.family, "eval", o.config);
  nlohmann::json tree = load_config_file(path);
  if (!tree.is_object()) throw_config_error(path, "", "expected a mapping of sections");
  apply_overrides(tree, o.overrides, path);
  const std::vector<ModelRun> runs = model_runs(path, tree);  // every model's config checked before any runs
  std::vector<std::vector<LoadedTask>> tasks;
  for (const ModelRun& run : runs) tasks.push_back(load_tasks(run.cfg));
  std::vector<eval::ModelResults> all;
  nlohmann::json combined = {{"models", nlohmann::json::array()}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const ModelRun& run = runs[i];
    eval::ModelResults r = evaluate(run, run.cfg, std::move(tasks[i]));
    const fs::path dir = fs::path(run.cfg.output_dir) / label_dir(run.label);
    const nlohmann::json j = eval::results_json(r, run.tree);
    write_json(dir / "results.json", j);
    combined["models"].push_back(j);
    all.push_back(std::move(r));
  }
  const fs::path out = fs::path(runs.front().cfg.output_dir) / "results.json";
  write_json(out, combined);
  std::printf("\n");
  eval::print_results_table(stdout, all);
  std::printf("\nresults: %s\n", out.string().c_str());
  // The results as an artifact (§5.2 has no eval type; W&B users log them as a run summary):
  // inputs are the model artifacts evaluated.
  try {
    artifacts::ArtifactStore store(default_artifact_root());
    artifacts::Artifact a;
    a.name = artifact_name_for_dir(runs.front().cfg.output_dir);
    a.type = artifacts::kEvalResults;
    a.path = fs::absolute(runs.front().cfg.output_dir).lexically_normal().string();
    a.content_hash = artifacts::content_hash(out);
    for (const ModelRun& r : runs)
      if (!r.artifact.empty()) a.inputs.push_back(r.artifact);
    for (const eval::ModelResults& m : all)
      for (const eval::TaskResult& t : m.tasks)
        for (const eval::MetricValue& v : t.metrics) a.metadata[m.label][t.task + "/" + v.name] = v.value;
    const artifacts::Artifact pub = store.publish(a);
    std::printf("artifact: %s (%s)\n", pub.ref().c_str(), pub.type.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: the eval results were not recorded in the artifact store: %s\n", e.what());
  }
}

}  // namespace

void add_eval_commands(CLI::App& app) {
  for (const RecipeFamily& f : kRecipeFamilies) {
    CLI::App* family = family_group(app, f.name);
    auto o = std::make_shared<EvalOptions>();
    o->family = f.name;
    CLI::App* cmd = family->add_subcommand(
        "eval", "Score a model (or several: run.model=a,b,c) on the recipe's tasks: multiple choice, generation, perplexity");
    cmd->add_option("-c,--config", o->config,
                    fmt::format("Recipe: a name in recipes/{}/eval/ (tiny, default) or a YAML path", f.name))
        ->capture_default_str();
    cmd->add_option("overrides", o->overrides, "key=value overrides with dotted keys (evaluation.limit_samples=50)")
        ->check(CLI::Validator(
            [](std::string& arg) { return is_override(arg) ? std::string() : "expected key=value, got " + arg; },
            "KEY=VALUE"));
    cmd->callback([o] { run_eval(*o); });
  }
}

}  // namespace nemotron::cli
