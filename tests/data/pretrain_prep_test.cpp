// The data-prep stage end to end on small inputs: shards readable by the indexed-dataset reader,
// an EOD after every document, blend.json splits, up-to-date skipping, refusal to overwrite, and
// input errors that name the file and line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/config_tree.h"
#include "data/blend.h"
#include "data/indexed_dataset.h"
#include "data/pretrain_prep.h"
#include "data/tokenizer.h"
#include "test_util.h"

namespace nemotron::data {
namespace {

namespace fs = std::filesystem;

class PretrainPrep : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("nm_prep_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  nlohmann::json config(const std::string& extra_yaml = "") {
    std::string yaml = fmt::format(R"(output_dir: {}/out
sources:
  - name: gen
    generator: {{seed: 7, num_documents: 300, problems_per_document: 4}}
tokenizer:
  train: {{vocab_size: 300, special_tokens: ["<s>", "</s>"]}}
  eos_token: "</s>"
num_shards: 4
valid_shards: 1
test_shards: 1
{})", dir_.string(), extra_yaml);
    return parse_yaml_text(yaml, "prep.yaml");
  }
  PretrainPrepResult run(const nlohmann::json& tree, int64_t sample = 0, bool force = false) {
    ConfigReader r(tree, "prep.yaml");
    PretrainPrepConfig cfg = PretrainPrepConfig::read(r);
    r.check_unknown_keys();
    return prepare_pretrain_data(cfg, tree.dump(), sample, force, nullptr);
  }
  fs::path dir_;
};

TEST_F(PretrainPrep, writes_shards_with_an_eod_per_document_and_a_blend) {
  nlohmann::json tree = config();
  PretrainPrepResult res = run(tree);
  EXPECT_FALSE(res.up_to_date);
  EXPECT_EQ(res.documents, 300);
  Tokenizer tok = Tokenizer::load(res.tokenizer_path);
  const int32_t eos = *tok.token_to_id("</s>");
  BlendPerSplit blends = load_blend_json(res.blend_path);
  ASSERT_TRUE(blends[0] && blends[1] && blends[2]);
  EXPECT_EQ(blends[0]->prefixes.size(), 2u);
  EXPECT_EQ(blends[1]->prefixes.size(), 1u);
  int64_t docs = 0, tokens = 0;
  for (const auto& split : blends)
    for (const std::string& prefix : split->prefixes) {
      IndexedDataset ds = IndexedDataset::open(prefix);
      docs += ds.num_sequences();
      tokens += ds.num_tokens();
      for (int64_t i = 0; i < ds.num_sequences(); ++i) {
        std::vector<int32_t> seq = ds.get(i);
        ASSERT_FALSE(seq.empty());
        EXPECT_EQ(seq.back(), eos);
        EXPECT_EQ(std::count(seq.begin(), seq.end(), eos), 1);
      }
    }
  EXPECT_EQ(docs, 300);
  EXPECT_EQ(tokens, res.tokens);
  EXPECT_GT(res.unigram_entropy_nats, 1.0);
  EXPECT_LT(res.unigram_entropy_nats, std::log(300.0));
  // The first document decodes back to the generator's text.
  IndexedDataset any = IndexedDataset::open(blends[0]->prefixes[0]);
  std::vector<int32_t> d0 = any.get(0);
  d0.pop_back();
  EXPECT_NE(tok.decode(d0).find(" = "), std::string::npos);

  // Same config and inputs: nothing to do. Another config: refused without force.
  EXPECT_TRUE(run(tree).up_to_date);
  nlohmann::json other = config("min_doc_chars: 5");
  EXPECT_NE(testing::input_error([&] { run(other); }).find("pass --force to overwrite it"), std::string::npos);
  EXPECT_FALSE(run(other, 0, true).up_to_date);
  EXPECT_TRUE(run(other).up_to_date);
}

TEST_F(PretrainPrep, sample_writes_a_separate_directory) {
  PretrainPrepResult res = run(config(), 40);
  EXPECT_EQ(res.documents, 40);
  EXPECT_EQ(fs::path(res.output_dir).filename(), "sample-40");
}

TEST_F(PretrainPrep, jsonl_sources_and_their_errors) {
  std::ofstream(dir_ / "a.jsonl") << "{\"text\": \"one plus one is two\"}\n{\"text\": \"three\"}\n"
                                  << "{\"text\": \"four five six\"}\n{\"text\": \"seven eight\"}\n{\"text\": \"nine\"}\n";
  std::string yaml = fmt::format(R"(output_dir: {0}/out
sources:
  - name: web
    files: [{0}/a.jsonl]
tokenizer:
  train: {{vocab_size: 280, special_tokens: ["</s>"]}}
  eos_token: "</s>"
num_shards: 4
valid_shards: 1
test_shards: 1
)", dir_.string());
  nlohmann::json tree = parse_yaml_text(yaml, "prep.yaml");
  EXPECT_EQ(run(tree).documents, 5);
  std::ofstream(dir_ / "a.jsonl", std::ios::app) << "{\"txt\": 3}\n";
  EXPECT_NE(testing::input_error([&] { run(tree, 0, true); }).find("a.jsonl:6"), std::string::npos);
}

TEST_F(PretrainPrep, a_text_source_that_is_not_utf8_is_named) {
  std::ofstream(dir_ / "good.txt") << "plain text\n";
  std::ofstream(dir_ / "latin1.txt", std::ios::binary) << "first line\ncaf\xe9 au lait\n";
  std::string yaml = fmt::format(R"(output_dir: {0}/out
sources:
  - name: notes
    files: [{0}/good.txt, {0}/latin1.txt]
tokenizer:
  train: {{vocab_size: 280, special_tokens: ["</s>"]}}
  eos_token: "</s>"
num_shards: 1
valid_shards: 0
test_shards: 0
)", dir_.string());
  EXPECT_EQ(testing::input_error([&] { run(parse_yaml_text(yaml, "prep.yaml")); }),
            (dir_ / "latin1.txt").string() +
                ":2: not valid UTF-8 (byte 14 of the file); a text source must be UTF-8 (convert it, e.g. with iconv)");
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(PretrainPrep, staging_directories_of_killed_runs_are_removed) {
  nlohmann::json tree = config();
  run(tree);
  // A run killed while writing leaves <out>.tmp-<pid> (older versions) or <out>.tmp-<host>-<pid>.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const fs::path legacy = dir_ / fmt::format("out.tmp-{}", dead);
  const fs::path current = dir_ / fmt::format("out.tmp-{}-{}", host, dead);
  const fs::path alive = dir_ / fmt::format("out.tmp-{}-{}", host, ::getppid());   // still running: kept
  const fs::path elsewhere = dir_ / fmt::format("out.tmp-otherhost-{}", dead);    // not ours to judge: kept
  for (const fs::path& p : {legacy, current, alive, elsewhere}) fs::create_directories(p / "datasets");
  EXPECT_TRUE(run(tree).up_to_date);  // even a run with nothing to do cleans up
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_FALSE(fs::exists(current));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(elsewhere));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "blend.json"));
}

