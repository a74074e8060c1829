// `data prep sft` through the library: JSONL rows with every kind of bad row (dropped and counted
// by reason), the packed shards read back, the split links and blend.json, and the errors that
// stop a run before anything is written.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/config_tree.h"
#include "data/packed_sft_dataset.h"
#include "data/sft_prep.h"
#include "tokenizer_test_util.h"

namespace nemotron::data {
namespace {

namespace fs = std::filesystem;
using testing::json;

// (data_test_util.h and tokenizer_test_util.h both define input_error; this file takes the latter.)
std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::temp_directory_path() / (std::string("nemotron_sft_prep_test_") + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}
void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string write_tokenizer(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  testing::make(testing::tokenizer_json(
                    testing::bpe_model(testing::byte_level_tokens({"<|im_start|>", "<|im_end|>", "</s>"}), {}),
                    testing::byte_level_pretokenizer(false, false),
                    json::array({testing::added_token(256, "<|im_start|>", true), testing::added_token(257, "<|im_end|>", true),
                                 testing::added_token(258, "</s>", true)}),
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}))
      .save(path);
  return path;
}

SftPrepConfig read_config(const std::string& yaml, nlohmann::json& tree) {
  tree = parse_yaml_text(yaml, "test.yaml");
  ConfigReader r(tree, "test.yaml");
  SftPrepConfig cfg = SftPrepConfig::read(r);
  r.check_unknown_keys();
  return cfg;
}

const char* kRows = R"({"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "The answer is 5."}], "used_in": "nano_v3"}
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning_content": "R"}, {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "B"}], "used_in": ["nano_v3"]}
{"text": "no messages", "used_in": "nano_v3"}
{"messages": [{"role": "robot", "content": "beep"}], "used_in": "nano_v3"}
{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{not json"}}]}], "used_in": "nano_v3"}
{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], "used_in": "nano_v2"}

{"messages": [{"role": "user", "content": "What is 6 * 7?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": "{\"expression\": \"6 * 7\"}"}}]}, {"role": "tool", "content": "42"}, {"role": "assistant", "content": "The answer is 42."}], "used_in": "nano_v3,super_v3"}
)";

