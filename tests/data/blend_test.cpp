#include <gtest/gtest.h>

#include "core/config_tree.h"
#include "data/blend.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using nlohmann::json;
using testing::input_error;

TEST(BlendList, weighted_pairs_and_prefix_only_lists) {
  Blend b = parse_blend_list({"0.3", "/d/a", "0.7", "  /d/b  "}, "data_path");
  EXPECT_EQ(b.prefixes, (std::vector<std::string>{"/d/a", "/d/b"}));
  ASSERT_TRUE(b.weights);
  EXPECT_EQ(*b.weights, (std::vector<double>{0.3, 0.7}));
  b = parse_blend_list({"/d/a", "/d/b"}, "data_path");  // even, but no weights
  EXPECT_FALSE(b.weights);
  EXPECT_EQ(b.prefixes.size(), 2u);
  b = parse_blend_list({"/d/a", "/d/b", "/d/c"}, "data_path");
  EXPECT_EQ(b.prefixes.size(), 3u);
  EXPECT_EQ(blend_to_list(parse_blend_list({"2", "/a", "1e-05", "/b"}, "x")),
            (std::vector<std::string>{"2.0", "/a", "1e-05", "/b"}));
}

TEST(BlendList, errors_name_the_entry) {
  EXPECT_EQ(input_error([] { parse_blend_list({"0.3", "/a", "/b", "/c"}, "blend.json: train"); }),
            "blend.json: train[2]: expected a weight (every other entry is one, as blend.json: train[0] = \"0.3\" is), "
            "got \"/b\"");
  EXPECT_EQ(input_error([] { parse_blend_list({"0.5", "/a", "/b"}, "blend.json: train"); }),
            "blend.json: train[0]: \"0.5\" is a number, but the list has an odd number of entries, so it is read as "
            "prefixes only (3); give every dataset as a weight followed by its prefix, or prefixes alone");
  EXPECT_EQ(input_error([] { parse_blend_list({"/a", "0.5"}, "p"); }),
            "p[1]: \"0.5\" is a number, but the list starts with a prefix, so it is read as prefixes only (2); give "
            "every dataset as a weight followed by its prefix, or prefixes alone");
  EXPECT_EQ(input_error([] { parse_blend_list({"1", "2"}, "p"); }),
            "p[1]: expected a dataset path prefix after the weight p[0] = \"1\", got the number \"2\"");
  EXPECT_EQ(input_error([] { parse_blend_list({"-1", "/a"}, "p"); }),
            "p[0]: weight: expected a positive number, got \"-1\"");
  EXPECT_EQ(input_error([] { parse_blend_list({"0", "/a"}, "p"); }),
            "p[0]: weight: expected a positive number, got \"0\"");
  EXPECT_EQ(input_error([] { parse_blend_list({"1", "/d/a.bin"}, "p"); }),
            "p[1]: \"/d/a.bin\": expected a path prefix without the .bin/.idx extension (\"/d/a\")");
  EXPECT_EQ(input_error([] { parse_blend_list({"1", "  "}, "p"); }),
            "p[1]: expected a dataset path prefix, got an empty string");
  EXPECT_EQ(input_error([] { parse_blend_list({}, "p"); }),
            "p: empty list; give [weight, prefix, ...] or [prefix, ...] (use null for a split without data)");
}

TEST(BlendPerSplit, reads_the_nemotron_blend_json_forms) {
  const json tree = json::parse(R"({
    "train": ["2.2", "/d/cc/shard_000000", "2.2", "/d/cc/shard_000001", 1, "/d/code/shard_000003"],
    "valid": "2.2 /d/cc/shard_000117",
    "test": null})");
  BlendPerSplit b = parse_blend_per_split(tree, "blend.json");
  ASSERT_TRUE(b[0] && b[1]);
  EXPECT_FALSE(b[2]);
  EXPECT_EQ(b[0]->prefixes.size(), 3u);
  EXPECT_EQ(*b[0]->weights, (std::vector<double>{2.2, 2.2, 1.0}));
  EXPECT_EQ(b[1]->prefixes, (std::vector<std::string>{"/d/cc/shard_000117"}));
  // Written back as Nemotron writes it: weights as strings.
  const json out = blend_per_split_to_json(b);
  EXPECT_EQ(out["train"][4], json("1.0"));
  EXPECT_TRUE(out["test"].is_null());
  EXPECT_EQ(parse_blend_per_split(out, "again")[0]->prefixes, b[0]->prefixes);
}

