#include <gtest/gtest.h>

#include "data/jsonl.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;

std::vector<std::string> all_texts(const std::string& path, const std::string& key = "text") {
  JsonlReader r(path);
  std::vector<std::string> out;
  for (std::string t; r.next_text(t, key);) out.push_back(t);
  return out;
}

TEST(Jsonl, reads_rows_with_crlf_blank_lines_bom_and_no_final_newline) {
  const std::string p = testing::temp_dir() + "/a.jsonl";
  testing::write_text(p, "\xEF\xBB\xBF{\"text\": \"one\"}\r\n\r\n   \n{\"text\": \"two\\nlines\", \"id\": 2}\n"
                         "{\"id\": 3, \"text\": \"caf\xC3\xA9\"}");
  EXPECT_EQ(all_texts(p), (std::vector<std::string>{"one", "two\nlines", "caf\xC3\xA9"}));
  JsonlReader r(p);
  std::string t;
  ASSERT_TRUE(r.next_text(t));
  EXPECT_EQ(r.line_number(), 1);
  ASSERT_TRUE(r.next_text(t));
  EXPECT_EQ(r.line_number(), 4);  // blank lines 2 and 3 were skipped
  EXPECT_EQ(input_error([&] { all_texts(p, "id"); }), p + ":1: missing field \"id\" (the row has fields \"text\")");
}

TEST(Jsonl, errors_name_the_file_and_line) {
  const std::string dir = testing::temp_dir();
  auto first_error = [&](const std::string& name, const std::string& text, const std::string& key = "text") {
    testing::write_text(dir + "/" + name, text);
    return input_error([&] { all_texts(dir + "/" + name, key); });
  };
  EXPECT_EQ(first_error("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"text\": \"cut"),
            dir + "/bad.jsonl:3: invalid JSON at column 14: syntax error while parsing value - invalid string: "
                  "missing closing quote; last read: '\"cut'");
  EXPECT_EQ(first_error("arr.jsonl", "[1, 2]\n"), dir + "/arr.jsonl:1: expected a JSON object, got [1,2]");
  EXPECT_EQ(first_error("missing.jsonl", "{\"text\": \"a\"}\n{\"content\": \"b\", \"id\": 1}\n"),
            dir + "/missing.jsonl:2: missing field \"text\" (the row has fields \"content\", \"id\")");
  EXPECT_EQ(first_error("empty_row.jsonl", "{}\n"),
            dir + "/empty_row.jsonl:1: missing field \"text\" (the row has no fields)");
  EXPECT_EQ(first_error("num.jsonl", "{\"text\": 42}\n"),
            dir + "/num.jsonl:1: field \"text\": expected a string, got 42");
  EXPECT_EQ(first_error("key.jsonl", "{\"text\": \"a\", \"body\": null}\n", "body"),
            dir + "/key.jsonl:1: field \"body\": expected a string, got null");
  EXPECT_EQ(input_error([&] { JsonlReader r(dir + "/none.jsonl"); }),
            dir + "/none.jsonl: cannot open: No such file or directory");
}

// A 200 MB row took 87 s and 5.3 GB to be dropped (issue 25): a row past max_row_bytes is refused
// as soon as it passes the limit, naming file:line; a row of exactly the limit still reads.
TEST(Jsonl, a_row_past_max_row_bytes_is_refused_with_file_and_line) {
  const std::string p = testing::temp_dir() + "/long.jsonl";
  const std::string row = "{\"text\": \"" + std::string(88, 'x') + "\"}";  // 100 bytes
  ASSERT_EQ(row.size(), 100u);
  testing::write_text(p, row + "\r\n\n" + row + "\n{\"text\": \"" + std::string(89, 'y') + "\"}\n" + row + "\n");
  JsonlReader r(p, 100);
  std::string t;
  ASSERT_TRUE(r.next_text(t));  // 100 bytes and a CR: the line ending does not count
  ASSERT_TRUE(r.next_text(t));
  EXPECT_EQ(r.line_number(), 3);
  EXPECT_EQ(input_error([&] { r.next_text(t); }),
            p + ":4: the row is longer than max_row_bytes = 100 bytes (raise max_row_bytes for longer rows)");
  EXPECT_EQ(all_texts(p).size(), 4u);  // the default limit (16 MiB) takes them all
}

TEST(Jsonl, streams_a_large_file_and_round_trips_what_write_jsonl_wrote) {
  const std::string p = testing::temp_dir() + "/big.jsonl";
  std::vector<nlohmann::json> rows;
  const std::string long_text(200000, 'x');  // one line far longer than any buffer
  for (int i = 0; i < 20000; ++i) rows.push_back({{"text", i == 777 ? long_text : "row " + std::to_string(i)}});
  write_jsonl(p, rows);
  JsonlReader r(p);
  int64_t n = 0;
  for (std::string t; r.next_text(t); ++n) ASSERT_EQ(t, rows[n]["text"].get<std::string>());
  EXPECT_EQ(n, 20000);
  EXPECT_EQ(r.line_number(), 20000);
}

}  // namespace
}  // namespace nemotron::data
