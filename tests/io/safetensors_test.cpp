#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("nm_st_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // A file from a header JSON text and a data buffer of `data_bytes` bytes.
  std::string raw_file(const std::string& header, size_t data_bytes, const std::string& name = "raw.safetensors") {
    std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header;
    out << std::string(data_bytes, '\x01');
    return p;
  }
  std::string error_of(const std::string& p) {
    try {
      SafetensorsFile::open(p);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

TEST_F(SafetensorsTest, round_trip_keeps_names_dtypes_shapes_and_bytes) {
  Tensor a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_vector<double>({2}, {-1.5, 1e-300}).to_host(DType::bf16);
  Tensor c = Tensor::from_vector<int64_t>({3}, {7, -8, 1ll << 40});
  Tensor d = Tensor::from_vector<int32_t>({0}, {});
  save_safetensors(path("x.safetensors"), {{"a.weight", a}, {"b", b}, {"c", c}, {"empty", d}}, {{"format", "pt"}});
  SafetensorsFile f = SafetensorsFile::open(path("x.safetensors"));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_NE(f.find("b"), nullptr);
  EXPECT_EQ(f.find("b")->dtype, StDtype::BF16);
  EXPECT_EQ(f.load("a.weight").to_f64_vector(), a.to_f64_vector());
  EXPECT_EQ(f.load("b").dtype(), DType::bf16);
  EXPECT_EQ(f.load("b").to_f64_vector(), b.to_f64_vector());
  EXPECT_EQ(f.load("c").to_host(DType::i64).data<int64_t>()[2], 1ll << 40);
  EXPECT_EQ(f.load("empty").shape(), Shape({0}));
  EXPECT_EQ(f.load("a.weight", DType::f64).to_f64_vector(), a.to_f64_vector());
  EXPECT_THROW(f.load("a.weight", DType::i32), InputError);
  EXPECT_THROW(f.load("nope"), InputError);
  EXPECT_FALSE(fs::exists(path("x.safetensors.tmp." + std::to_string(::getpid()))));
}

TEST_F(SafetensorsTest, layout_is_the_reference_layout) {
  save_safetensors(path("y.safetensors"), {{"t", Tensor::from_vector<float>({1}, {2.0f})}});
  std::ifstream in(path("y.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 4);
  auto j = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(j["t"]["dtype"], "F32");
  EXPECT_EQ(j["t"]["data_offsets"], nlohmann::json::array({0, 4}));
  float v;
  std::memcpy(&v, bytes.data() + 8 + n, 4);
  EXPECT_EQ(v, 2.0f);
}

TEST_F(SafetensorsTest, reads_f16_and_u8) {
  // 1.0, -2.0, 65504 (max half), 2^-24 (smallest subnormal) as IEEE half; then 3 bytes of U8.
  uint16_t h[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
  std::string header = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"u":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  std::string p = path("h.safetensors");
  std::ofstream out(p, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out.write(reinterpret_cast<const char*>(h), 8);
  out << std::string("\x05\xff\x00", 3);
  out.close();
  SafetensorsFile f = SafetensorsFile::open(p);
  Tensor t = f.load("h");
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_f64_vector(), (std::vector<double>{1.0, -2.0, 65504.0, std::ldexp(1.0, -24)}));
  EXPECT_EQ(f.load("u").to_f64_vector(), (std::vector<double>{5, 255, 0}));
}

TEST_F(SafetensorsTest, corrupt_files_are_clear_errors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(error_of(raw_file(ok, 8)), "no error");
  {
    std::string p = path("short");
    std::ofstream(p) << "abc";
    EXPECT_NE(error_of(p).find("shorter than the 8-byte header length"), std::string::npos);
  }
  {
    std::string p = path("huge");
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 1ull << 40;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
    out.close();
    EXPECT_NE(error_of(p).find("exceeds the 100000000 byte limit"), std::string::npos);
  }
  {
    std::string p = path("past");
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 64;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
    out.close();
    EXPECT_NE(error_of(p).find("runs past the end"), std::string::npos);
  }
  EXPECT_NE(error_of(raw_file("{\"a\":", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(raw_file("[1]", 0)).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4)).find("tensor \"a\": data_offsets [0, 8] run past the data buffer of 4 bytes"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("8 bytes for 3 F32 elements"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8)).find("unsupported dtype \"Q4\""), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)).find("not a non-negative integer"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).find("end before they begin"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("overlaps"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("bytes 0..4 before tensor \"a\" belong to no tensor"), std::string::npos);
  EXPECT_NE(error_of(raw_file(ok, 12)).find("last 4 bytes"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"__metadata__":{"k":1}})", 0)).find("__metadata__.k is not a string"), std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)).find("too large"), std::string::npos);
  EXPECT_NE(error_of(path("missing")).find("cannot open"), std::string::npos);
}

TEST_F(SafetensorsTest, sharded_checkpoints_round_trip_through_the_index) {
  std::vector<NamedTensor> ts;
  for (int i = 0; i < 5; ++i)
    ts.push_back({fmt::format("layers.{}.w", i), Tensor::from_vector<float>({4}, {float(i), 1, 2, 3})});
  std::vector<std::string> files = save_sharded_safetensors(dir_.string(), ts, 40);
  EXPECT_EQ(files.size(), 4u);  // 3 shards of <= 40 bytes (2 + 2 + 1 tensors) + the index
  EXPECT_EQ(files[0], "model-00001-of-00003.safetensors");
  SafetensorsSet set = SafetensorsSet::open(dir_.string());
  EXPECT_EQ(set.names().size(), 5u);
  EXPECT_EQ(set.load("layers.4.w").to_f64_vector()[0], 4.0);
  EXPECT_EQ(set.files().size(), 3u);
  // An index that names a tensor its shard does not hold is an error naming both.
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"weight_map":{"ghost":"model-00001-of-00003.safetensors"}})";
  try {
    SafetensorsSet::open(dir_.string());
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weight_map.ghost: tensor is not in model-00001-of-00003.safetensors"),
              std::string::npos);
  }
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map":{"x":"../etc/passwd"}})";
  EXPECT_THROW(SafetensorsSet::open(dir_.string()), InputError);
}

TEST_F(SafetensorsTest, single_file_directory) {
  save_sharded_safetensors(dir_.string(), {{"w", Tensor::from_vector<float>({1}, {3})}}, 1 << 20);
  EXPECT_TRUE(fs::exists(dir_ / "model.safetensors"));
  EXPECT_EQ(SafetensorsSet::open(dir_.string()).load("w").to_f64_vector()[0], 3.0);
  EXPECT_THROW(SafetensorsSet::open((dir_ / "nothing").string()), InputError);
}

}  // namespace
}  // namespace nemotron::io
