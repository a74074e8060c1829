// The pipeline recipe (stage list) and the up-to-date rule (pipeline/stage_state.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/config_tree.h"
#include "core/error.h"
#include "io/checkpoint_layout.h"
#include "pipeline/pipeline_recipe.h"
#include "pipeline/stage_state.h"
#include "test_util.h"

namespace nemotron::pipeline {
namespace {

using json = nlohmann::json;

json parse(const std::string& yaml) { return parse_yaml_text(yaml, "p.yaml"); }

const char* kRecipe = R"(run_dir: runs/x
stages:
  - {name: prep, command: data prep pretrain, config: tiny}
  - {name: pretrain, command: pretrain, config: tiny, overrides: [checkpoint.load=runs/x/pretrain]}
  - {name: eval, command: [eval], config: tiny}
)";

std::string error_of(const std::string& yaml) {
  try {
    read_pipeline_recipe(parse(yaml), "p.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PipelineRecipe, ReadsStagesKindsAndCommandLines) {
  const PipelineRecipe r = read_pipeline_recipe(parse(kRecipe), "p.yaml");
  ASSERT_EQ(r.stages.size(), 3u);
  EXPECT_EQ(r.run_dir, "runs/x");
  EXPECT_EQ(r.stages[0].kind, StageKind::kDataPrep);
  EXPECT_EQ(r.stages[1].kind, StageKind::kTrain);
  EXPECT_EQ(r.stages[2].kind, StageKind::kEval);
  EXPECT_EQ((r.stages[0].command), (std::vector<std::string>{"data", "prep", "pretrain"}));
  EXPECT_EQ(stage_command_line("super3", r.stages[1]),
            "nemotron super3 pretrain -c tiny checkpoint.load=runs/x/pretrain");
  EXPECT_EQ(r.stages[1].checkpoint_key, "checkpoint.save");
  EXPECT_EQ(r.stages[1].iterations_key, "train.train_iters");
}

TEST(PipelineRecipe, BadRecipesNameFileAndKey) {
  EXPECT_NE(error_of("stages: [{name: a, command: sft}]").find("p.yaml: run_dir: required"), std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: []").find("p.yaml: stages: expected a non-empty list"), std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: Bad-Name, command: sft}]").find("p.yaml: stages[0].name: expected a name"),
            std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: a, command: sft}, {name: a, command: eval}]")
                .find("p.yaml: stages[1].name: \"a\" names two stages"),
            std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: a}]").find("p.yaml: stages[0].command: required"), std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: a, command: sft, overides: []}]").find("p.yaml: stages[0].overides"),
            std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: a, command: sft, overrides: [nokey]}]")
                .find("p.yaml: stages[0].overrides[0]: expected key=value"),
            std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: a, command: sft, kind: training}]").find("stages[0].kind: expected data_prep"),
            std::string::npos);
  EXPECT_NE(error_of("run_dir: r\nstages: [{name: a, command: sft --force}]").find("stages[0].command: \"--force\""),
            std::string::npos);
}

