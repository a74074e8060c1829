// `nemotron super3|nano3 pipeline [-c tiny|PATH] [--force] [--from STAGE] [--only STAGE,...]
// [key=value ...]`: the stages of a pipeline recipe (pipeline/pipeline_recipe.h) one after the
// other, in this process, each through the binary's own command dispatch (app.h: run()) with the
// argv a user would type, so a stage prints and behaves exactly as its command does alone. Each
// stage reads what the one before it published (its recipe's paths or ${art:...} references);
// stages whose output is up to date are skipped (pipeline/stage_state.h), a training stage cut
// short resumes from its latest checkpoint, and RUN_DIR/pipeline.json records every stage's
// config, inputs, outputs and seconds. A SIGTERM/SIGINT during a training stage saves a
// checkpoint and ends the process (cli/stop_signals.h); rerunning the pipeline goes on from there.
// It ends with a table of the stages, the eval table (base -> SFT -> RL), one verdict line per
// stage the recipe judges (pipeline/stage_verdict.h: did it raise its skill?) and the HTML report.
#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "artifacts/artifact_store.h"
#include "cli/app.h"
#include "cli/artifact_refs.h"
#include "cli/commands.h"
#include "cli/recipe_paths.h"
#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "pipeline/pipeline_recipe.h"
#include "pipeline/stage_state.h"
#include "pipeline/stage_verdict.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using pipeline::Action;
using pipeline::StageKind;
using pipeline::StageSpec;

struct PipelineOptions {
  std::string family;
  std::string config = "tiny";
  bool force = false;
  std::string from, only;
  std::vector<std::string> overrides;
};

// A stage's recipe, resolved and loaded as its command will load it.
struct LoadedStage {
  const StageSpec* spec = nullptr;
  std::string recipe_path;
  json tree;
};

std::string recipe_folder(const StageSpec& s) {
  size_t first = 0;
  std::string folder;
  if (s.command.size() >= 2 && s.command[0] == "data" && s.command[1] == "prep") folder = "data_prep", first = 2;
  for (size_t i = first; i < s.command.size(); ++i) folder += (folder.empty() ? "" : "/") + s.command[i];
  return folder;
}

const json* dotted(const json& tree, const std::string& key) {
  const json* at = &tree;
  std::istringstream in(key);
  for (std::string part; std::getline(in, part, '.');) {
    if (!at->is_object() || !at->contains(part)) return nullptr;
    at = &(*at)[part];
  }
  return at;
}

std::string string_at(const LoadedStage& st, const std::string& key) {
  const json* v = dotted(st.tree, key);
  if (!v || !v->is_string() || v->get<std::string>().empty())
    throw InputError(fmt::format("{}: {}: the {} stage's output is read from this key; {} (set {}.{}_key in the "
                                 "pipeline recipe if the command keeps it elsewhere)",
                                 st.recipe_path, key, st.spec->name, v ? "expected a path" : "missing",
                                 st.spec->where, st.spec->kind == StageKind::kTrain ? "checkpoint" : "output"));
  return v->get<std::string>();
}

int64_t final_iteration(const LoadedStage& st) {
  const json* v = dotted(st.tree, st.spec->iterations_key);
  if (!v || !v->is_number_integer() || v->get<int64_t>() <= 0)
    throw InputError(fmt::format("{}: {}: the {} stage's last iteration is read from this key; {} (set {}.iterations_key "
                                 "in the pipeline recipe if the command keeps it elsewhere)",
                                 st.recipe_path, st.spec->iterations_key, st.spec->name,
                                 v ? "expected a positive integer" : "missing", st.spec->where));
  return v->get<int64_t>();
}

std::string output_dir(const LoadedStage& st) {
  return string_at(st, st.spec->kind == StageKind::kTrain ? st.spec->checkpoint_key : st.spec->output_key);
}

