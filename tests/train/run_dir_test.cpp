// The rules of a checkpoint directory (train/run_dir.h): a fresh run is refused over another
// run's directory and a resume (load = save) is not; one lock holder at a time, named in the
// refusal, released when its process dies even by SIGKILL; the start finishes interrupted
// writes; a directory that cannot be written says "not writable".
#include "train/run_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/hybrid_model.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train_fixtures.h"

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;
using train::CheckpointSection;

struct TempDir {
  fs::path path = fs::temp_directory_path() / fmt::format("nemotron-rundir-{}-{}", ::getpid(), next());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int next() {
    static int c = 0;
    return c++;
  }
};

CheckpointSection section(const std::string& save, const std::string& load = "", bool finetune = false) {
  CheckpointSection k;
  k.save = save, k.load = load, k.finetune = finetune;
  return k;
}

void save_iteration(const std::string& dir, int64_t it) {
  train::PretrainConfig cfg = tiny_train_config();
  model::HybridModel net(cfg.model, host_backend(), DType::f32);
  net.init(1);
  train::TrainState s;
  s.iteration = it;
  train::save_checkpoint(dir, {&net.params(), nullptr, s, "x: 1\n"});
}

TEST(RunDir, a_fresh_run_is_refused_over_another_runs_directory_and_a_resume_is_not) {
  TempDir tmp;
  const std::string d = (tmp.path / "run").string();
  EXPECT_NO_THROW(train::check_run_dir(section(d)));  // does not exist yet
  fs::create_directories(d);
  std::ofstream(fs::path(d) / "notes.txt") << "mine";  // files of no run are left alone
  EXPECT_NO_THROW(train::check_run_dir(section(d)));
  std::ofstream(fs::path(d) / "metrics.jsonl") << "{\"type\":\"train\"}\n";
  EXPECT_EQ(input_error([&] { train::check_run_dir(section(d)); }),
            "checkpoint.save " + d + " holds the metrics.jsonl of an earlier run; resume it with checkpoint.load=" + d +
                ", or pick another checkpoint.save");
  save_iteration(d, 30);
  const std::string refused = "checkpoint.save " + d + " holds iteration 30 of an earlier run; resume it with " +
                              "checkpoint.load=" + d + ", or pick another checkpoint.save";
  EXPECT_EQ(input_error([&] { train::check_run_dir(section(d)); }), refused);
  EXPECT_EQ(input_error([&] { train::check_run_dir(section(d, (tmp.path / "other").string())); }), refused);
  EXPECT_EQ(train::check_run_dir(section(d, d)).tracked_iteration, 30);
  EXPECT_NO_THROW(train::check_run_dir(section(d + "/", d + "/iter_0000030")));
  EXPECT_EQ(input_error([&] { train::check_run_dir(section(d, d, /*finetune=*/true)); }),
            "checkpoint.save " + d + " holds iteration 30 of an earlier run, and checkpoint.finetune=true would start " +
                "over at iteration 0 there, replacing it: pick another checkpoint.save for the fine-tuned run");
  fs::remove(fs::path(d) / "latest_checkpointed_iteration.txt");
  EXPECT_NE(input_error([&] { train::check_run_dir(section(d)); }).find("holds iter_0000030 (without "),
            std::string::npos);
  // Without the tracker, load = save would start from scratch: the iteration must be named.
  EXPECT_EQ(input_error([&] { train::check_run_dir(section(d, d)); }),
            "checkpoint.save " + d + " holds iter_0000030 (without latest_checkpointed_iteration.txt), so " +
                "checkpoint.load=" + d + " would start from scratch over it: resume from it with checkpoint.load=" + d +
                "/iter_0000030, or pick another checkpoint.save");
  EXPECT_NO_THROW(train::check_run_dir(section(d, d + "/iter_0000030")));
  EXPECT_NO_THROW(train::check_run_dir(section("")));  // nothing is saved: nothing to own
}

