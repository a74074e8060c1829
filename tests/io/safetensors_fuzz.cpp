// Property/fuzz test of the safetensors reader and the sharded index: files made from valid ones by
// random byte flips, truncations, huge or lying header lengths, bad offsets, overlapping ranges,
// broken JSON, unknown dtypes and odd shapes; index files with broken JSON, wrong types, paths out
// of the directory and tensors in the wrong shard. Every input must either open (and then every
// tensor must lie inside the file, not overlap another, and load) or fail with InputError: any other
// exception fails the test, and a crash or an out-of-bounds read fails it under AddressSanitizer
// (scripts/test.sh runs this target in build-asan/ for a bounded time).
// Bounds: NEMOTRON_FUZZ_SECONDS (default 2) and NEMOTRON_FUZZ_ITERATIONS (default unbounded);
// NEMOTRON_FUZZ_SEED (default 1) makes a run reproducible; the failing iteration is printed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "io/safetensors.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

struct Bounds {
  double seconds = env_number("NEMOTRON_FUZZ_SECONDS", 2.0);
  double iterations = env_number("NEMOTRON_FUZZ_ITERATIONS", 1e18);
  uint64_t seed = static_cast<uint64_t>(env_number("NEMOTRON_FUZZ_SEED", 1));
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool more(uint64_t i) const {
    return static_cast<double>(i) < iterations &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds;
  }
};

