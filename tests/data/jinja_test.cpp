// The Jinja interpreter against jinja2: every render in tests/fixtures/jinja/expected.json was made
// by tools/make_jinja_fixtures.py (jinja2 configured as transformers configures it) from the real
// templates committed beside it: Nemotron 3's nano3.jinja, Llama-3.3's, NVIDIA Nemotron Nano v2's,
// Nemotron-H 8B/47B Reasoning's, Megatron's two SFT formats, and features.jinja for the rest of
// the subset. Then errors with their line, and hostile templates that must end in a TemplateError.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <string>

#include <fmt/format.h>

#include "data/chat_template.h"
#include "data/data_test_util.h"
#include "data/jinja/template.h"
#include "test_util.h"

namespace nemotron::data {
namespace {

using jinja::Dict;
using jinja::Template;
using jinja::TemplateError;
using jinja::Value;

std::string fixture(const std::string& name) {
  return testing::read_text(nemotron::testing::source_root().string() + "/tests/fixtures/jinja/" + name);
}

const OrderedJson& expected() {
  static const OrderedJson e = OrderedJson::parse(fixture("expected.json"));
  return e;
}

const OrderedJson& cases() {
  static const OrderedJson c = OrderedJson::parse(fixture("cases.json"));
  return c;
}

const OrderedJson& input_case(const std::string& name) {
  for (const OrderedJson& c : cases())
    if (c.at("name") == name) return c;
  throw std::runtime_error("no case " + name);
}

const Template& compiled(const std::string& name) {
  static std::map<std::string, Template> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Template(fixture(name))).first;
  return it->second;
}

// The variables transformers renders with: messages, tools (None when absent), documents,
// add_generation_prompt, the special tokens, the caller's kwargs.
Dict vars_of(const OrderedJson& entry) {
  const OrderedJson& c = input_case(entry.at("case"));
  Dict vars = {{"messages", jinja::from_json(c.at("messages"))},
               {"tools", jinja::from_json(c.contains("tools") ? c["tools"] : OrderedJson())},
               {"documents", Value::none()},
               {"add_generation_prompt", Value::boolean(entry.at("add_generation_prompt").get<bool>())}};
  for (const auto& [k, v] : expected().at("special_tokens").items()) vars.emplace_back(k, jinja::from_json(v));
  for (const auto& [k, v] : entry.at("vars").items()) vars.emplace_back(k, jinja::from_json(v));
  return vars;
}

std::string label(const OrderedJson& entry) {
  return fmt::format("{} / {} / gen={} / {}", entry.at("template").get<std::string>(), entry.at("case").get<std::string>(),
                     entry.at("add_generation_prompt").get<bool>(), entry.at("vars").dump());
}

TEST(Jinja, renders_every_fixture_byte_identical_to_jinja2) {
  size_t rendered = 0, refused = 0;
  for (const OrderedJson& entry : expected().at("renders")) {
    const Template& t = compiled(entry.at("template"));
    if (entry.contains("error")) {
      EXPECT_THROW(t.render(vars_of(entry)), TemplateError) << label(entry) << ": jinja2 raised " << entry["error"];
      ++refused;
      continue;
    }
    try {
      EXPECT_EQ(t.render(vars_of(entry)), entry.at("output").get<std::string>()) << label(entry);
    } catch (const TemplateError& e) {
      ADD_FAILURE() << label(entry) << ": line " << e.line << ": " << e.what();
    }
    ++rendered;
  }
  EXPECT_GE(rendered, 300u);
  EXPECT_GE(refused, 1u);
}

TEST(Jinja, raise_exception_carries_the_templates_message) {
  const Template t(fixture("llama3_3.jinja"));
  OrderedJson entry = {{"case", "tools_parallel"}, {"add_generation_prompt", false}, {"vars", OrderedJson::object()}};
  try {
    t.render(vars_of(entry));
    FAIL() << "rendered";
  } catch (const TemplateError& e) {
    EXPECT_STREQ(e.what(), "This model only supports single tool-calls at once!");
    EXPECT_GT(e.line, 1);
  }
}

// The built-in renderers against the interpreter running the template each one implements.
void expect_builtin_matches(ChatFormat f, const std::string& tmpl, size_t at_least) {
  size_t compared = 0;
  for (const OrderedJson& entry : expected().at("renders")) {
    if (entry.at("template") != tmpl) continue;
    const bool gen = entry.at("add_generation_prompt").get<bool>();
    const OrderedJson kw = entry.at("vars").value("chat_template_kwargs", OrderedJson::object());
    ChatRenderOptions opt;
    opt.add_generation_prompt = gen;
    opt.enable_thinking = kw.value("enable_thinking", true);
    opt.truncate_history_thinking = kw.value("truncate_history_thinking", true);
    if (kw.contains("reasoning_budget")) opt.reasoning_budget = kw["reasoning_budget"].get<int64_t>();
    const OrderedJson& c = input_case(entry.at("case"));
    const OrderedJson tools = c.contains("tools") ? c["tools"] : OrderedJson();
    std::optional<std::string> interpreted, builtin;
    try {
      interpreted = compiled(tmpl).render(vars_of(entry));
    } catch (const TemplateError&) {
    }
    try {
      builtin = render_chat(f, c.at("messages"), tools, opt);
    } catch (const ChatTemplateError&) {
    }
    if (f != ChatFormat::nano3) {
      // Megatron's formats have no generation prompt, tools or tool role: the built-ins refuse
      // what the Python template would silently drop.
      if (gen || !builtin) continue;
    }
    ASSERT_EQ(builtin.has_value(), interpreted.has_value()) << label(entry) << (builtin ? " built-in rendered" : " built-in refused");
    if (builtin) {
      EXPECT_EQ(*builtin, *interpreted) << label(entry);
    }
    ++compared;
  }
  EXPECT_GE(compared, at_least) << tmpl;
}

TEST(Jinja, builtin_renderers_equal_the_interpreter_on_every_case) {
  expect_builtin_matches(ChatFormat::nano3, "nano3.jinja", 90);
  expect_builtin_matches(ChatFormat::nemotron_h, "megatron_nemotron_h_aligned.jinja", 8);
  expect_builtin_matches(ChatFormat::nano_v2, "megatron_nemotron_nano_v2.jinja", 8);
}

int error_line(std::string_view source, const Dict& vars = {}) {
  try {
    Template(source).render(vars);
  } catch (const TemplateError& e) {
    return e.line;
  }
  return -1;
}

TEST(Jinja, errors_name_the_template_line) {
  EXPECT_EQ(error_line("a\nb\n{% if x %}\nc"), 4);                 // unclosed if: at the end
  EXPECT_EQ(error_line("a\n\n{{ 1 + }}"), 3);                       // syntax
  EXPECT_EQ(error_line("a\n{% frobnicate %}"), 2);                  // unknown tag
  EXPECT_EQ(error_line("{{ 'x' }}\n\n{{ undefined_fn() }}"), 3);    // calling undefined
  EXPECT_EQ(error_line("\n{{ 'a' + 1 }}"), 2);                      // type error
  EXPECT_EQ(error_line("{# c\nc #}\n{{ x.y.z }}"), 3);              // attribute of undefined
  EXPECT_EQ(error_line("{{ 'unterminated }}"), 1);
  EXPECT_EQ(error_line("{{ x | nosuchfilter }}"), 1);
  EXPECT_EQ(error_line("{{ 1 // 0 }}"), 1);
}

TEST(Jinja, undefined_and_none_follow_jinja2) {
  const Dict vars = {{"d", jinja::from_json(OrderedJson::parse(R"({"a": null, "l": [1]})"))}};
  EXPECT_EQ(Template("{{ missing }}|{{ d.b }}|{{ d.a }}|{{ d.l[5] }}|{{ missing is defined }}|{{ d.b | default('x') }}")
                .render(vars),
            "||None||False|x");
  EXPECT_EQ(Template("{% for x in missing %}no{% else %}empty{% endfor %}").render({}), "empty");
}

// Hostile templates: each ends in a TemplateError, quickly, never a crash.
TEST(Jinja, hostile_templates_end_in_an_error_not_a_crash) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto refused = [](const std::string& src) {
    try {
      Template(src).render({});
    } catch (const TemplateError&) {
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"));
  EXPECT_TRUE(refused(std::string(5000, '{') + "% if 1 %}"));
  std::string nested_ifs;
  for (int k = 0; k < 5000; ++k) nested_ifs += "{% if 1 %}";
  EXPECT_TRUE(refused(nested_ifs));
  EXPECT_TRUE(refused("{{ " + [] { std::string s; for (int k = 0; k < 100000; ++k) s += "not "; return s; }() + "1 }}"));
  EXPECT_TRUE(refused("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"));
  EXPECT_TRUE(refused("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(refused("{{ range(10 ** 12) }}"));
  EXPECT_TRUE(refused("{{ 'x' * 10 ** 12 }}"));
  EXPECT_TRUE(refused("{% set ns = namespace(s='xx') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"));
  EXPECT_TRUE(refused("{{ 2 ** 64 }}"));
  // Shared lists nesting exponentially: printing, JSON, comparing and concatenating stop at a bound.
  const std::string dag = "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(80) %}{% set ns.a = [ns.a, ns.a] %}"
                          "{% set ns.b = [ns.b, ns.b] %}{% endfor %}";
  EXPECT_TRUE(refused(dag + "{{ ns.a }}"));
  EXPECT_TRUE(refused(dag + "{{ ns.a | tojson }}"));
  EXPECT_TRUE(refused(dag + "{{ ns.a == ns.b }}"));
  EXPECT_TRUE(refused(dag + "{{ [ns.a, 1] | sort }}"));
  EXPECT_TRUE(refused("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

// Random token soup from the template language: parse and render throw TemplateError or succeed.
TEST(Jinja, random_templates_never_crash) {
  static const char* kPieces[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", " if ", " for ", " in ", " endfor ",
                                  " endif ", " set ", " x ", " = ", "(", ")", "[", "]", "{", "}", "'s'", "\"t\"", "1",
                                  "2.5", "|", " trim ", " is ", " not ", " defined ", ",", ":", ".", " loop ", " ns ",
                                  " macro ", " endmacro ", " m(", "~", "*", "**", "//", "%", " range(3) ", "\n", "  ",
                                  " messages ", " raw ", " endraw ", " else ", " elif ", " namespace(a=1) ", " tojson "};
  std::mt19937 rng(7);
  const Dict vars = {{"messages", jinja::from_json(OrderedJson::parse(R"([{"role": "user", "content": "hi"}])"))}};
  int ok = 0, errors = 0;
  for (int n = 0; n < 4000; ++n) {
    std::string src;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) src += kPieces[rng() % (sizeof kPieces / sizeof *kPieces)];
    try {
      Template(src).render(vars);
      ++ok;
    } catch (const TemplateError&) {
      ++errors;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace nemotron::data
