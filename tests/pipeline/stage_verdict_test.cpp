// The pipeline's per-stage verdicts (pipeline/stage_verdict.h): a stage that raised its skill by the
// recipe's least gain reads PASS, one that did not reads FAIL, a missing column or metric is a FAIL
// that names it, and bad `verdicts:` entries are one error naming the file and key.
#include <gtest/gtest.h>

#include <string>

#include "core/config_tree.h"
#include "core/error.h"
#include "pipeline/pipeline_recipe.h"
#include "pipeline/stage_verdict.h"

namespace nemotron::pipeline {
namespace {

using json = nlohmann::json;

// results.json as `nemotron eval` writes it for base -> SFT -> RL, one-step pass@1 and perplexity.
json results(double base, double sft, double rl) {
  auto model = [](const std::string& artifact, double pass, double ppl) {
    return json{{"model", {{"artifact", artifact}}},
                {"results", {{"arithmetic_onestep", {{"pass@1,none", pass}, {"pass@1_stderr,none", 0.01}}},
                             {"arithmetic_text", {{"token_perplexity,none", ppl}}}}},
                {"higher_is_better", {{"arithmetic_onestep", {{"pass@1", true}}},
                                      {"arithmetic_text", {{"token_perplexity", false}}}}}};
  };
  return {{"models", json::array({model("super3-tiny-pretrain:v3", base, 3.4), model("super3-tiny-sft:v2", sft, 8.2),
                                  model("super3-tiny-rl:v7", rl, 8.0)})}};
}

const char* kRecipe = R"(run_dir: runs/x
stages:
  - {name: sft, command: sft, config: tiny}
  - {name: rl, command: rl, config: tiny}
  - {name: eval, command: eval, config: tiny}
verdicts:
  - {stage: sft, says: SFT, task: arithmetic_onestep, metric: pass@1, before: super3-tiny-pretrain, after: super3-tiny-sft, min_gain: 0.2}
  - {stage: rl, says: GRPO, task: arithmetic_onestep, metric: pass@1, before: super3-tiny-sft, after: super3-tiny-rl, min_gain: 0.1}
)";

std::vector<VerdictSpec> specs() { return read_pipeline_recipe(parse_yaml_text(kRecipe, "p.yaml"), "p.yaml").verdicts; }

TEST(StageVerdict, GainAtLeastTheRecipesMinimumPasses) {
  const auto v = judge(specs(), results(0.0, 0.31, 0.52));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].passed);
  EXPECT_TRUE(v[1].passed);
  EXPECT_EQ(v[0].line, "verdict sft: SFT raised arithmetic_onestep pass@1 0.0% -> 31.0% (+31.0 points, needs +20.0 points): PASS");
  EXPECT_EQ(v[1].line, "verdict rl: GRPO raised arithmetic_onestep pass@1 31.0% -> 52.0% (+21.0 points, needs +10.0 points): PASS");
}

TEST(StageVerdict, AStageThatDidNotRaiseItsSkillFails) {
  const auto v = judge(specs(), results(0.0, 0.08, 0.10));  // the README's old numbers: GRPO inside the noise
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].passed);
  EXPECT_FALSE(v[1].passed);
  EXPECT_EQ(v[1].line,
            "verdict rl: GRPO did not clearly raise arithmetic_onestep pass@1 8.0% -> 10.0% (+2.0 points, needs +10.0 "
            "points): FAIL");
  EXPECT_FALSE(judge(specs(), results(0.0, 0.40, 0.30))[1].passed);  // a loss is no gain
  EXPECT_TRUE(judge(specs(), results(0.0, 0.20, 0.30))[1].passed);   // exactly the minimum
}

TEST(StageVerdict, LowerIsBetterMetricsCountAFallAsTheGain) {
  std::vector<VerdictSpec> s = specs();
  s[1].task = "arithmetic_text", s[1].metric = "token_perplexity", s[1].min_gain = 0.1;
  const auto v = judge(s, results(0.0, 0.3, 0.3));
  EXPECT_TRUE(v[1].passed);  // 8.2 -> 8.0
  EXPECT_EQ(v[1].line, "verdict rl: GRPO lowered arithmetic_text token_perplexity 8.200 -> 8.000 (-0.200, needs -0.100): PASS");
  s[1].min_gain = 0.5;
  EXPECT_FALSE(judge(s, results(0.0, 0.3, 0.3))[1].passed);
}

TEST(StageVerdict, MissingColumnOrMetricFailsAndSaysWhat) {
  json r = results(0.0, 0.3, 0.5);
  r["models"].erase(2);  // an eval of base -> SFT only
  auto v = judge(specs(), r);
  EXPECT_TRUE(v[0].passed);
  EXPECT_FALSE(v[1].passed);
  EXPECT_NE(v[1].line.find("cannot judge GRPO: the eval results have no column super3-tiny-rl"), std::string::npos) << v[1].line;
  r = results(0.0, 0.3, 0.5);
  r["models"][0]["results"].erase("arithmetic_onestep");
  v = judge(specs(), r);
  EXPECT_FALSE(v[0].passed);
  EXPECT_NE(v[0].line.find("no arithmetic_onestep pass@1 for super3-tiny-pretrain"), std::string::npos) << v[0].line;
  const json j = verdicts_json(v);
  EXPECT_TRUE(j[0]["before_value"].is_null());
  EXPECT_EQ(j[1]["passed"], true);
  EXPECT_DOUBLE_EQ(j[1]["after_value"].get<double>(), 0.5);
}

std::string error_of(const std::string& verdicts) {
  const std::string yaml = "run_dir: r\nstages: [{name: sft, command: sft}, {name: eval, command: eval}]\nverdicts: " + verdicts;
  try {
    read_pipeline_recipe(parse_yaml_text(yaml, "p.yaml"), "p.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(StageVerdict, BadEntriesNameFileAndKey) {
  const std::string ok = "task: t, metric: m, before: a, after: b";
  EXPECT_EQ(error_of("[{stage: sft, " + ok + ", min_gain: 0.1}]"), "(no error)");
  EXPECT_NE(error_of("{stage: sft}").find("p.yaml: verdicts: expected a list"), std::string::npos);
  EXPECT_NE(error_of("[{stage: rl, " + ok + ", min_gain: 0.1}]").find("p.yaml: verdicts[0].stage: expected a stage of this recipe, got \"rl\""),
            std::string::npos);
  EXPECT_NE(error_of("[{stage: sft, task: t, metric: m, before: a, min_gain: 0.1}]").find("p.yaml: verdicts[0].after: required"),
            std::string::npos);
  EXPECT_NE(error_of("[{stage: sft, task: t, metric: m, before: 'a:v1', after: b, min_gain: 0.1}]")
                .find("p.yaml: verdicts[0].before: expected an artifact name without :version"),
            std::string::npos);
  EXPECT_NE(error_of("[{stage: sft, " + ok + ", min_gain: 0}]").find("p.yaml: verdicts[0].min_gain: expected a positive number"),
            std::string::npos);
  EXPECT_NE(error_of("[{stage: sft, " + ok + ", min_gain: 0.1, minimum: 1}]").find("p.yaml: verdicts[0].minimum"), std::string::npos);
}

}  // namespace
}  // namespace nemotron::pipeline