TEST(BlendPerSplit, errors_name_the_file_and_the_entry) {
  auto err = [](const char* text) {
    return input_error([&] { parse_blend_per_split(json::parse(text), "out/blend.json"); });
  };
  EXPECT_EQ(err(R"({"train": ["/a"], "valid": null})"),
            "out/blend.json: \"test\": missing; all of \"train\", \"valid\", \"test\" are required (null for a split "
            "without data)");
  EXPECT_EQ(err(R"({"tran": ["/a"], "valid": null, "test": null})"),
            "out/blend.json: \"tran\": unknown key (did you mean \"train\"?); expected \"train\", \"valid\", \"test\"");
  EXPECT_EQ(err(R"({"train": 3, "valid": null, "test": null})"),
            "out/blend.json: train: expected a list of strings, one whitespace-separated string, or null, got 3");
  EXPECT_EQ(err(R"({"train": ["1", {"p": 1}], "valid": null, "test": null})"),
            "out/blend.json: train[1]: expected a string (a weight or a path prefix), got {\"p\":1}");
  EXPECT_EQ(err(R"({"train": [], "valid": null, "test": null})"),
            "out/blend.json: train: empty list; give [weight, prefix, ...] or [prefix, ...] (use null for a split "
            "without data)");
  EXPECT_EQ(err(R"({"train": ["1", "/a", "x", "/b"], "valid": null, "test": null})"),
            "out/blend.json: train[2]: expected a weight (every other entry is one, as out/blend.json: train[0] = "
            "\"1\" is), got \"x\"");
  EXPECT_EQ(err(R"(["/a"])"),
            "out/blend.json: expected an object with keys \"train\", \"valid\", \"test\", got [\"/a\"]");
}

TEST(BlendPerSplit, file_round_trip_and_unreadable_files) {
  const std::string dir = testing::temp_dir();
  BlendPerSplit b;
  b[0] = Blend{{"/d/a", "/d/b"}, std::vector<double>{2.2, 1.0}};
  b[1] = Blend{{"/d/c"}, std::nullopt};
  write_blend_json(dir + "/blend.json", b);
  EXPECT_EQ(json::parse(testing::read_text(dir + "/blend.json")),
            json::parse(R"({"train": ["2.2", "/d/a", "1.0", "/d/b"], "valid": ["/d/c"], "test": null})"));
  BlendPerSplit back = load_blend_json(dir + "/blend.json");
  EXPECT_EQ(back[0]->prefixes, b[0]->prefixes);
  EXPECT_EQ(*back[0]->weights, *b[0]->weights);
  EXPECT_FALSE(back[1]->weights);
  EXPECT_EQ(input_error([&] { load_blend_json(dir + "/none.json"); }),
            dir + "/none.json: cannot open: No such file or directory");
  testing::write_text(dir + "/bad.json", "{\"train\": [\"1\", \"/a\",]}");
  EXPECT_NE(input_error([&] { load_blend_json(dir + "/bad.json"); }).find(dir + "/bad.json"), std::string::npos);
}

TEST(PythonFloatStr, matches_python_str) {
  EXPECT_EQ(python_float_str(1.0), "1.0");
  EXPECT_EQ(python_float_str(2.2), "2.2");
  EXPECT_EQ(python_float_str(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float_str(1e-5), "1e-05");
  EXPECT_EQ(python_float_str(123456789.0), "123456789.0");
}

}  // namespace
}  // namespace nemotron::data
