#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/progress.h"

namespace nemotron {

TEST(Progress, formats_durations_and_rates) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_rate(950), "950");
  EXPECT_EQ(format_rate(48200), "48.2k");
  EXPECT_EQ(format_rate(1.25e6), "1.2M");
}

TEST(Progress, writes_plain_lines_when_not_a_terminal) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar bar("tokenizing", 4, "docs", f, 0.0);
    bar.advance(2, 100);
    bar.advance(2, 100);
    bar.finish();
  }
  std::rewind(f);
  char buf[512] = {};
  std::string all;
  while (std::fgets(buf, sizeof buf, f)) all += buf;
  std::fclose(f);
  EXPECT_NE(all.find("tokenizing [############............] 2/4 docs"), std::string::npos) << all;
  EXPECT_NE(all.find("4/4 docs"), std::string::npos) << all;
  EXPECT_NE(all.find("tok/s in 0:00"), std::string::npos) << all;
  EXPECT_EQ(all.find('\r'), std::string::npos);
}

}  // namespace nemotron
