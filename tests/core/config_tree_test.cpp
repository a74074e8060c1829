#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron {

using nlohmann::json;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  return testing::write_temp("nemotron_config_tree_test", name, text);
}
using testing::input_error;

}  // namespace

TEST(YamlScalar, core_schema_types) {
  EXPECT_EQ(parse_yaml_scalar("8"), json(8));
  EXPECT_EQ(parse_yaml_scalar("-12"), json(-12));
  EXPECT_EQ(parse_yaml_scalar("0x1F"), json(31));
  EXPECT_EQ(parse_yaml_scalar("0o17"), json(15));
  EXPECT_TRUE(parse_yaml_scalar("8").is_number_integer());
  EXPECT_TRUE(parse_yaml_scalar("8.0").is_number_float());
  EXPECT_EQ(parse_yaml_scalar("1e-5").get<double>(), 1e-5);  // YAML 1.2: no dot needed
  EXPECT_EQ(parse_yaml_scalar("2.5").get<double>(), 2.5);
  EXPECT_EQ(parse_yaml_scalar(".5").get<double>(), 0.5);
  EXPECT_TRUE(std::isinf(parse_yaml_scalar(".inf").get<double>()));
  EXPECT_LT(parse_yaml_scalar("-.Inf").get<double>(), 0);
  EXPECT_TRUE(std::isnan(parse_yaml_scalar(".nan").get<double>()));
  EXPECT_EQ(parse_yaml_scalar("true"), json(true));
  EXPECT_EQ(parse_yaml_scalar("FALSE"), json(false));
  EXPECT_TRUE(parse_yaml_scalar("null").is_null());
  EXPECT_TRUE(parse_yaml_scalar("~").is_null());
  EXPECT_TRUE(parse_yaml_scalar("").is_null());
  // YAML 1.1 words are plain strings in the core schema.
  EXPECT_EQ(parse_yaml_scalar("yes"), json("yes"));
  EXPECT_EQ(parse_yaml_scalar("eight"), json("eight"));
  EXPECT_EQ(parse_yaml_scalar("1.2.3"), json("1.2.3"));
  EXPECT_EQ(parse_yaml_scalar("M*M-ME"), json("M*M-ME"));
}

TEST(YamlText, mappings_lists_and_quoted_scalars) {
  json t = parse_yaml_text(
      "model:\n"
      "  hidden_size: 64\n"
      "  eps: 1.0e-5\n"
      "  quoted: '8'\n"
      "  dq: \"true\"\n"
      "  tagged: !!str 5\n"
      "  limit: [0.0, .inf]\n"
      "  empty:\n"
      "  nested: {a: 1, b: [x, 2]}\n",
      "t.yaml");
  const json& m = t["model"];
  EXPECT_EQ(m["hidden_size"], json(64));
  EXPECT_EQ(m["eps"].get<double>(), 1e-5);
  EXPECT_EQ(m["quoted"], json("8"));
  EXPECT_EQ(m["dq"], json("true"));
  EXPECT_EQ(m["tagged"], json("5"));
  EXPECT_EQ(m["limit"][0].get<double>(), 0.0);
  EXPECT_TRUE(std::isinf(m["limit"][1].get<double>()));
  EXPECT_TRUE(m["empty"].is_null());
  EXPECT_EQ(m["nested"], json::parse(R"({"a": 1, "b": ["x", 2]})"));
}

TEST(YamlText, duplicate_keys_and_syntax_errors_name_file_and_line) {
  EXPECT_EQ(input_error([] { parse_yaml_text("model:\n  a: 1\n  a: 2\n", "t.yaml"); }),
            "t.yaml: model.a: duplicate key (line 3)");
  EXPECT_EQ(input_error([] { parse_yaml_text("model:\n  a: b: c\n", "t.yaml"); }),
            "t.yaml: YAML parse error at line 2, column 7: illegal map value");
  // A pattern starting with '*' reads as a YAML alias; the message says to quote it.
  EXPECT_EQ(input_error([] { parse_yaml_text("model:\n  hybrid_override_pattern: *E\n", "t.yaml"); }),
            "t.yaml: YAML parse error at line 2, column 28: the referenced anchor is not defined "
            "(a value starting with * is a YAML alias; quote it: \"*E\")");
}

