#include "eval/eval_results.h"

#include <fmt/format.h>

#include <algorithm>

namespace nemotron::eval {

nlohmann::json results_json(const ModelResults& m, const nlohmann::json& config) {
  nlohmann::json results = nlohmann::json::object(), n = nlohmann::json::object(), times = nlohmann::json::object();
  nlohmann::json higher = nlohmann::json::object();  // lm-eval's "higher_is_better": {task: {metric: bool}}
  for (const TaskResult& t : m.tasks) {
    nlohmann::json r = {{"alias", t.task}, {"type", task_type_name(t.type)}, {"num_fewshot", t.num_fewshot}};
    for (const MetricValue& v : t.metrics) {
      r[v.name + ",none"] = v.value;
      r[v.name + "_stderr,none"] = v.stderr_;
      higher[t.task][v.name] = v.higher_is_better;
    }
    results[t.task] = r;
    n[t.task] = {{"original", t.items}, {"effective", t.items}};
    times[t.task] = t.seconds;
  }
  return {{"results", results},           {"n-samples", n},
          {"model", {{"label", m.label}, {"path", m.path}, {"artifact", m.artifact}}},
          {"higher_is_better", higher},  {"task_seconds", times},        {"total_evaluation_time_seconds", m.seconds},
          {"config", config}};
}

void print_results_table(std::FILE* out, const std::vector<ModelResults>& models) {
  if (models.empty()) return;
  std::vector<std::string> col_names;
  for (const ModelResults& m : models) col_names.push_back(m.label);
  size_t task_w = 4, metric_w = 6, col_w = 15;
  for (const TaskResult& t : models[0].tasks) {
    task_w = std::max(task_w, t.task.size());
    for (const MetricValue& v : t.metrics) metric_w = std::max(metric_w, v.name.size() + 2);
  }
  for (const std::string& c : col_names) col_w = std::max(col_w, c.size());
  std::fprintf(out, "%-*s  %-*s", static_cast<int>(task_w), "Task", static_cast<int>(metric_w), "Metric");
  for (const std::string& c : col_names) std::fprintf(out, "  %*s", static_cast<int>(col_w), c.c_str());
  std::fprintf(out, "\n");
  for (size_t ti = 0; ti < models[0].tasks.size(); ++ti) {
    const TaskResult& t0 = models[0].tasks[ti];
    for (const MetricValue& v0 : t0.metrics) {
      const std::string metric = v0.name + (v0.higher_is_better ? " ↑" : " ↓");
      // printf pads bytes: the arrow is 3 bytes wide and 1 column.
      std::fprintf(out, "%-*s  %-*s", static_cast<int>(task_w), t0.task.c_str(), static_cast<int>(metric_w + 2),
                   metric.c_str());
      for (const ModelResults& m : models) {
        std::string cell = "-";
        if (ti < m.tasks.size())
          if (const MetricValue* v = m.tasks[ti].metric(v0.name))
            cell = v->value >= 100 ? fmt::format("{:.1f} ± {:.1f}", v->value, v->stderr_)
                                   : fmt::format("{:.3f} ± {:.3f}", v->value, v->stderr_);
        std::fprintf(out, "  %*s", static_cast<int>(col_w + (cell == "-" ? 0 : 1)), cell.c_str());  // ± is 2 bytes
      }
      std::fprintf(out, "\n");
    }
  }
}

}  // namespace nemotron::eval
