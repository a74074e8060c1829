#include "report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json_limits.h"
#include "report/svg_chart.h"

namespace nemotron::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kKnownStages[] = {"pretrain", "sft", "rl", "grpo", "eval"};

bool read_text(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

// iter_0000100 -> 100; -1 for other names.
int64_t iteration_of(const std::string& name) {
  if (name.size() <= 5 || name.rfind("iter_", 0) != 0) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (int64_t{1} << 50)) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

bool looks_like_stage(const fs::path& d) {
  std::error_code ec;
  if (fs::exists(d / "metrics.jsonl", ec) || fs::exists(d / "latest_checkpointed_iteration.txt", ec)) return true;
  for (const auto& e : fs::directory_iterator(d, ec))
    if (e.is_directory(ec) && iteration_of(e.path().filename().string()) >= 0) return true;
  return false;
}

StageRun load_stage(const fs::path& dir, std::string name) {
  StageRun s;
  s.name = std::move(name);
  s.dir = dir.string();
  std::error_code ec;
  const fs::path metrics = dir / "metrics.jsonl";
  if (fs::exists(metrics, ec)) {
    std::ifstream in(metrics);
    std::string line;
    int64_t n = 0, bad = 0;
    std::string first_bad;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json r = parse_json_or_discarded<json>(line);
      if (r.is_discarded() || !r.is_object()) {
        if (bad++ == 0) first_bad = fmt::format("{}:{}", metrics.string(), n);
        continue;
      }
      s.records.push_back(std::move(r));
    }
    if (bad > 0)
      s.warnings.push_back(fmt::format("{} line(s) of metrics.jsonl are not JSON objects and were skipped (first: {})",
                                       bad, first_bad));
  } else {
    s.warnings.push_back(fmt::format("{}: no metrics.jsonl", dir.string()));
  }
  // The resolved config: the stage's own config.yaml, else the newest checkpoint's.
  fs::path config = dir / "config.yaml";
  if (!fs::exists(config, ec)) {
    config.clear();
    int64_t best = -1;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const int64_t it = iteration_of(e.path().filename().string());
      if (it > best && fs::exists(e.path() / "config.yaml", ec)) best = it, config = e.path() / "config.yaml";
    }
  }
  if (!config.empty()) {
    if (read_text(config, s.config_text))
      s.config_path = config.string();
    else
      s.warnings.push_back(fmt::format("{}: cannot be read", config.string()));
  }
  return s;
}

int stage_rank(const std::string& name) {
  for (size_t i = 0; i < std::size(kKnownStages); ++i)
    if (name == kKnownStages[i]) return static_cast<int>(i);
  return static_cast<int>(std::size(kKnownStages));
}

// --- rendering ----------------------------------------------------------------------------------

std::string number_text(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// Readable chart titles for the keys the trainers write; other keys show as written.
std::string metric_title(const std::string& key) {
  static const std::map<std::string, std::string> kTitles = {
      {"lm_loss", "lm loss"},          {"lr", "learning rate"},
      {"grad_norm", "grad norm"},      {"tokens_per_second", "throughput (tokens/s)"},
      {"step_seconds", "iteration time (s)"}, {"load_balancing_loss", "load balancing loss"},
      {"moe_max_load", "MoE max load"}};
  auto it = kTitles.find(key);
  return it == kTitles.end() ? key : it->second;
}

// Chart order: losses, schedule and stability first, then RL outcomes, then the rest by name.
int metric_rank(const std::string& key) {
  if (key == "lm_loss") return 0;
  if (key == "lr") return 1;
  if (key == "grad_norm") return 2;
  if (key.find("reward") != std::string::npos) return 3;
  if (key.find("accuracy") != std::string::npos) return 4;
  if (key == "tokens_per_second") return 6;
  if (key == "step_seconds") return 7;
  return 5;
}

std::string stage_charts(const StageRun& s) {
  // key -> record type -> points; the x axis is the iteration.
  std::map<std::string, std::map<std::string, std::vector<std::pair<double, double>>>> by_key;
  for (const json& r : s.records) {
    const std::string type = r.value("type", "train");
    if (type == "summary" || !r.contains("iteration") || !r["iteration"].is_number()) continue;
    const double it = r["iteration"].get<double>();
    for (const auto& [key, v] : r.items())
      if (v.is_number() && key != "iteration" && key != "consumed_samples") by_key[key][type].emplace_back(it, v.get<double>());
  }
  std::vector<std::string> keys;
  for (const auto& [k, _] : by_key) keys.push_back(k);
  std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return metric_rank(a) < metric_rank(b); });
  std::string out;
  for (const std::string& key : keys) {
    std::vector<Series> series;
    for (auto& [type, pts] : by_key[key]) {
      std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      series.push_back({type, pts});
    }
    // Training first so it keeps the first colour; validation next.
    std::stable_sort(series.begin(), series.end(), [](const Series& a, const Series& b) {
      return (a.name != "train") < (b.name != "train");
    });
    const std::string svg = svg_line_chart(metric_title(key), "iteration", series);
    if (!svg.empty()) out += "<figure class=\"chart\">" + svg + "</figure>\n";
  }
  return out;
}