TEST(JsonText, python_float_literals_and_float_objects) {
  json t = parse_json_text(R"({"lim": [0.0, Infinity], "neg": -Infinity, "n": NaN, "s": "Infinity NaN"})", "c.json");
  EXPECT_TRUE(std::isinf(*json_number(t["lim"][1])));
  EXPECT_EQ(*json_number(t["neg"]), -INFINITY);
  EXPECT_TRUE(std::isnan(*json_number(t["n"])));
  EXPECT_EQ(t["s"], json("Infinity NaN"));  // strings are left alone
  EXPECT_TRUE(std::isinf(*json_number(json::parse(R"({"__float__": "Infinity"})"))));
  EXPECT_EQ(*json_number(json(3)), 3.0);
  EXPECT_FALSE(json_number(json("3")).has_value());
  EXPECT_FALSE(json_number(json::parse(R"({"__float__": "many"})")).has_value());
}

TEST(JsonText, syntax_error_names_file_line_and_column) {
  EXPECT_EQ(input_error([] { parse_json_text("{\n  \"a\": 1,\n}\n", "c.json"); }),
            "c.json: JSON parse error at line 3, column 1: syntax error while parsing object key - unexpected '}'; "
            "expected string literal");
}

TEST(ConfigFile, loads_by_extension_and_reports_missing_files) {
  std::string y = write_temp("a.yaml", "x: 1e-5\n");
  std::string j = write_temp("a.json", "{\"x\": 1}\n");
  EXPECT_EQ(load_config_file(y)["x"].get<double>(), 1e-5);
  EXPECT_EQ(load_config_file(j)["x"], json(1));
  EXPECT_EQ(input_error([] { load_config_file("/nonexistent/nope.yaml"); }),
            "/nonexistent/nope.yaml: cannot open: No such file or directory");
  std::string dir = std::filesystem::path(y).parent_path().string();
  EXPECT_EQ(input_error([&] { load_config_file(dir); }), dir + ": is a directory, expected a config file");
}

TEST(Overrides, set_nested_values_typed_as_yaml) {
  json t = parse_yaml_text("train:\n  global_batch_size: 32\n", "t.yaml");
  apply_overrides(t,
                  {"train.global_batch_size=8", "train.lr=3e-4", "train.name='8'", "model.limit=[0, .inf]",
                   "new.deep.key=true", "train.note="},
                  "command line");
  EXPECT_EQ(t["train"]["global_batch_size"], json(8));
  EXPECT_EQ(t["train"]["lr"].get<double>(), 3e-4);
  EXPECT_EQ(t["train"]["name"], json("8"));
  EXPECT_TRUE(std::isinf(t["model"]["limit"][1].get<double>()));
  EXPECT_EQ(t["new"]["deep"]["key"], json(true));
  EXPECT_TRUE(t["train"]["note"].is_null());
}

TEST(Overrides, malformed_assignments_are_input_errors) {
  json t = parse_yaml_text("train:\n  steps: 5\n", "t.yaml");
  EXPECT_EQ(input_error([&] { apply_override(t, "train.steps", "command line"); }),
            "command line: override \"train.steps\": expected key=value");
  EXPECT_EQ(input_error([&] { apply_override(t, "train..steps=1", "command line"); }),
            "command line: override \"train..steps=1\": empty part in key \"train..steps\"");
  EXPECT_EQ(input_error([&] { apply_override(t, "train.steps.x=1", "command line"); }),
            "command line: train.steps.x: cannot set it: train.steps is not a mapping (it is 5)");
  EXPECT_EQ(input_error([&] { apply_override(t, "train.steps=[1,", "command line"); }),
            "command line: train.steps: cannot parse value \"[1,\": end of sequence flow not found");
  EXPECT_TRUE(is_override("a.b=1"));
  EXPECT_FALSE(is_override("--seq-len=5"));
  EXPECT_FALSE(is_override("tiny"));
}

