// /metrics in Prometheus' text format: every sample line well formed and announced by its # TYPE,
// counters that add up, histogram buckets cumulative with +Inf equal to _count.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "serve/metrics.h"

namespace nemotron::serve {
namespace {

// name{labels} -> value, checking each line's syntax and that its family was typed first.
std::map<std::string, double> parse(const std::string& text) {
  std::map<std::string, double> out;
  std::set<std::string> typed;
  const std::regex type_line(R"(# TYPE ([a-z_]+) (counter|gauge|histogram))");
  const std::regex sample(R"(([a-z_]+)(\{[a-z]+="[^"]*"\})? (-?[0-9.e+-]+|\+Inf))");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, type_line)) {
      typed.insert(m[1]);
    } else if (line.rfind("# HELP ", 0) == 0) {
      continue;
    } else if (std::regex_match(line, m, sample)) {
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (!typed.count(family) && family.size() > std::strlen(suffix) && family.ends_with(suffix))
          family.resize(family.size() - std::strlen(suffix));
      EXPECT_TRUE(typed.count(family)) << "no # TYPE before " << line;
      out[std::string(m[1]) + std::string(m[2])] = std::stod(m[3]);
    } else {
      ADD_FAILURE() << "not a Prometheus line: " << line;
    }
  }
  return out;
}

TEST(ServerMetrics, RendersPrometheusTextThatAddsUp) {
  ServerMetrics m;
  m.count_request(200);
  m.count_request(200);
  m.count_request(400);
  m.add_tokens(12, 0);
  m.add_tokens(0, 5);
  for (double s : {0.003, 0.03, 3.0}) m.observe_time_to_first_token(s);
  m.observe_inter_token_latency(0.02);
  m.set_engine({/*waiting=*/2, /*running=*/3, /*max_slots=*/4, /*in_use=*/1000, /*total=*/4000});
  const std::map<std::string, double> v = parse(m.render());
  EXPECT_EQ(v.at(R"(nemotron_requests_total{status="200"})"), 2);
  EXPECT_EQ(v.at(R"(nemotron_requests_total{status="400"})"), 1);
  EXPECT_EQ(v.at("nemotron_prompt_tokens_total"), 12);
  EXPECT_EQ(v.at("nemotron_generation_tokens_total"), 5);
  EXPECT_EQ(v.at("nemotron_requests_waiting"), 2);
  EXPECT_EQ(v.at("nemotron_requests_running"), 3);
  EXPECT_EQ(v.at("nemotron_batch_occupancy_ratio"), 0.75);
  EXPECT_EQ(v.at("nemotron_decode_state_bytes_in_use"), 1000);
  EXPECT_EQ(v.at("nemotron_decode_state_bytes"), 4000);
  // Cumulative buckets: 0.003 <= 0.005, 0.03 <= 0.04, 3.0 <= 5; +Inf = _count.
  EXPECT_EQ(v.at(R"(nemotron_time_to_first_token_seconds_bucket{le="0.001"})"), 0);
  EXPECT_EQ(v.at(R"(nemotron_time_to_first_token_seconds_bucket{le="0.005"})"), 1);
  EXPECT_EQ(v.at(R"(nemotron_time_to_first_token_seconds_bucket{le="0.04"})"), 2);
  EXPECT_EQ(v.at(R"(nemotron_time_to_first_token_seconds_bucket{le="2.5"})"), 2);
  EXPECT_EQ(v.at(R"(nemotron_time_to_first_token_seconds_bucket{le="5"})"), 3);
  EXPECT_EQ(v.at(R"(nemotron_time_to_first_token_seconds_bucket{le="+Inf"})"), 3);
  EXPECT_EQ(v.at("nemotron_time_to_first_token_seconds_count"), 3);
  EXPECT_NEAR(v.at("nemotron_time_to_first_token_seconds_sum"), 3.033, 1e-9);
  EXPECT_EQ(v.at("nemotron_inter_token_latency_seconds_count"), 1);
}

TEST(Histogram, ABoundaryValueFallsInItsOwnBucket) {
  Histogram h({1.0, 2.0});
  h.observe(1.0);  // le="1" includes 1
  h.observe(2.5);
  std::string out;
  h.render(out, "x");
  EXPECT_EQ(out, "x_bucket{le=\"1\"} 1\nx_bucket{le=\"2\"} 1\nx_bucket{le=\"+Inf\"} 2\nx_sum 3.5\nx_count 2\n");
}

}  // namespace
}  // namespace nemotron::serve