// Last value of `key` in records of `type`, as text ("" if none).
std::string last_value(const StageRun& s, const std::string& type, const std::string& key, int64_t* iteration = nullptr) {
  for (auto it = s.records.rbegin(); it != s.records.rend(); ++it)
    if (it->value("type", "") == type && it->contains(key)) {
      if (iteration) *iteration = it->value("iteration", int64_t{-1});
      return number_text((*it)[key]);
    }
  return "";
}

std::string summary_table(const RunData& run) {
  std::string t =
      "<table class=\"summary\">\n<tr><th>stage</th><th>iterations</th><th>last lm loss</th><th>last validation "
      "loss</th><th>training time (s)</th><th>last checkpoint</th></tr>\n";
  for (const StageRun& s : run.stages) {
    int64_t last_it = -1;
    for (const json& r : s.records)
      if (r.contains("iteration") && r["iteration"].is_number_integer())
        last_it = std::max(last_it, r["iteration"].get<int64_t>());
    double seconds = 0;
    std::string checkpoint;
    for (const json& r : s.records)
      if (r.value("type", "") == "summary") {
        if (r.contains("seconds") && r["seconds"].is_number()) seconds += r["seconds"].get<double>();
        if (r.contains("checkpoint") && r["checkpoint"].is_string() && !r["checkpoint"].get<std::string>().empty())
          checkpoint = r["checkpoint"].get<std::string>();
      }
    t += fmt::format(
        "<tr><td><a href=\"#stage-{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>{5}</td></tr>\n",
        html_escape(s.name), last_it >= 0 ? std::to_string(last_it) : "-",
        html_escape(last_value(s, "train", "lm_loss")), html_escape(last_value(s, "validation", "lm_loss")),
        seconds > 0 ? fmt::format("{:.1f}", seconds) : "-", html_escape(checkpoint));
  }
  return t + "</table>\n";
}

// A results.json as rows of dotted keys and values (nested objects flattened, lists indexed).
void flatten(const json& v, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& rows) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [k, x] : v.items()) flatten(x, prefix.empty() ? k : prefix + "." + k, rows);
  } else if (v.is_array() && !v.empty() && rows.size() < 5000) {
    for (size_t i = 0; i < v.size(); ++i) flatten(v[i], fmt::format("{}[{}]", prefix, i), rows);
  } else if (rows.size() < 5000) {
    rows.emplace_back(prefix, number_text(v));
  }
}

std::string text_of(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : "";
}

std::string joined(const json& list) {
  std::string s;
  if (list.is_array())
    for (const json& x : list)
      if (x.is_string()) s += (s.empty() ? "" : ", ") + x.get<std::string>();
  return s;
}

