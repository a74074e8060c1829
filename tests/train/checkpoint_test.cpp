// Checkpoints: the Megatron-like layout and tracker, a crash at every stage of a save (a child
// process killed there) leaving the previous checkpoint loadable, pruning, resolution of parent
// and iter_* paths, and a checkpoint of another model shape refused with nothing touched.
#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/hf_convert.h"
#include "model/hybrid_model.h"
#include "test_util.h"
#include "train_fixtures.h"

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;
using train::CheckpointContent;
using train::TrainState;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / fmt::format("nemotron-ckpt-{}-{}", ::getpid(), counter()++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every file under a directory with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = slurp(e.path());
  return out;
}

std::vector<float> weights_of(const model::ParamStore& s) {
  std::vector<float> w;
  for (const model::Param* p : s.all()) {
    const float* d = p->value.data<float>();
    w.insert(w.end(), d, d + p->value.numel());
  }
  return w;
}

struct Saver {
  train::PretrainConfig cfg = tiny_train_config();
  model::HybridModel net{cfg.model, host_backend(), DType::f32};
  train::AdamW opt{net.params(), {}};
  Saver() { net.init(1); }
  // A distinct state per iteration: weights shifted, moments set.
  void make_iteration(int64_t it) {
    net.init(static_cast<uint64_t>(100 + it));
    for (auto& m : opt.first_moments())
      if (m.defined()) fill_uniform(m, Philox(it, 1), -1, 1);  // undefined: a buffer (no state)
    for (auto& v : opt.second_moments())
      if (v.defined()) fill_uniform(v, Philox(it, 2), 0, 1);
    opt.set_steps_taken(it);
  }
  CheckpointContent content(int64_t it) {
    TrainState s;
    s.iteration = it;
    s.consumed_train_samples = 4 * it;
    s.optimizer_steps = it;
    s.data = {{"train", {{"kind", "mock"}, {"next_sample", 4 * it}}}};
    return {&net.params(), &opt, s, train::config_to_yaml(cfg.tree)};
  }
};

TEST(Checkpoint, writes_megatron_layout_and_loads_back_exactly) {
  TempDir tmp;
  Saver a;
  a.make_iteration(3);
  std::string dir = train::save_checkpoint(tmp.path.string(), a.content(3));
  EXPECT_EQ(dir, (tmp.path / "iter_0000003").string());
  EXPECT_EQ(slurp(tmp.path / "latest_checkpointed_iteration.txt"), "3");
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "train_state.json", "config.yaml"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / f)) << f;
  nlohmann::json st = nlohmann::json::parse(slurp(fs::path(dir) / "train_state.json"));
  EXPECT_EQ(st["format_version"], 1);
  EXPECT_EQ(st["iteration"], 3);
  EXPECT_EQ(st["consumed_train_samples"], 12);
  EXPECT_EQ(st["scheduler"]["num_steps"], 12);
  EXPECT_EQ(st["data"]["train"]["next_sample"], 12);
  EXPECT_EQ(parse_yaml_text(slurp(fs::path(dir) / "config.yaml"), "config.yaml"), a.cfg.tree);
  io::SafetensorsFile opt = io::SafetensorsFile::open((fs::path(dir) / "optimizer.safetensors").string());
  EXPECT_NE(opt.find("exp_avg.backbone.embeddings.weight"), nullptr);
  EXPECT_NE(opt.find("exp_avg_sq.backbone.layers.3.mixer.gate.weight"), nullptr);
  EXPECT_EQ(opt.find("exp_avg.backbone.layers.3.mixer.gate.e_score_correction_bias"), nullptr);  // a buffer

  Saver b;                                                    // a fresh model and optimizer get the same bits
  for (const std::string& path : {tmp.path.string(), dir}) {  // the parent (tracker) or iter_* itself
    std::string resolved = train::resolve_checkpoint_dir(path);
    EXPECT_EQ(resolved, dir);
    TrainState s = train::read_train_state(resolved);
    train::load_checkpoint_weights(resolved, b.net.params());
    train::load_checkpoint_optimizer(resolved, b.opt, b.net.params(), s.optimizer_steps);
    EXPECT_EQ(weights_of(b.net.params()), weights_of(a.net.params()));
    EXPECT_EQ(b.opt.steps_taken(), 3);
    for (size_t k = 0; k < a.opt.first_moments().size(); ++k) {
      if (!a.net.params().all()[k]->requires_grad) continue;
      EXPECT_EQ(b.opt.first_moments()[k].to_f64_vector(), a.opt.first_moments()[k].to_f64_vector());
      EXPECT_EQ(b.opt.second_moments()[k].to_f64_vector(), a.opt.second_moments()[k].to_f64_vector());
    }
  }
}