TEST(PipelineRecipe, SelectsStagesByFromAndOnly) {
  const PipelineRecipe r = read_pipeline_recipe(parse(kRecipe), "p.yaml");
  EXPECT_EQ(select_stages(r, "", ""), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(select_stages(r, "pretrain", ""), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(select_stages(r, "", "eval,prep"), (std::vector<size_t>{0, 2}));
  try {
    select_stages(r, "sft", "");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--from sft: no such stage in p.yaml (stages: prep, pretrain, eval)");
  }
  EXPECT_THROW(select_stages(r, "", "eval,nope"), InputError);
  EXPECT_THROW(select_stages(r, "prep", "eval"), InputError);
}

TEST(PipelineRecipe, TheShippedTinyRecipesListEveryStage) {
  for (const char* family : {"super3", "nano3"}) {
    const std::string path = nemotron::testing::source_root().string() + "/recipes/" + family + "/pipeline/tiny.yaml";
    const PipelineRecipe r = read_pipeline_recipe(load_config_file(path), path);
    std::vector<std::string> names;
    for (const StageSpec& s : r.stages) names.push_back(s.name);
    EXPECT_EQ(names, (std::vector<std::string>{"data_prep_pretrain", "pretrain", "data_prep_sft", "sft", "data_prep_rl",
                                               "rl", "eval"}))
        << path;
    EXPECT_EQ(r.run_dir, std::string("runs/") + family + "/tiny");
    EXPECT_EQ(r.stages[5].kind, StageKind::kTrain);
    EXPECT_EQ(r.stages[5].checkpoint_key, "checkpointing.checkpoint_dir");
    EXPECT_EQ(r.stages[5].iterations_key, "grpo.max_num_steps");
    EXPECT_EQ(r.stages[6].kind, StageKind::kEval);
  }
}

const Fingerprint kFp{json{{"train", {{"train_iters", 300}}}}, {"data:v1"}};

StageRecord record(const std::string& status, const Fingerprint& fp = kFp) {
  StageRecord r;
  r.name = "pretrain";
  r.status = status;
  r.fingerprint = fp;
  return r;
}

TEST(UpToDateRule, TrainingStage) {
  const TrainProgress none{}, partial{true, 100}, final{true, 300};
  const StageRecord done = record("done"), running = record("running");
  EXPECT_EQ(decide(StageKind::kTrain, nullptr, kFp, none, 300, false, false).action, Action::kRun);
  EXPECT_EQ(decide(StageKind::kTrain, &done, kFp, final, 300, false, false).action, Action::kSkip);
  // cut short: the same fingerprint resumes
  const Decision resume = decide(StageKind::kTrain, &running, kFp, partial, 300, false, false);
  EXPECT_EQ(resume.action, Action::kRun);
  EXPECT_EQ(resume.reason, "resuming from iteration 100 of 300");
  // the final iteration saved, the pipeline stopped before recording it: run (the trainer has nothing left)
  EXPECT_EQ(decide(StageKind::kTrain, &running, kFp, final, 300, false, false).action, Action::kRun);
  // a changed config or input, or a run nobody recorded, is never overwritten...
  Fingerprint longer = kFp;
  longer.config["train"]["train_iters"] = 600;
  const Decision changed = decide(StageKind::kTrain, &done, longer, final, 600, false, false);
  EXPECT_EQ(changed.action, Action::kRefuse);
  EXPECT_NE(changed.reason.find("config key train.train_iters: 300 -> 600"), std::string::npos) << changed.reason;
  Fingerprint new_data = kFp;
  new_data.inputs = {"data:v2"};
  const Decision input = decide(StageKind::kTrain, &done, new_data, final, 300, false, false);
  EXPECT_EQ(input.action, Action::kRefuse);
  EXPECT_NE(input.reason.find("inputs [data:v1] -> [data:v2]"), std::string::npos) << input.reason;
  EXPECT_EQ(decide(StageKind::kTrain, nullptr, kFp, final, 300, false, false).action, Action::kRefuse);
  // ... unless forced
  EXPECT_EQ(decide(StageKind::kTrain, &done, longer, final, 600, false, true).action, Action::kRun);
  EXPECT_EQ(decide(StageKind::kTrain, &done, kFp, final, 300, false, true).action, Action::kRun);
  // a changed config with no checkpoint yet simply runs
  EXPECT_EQ(decide(StageKind::kTrain, &done, longer, none, 600, false, false).action, Action::kRun);
}

TEST(UpToDateRule, EvalAndDataPrep) {
  const StageRecord done = record("done"), failed = record("failed");
  EXPECT_EQ(decide(StageKind::kEval, &done, kFp, {}, 0, true, false).action, Action::kSkip);
  EXPECT_EQ(decide(StageKind::kEval, &done, kFp, {}, 0, false, false).action, Action::kRun);  // results deleted
  EXPECT_EQ(decide(StageKind::kEval, &failed, kFp, {}, 0, true, false).action, Action::kRun);
  Fingerprint new_model = kFp;
  new_model.inputs = {"data:v1", "sft:v2"};
  EXPECT_EQ(decide(StageKind::kEval, &done, new_model, {}, 0, true, false).action, Action::kRun);
  EXPECT_EQ(decide(StageKind::kEval, nullptr, kFp, {}, 0, true, false).action, Action::kRun);
  // a data prep always runs: the command itself finds its output up to date
  EXPECT_EQ(decide(StageKind::kDataPrep, &done, kFp, {}, 0, false, false).action, Action::kRun);
}

TEST(PipelineState, RoundTripsAndRejectsMalformedFiles) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "nemotron_pipeline_state_test";
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "pipeline.json").string();
  EXPECT_TRUE(load_state(path).stages.empty());
  PipelineState s;
  s.recipe = "r.yaml";
  StageRecord& r = s.upsert("pretrain");
  r = record("done");
  r.outputs = {"m:v3"};
  r.seconds = 12.5;
  save_state(s, path);
  const PipelineState back = load_state(path);
  ASSERT_NE(back.find("pretrain"), nullptr);
  EXPECT_EQ(back.find("pretrain")->fingerprint, kFp);
  EXPECT_EQ(back.find("pretrain")->outputs, (std::vector<std::string>{"m:v3"}));
  EXPECT_DOUBLE_EQ(back.find("pretrain")->seconds, 12.5);
  std::ofstream(path) << "{\"stages\": [{\"name\": 3}]}";
  EXPECT_THROW(load_state(path), InputError);
  std::ofstream(path) << "{not json";
  EXPECT_THROW(load_state(path), InputError);
  std::filesystem::remove_all(dir);
}

TEST(TrainProgress, ReadsTheTrackerAndIterationDirectories) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "nemotron_pipeline_progress_test";
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(read_train_progress(dir.string()).has_run);
  std::filesystem::create_directories(dir / "tb_logs");
  EXPECT_FALSE(read_train_progress(dir.string()).has_run);
  std::filesystem::create_directories(dir / "iter_0000010");
  EXPECT_TRUE(read_train_progress(dir.string()).has_run);
  EXPECT_EQ(read_train_progress(dir.string()).latest_iteration, -1);
  std::ofstream(dir / io::kTrackerFile) << "10";
  EXPECT_EQ(read_train_progress(dir.string()).latest_iteration, 10);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nemotron::pipeline