TEST(Overrides, list_items_by_index) {
  // The form recipes/*/data_prep/pretrain/default.yaml documents: sources.0.files='[...]'.
  json t = parse_yaml_text("sources:\n  - name: web\n    files: [a.jsonl]\n  - name: code\n", "d.yaml");
  apply_overrides(t, {"sources.0.files=[/data/web/part-0.jsonl]", "sources.1.weight=0.5", "sources.1=x"},
                  "command line");
  EXPECT_EQ(t["sources"][0]["files"], json::array({"/data/web/part-0.jsonl"}));
  EXPECT_EQ(t["sources"][0]["name"], json("web"));
  EXPECT_EQ(t["sources"][1], json("x"));
  EXPECT_EQ(input_error([&] { apply_override(t, "sources.2.files=[]", "command line"); }),
            "command line: sources.2.files: cannot set it: sources is a list; \"2\" is not an index of it (0 to 1)");
  EXPECT_EQ(input_error([&] { apply_override(t, "sources.web.files=[]", "command line"); }),
            "command line: sources.web.files: cannot set it: sources is a list; \"web\" is not an index of it (0 "
            "to 1)");
  json e = parse_yaml_text("sources: []\n", "d.yaml");
  EXPECT_EQ(input_error([&] { apply_override(e, "sources.0.files=[]", "command line"); }),
            "command line: sources.0.files: cannot set it: sources is an empty list");
}

TEST(YamlText, nested_aliases_are_bounded_and_name_file_and_line) {
  // "Billion laughs": 9 levels of 9 aliases each is 9^9 (387 million) leaves from ~400 bytes; line 6
  // (9^6 leaves) is the first that expands beyond the budget.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += fmt::format("{}: &{} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n", c, c, fmt::arg("p", prev));
  }
  ASSERT_LT(bomb.size(), 500u);
  std::string err = input_error([&] { parse_yaml_text(bomb, "bomb.yaml"); });
  EXPECT_EQ(err,
            "bomb.yaml: line 6: aliases expand the document beyond 4 MiB (aliases nested in aliases?); write the "
            "values out or nest fewer aliases");
  // Ordinary use of anchors and aliases (a shared block) still loads.
  json ok = parse_yaml_text("base: &b {lr: 1e-4, warmup: 10}\nsft: *b\nrl: *b\n", "ok.yaml");
  EXPECT_EQ(ok["rl"]["warmup"], json(10));
  // So does a large alias-free document (every node is in the text, so it is within the budget).
  std::string big = "files: [";
  for (int i = 0; i < 200000; ++i) big += i ? ",1" : "1";
  EXPECT_EQ(parse_yaml_text(big + "]\n", "big.yaml")["files"].size(), 200000u);
}

TEST(Suggestions, nearest_key_by_edit_distance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
  std::vector<std::string> keys = {"hidden_size", "vocab_size", "num_attention_heads", "n_groups"};
  EXPECT_EQ(nearest_key("hidden_sze", keys), "hidden_size");
  EXPECT_EQ(nearest_key("num_attn_heads", keys), "num_attention_heads");
  EXPECT_EQ(nearest_key("completely_different", keys), "");
}

TEST(ConfigReader, typed_getters_with_fallbacks) {
  json t = parse_yaml_text(
      "model:\n  n: 8\n  f: 2.5\n  big: 1e5\n  b: true\n  s: relu2\n  nul: null\n  inf: .inf\n  sub: {k: 3}\n", "t.yaml");
  ConfigReader root(t, "t.yaml");
  ConfigReader& m = root.section("model");
  EXPECT_EQ(m.get_int("n", 0), 8);
  EXPECT_EQ(m.get_positive_int("big", 0), 100000);  // an integral float is an integer
  EXPECT_EQ(m.get_number("f", 0), 2.5);
  EXPECT_EQ(m.get_number("n", 0), 8.0);
  EXPECT_TRUE(std::isinf(m.get_number("inf", 0)));
  EXPECT_TRUE(m.get_bool("b", false));
  EXPECT_EQ(m.get_string("s", ""), "relu2");
  EXPECT_EQ(m.get_int("nul", 42), 42);  // null = absent
  EXPECT_EQ(m.get_int("absent", 7), 7);
  EXPECT_FALSE(m.has("absent"));
  EXPECT_EQ(m.section("sub").get_int("k", 0), 3);
  EXPECT_EQ(m.key_path("n"), "model.n");
  root.check_unknown_keys();  // everything was read
}