const char* kDtypes[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
const size_t kSizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}
  uint64_t u(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool coin(int one_in) { return u(static_cast<uint64_t>(one_in)) == 0; }

  // A valid file: header JSON (as an object, so mutations can edit it) and a data buffer.
  json valid_header(size_t* data_bytes) {
    json h = json::object();
    if (coin(2)) h["__metadata__"] = {{"format", "pt"}, {"k", std::string(u(4), 'x')}};
    size_t offset = 0;
    const int n = static_cast<int>(u(5));
    for (int i = 0; i < n; ++i) {
      const size_t d = u(10);
      std::vector<uint64_t> shape(u(4));
      uint64_t numel = 1;
      for (auto& s : shape) numel *= (s = u(5));
      const size_t bytes = numel * kSizes[d];
      h[fmt::format("t{}.{}", i, coin(4) ? "weight" : "w\u00e9ight")] = {
          {"dtype", kDtypes[d]}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    }
    *data_bytes = offset;
    return h;
  }

  std::string assemble(const std::string& header_text, size_t data_bytes) {
    std::string out(8, '\0');
    uint64_t n = header_text.size();
    std::memcpy(out.data(), &n, 8);
    out += header_text;
    for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(u(256)));
    return out;
  }

  json odd_value() {
    switch (u(10)) {
      case 0:
        return -1;
      case 1:
        return 1.5;
      case 2:
        return std::numeric_limits<uint64_t>::max();
      case 3:
        return "12";
      case 4:
        return nullptr;
      case 5:
        return json::array();
      case 6:
        return json::object();
      case 7:
        return uint64_t{1} << 40;
      case 8:
        return json::array({0, std::numeric_limits<uint64_t>::max()});
      default:
        return static_cast<int64_t>(u(1000));
    }
  }

  // Structured edits of a valid header: the fields a lying file gets wrong.
  void mutate_header(json& h) {
    std::vector<std::string> names;
    for (auto it = h.begin(); it != h.end(); ++it)
      if (it.key() != "__metadata__") names.push_back(it.key());
    const int edits = 1 + static_cast<int>(u(3));
    for (int e = 0; e < edits; ++e) {
      if (names.empty() || coin(8)) {
        h[fmt::format("x{}", u(100))] =
            coin(2) ? odd_value() : json{{"dtype", "F32"}, {"shape", {u(3)}}, {"data_offsets", {u(64), u(64)}}};
        continue;
      }
      json& t = h[names[u(names.size())]];
      if (!t.is_object()) {  // an earlier edit replaced the entry
        t = odd_value();
        continue;
      }
      const bool pair = t.contains("data_offsets") && t["data_offsets"].is_array() && t["data_offsets"].size() == 2;
      if (pair && coin(3)) {
        // Keep the length (so the size check passes) but move the range: onto another tensor's
        // bytes (overlap or alias), by a few bytes (a hole or an overlap), or past the end.
        json& off = t["data_offsets"];
        if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) continue;
        const uint64_t len = off[1].get<uint64_t>() - std::min(off[0].get<uint64_t>(), off[1].get<uint64_t>());
        const json& other = h[names[u(names.size())]];
        uint64_t base = other.is_object() && other.contains("data_offsets") && other["data_offsets"].is_array() &&
                                !other["data_offsets"].empty() && other["data_offsets"][0].is_number_unsigned()
                            ? other["data_offsets"][0].get<uint64_t>()
                            : 0;
        uint64_t begin = coin(2) ? base + u(3) : off[0].get<uint64_t>() + u(5) - 2;
        off = {begin, begin + len};
        continue;
      }
      switch (u(12)) {
        case 0:
          t["dtype"] = coin(2) ? json("F8_E4M3") : odd_value();
          break;
        case 1:
          t["shape"] = odd_value();
          break;
        case 2:
          t["shape"] = {uint64_t{1} << 32, uint64_t{1} << 32, uint64_t{1} << 32};
          break;
        case 3:
          t["data_offsets"] = odd_value();
          break;
        case 4:
          t["data_offsets"] = {u(200), u(200)};
          break;  // overlaps, holes, reversed, past the end
        case 5:
          if (pair) t["data_offsets"][0] = std::numeric_limits<uint64_t>::max();
          break;
        case 6:
          if (pair) t["data_offsets"][1] = std::numeric_limits<uint64_t>::max();
          break;
        case 7:
          t.erase(coin(2) ? "dtype" : coin(2) ? "shape" : "data_offsets");
          break;
        case 8:
          t = odd_value();
          break;
        case 9:
          h["__metadata__"] = coin(2) ? odd_value() : json{{"k", odd_value()}};
          return;
        case 10:
          t["shape"] = {u(3), -static_cast<int64_t>(u(3)) - 1};
          break;
        default:
          t["dtype"] = kDtypes[u(10)];
          break;  // a valid dtype of the wrong size
      }
    }
  }

  // The largest end offset the (edited) header claims, so a data buffer of exactly that size leaves
  // no unclaimed tail and the other checks (overlaps, holes) are the ones that must catch an edit.
  static size_t claimed_end(const json& h) {
    uint64_t end = 0;
    for (auto it = h.begin(); it != h.end(); ++it) {
      const json& t = it.value();
      if (it.key() == "__metadata__" || !t.is_object() || !t.contains("data_offsets")) continue;
      const json& off = t["data_offsets"];
      if (off.is_array() && off.size() == 2 && off[1].is_number_unsigned() && off[1].get<uint64_t>() < (1u << 20))
        end = std::max(end, off[1].get<uint64_t>());
    }
    return static_cast<size_t>(end);
  }

  // Raw edits: the header length field, byte flips, truncation, trailing bytes, broken text.
  void mutate_bytes(std::string& f) {
    switch (u(7)) {
      case 0: {
        // Past the end of the file by a little (inside the mapped page) or by pages (outside it).
        uint64_t n = coin(3)   ? std::numeric_limits<uint64_t>::max() - u(16)
                     : coin(2) ? u(f.size() + 16)
                               : f.size() + u(uint64_t{1} << 22);
        if (f.size() >= 8) std::memcpy(f.data(), &n, 8);
        break;
      }
      case 1:
        for (int k = 1 + static_cast<int>(u(8)); k > 0 && !f.empty(); --k)
          f[u(f.size())] ^= static_cast<char>(1 + u(255));
        break;
      case 2:
        f.resize(u(f.size() + 1));
        break;
      case 3:
        f.append(1 + u(16), static_cast<char>(u(256)));
        break;
      case 4:  // flip inside the header text, where the JSON is
        if (f.size() > 8)
          for (int k = 1 + static_cast<int>(u(4)); k > 0; --k)
            f[8 + u(std::min<size_t>(f.size() - 8, 200))] = "{}[]\",:0-9e\\\xff"[u(14)];
        break;
      case 5:
        f.insert(u(f.size() + 1), std::string(1 + u(3), static_cast<char>(u(256))));
        break;
      default: {
        std::string deep(u(300), '[');
        std::string text = coin(2) ? deep : "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}";
        f = assemble(text, u(8));
        break;
      }
    }
  }

 private:
  std::mt19937_64 rng_;
};

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// What must hold of a file that opened: ranges inside the file and disjoint, loads succeed.
void check_opened(const SafetensorsFile& f, size_t file_size) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const StTensorInfo& t : f.tensors()) {
    std::span<const uint8_t> b = f.bytes(t);
    ASSERT_LE(b.size(), file_size) << t.name;
    ASSERT_EQ(b.size(), static_cast<size_t>(t.shape.numel()) * st_dtype_size(t.dtype)) << t.name;
    ranges.push_back({t.begin, t.end});
    Tensor native = f.load(t.name);
    ASSERT_EQ(native.shape(), t.shape);
    const bool floating =
        t.dtype == StDtype::F64 || t.dtype == StDtype::F32 || t.dtype == StDtype::F16 || t.dtype == StDtype::BF16;
    Tensor wide = f.load(t.name, floating ? DType::f64 : DType::i64);
    ASSERT_EQ(wide.numel(), t.shape.numel());
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "overlap";
}

class SafetensorsFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("nm_fuzz_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SafetensorsFuzz, corrupted_files_open_cleanly_or_fail_with_input_error) {
  Bounds bounds;
  Fuzzer fz(bounds.seed);
  std::map<std::string, int> outcome;
  const fs::path p = dir_ / "f.safetensors";
  uint64_t i = 0;
  for (; bounds.more(i); ++i) {
    size_t data = 0;
    json h = fz.valid_header(&data);
    const int how = static_cast<int>(fz.u(10));  // 0-2 structured, 3-5 raw, 6-8 both, 9 valid
    if (how <= 2 || (how >= 6 && how <= 8)) fz.mutate_header(h);
    std::string text = h.dump();
    if (fz.coin(2)) text.append((8 - text.size() % 8) % 8, ' ');
    size_t data_bytes = data;
    if (how <= 2 || (how >= 6 && how <= 8)) data_bytes = fz.coin(4) ? fz.u(data + 16) : Fuzzer::claimed_end(h);
    std::string bytes = fz.assemble(text, data_bytes);
    if (how >= 3 && how <= 8) fz.mutate_bytes(bytes);
    write(p, bytes);
    try {
      SafetensorsFile f = SafetensorsFile::open(p.string());
      check_opened(f, bytes.size());
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "iteration " << i << " (seed " << bounds.seed << ")";
        return;
      }
      ++outcome["opened"];
    } catch (const InputError& e) {
      ++outcome["InputError"];
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << " (seed " << bounds.seed << "): " << typeid(e).name() << ": " << e.what();
    }
  }
  std::printf("[fuzz] %llu files in %.1f s (seed %llu): %d opened, %d rejected with InputError\n",
              static_cast<unsigned long long>(i),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - bounds.start).count(),
              static_cast<unsigned long long>(bounds.seed), outcome["opened"], outcome["InputError"]);
  EXPECT_GT(i, 50u) << "too few iterations to mean anything";
  EXPECT_GT(outcome["opened"], 0);  // both ways out are exercised, so the property is not vacuous
  EXPECT_GT(outcome["InputError"], 0);
}