TEST(SftPrep, jsonl_rows_are_templated_packed_and_bad_rows_counted) {
  const std::string dir = temp_dir();
  write_text(dir + "/rows.jsonl", kRows);
  const std::string tok = write_tokenizer(dir);
  nlohmann::json tree;
  SftPrepConfig cfg = read_config(fmt::format(R"(output_dir: {0}/out
sources: [{{name: chat, files: {0}/rows.jsonl}}]
tokenizer: {{model: {1}}}
pack_size: 300
num_shards: 1
used_in_filter: nano_v3
)", dir, tok), tree);
  SftPrepResult res = prepare_sft_data(cfg, tree.dump(), 0, false, nullptr);
  EXPECT_EQ(res.rows_in, 7);
  EXPECT_EQ(res.rows_dropped, 4);
  EXPECT_EQ(res.dropped_by_reason[static_cast<size_t>(DropReason::no_messages)], 1);
  EXPECT_EQ(res.dropped_by_reason[static_cast<size_t>(DropReason::unknown_role)], 1);
  EXPECT_EQ(res.dropped_by_reason[static_cast<size_t>(DropReason::bad_tool_call)], 1);
  EXPECT_EQ(res.dropped_by_reason[static_cast<size_t>(DropReason::used_in_filter)], 1);
  EXPECT_EQ(res.sequences, 4);  // the reasoning row gives one sequence per user turn
  // One shard: everything goes to train.
  EXPECT_EQ(res.splits[0].shards, 1);
  EXPECT_EQ(res.splits[1].shards, 0);
  PackedSftDataset ds(dir + "/out/splits/train", 300, 258);
  int64_t tokens = 0, trained = 0, sequences = 0;
  for (int64_t i = 0; i < ds.num_rows(); ++i) {
    tokens += static_cast<int64_t>(ds.row(i).input_ids.size());
    sequences += static_cast<int64_t>(ds.row(i).seq_start_id.size());
    for (uint8_t m : ds.row(i).loss_mask) trained += m;
  }
  EXPECT_EQ(tokens, res.tokens);
  EXPECT_EQ(trained, res.trained_tokens);
  EXPECT_EQ(sequences, 4);
  std::ifstream in(dir + "/out/metadata.json");
  const nlohmann::json meta = nlohmann::json::parse(in);
  EXPECT_EQ(meta["rows_dropped_by_reason"]["unknown_role"], 1);
  EXPECT_EQ(meta["type"], "SFTDataArtifact");
  EXPECT_EQ(meta["bins"], res.bins);
  const nlohmann::json blend = load_config_file(dir + "/out/blend.json");
  ASSERT_EQ(blend["train"].size(), 2u);
  EXPECT_TRUE(fs::exists(blend["train"][1].get<std::string>() + ".parquet"));
  EXPECT_TRUE(blend["valid"].is_null());
}

// Issue 11: a killed prep left <out>.tmp-<pid> forever; the staging directory of a dead writer
// is removed by the next run, even one with nothing to do, and --force carries --sample outputs.
TEST(SftPrep, staging_directories_of_killed_runs_are_removed_and_samples_survive_force) {
  const std::string dir = temp_dir();
  write_text(dir + "/rows.jsonl", kRows);
  const std::string tok = write_tokenizer(dir);
  nlohmann::json tree;
  SftPrepConfig cfg = read_config(fmt::format(R"(output_dir: {0}/out
sources: [{{name: chat, files: {0}/rows.jsonl}}]
tokenizer: {{model: {1}}}
pack_size: 300
num_shards: 1
)", dir, tok), tree);
  ASSERT_FALSE(prepare_sft_data(cfg, tree.dump(), 0, false, nullptr).up_to_date);
  ASSERT_FALSE(prepare_sft_data(cfg, tree.dump(), 2, false, nullptr).up_to_date);  // out/sample-2
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const fs::path legacy = fs::path(dir) / fmt::format("out.tmp-{}", dead);
  fs::create_directories(legacy / "splits");
  EXPECT_TRUE(prepare_sft_data(cfg, tree.dump(), 0, false, nullptr).up_to_date);
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_FALSE(prepare_sft_data(cfg, tree.dump(), 0, true, nullptr).up_to_date);  // --force
  EXPECT_TRUE(fs::exists(dir + "/out/sample-2/metadata.json"));
  EXPECT_TRUE(fs::exists(dir + "/out/metadata.json"));
}

TEST(SftPrep, reads_a_nemotron_style_config_with_a_raw_blend) {
  const std::string dir = temp_dir();
  write_text(dir + "/rows.jsonl", kRows);
  write_text(dir + "/blend.json", fmt::format(R"({{"datasets": [{{"name": "chat", "path": "{}", "subset": "x"}}]}})", dir + "/rows.jsonl"));
  const std::string tok = write_tokenizer(dir);
  nlohmann::json tree;
  SftPrepConfig cfg = read_config(fmt::format(R"(run: {{env: {{container: anyscale/ray:2.49.2-py312}}}}
blend_path: {0}/blend.json
output_dir: {0}/out
num_shards: 1
tokenizer: {{model: {1}, add_bos: false, add_eos: true}}
pack_size: 4096
algorithm: first_fit_shuffle
seed: null
parquet_row_group_size: 1000
parquet_compression: zstd
train_ratio: 0.98
valid_ratio: 0.01
test_ratio: 0.01
chat_template: nano3
messages_field: messages
tools_field: tools
used_in_filter: nano_v3
used_in_field: used_in
max_doc_tokens: null
sample: 3
sample_seed: 7
force: false
config_name: default
plan: {{planner_cpus: 0.5}}
download: {{batch_size: 1}}
tokenization: {{cpus_per_worker: 4}}
observability: {{pipeline_logging_interval_s: 30}}
)", dir, tok), tree);
  ASSERT_EQ(cfg.sources.size(), 1u);
  EXPECT_EQ(cfg.sources[0].name, "chat");
  EXPECT_EQ(cfg.sample, 3);
  EXPECT_EQ(cfg.seed, 7u);  // seed: null takes sample_seed
  SftPrepResult res = prepare_sft_data(cfg, tree.dump(), cfg.sample, cfg.force, nullptr);
  EXPECT_EQ(res.rows_in, 3);
  EXPECT_TRUE(fs::exists(dir + "/out/sample-3/splits/train"));
  write_text(dir + "/remote.json", R"({"datasets": [{"name": "x", "path": "hf://nvidia/Nemotron-Science-v1"}]})");
  EXPECT_NE(testing::input_error([&] {
              nlohmann::json t;
              read_config(fmt::format("blend_path: {0}/remote.json\noutput_dir: {0}/o\ntokenizer: {{model: {1}}}\n", dir, tok), t);
            }).find("remote.json: datasets[0].path: \"hf://nvidia/Nemotron-Science-v1\" is remote"),
            std::string::npos);
}

TEST(SftPrep, split_links_follow_the_shuffled_shards) {
  const std::string dir = temp_dir();
  const std::string tok = write_tokenizer(dir);
  nlohmann::json tree;
  SftPrepConfig cfg = read_config(fmt::format(R"(output_dir: {0}/out
sources: [{{name: chat, generator: {{seed: 1, first_problem: 0, num_examples: 300}}}}]
tokenizer: {{model: {1}}}
pack_size: 1024
num_shards: 8
heldout_examples: 5
)", dir, tok), tree);
  SftPrepResult res = prepare_sft_data(cfg, tree.dump(), 0, false, nullptr);
  EXPECT_EQ(res.splits[0].shards, 6);
  EXPECT_EQ(res.splits[1].shards, 1);
  EXPECT_EQ(res.splits[2].shards, 1);
  std::vector<std::string> names;
  for (const char* split : {"train", "valid", "test"})
    for (const auto& e : fs::directory_iterator(dir + "/out/splits/" + split)) {
      EXPECT_TRUE(fs::is_symlink(e.path()));
      EXPECT_TRUE(fs::is_regular_file(e.path()));  // the link resolves
      names.push_back(e.path().filename().string());
    }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 8u);
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i].substr(0, 16), fmt::format("{:06d}__chat__sh", i));
  EXPECT_TRUE(fs::exists(dir + "/out/heldout/chat.jsonl"));
  EXPECT_GT(res.packing_efficiency, 0.9);
}

TEST(SftPrep, an_invalid_jsonl_line_stops_the_run_and_writes_nothing) {
  const std::string dir = temp_dir();
  write_text(dir + "/rows.jsonl", std::string(kRows) + "{\"messages\": [\n");
  const std::string tok = write_tokenizer(dir);
  nlohmann::json tree;
  SftPrepConfig cfg = read_config(fmt::format("output_dir: {0}/out\nsources: [{{files: {0}/rows.jsonl}}]\ntokenizer: {{model: {1}}}\n", dir, tok), tree);
  const std::string msg = testing::input_error([&] { prepare_sft_data(cfg, tree.dump(), 0, false, nullptr); });
  EXPECT_NE(msg.find("rows.jsonl:9: invalid JSON"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir + "/out"));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().find("out.tmp"), std::string::npos);
}

TEST(SftPrep, config_errors_name_the_key) {
  const std::string dir = temp_dir();
  const std::string tok = write_tokenizer(dir);
  write_text(dir + "/rows.jsonl", kRows);
  auto error = [&](const std::string& extra) {
    return testing::input_error([&] {
      nlohmann::json tree;
      read_config(fmt::format("output_dir: {0}/out\nsources: [{{files: {0}/rows.jsonl}}]\ntokenizer: {{model: {1}}}\n{2}\n", dir, tok, extra),
                  tree);
    });
  };
  EXPECT_NE(error("chat_template: chatml").find("test.yaml: chat_template: chat template \"chatml\": not a built-in"), std::string::npos);
  EXPECT_NE(error("algorithm: best_fit").find("algorithm: unknown packing algorithm"), std::string::npos);
  EXPECT_NE(error("pack_size: 0").find("pack_size"), std::string::npos);
  EXPECT_NE(error("messages_feild: m").find("messages_feild"), std::string::npos);
  EXPECT_NE(testing::input_error([&] {
              nlohmann::json tree;
              read_config(fmt::format("output_dir: {0}/out\nsources: [{{files: {0}/missing.jsonl}}]\ntokenizer: {{model: {1}}}\n", dir, tok), tree);
            }).find("missing.jsonl: no such file"),
            std::string::npos);
  EXPECT_NE(testing::input_error([&] {
              nlohmann::json tree;
              read_config(fmt::format("output_dir: {0}/out\nsources: [{{files: {0}/rows.jsonl}}]\ntokenizer: {{model: {0}/nope.json}}\n", dir), tree);
            }).find("tokenizer.model"),
            std::string::npos);
}

}  // namespace
}  // namespace nemotron::data