// Issue 11: a NaN in a saved AdamW moment (a diverged run) was loaded silently and poisoned every
// later step; it is refused, naming the file and the moment.
TEST(Checkpoint, a_non_finite_optimizer_moment_is_refused_naming_it) {
  TempDir tmp;
  Saver a;
  a.make_iteration(3);
  a.opt.second_moments()[0].data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  std::string dir = train::save_checkpoint(tmp.path.string(), a.content(3));
  Saver b;
  train::load_checkpoint_weights(dir, b.net.params());
  try {
    train::load_checkpoint_optimizer(dir, b.opt, b.net.params(), 3);
    FAIL() << "a NaN moment was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("optimizer.safetensors: tensor \"exp_avg_sq." + a.net.params().all()[0]->name + "\""),
              std::string::npos) << what;
    EXPECT_NE(what.find("non-finite"), std::string::npos) << what;
  }
}

// A child process saves iteration 2 over a directory holding iteration 1 and dies (_exit: no
// destructors, no cleanup, like a kill) just before the given stage. The tracker must then name
// a complete checkpoint whose weights are exactly those of the iteration it claims.
TEST(Checkpoint, a_crash_at_any_stage_leaves_a_loadable_checkpoint) {
  for (const char* stage : {"model", "optimizer", "config", "train_state", "rename", "tracker", "prune"}) {
    SCOPED_TRACE(stage);
    TempDir tmp;
    Saver a;
    a.make_iteration(1);
    train::save_checkpoint(tmp.path.string(), a.content(1));
    const std::vector<float> w1 = weights_of(a.net.params());
    a.make_iteration(2);
    const std::vector<float> w2 = weights_of(a.net.params());
    std::fflush(nullptr);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(20);
      const std::string at = stage;
      train::save_checkpoint(tmp.path.string(), a.content(2), -1, [&](const std::string& s) {
        if (s == at) ::_exit(42);
      });
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 42);

    const bool renamed_before_crash = std::string(stage) == "tracker" || std::string(stage) == "prune";
    const bool tracker_updated = std::string(stage) == "prune";
    EXPECT_EQ(fs::exists(tmp.path / "iter_0000002"), renamed_before_crash);
    std::string dir = train::resolve_checkpoint_dir(tmp.path.string());
    EXPECT_EQ(dir, (tmp.path / (tracker_updated ? "iter_0000002" : "iter_0000001")).string());
    Saver b;
    train::load_checkpoint_weights(dir, b.net.params());
    train::load_checkpoint_optimizer(dir, b.opt, b.net.params(), train::read_train_state(dir).optimizer_steps);
    EXPECT_EQ(weights_of(b.net.params()), tracker_updated ? w2 : w1);

    // The next save cleans up what the crash left behind.
    a.make_iteration(3);
    train::save_checkpoint(tmp.path.string(), a.content(3));
    for (const auto& e : fs::directory_iterator(tmp.path))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST(Checkpoint, most_recent_k_keeps_the_newest_iterations) {
  TempDir tmp;
  Saver a;
  for (int64_t it = 1; it <= 4; ++it) train::save_checkpoint(tmp.path.string(), a.content(it), 2);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"iter_0000003", "iter_0000004", "latest_checkpointed_iteration.txt"}));
}

