// The bounded JSON parser (core/json_limits.h): 100,000 nested arrays or objects (the input that
// took down `nemotron serve` and `data prep` with a stack overflow) are refused with the line,
// column and limit, on a thread with a small stack, without building the value; JSON at the limit
// parses as nlohmann does; excerpts of huge or deep values stay short.
#include <gtest/gtest.h>

#include <pthread.h>

#include <functional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nested_objects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

// Runs `f` on a thread with a 256 KiB stack: a parser (or destructor) that recursed once per level
// would overflow it long before 100,000 levels, so a pass here is not the luck of a big stack.
void on_small_stack(const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t t;
  auto run = [](void* p) -> void* {
    (*static_cast<const std::function<void()>*>(p))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &attr, run, const_cast<std::function<void()>*>(&f)), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(JsonLimits, refuses_100k_nested_arrays_with_line_column_and_limit) {
  const std::string text = nested_arrays(100000);
  std::optional<JsonError> e;
  json out = 1;
  on_small_stack([&] { e = parse_json_bounded(text, out); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->line, 1u);
  EXPECT_EQ(e->column, static_cast<size_t>(kMaxJsonDepth + 1));  // the first bracket past the limit
  EXPECT_EQ(e->reason, "arrays and objects nested deeper than 256 levels");
  EXPECT_TRUE(out.is_null());  // nothing half-built is handed back
}

TEST(JsonLimits, refuses_100k_nested_objects_ordered_and_unordered) {
  const std::string text = nested_objects(100000);
  std::optional<JsonError> e1, e2;
  on_small_stack([&] {
    json a;
    ojson b;
    e1 = parse_json_bounded(text, a);
    e2 = parse_json_bounded(text, b);
  });
  ASSERT_TRUE(e1 && e2);
  EXPECT_EQ(e1->column, 5u * kMaxJsonDepth + 1);  // `{"a":` is 5 bytes per level
  EXPECT_EQ(e2->column, e1->column);
}

TEST(JsonLimits, parse_json_throws_input_error_naming_source_line_and_limit) {
  const std::string text = "{\"x\": 1,\n \"deep\": " + nested_arrays(100000) + "}";
  std::string msg;
  on_small_stack([&] {
    try {
      (void)parse_json<json>(text, "cfg.json");
    } catch (const InputError& e) {
      msg = e.what();
    }
  });
  // line 2 is ` "deep": ` then the arrays: the outer object is level 1, the 256th `[` level 257
  EXPECT_EQ(msg, "cfg.json: JSON parse error at line 2, column 265: arrays and objects nested deeper than 256 levels");
}

TEST(JsonLimits, brackets_inside_strings_do_not_count) {
  // 300 brackets in a string at depth 1, then a real excess: the column is the real bracket's.
  const std::string text = "[\"" + std::string(300, '[') + "\\\"[\"," + nested_arrays(300) + "]";
  json out;
  std::optional<JsonError> e = parse_json_bounded(text, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->column, 1 + 1 + 300 + 3 + 1 + 1 + 255 + 1);
}

TEST(JsonLimits, at_the_limit_parses_as_nlohmann_does) {
  for (const std::string& text : {nested_arrays(kMaxJsonDepth), nested_objects(kMaxJsonDepth),
                                  std::string(R"({"a": [1, 2.5, "x\u00e9", null, true, {"b": {}}], "c": -3})")}) {
    json out;
    ASSERT_FALSE(parse_json_bounded(text, out)) << text.substr(0, 40);
    EXPECT_EQ(out, json::parse(text));
  }
  ojson o;
  ASSERT_FALSE(parse_json_bounded(R"({"z": 1, "a": 2})", o));
  EXPECT_EQ(o.begin().key(), "z");  // ordered_json keeps the key order
  json out;
  EXPECT_TRUE(parse_json_bounded(nested_arrays(kMaxJsonDepth + 1), out));
  EXPECT_FALSE(parse_json_bounded(nested_arrays(10), out, /*max_depth=*/10));
  EXPECT_TRUE(parse_json_bounded(nested_arrays(11), out, /*max_depth=*/10));
}

TEST(JsonLimits, syntax_errors_keep_nlohmanns_position_and_reason) {
  json out;
  std::optional<JsonError> e = parse_json_bounded("{\n  \"a\": 1,\n}", out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where(), "line 3, column 1");
  EXPECT_EQ(e->reason, "syntax error while parsing object key - unexpected '}'; expected string literal");
  e = parse_json_bounded("[1] x", out);  // trailing garbage
  ASSERT_TRUE(e);
  EXPECT_NE(e->reason.find("expected end of input"), std::string::npos) << e->reason;
  EXPECT_TRUE(parse_json_or_discarded<json>("{").is_discarded());
  EXPECT_TRUE(parse_json_or_discarded<json>(nested_arrays(100000)).is_discarded());
  std::istringstream in("{\"k\": [1]}");
  EXPECT_EQ(parse_json_or_discarded<json>(in), json::parse("{\"k\": [1]}"));
}

TEST(JsonLimits, excerpt_is_short_for_huge_and_deep_values) {
  EXPECT_EQ(json_excerpt(json::parse(R"({"a":[1,"x"]})")), R"({"a":[1,"x"]})");  // short: dump() exactly
  const json big = std::string(50'000'000, 'x');
  const std::string e = json_excerpt(big, 60);
  EXPECT_EQ(e, "\"" + std::string(56, 'x') + "...");
  // 200 levels (under the parse limit) quoted in 80 characters, not 400.
  json deep = json::array();
  for (int i = 0; i < 200; ++i) deep = json::array({deep});
  EXPECT_EQ(json_excerpt(deep, 80), std::string(77, '[') + "...");
  // A cut never splits a UTF-8 character.
  const std::string ex = json_excerpt(json(std::string(100, '\xC3')), 10);  // invalid UTF-8 is replaced
  EXPECT_LE(ex.size(), 12u);
  const std::string accents = json_excerpt(json("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"), 8);
  EXPECT_EQ(accents, "\"\xC3\xA9\xC3\xA9...");
}

}  // namespace
}  // namespace nemotron
