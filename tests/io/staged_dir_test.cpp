// io::StagedDir: a directory replaced as a whole (nothing of the old one left beside the new), the
// staging directory gone when the writer fails, and leftovers of dead writers removed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "io/staged_dir.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;

class StagedDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("nm_staged_{}_{}", ::getpid(),
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(root_), {})); }
  fs::path root_;
};

TEST_F(StagedDirTest, commit_replaces_the_whole_directory) {
  const fs::path out = root_ / "hf";
  fs::create_directories(out);
  std::ofstream(out / "tokenizer.json") << "an earlier model's tokenizer";
  std::ofstream(out / "model.safetensors") << "old";
  {
    StagedDir staged(out);
    EXPECT_EQ(staged.path().parent_path(), root_);
    std::ofstream(staged.path() / "model.safetensors") << "new";
    EXPECT_TRUE(fs::exists(out / "tokenizer.json"));  // untouched until commit
    staged.commit();
  }
  EXPECT_FALSE(fs::exists(out / "tokenizer.json"));
  std::ifstream in(out / "model.safetensors");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "new");
  EXPECT_EQ(entries(), 1u);  // no staging or old directory left beside it
}

TEST_F(StagedDirTest, a_failed_writer_leaves_the_old_directory_and_no_staging) {
  const fs::path out = root_ / "ckpt";
  fs::create_directories(out);
  std::ofstream(out / "config.yaml") << "old";
  try {
    StagedDir staged(out);
    std::ofstream(staged.path() / "config.yaml") << "half";
    throw std::runtime_error("disk full");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(fs::exists(out / "config.yaml"));
  EXPECT_EQ(entries(), 1u);
  StagedDir fresh(root_ / "new" / "deep");  // a missing parent is created; commit renames into it
  fresh.commit();
  EXPECT_TRUE(fs::is_directory(root_ / "new" / "deep"));
}

TEST_F(StagedDirTest, leftovers_of_dead_writers_are_removed_or_put_back) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const fs::path out = root_ / "data";
  fs::create_directories(root_ / fmt::format("data.tmp-{}-{}", host, dead));
  fs::create_directories(root_ / fmt::format("data.tmp-{}", dead));
  fs::create_directories(root_ / fmt::format("data.tmp-{}-{}", host, ::getpid()));  // a live writer (us)
  fs::create_directories(root_ / "data.tmp-notes");                                 // not a staging name
  // A fallback swap that died between its renames: the old directory is put back.
  fs::create_directories(root_ / fmt::format("data.old-{}-{}", host, dead));
  std::ofstream(root_ / fmt::format("data.old-{}-{}", host, dead) / "blend.json") << "{}";
  EXPECT_EQ(remove_stale_staging_dirs(out), 2);
  EXPECT_TRUE(fs::exists(out / "blend.json"));
  EXPECT_TRUE(fs::exists(root_ / fmt::format("data.tmp-{}-{}", host, ::getpid())));
  EXPECT_TRUE(fs::exists(root_ / "data.tmp-notes"));
  EXPECT_EQ(entries(), 3u);
}

}  // namespace
}  // namespace nemotron::io