// The artifacts of pipeline.json's "lineage" ({artifact, type, inputs}) as a layered graph: an
// artifact's column is one past its deepest input's, so raw data sits left and scores right.
std::string lineage_svg(const json& lineage) {
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> inputs;
  std::map<std::string, std::string> types;
  for (const json& e : lineage) {
    const std::string a = text_of(e, "artifact");
    if (a.empty() || inputs.count(a)) continue;
    names.push_back(a);
    types[a] = text_of(e, "type");
    auto& in = inputs[a];
    if (e.contains("inputs") && e["inputs"].is_array())
      for (const json& x : e["inputs"])
        if (x.is_string()) in.push_back(x.get<std::string>());
  }
  for (const std::string& a : std::vector<std::string>(names))  // inputs outside the record: leaves
    for (const std::string& i : inputs[a])
      if (!inputs.count(i)) names.push_back(i), inputs[i] = {};
  if (names.empty()) return "";
  std::map<std::string, int> layer;
  for (size_t pass = 0; pass <= names.size(); ++pass)  // longest path; a cycle stops at names.size()
    for (const std::string& a : names) {
      int l = 0;
      for (const std::string& i : inputs[a]) l = std::max(l, layer[i] + 1);
      layer[a] = l;
    }
  std::map<int, std::vector<std::string>> columns;
  for (const std::string& a : names) columns[layer[a]].push_back(a);
  constexpr int kColW = 250, kBoxW = 210, kRowH = 46, kBoxH = 34, kPad = 10;
  size_t rows = 0;
  for (const auto& [l, v] : columns) rows = std::max(rows, v.size());
  std::map<std::string, std::pair<int, int>> at;  // top-left of each box
  for (const auto& [l, v] : columns)
    for (size_t r = 0; r < v.size(); ++r) at[v[r]] = {kPad + l * kColW, kPad + static_cast<int>(r) * kRowH};
  const int w = kPad * 2 + static_cast<int>(columns.rbegin()->first) * kColW + kBoxW;
  const int h = kPad * 2 + static_cast<int>(rows) * kRowH;
  std::string svg = fmt::format(
      "<svg class=\"lineage\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n"
      "<title>artifact lineage</title>\n",
      w, h);
  for (const std::string& a : names)
    for (const std::string& i : inputs[a])
      svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>\n", at[i].first + kBoxW,
                         at[i].second + kBoxH / 2, at[a].first, at[a].second + kBoxH / 2);
  for (const std::string& a : names) {
    const auto [x, y] = at[a];
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"4\" fill=\"#eef3fb\" stroke=\"#5878a8\"/>\n"
        "<text x=\"{}\" y=\"{}\">{}</text>\n<text x=\"{}\" y=\"{}\" fill=\"#666\">{}</text>\n",
        x, y, kBoxW, kBoxH, x + 6, y + 14, html_escape(a), x + 6, y + 28, html_escape(types[a]));
  }
  return svg + "</svg>\n";
}

// pipeline.json: the stages as the pipeline ran them, the artifacts' lineage, each stage's config.
std::string pipeline_section(const RunData& run) {
  std::string h = "<section id=\"pipeline\">\n<h2>pipeline</h2>\n";
  if (!run.pipeline_warning.empty()) return h + fmt::format("<p class=\"warn\">{}</p>\n</section>\n", html_escape(run.pipeline_warning));
  const json& p = run.pipeline;
  h += fmt::format("<p class=\"meta\">recipe {}</p>\n", html_escape(text_of(p, "recipe")));
  h += "<table class=\"pipeline\">\n<tr><th>stage</th><th>result</th><th>seconds</th><th>outputs</th><th>command</th></tr>\n";
  for (const json& s : p["stages"]) {
    std::string seconds = "-";
    if (s.is_object() && s.contains("seconds") && s["seconds"].is_number())
      seconds = fmt::format("{:.1f}", s["seconds"].get<double>());
    std::string result = text_of(s, "result");
    if (result.empty()) result = text_of(s, "status");
    h += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td></tr>\n",
                     html_escape(text_of(s, "name")), html_escape(result), seconds,
                     html_escape(s.is_object() ? joined(s.value("outputs", json())) : ""), html_escape(text_of(s, "command")));
  }
  h += "</table>\n";
  if (p.contains("lineage") && p["lineage"].is_array()) {
    const std::string svg = lineage_svg(p["lineage"]);
    if (!svg.empty()) h += "<h3>lineage</h3>\n<figure class=\"chart\">\n" + svg + "</figure>\n";
  }
  for (const json& s : p["stages"])
    if (s.is_object() && s.contains("config") && !s["config"].is_null())
      h += fmt::format("<details>\n<summary>{} config</summary>\n<pre>{}</pre>\n</details>\n",
                       html_escape(text_of(s, "name")), html_escape(s["config"].dump(2)));
  return h + "</section>\n";
}

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; max-width: 1500px; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
figure.chart { margin: 0; border: 1px solid #ddd; }
svg text { font-family: sans-serif; font-size: 11px; fill: #333; }
svg text.t { font-size: 13px; font-weight: bold; }
svg text.yl { text-anchor: end; } svg text.xl, svg text.xt { text-anchor: middle; }
svg line.g { stroke: #e5e5e5; } svg rect.frame { fill: none; stroke: #999; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }
.meta { color: #666; font-size: 13px; } .warn { color: #a40; font-size: 13px; }
)";

}  // namespace

RunData load_run(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec))
    throw InputError(fmt::format("{}: {}", run_dir, fs::exists(run_dir, ec) ? "not a directory" : "no such directory"));
  RunData run;
  run.run_dir = run_dir;
  const fs::path root(run_dir);
  if (fs::exists(root / "metrics.jsonl", ec)) {
    std::string name = fs::weakly_canonical(root, ec).filename().string();
    run.stages.push_back(load_stage(root, name.empty() ? run_dir : name));
  }
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec) && iteration_of(e.path().filename().string()) < 0) subdirs.push_back(e.path());
  std::sort(subdirs.begin(), subdirs.end(), [](const fs::path& a, const fs::path& b) {
    const int ra = stage_rank(a.filename().string()), rb = stage_rank(b.filename().string());
    return ra != rb ? ra < rb : a.filename() < b.filename();
  });
  for (const fs::path& d : subdirs)
    if (looks_like_stage(d)) run.stages.push_back(load_stage(d, d.filename().string()));

  std::vector<fs::path> results;
  if (fs::exists(root / "results.json", ec)) results.push_back(root / "results.json");
  for (const fs::path& d : subdirs)
    if (fs::exists(d / "results.json", ec)) results.push_back(d / "results.json");
  for (const fs::path& p : results) {
    EvalResults e;
    e.path = p.string();
    std::string text;
    if (!read_text(p, text)) {
      e.warning = "cannot be read";
    } else {
      e.results = parse_json_or_discarded<json>(text);
      if (e.results.is_discarded()) e.results = nullptr, e.warning = "not valid JSON";
    }
    run.evals.push_back(std::move(e));
  }
  if (fs::exists(root / "pipeline.json", ec)) {
    std::string text;
    if (!read_text(root / "pipeline.json", text)) {
      run.pipeline_warning = "pipeline.json cannot be read";
    } else {
      json p = parse_json_or_discarded<json>(text);
      if (p.is_discarded() || !p.is_object() || !p.contains("stages") || !p["stages"].is_array())
        run.pipeline_warning = "pipeline.json is not a pipeline record (a JSON object with stages)";
      else
        run.pipeline = std::move(p);
    }
  }
  if (run.stages.empty() && run.evals.empty() && run.pipeline.is_null() && run.pipeline_warning.empty())
    throw InputError(fmt::format(
        "{}: no training stage found (expected metrics.jsonl or checkpoints in it or in its subdirectories, as "
        "in runs/super3/tiny/pretrain) and no results.json",
        run_dir));
  return run;
}

