#include "pipeline/stage_verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::pipeline {

namespace {

using json = nlohmann::json;

// Shares (accuracy, pass@k, exact match) read best as percent; anything else as it is.
bool is_share(const std::string& metric) {
  return metric.rfind("acc", 0) == 0 || metric.rfind("pass@", 0) == 0 || metric.rfind("exact_match", 0) == 0;
}

std::string show(const std::string& metric, double v) {
  return is_share(metric) ? fmt::format("{:.1f}%", 100.0 * v) : fmt::format("{:.3f}", v);
}

std::string show_gain(const std::string& metric, double g) {
  return is_share(metric) ? fmt::format("{:+.1f} points", 100.0 * g) : fmt::format("{:+.3f}", g);
}

// The model entry of results.json whose artifact is `name:vN` (or exactly `name`).
const json* column(const json& results, const std::string& name) {
  const json* models = results.is_object() && results.contains("models") ? &results["models"] : nullptr;
  if (!models || !models->is_array()) return nullptr;
  for (const json& m : *models) {
    if (!m.is_object() || !m.contains("model") || !m["model"].is_object()) continue;
    const std::string a = m["model"].value("artifact", "");
    if (a == name || a.rfind(name + ":", 0) == 0) return &m;
  }
  return nullptr;
}

std::optional<double> value_of(const json* model, const std::string& task, const std::string& metric) {
  if (!model || !model->contains("results") || !(*model)["results"].is_object()) return std::nullopt;
  const json& r = (*model)["results"];
  if (!r.contains(task) || !r[task].is_object()) return std::nullopt;
  const std::string key = metric + ",none";
  if (!r[task].contains(key) || !r[task][key].is_number()) return std::nullopt;
  const double v = r[task][key].get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// results.json's higher_is_better for the metric; true when it does not say.
bool higher_is_better(const json* model, const std::string& task, const std::string& metric) {
  if (!model || !model->contains("higher_is_better")) return true;
  const json& h = (*model)["higher_is_better"];
  if (!h.is_object() || !h.contains(task) || !h[task].is_object() || !h[task].contains(metric)) return true;
  return !h[task][metric].is_boolean() || h[task][metric].get<bool>();
}

}  // namespace

std::vector<VerdictSpec> read_verdicts(const json& node, const std::string& source,
                                       const std::vector<std::string>& stage_names) {
  std::vector<VerdictSpec> out;
  if (node.is_null()) return out;
  if (!node.is_array()) throw_config_error(source, "verdicts", "expected a list of {stage, task, metric, before, after, min_gain}");
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string where = fmt::format("verdicts[{}]", i);
    if (!node[i].is_object()) throw_config_error(source, where, "expected a mapping (stage, task, metric, before, after, min_gain)");
    ConfigReader r(node[i], source, where);
    VerdictSpec v;
    v.where = where;
    v.stage = r.get_string("stage", "");
    if (std::find(stage_names.begin(), stage_names.end(), v.stage) == stage_names.end())
      r.fail("stage", fmt::format("expected a stage of this recipe, got {}", describe_value(r.get_raw("stage"))));
    v.says = r.get_string("says", v.stage);
    for (auto [key, field] : {std::pair{"task", &v.task}, {"metric", &v.metric}, {"before", &v.before}, {"after", &v.after}}) {
      *field = r.get_string(key, "");
      if (field->empty()) r.fail(key, "required");
    }
    for (auto [key, field] : {std::pair{"before", &v.before}, {"after", &v.after}})
      if (field->find_first_of(":,") != std::string::npos)
        r.fail(key, fmt::format("expected an artifact name without :version (an eval column), got \"{}\"", *field));
    v.min_gain = r.get_number("min_gain", 0.0);
    if (!std::isfinite(v.min_gain) || v.min_gain <= 0)
      r.fail("min_gain", fmt::format("expected a positive number (the least gain that proves the stage), got {}",
                                     describe_value(r.get_raw("min_gain"))));
    r.check_unknown_keys();
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<Verdict> judge(const std::vector<VerdictSpec>& specs, const json& results) {
  std::vector<Verdict> out;
  for (const VerdictSpec& s : specs) {
    Verdict v;
    v.spec = s;
    const json* b = column(results, s.before);
    const json* a = column(results, s.after);
    v.before = value_of(b, s.task, s.metric);
    v.after = value_of(a, s.task, s.metric);
    const std::string what = s.task + " " + s.metric;
    if (!v.before || !v.after) {
      const std::string& missing = !v.before ? s.before : s.after;
      const bool no_column = !(!v.before ? b : a);
      v.line = fmt::format("verdict {}: cannot judge {}: the eval results have {} (needs {} before and after): FAIL",
                           s.stage, s.says,
                           no_column ? fmt::format("no column {}", missing) : fmt::format("no {} for {}", what, missing),
                           what);
      out.push_back(std::move(v));
      continue;
    }
    const bool up = higher_is_better(a, s.task, s.metric);
    const double gain = up ? *v.after - *v.before : *v.before - *v.after;
    v.passed = gain >= s.min_gain - 1e-9;  // scores are k/n: 0.3 - 0.2 is 0.1 less one rounding
    const char* verb = v.passed ? (up ? "raised" : "lowered") : (up ? "did not clearly raise" : "did not clearly lower");
    v.line = fmt::format("verdict {}: {} {} {} {} -> {} ({}, needs {}): {}", s.stage, s.says, verb, what, show(s.metric, *v.before),
                         show(s.metric, *v.after), show_gain(s.metric, up ? gain : -gain),
                         show_gain(s.metric, up ? s.min_gain : -s.min_gain), v.passed ? "PASS" : "FAIL");
    out.push_back(std::move(v));
  }
  return out;
}

json verdicts_json(const std::vector<Verdict>& vs) {
  json out = json::array();
  for (const Verdict& v : vs)
    out.push_back({{"stage", v.spec.stage},
                   {"task", v.spec.task},
                   {"metric", v.spec.metric},
                   {"before", v.spec.before},
                   {"after", v.spec.after},
                   {"before_value", v.before ? json(*v.before) : json(nullptr)},
                   {"after_value", v.after ? json(*v.after) : json(nullptr)},
                   {"min_gain", v.spec.min_gain},
                   {"passed", v.passed},
                   {"line", v.line}});
  return out;
}

}  // namespace nemotron::pipeline
