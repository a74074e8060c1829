// Fuzz test of the bounded JSON parser (core/json_limits.h), which every reader of outside JSON
// uses (request bodies, JSONL rows, configs, safetensors headers): random documents of nested
// arrays, objects, strings holding brackets, quotes and escapes, cut short or with bytes flipped,
// some 100,000 levels deep, against random depth limits. Every input must either parse to what
// nlohmann's own parser gives, no deeper than the limit, or be refused with a position inside the
// text; agreeing with nlohmann on every text it accepts within the limit. A crash, a stack
// overflow or an out-of-bounds read fails it (under AddressSanitizer in scripts/test.sh).
// Bounds: NEMOTRON_FUZZ_SECONDS (default 2), NEMOTRON_FUZZ_ITERATIONS, NEMOTRON_FUZZ_SEED (default 1).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron {
namespace {

using json = nlohmann::json;

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

// How deeply the text nests (duplicate keys make the parsed value shallower than its text), by
// nlohmann's SAX parser, which does not recurse.
struct DepthCounter : nlohmann::json_sax<json> {
  int depth = 0, most = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  bool open() {
    most = std::max(most, ++depth);
    return true;
  }
};

int text_depth(const std::string& text) {
  DepthCounter c;
  json::sax_parse(text, &c);
  return c.most;
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  uint64_t u(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::string string_token() {
    static const char* kPieces[] = {"[", "]", "{", "}", "\\\"", "\\\\", "x", ",", ":", "\\u00e9", " "};
    std::string s = "\"";
    for (uint64_t i = 0, n = u(6); i < n; ++i) s += kPieces[u(11)];
    return s + "\"";
  }

  void value(std::string& out, int depth, int max_depth) {
    const uint64_t k = depth >= max_depth ? u(3) : u(6);
    if (k == 0) out += std::to_string(static_cast<int64_t>(u(1000)) - 500);
    else if (k == 1) out += string_token();
    else if (k == 2) out += u(2) ? "null" : "true";
    else if (k == 3 || k == 4) {
      out += '[';
      for (uint64_t i = 0, n = u(3); i < n; ++i) {
        if (i) out += ',';
        value(out, depth + 1, max_depth);
      }
      out += ']';
    } else {
      out += '{';
      for (uint64_t i = 0, n = u(3); i < n; ++i) {
        if (i) out += ',';
        out += string_token() + ':';
        value(out, depth + 1, max_depth);
      }
      out += '}';
    }
  }

  std::string document() {
    std::string s;
    if (u(20) == 0) {  // a deep chain around a small value, as the attack sends it
      const size_t levels = u(2) ? 100000 : u(600);
      const bool objects = u(2);
      for (size_t i = 0; i < levels; ++i) s += objects ? "{\"a\":" : "[";
      value(s, 0, 3);
      for (size_t i = 0; i < levels; ++i) s += objects ? '}' : ']';
    } else {
      value(s, 0, static_cast<int>(u(12)));
    }
    switch (u(4)) {  // damage: cut, flip a byte, or insert a bracket
      case 0: s.resize(u(s.size() + 1)); break;
      case 1: if (!s.empty()) s[u(s.size())] = "[]{}\",:\\x"[u(9)]; break;
      case 2: s.insert(u(s.size() + 1), 1, "[{"[u(2)]); break;
      default: break;
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

TEST(JsonDepthFuzz, bounded_parse_agrees_with_nlohmann_or_refuses_in_bounds) {
  const double seconds = env_number("NEMOTRON_FUZZ_SECONDS", 2.0), iterations = env_number("NEMOTRON_FUZZ_ITERATIONS", 1e18);
  const uint64_t seed = static_cast<uint64_t>(env_number("NEMOTRON_FUZZ_SEED", 1));
  Gen g(seed);
  const auto start = std::chrono::steady_clock::now();
  uint64_t i = 0, accepted = 0, too_deep = 0;
  for (; static_cast<double>(i) < iterations &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds;
       ++i) {
    const std::string text = g.document();
    const int limit = g.u(4) == 0 ? kMaxJsonDepth : 1 + static_cast<int>(g.u(12));
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " iteration " << i << " limit " << limit << ": "
                                      << text.substr(0, 200));
    json ours;
    const std::optional<JsonError> e = parse_json_bounded(text, ours, limit);
    // nlohmann's parser and destructor do not recurse (3.11), so it is the oracle even 100,000 deep.
    const json ref = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!e) {
      ++accepted;
      ASSERT_FALSE(ref.is_discarded()) << "accepted what nlohmann refuses";
      ASSERT_LE(text_depth(text), limit);
      ASSERT_EQ(ours, ref);
    } else {
      ASSERT_TRUE(ours.is_null());
      ASSERT_GE(e->line, 1u);
      ASSERT_GE(e->column, 1u);
      ASSERT_LE(e->column, text.size() + 1);
      ASSERT_FALSE(e->reason.empty());
      if (!ref.is_discarded()) {
        ASSERT_GT(text_depth(text), limit) << "refused valid JSON within the limit: " << e->reason;
        ASSERT_NE(e->reason.find("nested deeper than"), std::string::npos) << e->reason;
        ++too_deep;
      }
    }
  }
  std::printf("json depth fuzz: %llu inputs, %llu accepted, %llu refused for depth alone\n",
              static_cast<unsigned long long>(i), static_cast<unsigned long long>(accepted),
              static_cast<unsigned long long>(too_deep));
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(too_deep, 0u);
}

}  // namespace
}  // namespace nemotron
