#include "eval/eval_config.h"

#include <fmt/format.h>

#include <set>

#include "core/config_tree.h"
#include "core/error.h"
#include "eval/bundled_tasks.h"

namespace nemotron::eval {

EvalConfig read_eval_config(const nlohmann::json& tree, const std::string& source) {
  EvalConfig c;
  c.source = source;
  ConfigReader root(tree, source);
  root.ignore("run");
  ConfigReader& dep = root.section("deployment");
  c.checkpoint_path = dep.get_string("checkpoint_path", "");
  if (c.checkpoint_path.empty()) dep.fail("checkpoint_path", "required: the checkpoint or Hugging Face directory to evaluate");
  c.device = dep.get_string("device", "cpu");
  if (c.device != "cpu" && c.device != "cuda") dep.fail("device", fmt::format("expected cpu or cuda, got \"{}\"", c.device));
  // The weights and activations: bf16 on a GPU as lm-eval's dtype=auto gives for a bf16 checkpoint.
  c.dtype = dep.get_string("dtype", "auto");
  if (c.dtype == "auto") c.dtype = c.device == "cuda" ? "bfloat16" : "float32";
  if (c.dtype != "bfloat16" && c.dtype != "float32")
    dep.fail("dtype", fmt::format("expected auto, bfloat16 or float32, got \"{}\"", c.dtype));
  if (c.dtype == "bfloat16" && c.device != "cuda") dep.fail("dtype", "bfloat16 needs device: cuda (the host computes in float32)");
  c.tokenizer = root.section("tokenizer").get_string("model", "");
  c.chat_template = root.get_string("chat_template", "nano3");
  c.output_dir = root.get_string("output_dir", "");
  if (c.output_dir.empty()) root.fail("output_dir", "required: where results.json goes");
  ConfigReader& ev = root.section("evaluation");
  c.row_tokens = ev.get_positive_int("row_tokens", 512);
  c.rows_per_forward = ev.get_positive_int("rows_per_forward", 8);
  c.limit_samples = ev.get_nonnegative_int("limit_samples", 0);
  const nlohmann::json& tasks = ev.get_raw("tasks");
  if (!tasks.is_array() || tasks.empty()) ev.fail("tasks", "expected a non-empty list of tasks");
  std::set<std::string> names;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string where = fmt::format("evaluation.tasks[{}]", i);
    if (!tasks[i].is_object()) throw_config_error(source, where, "expected a mapping");
    ConfigReader t(tasks[i], source, where);
    TaskSpec s;
    s.where = where;
    s.name = t.get_string("name", "");
    if (s.name.empty()) t.fail("name", "required");
    if (!names.insert(s.name).second) t.fail("name", fmt::format("\"{}\" names two tasks", s.name));
    const std::string type = t.get_string("type", "");
    const auto tt = task_type_from_name(type);
    if (!tt) t.fail("type", fmt::format("expected multiple_choice, generate or perplexity, got \"{}\"", type));
    s.type = *tt;
    s.path = t.get_string("path", "");
    s.generator = t.get_raw("generator");
    if (s.path.empty() == s.generator.is_null()) t.fail("path", "give either path (a JSONL file) or generator (exactly one)");
    const std::string fmt_name = t.get_string("format", "auto");
    const auto f = row_format_from_name(fmt_name);
    if (!f) t.fail("format", fmt::format("expected auto, native, lm_eval_mc or gsm8k, got \"{}\"", fmt_name));
    s.format = *f;
    s.fewshot_path = t.get_string("fewshot_path", "");
    s.shots.num_fewshot = t.get_nonnegative_int("num_fewshot", 0);
    s.shots.target_delimiter = t.get_string("target_delimiter", " ");
    s.shots.fewshot_delimiter = t.get_string("fewshot_delimiter", "\n\n");
    s.shots.seed = static_cast<uint64_t>(t.get_nonnegative_int("seed", 1234));
    s.limit = t.get_nonnegative_int("limit", 0);
    s.chat = t.get_bool("chat", false);
    s.max_new_tokens = t.get_positive_int("max_new_tokens", 64);
    s.samples = t.get_positive_int("samples", 1);
    s.temperature = t.get_number("temperature", 0.0);
    if (!(s.temperature >= 0)) t.fail("temperature", "expected >= 0 (0 = greedy)");
    s.top_p = t.get_number("top_p", 1.0);
    if (!(s.top_p > 0 && s.top_p <= 1)) t.fail("top_p", "expected 0 < top_p <= 1");
    s.verifier = t.get_string("verifier", "final_answer");
    if (s.verifier != "final_answer" && s.verifier != "exact" && s.verifier != "math")
      t.fail("verifier", fmt::format("expected final_answer, exact or math, got \"{}\"", s.verifier));
    if (s.type != TaskType::generate && (s.samples != 1 || s.chat))
      t.fail(s.chat ? "chat" : "samples", "only generate tasks sample completions");
    t.check_unknown_keys();
    c.tasks.push_back(std::move(s));
  }
  root.check_unknown_keys();
  return c;
}

std::vector<EvalItem> load_task_items(const TaskSpec& t, const EvalConfig& cfg) {
  int64_t limit = t.limit;
  if (cfg.limit_samples > 0 && (limit == 0 || cfg.limit_samples < limit)) limit = cfg.limit_samples;
  if (!t.path.empty()) return read_task_file(t.path, t.type, t.format, limit);
  nlohmann::json gen = t.generator;
  if (limit > 0 && gen.is_object() && (!gen.contains("count") || !gen["count"].is_number_integer() || gen["count"].get<int64_t>() > limit)) gen["count"] = limit;
  return generate_task_items(t.type, gen, cfg.source, t.where + ".generator");
}

std::vector<EvalItem> load_fewshot_pool(const TaskSpec& t) {
  if (t.fewshot_path.empty()) return {};
  return read_task_file(t.fewshot_path, t.type, t.format);
}

}  // namespace nemotron::eval