// The artifact a stage's output directory holds now ("name:vN"), "" when none.
std::string output_artifact(const std::string& dir) {
  try {
    const artifacts::ArtifactStore store(default_artifact_root());
    if (auto a = store.latest_at_path(dir)) return a->ref();
  } catch (const std::exception&) {
    // an unreadable store: the stage has no recorded output; its command reports the store itself
  }
  return "";
}

std::string now_utc() {
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", now);
}

// Runs `nemotron <words...>` through the binary's own dispatch; its exit code.
int dispatch(const std::vector<std::string>& words) {
  std::vector<std::string> args = words;
  args.insert(args.begin(), "nemotron");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const int rc = run(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  return rc;
}

std::vector<std::string> stage_argv(const std::string& family, const StageSpec& s, bool force) {
  std::vector<std::string> w{family};
  w.insert(w.end(), s.command.begin(), s.command.end());
  w.push_back("-c");
  w.push_back(s.config);
  if (force && s.kind == StageKind::kDataPrep) w.push_back("--force");
  w.insert(w.end(), s.overrides.begin(), s.overrides.end());
  return w;
}

// The eval stage's results.json (models side by side) as a table: one row per task metric.
// Returns the parsed results (discarded when unreadable).
json print_eval_table(const std::string& results_path) {
  std::ifstream in(results_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const json r = parse_json_or_discarded<json>(ss.str());
  if (r.is_discarded() || !r.contains("models") || !r["models"].is_array() || r["models"].empty()) {
    std::printf("(no readable results in %s)\n", results_path.c_str());
    return r;
  }
  std::vector<std::string> labels;
  for (const json& m : r["models"]) {
    std::string label = m.value("model", json::object()).value("artifact", "");
    if (label.empty()) label = m.value("model", json::object()).value("label", "?");
    labels.push_back(label);
  }
  std::vector<std::vector<std::string>> rows;
  const json& model0 = r["models"][0];
  const json first = model0.value("results", json::object());
  // Tasks in the config's order (the JSON object is sorted by name), then any others.
  std::vector<std::string> tasks;
  const json* listed = dotted(model0, "config.evaluation.tasks");
  if (listed && listed->is_array())
    for (const json& t : *listed)
      if (t.is_object() && t.contains("name") && t["name"].is_string() && first.contains(t["name"].get<std::string>()))
        tasks.push_back(t["name"].get<std::string>());
  for (auto t = first.begin(); t != first.end(); ++t)
    if (std::find(tasks.begin(), tasks.end(), t.key()) == tasks.end()) tasks.push_back(t.key());
  const json higher = model0.value("higher_is_better", json::object());
  for (const std::string& task : tasks) {
    const json& tr = first[task];
    if (!tr.is_object()) continue;
    for (auto k = tr.begin(); k != tr.end(); ++k) {
      const std::string key = k.key();
      const size_t comma = key.find(",none");
      if (comma == std::string::npos || key.find("_stderr") != std::string::npos) continue;
      const std::string metric = key.substr(0, comma);
      const json* hib = dotted(higher, task + "." + metric);
      std::vector<std::string> row{task, metric + (hib && hib->is_boolean() ? (hib->get<bool>() ? " ↑" : " ↓") : "")};
      for (const json& m : r["models"]) {
        const json res = m.value("results", json::object()).value(task, json::object());
        if (!res.contains(key) || !res[key].is_number()) {
          row.push_back("-");
          continue;
        }
        const double v = res[key].get<double>();
        const double se = res.value(metric + "_stderr,none", 0.0);
        row.push_back(v >= 100 ? fmt::format("{:.1f} ± {:.1f}", v, se) : fmt::format("{:.3f} ± {:.3f}", v, se));
      }
      rows.push_back(std::move(row));
    }
  }
  std::vector<size_t> w(labels.size() + 2, 0);
  w[0] = 4, w[1] = 6;
  for (size_t i = 0; i < labels.size(); ++i) w[i + 2] = std::max<size_t>(15, labels[i].size());
  const auto columns = [](const std::string& s) {  // display width (as fmt pads): ↑ ↓ ± are one column
    size_t c = 0;
    for (unsigned char ch : s) c += (ch & 0xC0) != 0x80;
    return c;
  };
  for (const auto& row : rows)
    for (size_t i = 0; i < 2; ++i) w[i] = std::max(w[i], columns(row[i]));
  std::string header = fmt::format("{:<{}}  {:<{}}", "Task", w[0], "Metric", w[1]);
  for (size_t i = 0; i < labels.size(); ++i) header += fmt::format("  {:>{}}", labels[i], w[i + 2]);
  std::printf("%s\n", header.c_str());
  for (const auto& row : rows) {
    std::string line = fmt::format("{:<{}}  {:<{}}", row[0], w[0], row[1], w[1]);  // fmt pads by display width
    for (size_t i = 2; i < row.size(); ++i) line += fmt::format("  {:>{}}", row[i], w[i]);
    std::printf("%s\n", line.c_str());
  }
  return r;
}

void run_pipeline(const PipelineOptions& o) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::string recipe_path = resolve_recipe(o.family, "pipeline", o.config);
  json tree = load_config_file(recipe_path);
  apply_overrides(tree, o.overrides, recipe_path);
  const pipeline::PipelineRecipe recipe = pipeline::read_pipeline_recipe(tree, recipe_path);
  const std::vector<size_t> selected = pipeline::select_stages(recipe, o.from, o.only);

  // Everything checked before any stage runs: each selected stage's command exists, its recipe loads.
  std::vector<LoadedStage> stages(recipe.stages.size());
  for (size_t i : selected) {
    const StageSpec& s = recipe.stages[i];
    std::vector<std::string> words{o.family};
    words.insert(words.end(), s.command.begin(), s.command.end());
    if (!has_command(words))
      throw InputError(fmt::format("{}: {} ({}): `{}` is not a command of this nemotron (see `nemotron {} --help`); "
                                   "remove the stage or run it with --from/--only around it",
                                   recipe_path, s.where, s.name, pipeline::stage_command_line(o.family, s), o.family));
  }
  for (size_t i : selected) {
    LoadedStage& st = stages[i];
    st.spec = &recipe.stages[i];
    st.recipe_path = resolve_recipe(o.family, recipe_folder(*st.spec), st.spec->config);
    st.tree = load_config_file(st.recipe_path);
    apply_overrides(st.tree, st.spec->overrides, st.recipe_path);
    output_dir(st);
    if (st.spec->kind == StageKind::kTrain) final_iteration(st);
  }

  const std::string state_path = (fs::path(recipe.run_dir) / "pipeline.json").string();
  pipeline::PipelineState state = pipeline::load_state(state_path);
  state.recipe = recipe_path;
  state.family = o.family;
  std::printf("pipeline %s: %zu of %zu stage(s); record %s\n", recipe_path.c_str(), selected.size(),
              recipe.stages.size(), state_path.c_str());

  std::vector<std::string> inputs;  // outputs of the stages so far, in order
  const size_t n = recipe.stages.size();
  for (size_t i = 0; i < n; ++i) {
    const StageSpec& s = recipe.stages[i];
    const bool chosen = std::find(selected.begin(), selected.end(), i) != selected.end();
    if (!chosen) {  // not run now: its recorded outputs still feed the stages after it
      if (const pipeline::StageRecord* r = state.find(s.name))
        inputs.insert(inputs.end(), r->outputs.begin(), r->outputs.end());
      continue;
    }
    const LoadedStage& st = stages[i];
    const std::string out_dir = output_dir(st);
    pipeline::Fingerprint fp{st.tree, inputs};
    const pipeline::StageRecord* rec = state.find(s.name);
    const pipeline::TrainProgress progress =
        s.kind == StageKind::kTrain ? pipeline::read_train_progress(out_dir) : pipeline::TrainProgress{};
    const int64_t last = s.kind == StageKind::kTrain ? final_iteration(st) : 0;
    const bool has_results = s.kind == StageKind::kEval && fs::exists(fs::path(out_dir) / "results.json");
    const pipeline::Decision d = pipeline::decide(s.kind, rec, fp, progress, last, has_results, o.force);
    const std::string line = pipeline::stage_command_line(o.family, s);
    std::printf("\n==> [%zu/%zu] %s: %s\n", i + 1, n, s.name.c_str(), line.c_str());
    if (d.action == Action::kRefuse)
      throw InputError(fmt::format("stage {}: {} {}; rerun with --force to move it aside and train again",
                                   s.name, out_dir, d.reason));
    if (d.action == Action::kSkip) {
      std::printf("    skipped, %s (%s)\n", d.reason.c_str(), out_dir.c_str());
      pipeline::StageRecord& r = state.upsert(s.name);
      r.result = "up to date";
      r.seconds = 0;
      inputs.insert(inputs.end(), r.outputs.begin(), r.outputs.end());
      continue;
    }
    std::printf("    %s\n", d.reason.c_str());
    if (o.force && s.kind == StageKind::kTrain && progress.has_run) {
      const std::string aside = out_dir + ".replaced-" + now_utc();
      fs::rename(out_dir, aside);
      std::printf("    --force: the previous run moved to %s\n", aside.c_str());
    }
    const std::string before = output_artifact(out_dir);
    const bool was_done = rec && rec->status == "done";  // read now: the record is updated below
    {
      pipeline::StageRecord& r = state.upsert(s.name);
      r.status = "running", r.command = line, r.fingerprint = fp, r.result = "", r.finished_at = "";
      save_state(state, state_path);
    }
    std::printf("\n");
    const auto t0 = std::chrono::steady_clock::now();
    int rc = 0;
    try {
      rc = dispatch(stage_argv(o.family, s, o.force));
    } catch (...) {
      pipeline::StageRecord& r = state.upsert(s.name);
      r.status = "failed", r.finished_at = now_utc();
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      save_state(state, state_path);
      std::fflush(stdout);
      std::fprintf(stderr, "pipeline: stage %s failed after %.1f s (`%s`)\n", s.name.c_str(), r.seconds, line.c_str());
      throw;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pipeline::StageRecord& r = state.upsert(s.name);
    r.seconds = secs, r.finished_at = now_utc();
    if (rc != 0) {
      r.status = "failed";
      save_state(state, state_path);
      throw InputError(fmt::format("stage {}: `{}` exited {}", s.name, line, rc));
    }
    const std::string after = output_artifact(out_dir);
    r.status = "done";
    r.outputs = after.empty() ? std::vector<std::string>{} : std::vector<std::string>{after};
    r.result = s.kind == StageKind::kDataPrep && !o.force && was_done && before == after
                   ? "up to date"
               : progress.has_run ? "resumed"
                                  : "ran";
    save_state(state, state_path);
    inputs.insert(inputs.end(), r.outputs.begin(), r.outputs.end());
    std::printf("<== %s: %s in %.1f s%s%s\n", s.name.c_str(), r.result.c_str(), secs, after.empty() ? "" : " -> ",
                after.c_str());
  }

  // The lineage of every output, back to the raw data, for the report's graph.
  try {
    const artifacts::ArtifactStore store(default_artifact_root());
    json lineage = json::array();
    std::vector<std::string> todo, seen;
    for (const pipeline::StageRecord& r : state.stages) todo.insert(todo.end(), r.outputs.begin(), r.outputs.end());
    while (!todo.empty()) {
      const std::string ref = todo.back();
      todo.pop_back();
      if (std::find(seen.begin(), seen.end(), ref) != seen.end()) continue;
      seen.push_back(ref);
      const auto a = store.find(artifacts::ArtifactRef::parse(ref, state_path));
      if (!a) continue;
      lineage.push_back({{"artifact", ref}, {"type", a->type}, {"inputs", a->inputs}});
      todo.insert(todo.end(), a->inputs.begin(), a->inputs.end());
    }
    state.lineage = std::move(lineage);
    save_state(state, state_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: the lineage was not recorded in %s: %s\n", state_path.c_str(), e.what());
  }

  // The summary: every stage of the recipe, what happened to it now, and its output.
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("\n==> pipeline summary (%s)\n", recipe_path.c_str());
  size_t name_w = 5;
  for (const StageSpec& s : recipe.stages) name_w = std::max(name_w, s.name.size());
  std::printf("%-*s  %-12s  %8s  %s\n", static_cast<int>(name_w), "Stage", "Status", "Seconds", "Output");
  for (size_t i = 0; i < n; ++i) {
    const StageSpec& s = recipe.stages[i];
    const bool chosen = std::find(selected.begin(), selected.end(), i) != selected.end();
    const pipeline::StageRecord* r = state.find(s.name);
    std::string outputs;
    if (r)
      for (const std::string& a : r->outputs) outputs += (outputs.empty() ? "" : ", ") + a;
    std::printf("%-*s  %-12s  %8s  %s\n", static_cast<int>(name_w), s.name.c_str(),
                chosen ? (r ? r->result.c_str() : "-") : "not selected",
                chosen && r ? fmt::format("{:.1f}", r->seconds).c_str() : "", outputs.c_str());
  }
  std::printf("%-*s  %-12s  %8.1f\n", static_cast<int>(name_w), "total", "", total);

  for (size_t i = n; i-- > 0;) {
    if (recipe.stages[i].kind != StageKind::kEval || !stages[i].spec) continue;
    const std::string results = (fs::path(output_dir(stages[i])) / "results.json").string();
    if (!fs::exists(results)) break;
    std::printf("\n==> evaluation (%s)\n", results.c_str());
    const json r = print_eval_table(results);
    if (!recipe.verdicts.empty()) {
      const std::vector<pipeline::Verdict> verdicts = pipeline::judge(recipe.verdicts, r);
      std::printf("\n");
      for (const pipeline::Verdict& v : verdicts) std::printf("%s\n", v.line.c_str());
      state.verdicts = pipeline::verdicts_json(verdicts);
      save_state(state, state_path);
    }
    break;
  }
  std::printf("\n");
  if (const int rc = dispatch({"report", recipe.run_dir}); rc != 0)
    throw InputError(fmt::format("`nemotron report {}` exited {}", recipe.run_dir, rc));
}

}  // namespace

void add_pipeline_commands(CLI::App& app) {
  for (const RecipeFamily& f : kRecipeFamilies) {
    CLI::App* family = family_group(app, f.name);
    auto o = std::make_shared<PipelineOptions>();
    o->family = f.name;
    CLI::App* cmd = family->add_subcommand(
        "pipeline", "Every stage in order (data prep -> pretrain -> SFT -> RL -> eval), skipping those up to date, "
                    "resuming one cut short; ends with the eval table and the HTML report");
    cmd->add_option("-c,--config", o->config,
                    fmt::format("Recipe: a name in recipes/{}/pipeline/ (tiny) or a YAML path", f.name))
        ->capture_default_str();
    cmd->add_flag("--force", o->force,
                  "Run every selected stage again: data prep with --force, a training stage's old checkpoints moved "
                  "aside to <dir>.replaced-<time>");
    cmd->add_option("--from", o->from, "Start at this stage (the ones before it are taken as they are)");
    cmd->add_option("--only", o->only, "Only these stages, comma-separated (in the recipe's order)");
    cmd->add_option("overrides", o->overrides, "key=value overrides of the pipeline recipe (run_dir=..., "
                                               "stages.1.overrides=[train.train_iters=10])")
        ->check(CLI::Validator(
            [](std::string& arg) { return is_override(arg) ? std::string() : "expected key=value, got " + arg; },
            "KEY=VALUE"));
    cmd->callback([o] { run_pipeline(*o); });
  }
}

}  // namespace nemotron::cli