TEST(ConfigReader, wrong_types_name_key_expected_and_value) {
  json t = parse_yaml_text(
      "model:\n  hidden_size: eight\n  zero: 0\n  neg: -3\n  frac: 3.5\n  flag: yes\n  n: '8'\n  s: 5\n  "
      "sub: 4\n  x: [1, 2]\n",
      "recipes/super3/pretrain/tiny.yaml");
  ConfigReader root(t, "recipes/super3/pretrain/tiny.yaml");
  ConfigReader& m = root.section("model");
  const std::string f = "recipes/super3/pretrain/tiny.yaml: model.";
  EXPECT_EQ(input_error([&] { m.get_positive_int("hidden_size", 0); }),
            f + "hidden_size: expected a positive integer, got \"eight\"");
  EXPECT_EQ(input_error([&] { m.get_positive_int("zero", 1); }), f + "zero: expected a positive integer, got 0");
  EXPECT_EQ(input_error([&] { m.get_nonnegative_int("neg", 1); }),
            f + "neg: expected a non-negative integer, got -3");
  EXPECT_EQ(input_error([&] { m.get_int("frac", 1); }), f + "frac: expected an integer, got 3.5");
  EXPECT_EQ(input_error([&] { m.get_bool("flag", false); }), f + "flag: expected true or false, got \"yes\"");
  EXPECT_EQ(input_error([&] { m.get_int("n", 0); }), f + "n: expected an integer, got \"8\"");
  EXPECT_EQ(input_error([&] { m.get_string("s", ""); }), f + "s: expected a string, got 5");
  EXPECT_EQ(input_error([&] { m.get_number("x", 0); }), f + "x: expected a number, got [1,2]");
  EXPECT_EQ(input_error([&] { m.section("sub"); }), f + "sub: expected a mapping of keys, got 4");
}

TEST(ConfigReader, unknown_keys_suggest_the_nearest_known_key) {
  json t = parse_yaml_text("model:\n  hidden_sze: 8\n  vocab_size: 16\ntrain:\n  stepz: 3\n", "tiny.yaml");
  {
    ConfigReader root(t, "tiny.yaml");
    ConfigReader& m = root.section("model");
    m.get_positive_int("hidden_size", 0);
    m.get_positive_int("vocab_size", 0);
    root.ignore("train");
    EXPECT_EQ(input_error([&] { root.check_unknown_keys(); }),
              "tiny.yaml: model.hidden_sze: unknown key (did you mean \"hidden_size\"?)");
  }
  {
    ConfigReader root(t, "tiny.yaml");
    root.section("model").get_int("hidden_sze", 0);
    root.section("model").get_int("vocab_size", 0);
    root.section("train").get_int("steps", 0);
    EXPECT_EQ(input_error([&] { root.check_unknown_keys(); }),
              "tiny.yaml: train.stepz: unknown key (did you mean \"steps\"?)");
  }
  {
    const json tree = json::parse(R"({"zzz": 1})");
    ConfigReader r(tree, "c.json");
    r.get_int("hidden_size", 0);
    EXPECT_EQ(input_error([&] { r.check_unknown_keys(); }), "c.json: zzz: unknown key");
  }
}

TEST(ConfigReader, describe_value_shows_strings_quoted_and_infinities) {
  EXPECT_EQ(describe_value(json("eight")), "\"eight\"");
  EXPECT_EQ(describe_value(json(3)), "3");
  EXPECT_EQ(describe_value(json(INFINITY)), ".inf");
  EXPECT_EQ(describe_value(json(nullptr)), "null");
  EXPECT_EQ(describe_value(json(std::string(200, 'a'))).size(), 80u);
}

}  // namespace nemotron