TEST_F(SafetensorsFuzz, corrupted_index_files_open_cleanly_or_fail_with_input_error) {
  Bounds bounds;
  Fuzzer fz(bounds.seed + 7);
  // Two valid shards with distinct tensors.
  for (int s = 0; s < 2; ++s) {
    std::vector<NamedTensor> ts = {{fmt::format("s{}.a", s), Tensor::zeros({3}, DType::f32)},
                                   {fmt::format("s{}.b", s), Tensor::zeros({2, 2}, DType::bf16)}};
    save_safetensors((dir_ / fmt::format("model-0000{}-of-00002.safetensors", s + 1)).string(), ts);
  }
  const json good = {{"metadata", {{"total_size", 40}}},
                     {"weight_map",
                      {{"s0.a", "model-00001-of-00002.safetensors"},
                       {"s0.b", "model-00001-of-00002.safetensors"},
                       {"s1.a", "model-00002-of-00002.safetensors"},
                       {"s1.b", "model-00002-of-00002.safetensors"}}}};
  const char* odd_files[] = {"../model-00001-of-00002.safetensors",
                             "/etc/passwd",
                             "",
                             ".",
                             "..",
                             "nope.safetensors",
                             "model-00002-of-00002.safetensors",
                             "a/b",
                             "model.safetensors.index.json"};
  std::map<std::string, int> outcome;
  uint64_t i = 0;
  for (; bounds.more(i); ++i) {
    json idx = good;
    std::string text;
    switch (fz.u(4)) {
      case 0:
        idx["weight_map"][fmt::format("s{}.{}", fz.u(3), fz.coin(2) ? "a" : "b")] = odd_files[fz.u(9)];
        break;
      case 1:
        idx["weight_map"] = fz.odd_value();
        break;
      case 2:
        idx = fz.coin(2) ? fz.odd_value() : json{{"weight_map", {{"s0.a", fz.odd_value()}}}};
        break;
      default:
        break;
    }
    text = idx.dump();
    if (fz.coin(2))
      for (int k = 1 + static_cast<int>(fz.u(4)); k > 0 && !text.empty(); --k)
        text[fz.u(text.size())] = "{}[]\",: x\\\x80"[fz.u(12)];
    write(dir_ / "model.safetensors.index.json", text);
    try {
      SafetensorsSet set = SafetensorsSet::open(dir_.string());
      for (const std::string& n : set.names()) {
        ASSERT_NO_THROW(set.load(n)) << n;
        ASSERT_GE(set.info(n).end, set.info(n).begin);
      }
      ++outcome["opened"];
    } catch (const InputError&) {
      ++outcome["InputError"];
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << " (seed " << bounds.seed << "): " << typeid(e).name() << ": " << e.what()
             << "\nindex: " << text;
    }
  }
  std::printf("[fuzz] %llu index files: %d opened, %d rejected with InputError\n", static_cast<unsigned long long>(i),
              outcome["opened"], outcome["InputError"]);
  EXPECT_GT(outcome["opened"], 0);
  EXPECT_GT(outcome["InputError"], 0);
}

TEST_F(SafetensorsFuzz, known_hostile_headers_are_input_errors) {
  auto with_length = [&](uint64_t n, const std::string& rest) {
    std::string f(8, '\0');
    std::memcpy(f.data(), &n, 8);
    return f + rest;
  };
  const std::string hdr = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const std::string huge = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})";
  const std::vector<std::string> cases = {
      "",                                                          // empty file
      "abc",                                                       // shorter than the length field
      with_length(std::numeric_limits<uint64_t>::max(), hdr),      // 8 + n overflows
      with_length(std::numeric_limits<uint64_t>::max() - 7, hdr),  // 8 + n wraps to 0
      with_length(hdr.size() + 1, hdr),                            // header runs past the end
      with_length(hdr.size(), hdr),                                // data shorter than the offsets
      with_length(3, "nul"),                                       // not an object
      with_length(2, "{]"),                                        // broken JSON
      with_length(huge.size(), huge),                              // numel overflows
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    write(dir_ / "h.safetensors", cases[k]);
    EXPECT_THROW(SafetensorsFile::open((dir_ / "h.safetensors").string()), InputError) << "case " << k;
  }
}

}  // namespace
}  // namespace nemotron::io
