// The HTML report: escaping, chart ticks and geometry, stage discovery that tolerates missing
// stages and broken lines, and a page that fetches nothing and lets no input string through raw.
#include "report/run_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "report/svg_chart.h"

namespace nemotron::report {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("nemotron-report-test-" + std::to_string(getpid()));
  TempDir() { fs::remove_all(path), fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
  }
};

TEST(Html, escape_covers_markup_and_quotes) {
  EXPECT_EQ(html_escape("<a href=\"x\">Tom & 'Jerry'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain"), "plain");
}

TEST(SvgChart, nice_ticks_are_round_and_cover_the_range) {
  EXPECT_EQ(nice_ticks(0, 10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0.5, 4.5), (std::vector<double>{1, 2, 3, 4}));
  const auto t = nice_ticks(6.87, 6.96);
  ASSERT_GE(t.size(), 3u);
  EXPECT_GE(t.front(), 6.87);
  EXPECT_LE(t.back(), 6.96);
  EXPECT_TRUE(nice_ticks(1, 1).empty());
  EXPECT_TRUE(nice_ticks(0, std::numeric_limits<double>::infinity()).empty());
}

TEST(SvgChart, draws_lines_dots_and_legend_and_skips_non_finite_points) {
  const std::string svg = svg_line_chart(
      "lm <loss>", "iteration",
      {{"train", {{1, 3.0}, {2, 2.5}, {3, std::nan("")}, {4, 2.0}}}, {"validation", {{2, 2.8}}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("<title>lm &lt;loss&gt;</title>"), std::string::npos);
  EXPECT_EQ(svg.find("<loss>"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find(">validation</text>"), std::string::npos);  // a legend with two series
  // 3 finite train points + 1 validation point, all drawn as dots.
  size_t dots = 0;
  for (size_t p = svg.find("<circle"); p != std::string::npos; p = svg.find("<circle", p + 1)) ++dots;
  EXPECT_EQ(dots, 4u);
  EXPECT_TRUE(svg_line_chart("t", "x", {{"s", {{1, std::nan("")}}}}).empty());
}

TEST(SvgChart, long_series_are_thinned_but_keep_their_spike) {
  Series s{"train", {}};
  for (int i = 0; i < 100000; ++i) s.points.emplace_back(i, i == 54321 ? 1000.0 : 1.0);
  const std::string svg = svg_line_chart("loss", "iteration", {s});
  EXPECT_LT(svg.size(), 60000u);
  EXPECT_NE(svg.find("1000"), std::string::npos);  // the spike sets the y axis
}

TEST(RunReport, finds_stages_in_order_and_tolerates_missing_and_broken_parts) {
  TempDir d;
  d.write("sft/metrics.jsonl",
          "{\"type\":\"train\",\"iteration\":1,\"lm_loss\":2.0,\"lr\":1e-5,\"grad_norm\":1.0}\n"
          "{\"type\":\"train\",\"iteration\":2,\"lm_l\n"  // a line torn by a crash
          "{\"type\":\"validation\",\"iteration\":2,\"lm_loss\":2.2}\n"
          "{\"type\":\"summary\",\"iteration\":2,\"seconds\":3.5,\"checkpoint\":\"ck/iter_0000002\"}\n");
  d.write("sft/iter_0000001/config.yaml", "old: 1\n");
  d.write("sft/iter_0000002/config.yaml", "model:\n  name: \"<b>x</b>\"\n");
  d.write("pretrain/metrics.jsonl", "{\"type\":\"train\",\"iteration\":1,\"lm_loss\":7.0}\n");
  d.write("rl/metrics.jsonl", "{\"type\":\"train\",\"iteration\":1,\"reward_mean\":0.25,\"accuracy\":0.5}\n");
  d.write("notes/readme.txt", "not a stage");
  d.write("eval/results.json", "{\"gsm8k\": {\"accuracy\": 0.5}, \"note\": \"<script>alert(1)</script>\"}");
  d.write("results.json", "{not json");

  const RunData run = load_run(d.path.string());
  ASSERT_EQ(run.stages.size(), 3u);
  EXPECT_EQ(run.stages[0].name, "pretrain");
  EXPECT_EQ(run.stages[1].name, "sft");
  EXPECT_EQ(run.stages[2].name, "rl");
  const StageRun& sft = run.stages[1];
  EXPECT_EQ(sft.records.size(), 3u);
  ASSERT_EQ(sft.warnings.size(), 1u);
  EXPECT_NE(sft.warnings[0].find("metrics.jsonl:2"), std::string::npos) << sft.warnings[0];
  EXPECT_EQ(fs::path(sft.config_path).parent_path().filename(), "iter_0000002");
  ASSERT_EQ(run.evals.size(), 2u);
  EXPECT_EQ(run.evals[0].warning, "not valid JSON");

  const std::string page = render_report(run, "now");
  for (const char* want : {"<h2>pretrain</h2>", "<h2>sft</h2>", "<h2>rl</h2>", "<title>reward_mean</title>",
                           "<title>accuracy</title>", "<title>lm loss</title>", "<title>learning rate</title>",
                           "<title>grad norm</title>", "<details>", "&lt;b&gt;x&lt;/b&gt;", "gsm8k.accuracy",
                           "&lt;script&gt;alert(1)&lt;/script&gt;", "not valid JSON", "ck/iter_0000002"})
    EXPECT_NE(page.find(want), std::string::npos) << want;
  // Self-contained: no script, no external resource, and CSP forbids any fetch.
  for (const char* banned : {"<script", "src=", "url(", "@import", "https://", "<b>x"})
    EXPECT_EQ(page.find(banned), std::string::npos) << banned;
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
}

TEST(RunReport, a_stage_directory_alone_is_a_run) {
  TempDir d;
  d.write("pretrain/metrics.jsonl", "{\"type\":\"train\",\"iteration\":1,\"lm_loss\":7.0}\n");
  const RunData run = load_run((d.path / "pretrain").string());
  ASSERT_EQ(run.stages.size(), 1u);
  EXPECT_EQ(run.stages[0].name, "pretrain");
}

TEST(RunReport, no_stage_or_no_directory_is_an_input_error) {
  TempDir d;
  EXPECT_THROW(load_run(d.path.string()), InputError);
  EXPECT_THROW(load_run((d.path / "missing").string()), InputError);
  d.write("file", "x");
  EXPECT_THROW(load_run((d.path / "file").string()), InputError);
}

TEST(RunReport, shows_the_pipeline_record_with_lineage_and_configs) {
  TempDir d;
  d.write("pretrain/metrics.jsonl", "{\"type\":\"train\",\"iteration\":1,\"lm_loss\":7.0}\n");
  d.write("pipeline.json", R"({"recipe": "recipes/super3/pipeline/tiny.yaml", "stages": [
    {"name": "data_prep_pretrain", "result": "up to date", "seconds": 0.4, "outputs": ["tiny-data:v1"],
     "command": "nemotron super3 data prep pretrain -c tiny", "config": {"output_dir": "runs/<x>"}},
    {"name": "pretrain", "result": "ran", "seconds": 41.25, "outputs": ["tiny-pretrain:v3"],
     "command": "nemotron super3 pretrain -c tiny", "config": {"train": {"train_iters": 300}}}],
    "lineage": [{"artifact": "tiny-pretrain:v3", "type": "model", "inputs": ["tiny-data:v1"]},
                {"artifact": "tiny-data:v1", "type": "PretrainBlendsArtifact", "inputs": ["raw:v1"]}]})");
  const RunData run = load_run(d.path.string());
  ASSERT_TRUE(run.pipeline.is_object());
  const std::string page = render_report(run, "now");
  for (const char* want : {"<h2>pipeline</h2>", "<td>up to date</td>", "41.2", "tiny-pretrain:v3",
                           "<title>artifact lineage</title>", ">raw:v1</text>", ">tiny-data:v1</text>",
                           "data_prep_pretrain config", "runs/&lt;x&gt;", "&quot;train_iters&quot;: 300"})
    EXPECT_NE(page.find(want), std::string::npos) << want;
  // raw data left of the data left of the model: one column per depth
  for (const char* want : {"<text x=\"16\" y=\"24\">raw:v1</text>", "<text x=\"266\" y=\"24\">tiny-data:v1</text>",
                           "<text x=\"516\" y=\"24\">tiny-pretrain:v3</text>"})
    EXPECT_NE(page.find(want), std::string::npos) << want;

  TempDir only_record;  // a pipeline that has run nothing but data prep is still a report
  only_record.write("pipeline.json", "{\"stages\": []}");
  EXPECT_NO_THROW(load_run(only_record.path.string()));
  only_record.write("pipeline.json", "[1, 2]");
  const RunData bad = load_run(only_record.path.string());
  EXPECT_NE(render_report(bad, "now").find("not a pipeline record"), std::string::npos);
}

}  // namespace
}  // namespace nemotron::report