// A kill while most_recent_k deletes an old iteration (just after it is renamed aside): no
// half-deleted iter_* is left, only a hidden .pruning-* that the next start removes.
TEST(Checkpoint, a_crash_while_pruning_leaves_no_half_iteration_and_the_next_start_finishes_it) {
  TempDir tmp;
  Saver a;
  for (int64_t it = 1; it <= 2; ++it) train::save_checkpoint(tmp.path.string(), a.content(it));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);
    train::save_checkpoint(tmp.path.string(), a.content(3), 2, [](const std::string& s) {
      if (s == "prune_delete") ::_exit(42);
    });
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 42);
  EXPECT_FALSE(fs::exists(tmp.path / "iter_0000001"));
  EXPECT_TRUE(fs::exists(tmp.path / ".pruning-iter_0000001"));
  EXPECT_EQ(train::resolve_checkpoint_dir(tmp.path.string()), (tmp.path / "iter_0000003").string());
  EXPECT_EQ(train::finish_interrupted_writes(tmp.path.string()),
            std::vector<std::string>{"finished the interrupted removal of iter_0000001"});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"iter_0000002", "iter_0000003", "latest_checkpointed_iteration.txt"}));
}

// What an interrupted prune of an earlier build left (files of an iter_* half deleted), or a
// truncated file: loading and exporting refuse it, naming what is missing, and the next prune
// removes it when it is older than the tracked iteration.
TEST(Checkpoint, an_incomplete_iteration_is_refused_naming_what_is_missing) {
  TempDir tmp;
  Saver a;
  for (int64_t it = 1; it <= 3; ++it) train::save_checkpoint(tmp.path.string(), a.content(it));
  const fs::path it1 = tmp.path / "iter_0000001", it3 = tmp.path / "iter_0000003";
  fs::remove(it1 / "model.safetensors");
  fs::remove(it1 / "config.yaml");
  EXPECT_EQ(input_error([&] { train::resolve_checkpoint_dir(it1.string()); }),
            it1.string() + ": incomplete checkpoint (missing config.yaml, model.safetensors; an interrupted save or "
                           "prune): load another iteration");
  fs::resize_file(it3 / "optimizer.safetensors", 100);
  EXPECT_EQ(input_error([&] { train::resolve_checkpoint_dir(tmp.path.string()); }),
            tmp.path.string() + "/latest_checkpointed_iteration.txt names iteration 3, but " + it3.string() +
                " is incomplete (truncated optimizer.safetensors (100 bytes, " +
                std::to_string(fs::file_size(tmp.path / "iter_0000002" / "optimizer.safetensors")) + " recorded))");
  // `convert export` resolves with its own rules (a weights directory is fine), but not this.
  fs::remove(it3 / "model.safetensors");
  EXPECT_NE(input_error([&] { model::resolve_checkpoint_dir(it3.string()); }).find("missing model.safetensors"),
            std::string::npos);
  EXPECT_NE(input_error([&] { model::resolve_checkpoint_dir(tmp.path.string()); }).find("missing model.safetensors"),
            std::string::npos);
  // The next save with most_recent_k removes the half-deleted iter_0000001.
  train::save_checkpoint(tmp.path.string(), a.content(4), 3);
  EXPECT_FALSE(fs::exists(it1));
  EXPECT_TRUE(fs::exists(tmp.path / "iter_0000002"));
}

TEST(Checkpoint, a_train_state_of_another_iteration_is_refused) {
  TempDir tmp;
  Saver a;
  train::save_checkpoint(tmp.path.string(), a.content(20));
  const fs::path dir = tmp.path / "iter_0000020";
  nlohmann::json st = nlohmann::json::parse(slurp(dir / "train_state.json"));
  st["iteration"] = 25;
  std::ofstream(dir / "train_state.json") << st.dump(2);
  EXPECT_EQ(input_error([&] { train::read_train_state(dir.string()); }),
            dir.string() + "/train_state.json: iteration 25 does not match its directory iter_0000020 (iteration 20); "
                           "the file was copied or edited: load a directory whose name and train_state.json agree");
}