TEST_F(PretrainPrep, reads_a_nemotron_raw_blend) {
  fs::create_directories(dir_ / "web");
  for (int k = 0; k < 2; ++k) {
    std::ofstream f(dir_ / "web" / fmt::format("part{}.jsonl", k));
    for (int i = 0; i < 4; ++i) f << fmt::format("{{\"text\": \"document {} of part {}\"}}\n", i, k);
  }
  std::ofstream(dir_ / "raw.json") << fmt::format(
      R"({{"datasets": [{{"name": "web", "path": "{0}/web", "weight": 2.0, "_comment": "two parts"}},
                       {{"name": "off", "path": "{0}/web", "weight": 0}}]}})", dir_.string());
  std::string yaml = fmt::format(R"(output_dir: {0}/out
blend_path: {0}/raw.json
tokenizer:
  train: {{vocab_size: 280, special_tokens: ["</s>"]}}
  eos_token: "</s>"
num_shards: 4
)", dir_.string());
  PretrainPrepResult res = run(parse_yaml_text(yaml, "prep.yaml"));
  EXPECT_EQ(res.documents, 8);
  BlendPerSplit blends = load_blend_json(res.blend_path);
  EXPECT_EQ((*blends[0]->weights)[0], 2.0);
  std::ofstream(dir_ / "remote.json") << R"({"datasets": [{"name": "w", "path": "hf://org/web"}]})";
  EXPECT_EQ(testing::input_error([&] {
              run(parse_yaml_text(fmt::format("output_dir: x\nblend_path: {}/remote.json\ntokenizer: {{path: t}}\n",
                                              dir_.string()),
                                  "prep.yaml"));
            }),
            (dir_ / "remote.json").string() + ": datasets[0].path: \"hf://org/web\" is remote; download it first and "
                                              "give the local path");
}

TEST_F(PretrainPrep, config_errors_name_the_key) {
  auto err = [&](const std::string& yaml) {
    return testing::input_error([&] { run(parse_yaml_text(yaml, "prep.yaml")); });
  };
  EXPECT_EQ(err("sources: []\noutput_dir: x\n"),
            "prep.yaml: sources: expected a non-empty list of sources (or blend_path: a raw blend JSON)");
  EXPECT_EQ(err("output_dir: x\nsources: [{name: a, files: [/nope.jsonl]}]\ntokenizer: {path: t.json}\n"),
            "prep.yaml: sources[0].files: /nope.jsonl: no such file");
  EXPECT_EQ(err("output_dir: x\nsources: [{name: a}]\ntokenizer: {path: t.json}\n"),
            "prep.yaml: sources[0].generator: give either files or generator (exactly one)");
  EXPECT_EQ(err("output_dir: x\nsources: [{name: a, generator: {}}]\ntokenizer: {path: t.json}\nnum_shards: 2\n"),
            "prep.yaml: num_shards: 2 shards in all leave none for training after valid_shards 1 + test_shards 1");
  EXPECT_EQ(err("output_dir: x\nsources: [{name: a, generator: {}}]\ntokenizer: {}\n"),
            "prep.yaml: tokenizer.train: give either path (a tokenizer.json) or train (exactly one)");
}

}  // namespace
}  // namespace nemotron::data
