// TensorBoard event files: CRC32C against published check values, and a written file read back by
// an independent decoder of the TFRecord framing and the Event protobuf (field numbers from
// tensorflow/core/util/event.proto and framework/summary.proto).
#include "io/tensorboard_writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/error.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;

// --- A minimal reader, written from the formats, not from the writer --------------------------

uint32_t unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

struct Field {
  int number = 0, wire = 0;
  uint64_t varint = 0;     // wire 0, and the raw bits of wire 1 / 5
  std::string_view bytes;  // wire 2
};

// Parses one protobuf message into its fields; fails the test on malformed input.
std::vector<Field> parse_message(std::string_view s) {
  std::vector<Field> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      EXPECT_LT(i, s.size()) << "varint runs past the end";
      if (i >= s.size()) return v;
      const auto b = static_cast<unsigned char>(s[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ADD_FAILURE() << "varint longer than 10 bytes";
    return v;
  };
  while (i < s.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<int>(key >> 3), f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.varint = varint();
    } else if (f.wire == 1 || f.wire == 5) {
      const size_t n = f.wire == 1 ? 8 : 4;
      EXPECT_LE(i + n, s.size());
      std::memcpy(&f.varint, s.data() + i, n);
      i += n;
    } else if (f.wire == 2) {
      const uint64_t n = varint();
      EXPECT_LE(i + n, s.size());
      f.bytes = s.substr(i, n);
      i += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.wire;
      break;
    }
    out.push_back(f);
  }
  return out;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::optional<std::string> file_version;
  std::vector<std::pair<std::string, float>> values;
};

Event decode_event(std::string_view payload) {
  Event e;
  for (const Field& f : parse_message(payload)) {
    if (f.number == 1 && f.wire == 1) {
      std::memcpy(&e.wall_time, &f.varint, 8);
    } else if (f.number == 2 && f.wire == 0) {
      e.step = static_cast<int64_t>(f.varint);
    } else if (f.number == 3 && f.wire == 2) {
      e.file_version = std::string(f.bytes);
    } else if (f.number == 5 && f.wire == 2) {
      for (const Field& v : parse_message(f.bytes)) {
        EXPECT_EQ(v.number, 1);
        std::string tag;
        float value = NAN;
        for (const Field& vf : parse_message(v.bytes)) {
          if (vf.number == 1 && vf.wire == 2) tag = std::string(vf.bytes);
          if (vf.number == 2 && vf.wire == 5) std::memcpy(&value, &vf.varint, 4);
        }
        e.values.emplace_back(tag, value);
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << f.number << " wire " << f.wire;
    }
  }
  return e;
}

// Reads every record, checking both CRCs of each.
std::vector<Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<Event> events;
  size_t i = 0;
  while (i < data.size()) {
    EXPECT_LE(i + 12, data.size()) << "truncated record header";
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, data.data() + i, 8);
    std::memcpy(&len_crc, data.data() + i + 8, 4);
    EXPECT_EQ(unmask(len_crc), crc32c(data.data() + i, 8)) << "length CRC at byte " << i;
    EXPECT_LE(i + 12 + len + 4, data.size()) << "truncated record";
    const std::string_view payload(data.data() + i + 12, len);
    std::memcpy(&data_crc, data.data() + i + 12 + len, 4);
    EXPECT_EQ(unmask(data_crc), crc32c(payload.data(), payload.size())) << "data CRC at byte " << i;
    events.push_back(decode_event(payload));
    i += 12 + len + 4;
  }
  return events;
}

}  // namespace

// The CRC-32C check value (RFC 3720 B.4 lists the iSCSI vectors below).
TEST(Crc32c, known_vectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46DD794Eu);
  // Continuing a CRC over a split buffer equals one pass.
  EXPECT_EQ(crc32c("56789", 5, crc32c("1234", 4)), 0xE3069283u);
}

TEST(Crc32c, mask_round_trips_and_matches_tensorflow_formula) {
  const uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  EXPECT_EQ(unmask(masked_crc32c("123456789", 9)), c);
}

TEST(TfRecord, frame_layout) {
  const std::string rec = tfrecord_frame("abc");
  ASSERT_EQ(rec.size(), 8u + 4 + 3 + 4);
  uint64_t len;
  std::memcpy(&len, rec.data(), 8);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(rec.substr(12, 3), "abc");
}

TEST(TensorBoardWriter, written_file_decodes_back) {
  const fs::path dir = fs::temp_directory_path() / ("nemotron-tb-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::string path;
  {
    TensorBoardWriter w(dir.string());
    path = w.path();
    w.add_scalars(1, {{"lm loss", 2.5}, {"learning-rate", 1e-4}});
    w.add_scalar(2, "lm loss", 2.25);
    w.add_scalars(300, {{"lm loss validation", 3.0}});
    // Flushed as written: the file is complete before the writer closes.
    const auto events = read_events(path);
    EXPECT_EQ(events.size(), 4u);
  }
  const std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 2), ".0") << name;  // the first file of this second/pid
  EXPECT_NE(name.find(fmt::format(".{}.", getpid())), std::string::npos) << name;

  const auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 4u);
  ASSERT_TRUE(ev[0].file_version.has_value());
  EXPECT_EQ(*ev[0].file_version, "brain.Event:2");
  EXPECT_TRUE(ev[0].values.empty());
  EXPECT_GT(ev[0].wall_time, 1.6e9);
  EXPECT_EQ(ev[1].step, 1);
  ASSERT_EQ(ev[1].values.size(), 2u);
  EXPECT_EQ(ev[1].values[0].first, "lm loss");
  EXPECT_EQ(ev[1].values[0].second, 2.5f);
  EXPECT_EQ(ev[1].values[1].first, "learning-rate");
  EXPECT_EQ(ev[1].values[1].second, 1e-4f);
  EXPECT_FALSE(ev[1].file_version.has_value());
  EXPECT_GE(ev[1].wall_time, ev[0].wall_time);
  EXPECT_EQ(ev[2].step, 2);
  EXPECT_EQ(ev[3].step, 300);  // a multi-byte varint
  ASSERT_EQ(ev[3].values.size(), 1u);
  EXPECT_EQ(ev[3].values[0].first, "lm loss validation");

  // A second writer (a resumed run) starts its own file and leaves the first untouched.
  const auto size_before = fs::file_size(path);
  {
    TensorBoardWriter w2(dir.string());
    EXPECT_NE(w2.path(), path);
    w2.add_scalar(3, "lm loss", 2.0);
  }
  EXPECT_EQ(fs::file_size(path), size_before);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_EQ(files, 2);
  fs::remove_all(dir);
}

TEST(TensorBoardWriter, unwritable_directory_is_an_error_naming_it) {
  const fs::path file = fs::temp_directory_path() / ("nemotron-tb-notadir-" + std::to_string(getpid()));
  std::ofstream(file) << "x";
  try {
    TensorBoardWriter w((file / "tb").string());
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace nemotron::io