// A kill between moving an iteration aside to replace it and renaming its replacement in: the
// next start moves it back.
TEST(Checkpoint, an_interrupted_replacement_is_moved_back) {
  TempDir tmp;
  Saver a;
  train::save_checkpoint(tmp.path.string(), a.content(2));
  fs::rename(tmp.path / "iter_0000002", tmp.path / "iter_0000002.old-12345");
  fs::create_directory(tmp.path / "iter_0000003.tmp-12345");
  EXPECT_EQ(train::finish_interrupted_writes(tmp.path.string()),
            (std::vector<std::string>{"restored iter_0000002 from iter_0000002.old-12345 (its replacement was "
                                      "interrupted)",
                                      "removed iter_0000003.tmp-12345, an interrupted save"}));
  EXPECT_EQ(train::resolve_checkpoint_dir(tmp.path.string()), (tmp.path / "iter_0000002").string());
  EXPECT_FALSE(fs::exists(tmp.path / "iter_0000003.tmp-12345"));
}

TEST(Checkpoint, resolve_names_what_is_wrong) {
  TempDir tmp;
  auto error = [](const std::string& path) {
    try {
      train::resolve_checkpoint_dir(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string p = tmp.path.string();
  EXPECT_EQ(error(p + "/nope"), p + "/nope: no such checkpoint directory");
  EXPECT_EQ(error(p), p + ": not a checkpoint (neither latest_checkpointed_iteration.txt nor an iter_* directory "
                          "with train_state.json)");
  std::ofstream(tmp.path / "latest_checkpointed_iteration.txt") << "7";
  EXPECT_EQ(error(p), p + "/latest_checkpointed_iteration.txt names iteration 7, but " + p +
                          "/iter_0000007 is missing or incomplete");
  std::ofstream(tmp.path / "latest_checkpointed_iteration.txt") << "seven";
  EXPECT_EQ(error(p), p + "/latest_checkpointed_iteration.txt: expected an iteration number, got \"seven\"");
}

TEST(Checkpoint, a_weights_only_directory_loads_for_finetuning_only) {
  TempDir tmp;
  const std::string p = tmp.path.string();
  std::ofstream(tmp.path / "model.safetensors") << "x";  // what `convert import` writes (content not read here)
  EXPECT_EQ(train::resolve_checkpoint_dir(p, /*weights_only=*/true), p);
  EXPECT_EQ(input_error([&] { train::resolve_checkpoint_dir(p); }),
            p + ": not a checkpoint (neither latest_checkpointed_iteration.txt nor an iter_* directory with "
                "train_state.json; it holds weights only: load it with checkpoint.finetune=true)");
}

TEST(Checkpoint, another_model_shape_is_refused_and_nothing_is_touched) {
  TempDir tmp;
  Saver a;
  train::save_checkpoint(tmp.path.string(), a.content(5));
  const auto before = snapshot(tmp.path);
  train::PretrainConfig other = tiny_train_config({"model.hidden_size=48"});
  model::HybridModel net(other.model, host_backend(), DType::f32);
  std::string dir = train::resolve_checkpoint_dir(tmp.path.string());
  try {
    train::load_checkpoint_weights(dir, net.params());
    FAIL() << "loaded a checkpoint of another shape";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir +
                                         "/model.safetensors: tensor \"backbone.embeddings.weight\" has shape [64, 32] "
                                         "but the model expects [64, 48] (a checkpoint of another model shape?)");
  }
  EXPECT_EQ(snapshot(tmp.path), before);
}

}  // namespace
}  // namespace nemotron::testing
