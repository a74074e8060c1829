// The loop every stage shares, with a job that only records what it was asked: validation,
// saves and stops land on the configured iterations; a stop request saves once and its line comes
// last; a process with writes_logs / writes_checkpoints off prints, records and writes nothing
// while the steps, validations and the checkpoint cadence stay the same (the rank seam).
#include "train/training_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using train::LoopClock;
using train::LoopOptions;
using train::LoopReport;
using train::LoopResult;

struct CallLog : train::TrainingJob {
  std::vector<std::string> calls;
  std::string banner() override { return "banner\n"; }
  LoopReport run_step(int64_t it, const LoopClock&) override {
    calls.push_back(fmt::format("step {}", it));
    return {json{{"type", "train"}, {"iteration", it}, {"loss", 1.0 / static_cast<double>(it)}},
            fmt::format("step line {}\n", it)};
  }
  LoopReport run_validation(int64_t it) override {
    calls.push_back(fmt::format("validate {}", it));
    return {json{{"type", "validation"}, {"iteration", it}}, fmt::format("validation line {}\n", it)};
  }
  train::CheckpointContent checkpoint(int64_t it) override {
    calls.push_back(fmt::format("checkpoint {}", it));
    return {};
  }
  std::string summary(const LoopResult& r, json&) override {
    return fmt::format("summary {} -> {}\n", r.first_iteration, r.final_iteration);
  }
};

struct LoopRun {
  fs::path dir = fs::temp_directory_path() / fmt::format("nemotron-loop-{}-{}", ::getpid(), next());
  std::FILE* log = std::tmpfile();
  LoopRun() { fs::remove_all(dir); }
  ~LoopRun() {
    std::fclose(log);
    fs::remove_all(dir);
  }
  LoopOptions options() {
    LoopOptions o;
    o.total = 7;
    o.validate_every = 3;
    o.validate_at_end = true;
    o.save_dir = (dir / "ckpt").string();
    o.save_every = 2;
    o.metrics_path = (dir / "metrics.jsonl").string();
    o.resume_hint = "resume with checkpoint.load=" + o.save_dir;
    o.hooks.log = log;
    o.hooks.writes_checkpoints = false;  // the job has no weights to write
    return o;
  }
  std::string text() {
    std::rewind(log);
    std::string s(1 << 16, '\0');
    s.resize(std::fread(s.data(), 1, s.size(), log));
    return s;
  }
  static int next() {
    static int c = 0;
    return c++;
  }
};

TEST(TrainingLoop, validates_and_saves_on_the_configured_iterations_then_once_more_at_the_end) {
  LoopRun run;
  CallLog job;
  train::TrainingLoop loop(run.options());
  const LoopResult r = loop.run(job);
  EXPECT_EQ(job.calls, (std::vector<std::string>{"step 1", "step 2", "checkpoint 2", "step 3", "validate 3", "step 4",
                                                 "checkpoint 4", "step 5", "step 6", "validate 6", "checkpoint 6",
                                                 "step 7", "validate 7", "checkpoint 7"}));
  EXPECT_EQ(r.final_iteration, 7);
  EXPECT_FALSE(r.exited_early);
  const std::string ckpt = run.options().save_dir;
  EXPECT_EQ(r.last_checkpoint, ckpt + "/iter_0000007");
  const std::string text = run.text();
  EXPECT_EQ(text.rfind("banner\nmetrics: " + run.options().metrics_path + "\nstep line 1\nstep line 2\n", 0), 0u)
      << text;
  EXPECT_NE(text.find("  saved checkpoint at iteration       2 to " + ckpt + "/iter_0000002 ("), std::string::npos)
      << text;
  EXPECT_NE(text.find("\nsummary 0 -> 7\n"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(ckpt)) << "writes_checkpoints=false wrote under the save directory";
}

TEST(TrainingLoop, a_stop_request_saves_once_and_its_line_comes_last) {
  LoopRun run;
  CallLog job;
  LoopOptions o = run.options();
  int asked = 0;
  o.hooks.stop_requested = [&] { return ++asked == 2 ? std::string("received SIGTERM") : std::string(); };
  train::TrainingLoop loop(o);
  const LoopResult r = loop.run(job);
  EXPECT_EQ(job.calls, (std::vector<std::string>{"step 1", "step 2", "checkpoint 2"}));
  EXPECT_TRUE(r.exited_early);
  EXPECT_EQ(r.stop_reason, "received SIGTERM");
  const std::string text = run.text();
  const std::string last = "received SIGTERM: saved iteration 2 to " + o.save_dir + "/iter_0000002; resume with " +
                           "checkpoint.load=" + o.save_dir + "\n";
  ASSERT_GE(text.size(), last.size());
  EXPECT_EQ(text.substr(text.size() - last.size()), last) << text;
}

TEST(TrainingLoop, exit_interval_saves_and_stops_and_a_resumed_loop_counts_on) {
  LoopRun run;
  LoopOptions o = run.options();
  o.exit_every = 3;
  {
    CallLog job;
    train::TrainingLoop loop(o);
    const LoopResult r = loop.run(job);
    EXPECT_EQ(job.calls, (std::vector<std::string>{"step 1", "step 2", "checkpoint 2", "step 3", "validate 3",
                                                   "checkpoint 3"}));
    EXPECT_TRUE(r.exited_early);
    EXPECT_NE(run.text().find("exiting at iteration 3 (train.exit_interval 3)\n"), std::string::npos);
  }
  CallLog job;
  train::TrainingLoop loop(o);
  loop.set_iteration(6);  // as a restore does
  const LoopResult r = loop.run(job);
  EXPECT_EQ(job.calls, (std::vector<std::string>{"step 7", "validate 7", "checkpoint 7"}));
  EXPECT_EQ(r.first_iteration, 6);
}

TEST(TrainingLoop, a_process_that_writes_no_logs_prints_and_records_nothing_but_steps_alike) {
  LoopRun run;
  CallLog job;
  LoopOptions o = run.options();
  o.hooks.writes_logs = false;
  int barriers = 0;
  o.hooks.save_barrier = [&] { ++barriers; };
  train::TrainingLoop loop(o);
  loop.run(job);
  EXPECT_EQ(job.calls.size(), 14u);
  EXPECT_EQ(barriers, 4);  // every save: at 2, 4, 6 and the end
  EXPECT_EQ(run.text(), "");
  EXPECT_FALSE(fs::exists(o.metrics_path));

  CallLog other;
  LoopRun logged;
  train::TrainingLoop writer(logged.options());
  writer.run(other);
  EXPECT_EQ(other.calls, job.calls);
  EXPECT_TRUE(fs::exists(logged.options().metrics_path));
}

TEST(TrainingLoop, a_finished_run_has_nothing_to_do) {
  LoopRun run;
  CallLog job;
  LoopOptions o = run.options();
  o.unit = "step";
  o.total_key = "grpo.max_num_steps";
  train::TrainingLoop loop(o);
  loop.set_iteration(7);
  const LoopResult r = loop.run(job);
  EXPECT_TRUE(r.nothing_to_do);
  EXPECT_TRUE(job.calls.empty());
  EXPECT_NE(run.text().find("nothing to do: step 7 already reaches grpo.max_num_steps 7\n"), std::string::npos);
}

}  // namespace
}  // namespace nemotron::testing