std::string render_report(const RunData& run, const std::string& generated_at) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Nothing may be fetched: styles are inline, charts are inline SVG, there is no script.
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "img-src data:\">\n";
  h += "<link rel=\"icon\" href=\"data:,\">\n";
  h += fmt::format("<title>nemotron report: {}</title>\n<style>{}</style>\n</head>\n<body>\n", html_escape(run.run_dir),
                   kStyle);
  h += fmt::format("<h1>nemotron report: {}</h1>\n<p class=\"meta\">generated {} from {} stage(s){}</p>\n",
                   html_escape(run.run_dir), html_escape(generated_at), run.stages.size(),
                   run.evals.empty() ? "" : fmt::format(" and {} results.json", run.evals.size()));
  if (!run.stages.empty()) h += summary_table(run);
  if (!run.pipeline.is_null() || !run.pipeline_warning.empty()) h += pipeline_section(run);
  for (const StageRun& s : run.stages) {
    h += fmt::format("<section id=\"stage-{0}\">\n<h2>{0}</h2>\n<p class=\"meta\">{1}: {2} metrics record(s)</p>\n",
                     html_escape(s.name), html_escape(s.dir), s.records.size());
    for (const std::string& w : s.warnings) h += fmt::format("<p class=\"warn\">{}</p>\n", html_escape(w));
    const std::string charts = stage_charts(s);
    h += charts.empty() ? "<p class=\"meta\">no metrics to plot</p>\n" : "<div class=\"charts\">\n" + charts + "</div>\n";
    if (!s.config_path.empty())
      h += fmt::format("<details>\n<summary>resolved config ({})</summary>\n<pre>{}</pre>\n</details>\n",
                       html_escape(s.config_path), html_escape(s.config_text));
    h += "</section>\n";
  }
  if (!run.evals.empty()) {
    h += "<section id=\"evaluation\">\n<h2>evaluation</h2>\n";
    for (const EvalResults& e : run.evals) {
      h += fmt::format("<h3>{}</h3>\n", html_escape(e.path));
      if (!e.warning.empty()) {
        h += fmt::format("<p class=\"warn\">{}</p>\n", html_escape(e.warning));
        continue;
      }
      std::vector<std::pair<std::string, std::string>> rows;
      flatten(e.results, "", rows);
      h += "<table class=\"eval\">\n<tr><th>metric</th><th>value</th></tr>\n";
      for (const auto& [k, v] : rows)
        h += fmt::format("<tr><td>{}</td><td class=\"num\">{}</td></tr>\n", html_escape(k), html_escape(v));
      h += "</table>\n";
    }
    h += "</section>\n";
  }
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace nemotron::report