// The lock is flock(2): a second holder fails (even in this process: another open file), the
// refusal names the holder, and the kernel releases it when the holder dies by SIGKILL.
TEST(RunDir, one_lock_holder_at_a_time_named_in_the_refusal_and_released_by_sigkill) {
  TempDir tmp;
  const std::string d = (tmp.path / "run").string();
  {
    train::RunDirLock lock = train::lock_run_dir(section(d), train::check_run_dir(section(d)), "first command");
    ASSERT_TRUE(lock.held());
    const std::string msg = input_error([&] { train::check_run_dir(section(d, d)); });
    EXPECT_EQ(msg.rfind("checkpoint.save " + d + " is in use by another run (pid " + std::to_string(::getpid()) +
                            " on host ",
                        0),
              0u)
        << msg;
    EXPECT_NE(msg.find(": first command; lock " + d + "/run.lock): wait for it to end, or pick another "
                                                      "checkpoint.save"),
              std::string::npos)
        << msg;
    EXPECT_EQ(input_error([&] { train::lock_run_dir(section(d, d), {}, "second"); }), msg);
  }
  EXPECT_NO_THROW(train::lock_run_dir(section(d, d), train::check_run_dir(section(d, d)), "after release"));

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);
    train::RunDirLock lock = train::lock_run_dir(section(d, d), train::check_run_dir(section(d, d)), "child");
    const char c = 'x';
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(input_error([&] { train::check_run_dir(section(d, d)); }).find("(pid " + std::to_string(pid) + " on host"),
            std::string::npos);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  ::close(ready[0]), ::close(ready[1]);
  EXPECT_NO_THROW(train::lock_run_dir(section(d, d), train::check_run_dir(section(d, d)), "after kill -9"));
}

TEST(RunDir, the_start_finishes_interrupted_writes_and_notices_a_directory_changed_meanwhile) {
  TempDir tmp;
  const std::string d = (tmp.path / "run").string();
  save_iteration(d, 4);
  fs::create_directories(fs::path(d) / ".pruning-iter_0000002" / "half");
  fs::create_directories(fs::path(d) / "iter_0000006.tmp-77");
  const train::RunDirState seen = train::check_run_dir(section(d, d));
  train::RunDirLock lock = train::lock_run_dir(section(d, d), seen, "resume");
  EXPECT_EQ(lock.notes(), (std::vector<std::string>{"note: " + d + ": finished the interrupted removal of iter_0000002",
                                                    "note: " + d + ": removed iter_0000006.tmp-77, an interrupted save"}));
  EXPECT_FALSE(fs::exists(fs::path(d) / ".pruning-iter_0000002"));
  lock = {};
  save_iteration(d, 5);  // another run wrote it between the check and the lock
  EXPECT_EQ(input_error([&] { train::lock_run_dir(section(d, d), seen, "late"); }),
            "checkpoint.save " + d + " changed while this run was starting (another run wrote to it): start this run "
                                     "again");
}

// Root ignores permissions, but not a read-only file system such as /sys.
std::string unwritable_dir(const TempDir& tmp) {
  if (::geteuid() == 0) return "/sys";
  const fs::path ro = tmp.path / "ro";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  return ro.string();
}

TEST(RunDir, a_directory_that_cannot_be_written_says_not_writable) {
  TempDir tmp;
  const std::string ro = unwritable_dir(tmp);
  std::error_code ec;
  if (fs::create_directory(ro + "/nemotron-probe", ec)) {
    fs::remove(ro + "/nemotron-probe");
    GTEST_SKIP() << ro << " is writable here";
  }
  const std::string metrics = ro + "/sub/metrics.jsonl";
  EXPECT_EQ(input_error([&] { train::MetricsFile f(metrics, false); }),
            metrics + ": cannot create the metrics file's directory: " + ro + " is not writable");
  EXPECT_EQ(input_error([&] { train::MetricsFile f(ro + "/metrics.jsonl", false); }),
            ro + "/metrics.jsonl: cannot open the metrics file: " + ro + " is not writable");
  EXPECT_EQ(input_error([&] { train::lock_run_dir(section(ro + "/run"), {}, "x"); }),
            "checkpoint.save " + ro + "/run: cannot create it: " + ro + " is not writable");
  fs::permissions(tmp.path / "ro", fs::perms::owner_all, ec);  // so that TempDir can remove it
}

}  // namespace
}  // namespace nemotron::testing
