// The sharded checkpoint format (io/tensor_pieces.h): pieces written by several "ranks" as boxes
// of a global tensor or flat ranges of a box read back at another layout (other boxes, other
// ranges, the whole tensor, another dtype), and a missing piece, a doubled one or another global
// shape refused with the tensor named. Plus the file hash (XXH64 against published vectors).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "io/file_hash.h"
#include "io/tensor_pieces.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;

class TensorPiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("nm_pieces_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // One rank file per entry of `ranks`; returns their paths.
  std::vector<std::string> write(const std::vector<std::vector<TensorPiece>>& ranks) {
    std::vector<std::string> paths;
    for (size_t r = 0; r < ranks.size(); ++r) {
      paths.push_back((dir_ / fmt::format("rank_{}.safetensors", r)).string());
      save_piece_file(paths.back(), ranks[r]);
    }
    return paths;
  }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

// The global tensor of shape `g` with element i = i + 0.5 (every value distinct).
Tensor global(const Shape& g) {
  Tensor t = Tensor::empty(g, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) + 0.5f;
  return t;
}

// The box [off, off + box) of a 2-D tensor, row-major.
Tensor box_of(const Tensor& t, std::vector<int64_t> off, const Shape& box) {
  Tensor out = Tensor::empty(box, DType::f32);
  for (int64_t i = 0; i < box[0]; ++i)
    for (int64_t j = 0; j < box[1]; ++j)
      out.data<float>()[i * box[1] + j] = t.data<float>()[(off[0] + i) * t.shape()[1] + off[1] + j];
  return out;
}

TensorPiece piece(const std::string& name, const Shape& g, std::vector<int64_t> off, const Shape& box, Tensor data,
                  int64_t begin = 0, int64_t end = -1) {
  TensorPiece p;
  p.name = name;
  p.global_shape = g;
  p.offset = std::move(off);
  p.box = box;
  p.begin = begin;
  p.end = end;
  p.data = std::move(data);
  return p;
}

void expect_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "element " << i;
}

TEST_F(TensorPiecesTest, boxes_of_four_ranks_read_as_another_box_and_whole) {
  const Shape g{6, 4};
  const Tensor t = global(g);
  std::vector<std::vector<TensorPiece>> ranks;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      ranks.push_back({piece("w", g, {3 * i, 2 * j}, {3, 2}, box_of(t, {3 * i, 2 * j}, {3, 2}))});
  const PieceSet set = PieceSet::open(write(ranks), "ckpt");
  expect_equal(set.read("w", g, {1, 1}, {4, 3}, DType::f32), box_of(t, {1, 1}, {4, 3}));  // spans all four
  expect_equal(set.read_whole("w"), t);
  EXPECT_EQ(set.read_whole("w").shape(), g);
}

TEST_F(TensorPiecesTest, zero_ranges_of_four_ranks_reassemble_at_two_and_one) {
  // A distributed optimizer at DP4 cuts the flat [5, 3] moment into ranges; DP2 asks for halves.
  const Shape g{5, 3};
  const Tensor t = global(g);
  const Tensor flat = t.view({15});
  const int64_t cuts[] = {0, 4, 8, 12, 15};
  std::vector<std::vector<TensorPiece>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back({piece("exp_avg.w", g, {}, {}, flat.slice(cuts[r], cuts[r + 1]), cuts[r], cuts[r + 1])});
  const PieceSet set = PieceSet::open(write(ranks), "ckpt");
  expect_equal(set.read("exp_avg.w", g, {0, 0}, g, DType::f32, 0, 7), flat.slice(0, 7));
  expect_equal(set.read("exp_avg.w", g, {0, 0}, g, DType::f32, 7, 15), flat.slice(7, 15));
  expect_equal(set.read_whole("exp_avg.w"), t);
  // A row box of the ranges (what a tensor-parallel rank would ask for).
  expect_equal(set.read("exp_avg.w", g, {2, 0}, {2, 3}, DType::f32), box_of(t, {2, 0}, {2, 3}));
}

TEST_F(TensorPiecesTest, converts_dtypes_and_keeps_scalars) {
  const Tensor t = global({2, 3});
  TensorPiece s = piece("scale", Shape{}, {}, {}, Tensor::empty(Shape{}, DType::f32));
  s.data.data<float>()[0] = 7.25f;
  const PieceSet set = PieceSet::open(write({{piece("w", {2, 3}, {}, {}, t), s}}), "ckpt");
  const Tensor half = set.read_whole("w", DType::bf16);
  EXPECT_EQ(half.dtype(), DType::bf16);
  expect_equal(half.to_host(DType::f32), t);  // x + 0.5 for small x is exact in bf16
  EXPECT_EQ(set.read_whole("scale").data<float>()[0], 7.25f);
  EXPECT_EQ(set.read_whole("scale").shape(), Shape{});
}

TEST_F(TensorPiecesTest, a_missing_piece_names_the_tensor) {
  const Shape g{5, 3};
  const Tensor flat = global(g).view({15});
  const PieceSet set = PieceSet::open(write({{piece("exp_avg.w", g, {}, {}, flat.slice(0, 7), 0, 7)}}), "ckpt/iter_0000004");
  const std::string e = error_of([&] { set.read_whole("exp_avg.w"); });
  EXPECT_NE(e.find("ckpt/iter_0000004: tensor \"exp_avg.w\": 8 of the 15 elements"), std::string::npos) << e;
  EXPECT_NE(e.find("in no rank file"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { set.read_whole("nope"); }).find("missing tensor \"nope\""), std::string::npos);
}

TEST_F(TensorPiecesTest, a_doubled_piece_and_another_global_shape_are_refused) {
  const Tensor t = global({2, 3});
  const PieceSet twice = PieceSet::open(write({{piece("w", {2, 3}, {}, {}, t)}, {piece("w", {2, 3}, {}, {}, t)}}), "ckpt");
  EXPECT_NE(error_of([&] { twice.read_whole("w"); }).find("in several rank files"), std::string::npos);
  const PieceSet one = PieceSet::open(write({{piece("w", {2, 3}, {}, {}, t)}}), "ckpt");
  const std::string e = error_of([&] { one.read("w", {3, 2}, {0, 0}, {3, 2}, DType::f32); });
  EXPECT_NE(e.find("tensor \"w\" has global shape [2, 3]"), std::string::npos) << e;
}

TEST_F(TensorPiecesTest, gather_makes_one_file_of_whole_tensors_per_part) {
  const Tensor t = global({4, 2});
  TensorPiece m = piece("exp_avg.w", {4, 2}, {}, {}, t);
  m.part = "optimizer";
  const PieceSet set = PieceSet::open(write({{piece("w", {4, 2}, {0, 0}, {2, 2}, box_of(t, {0, 0}, {2, 2})), m},
                                             {piece("w", {4, 2}, {2, 0}, {2, 2}, box_of(t, {2, 0}, {2, 2}))}}),
                                      "ckpt");
  const SafetensorsFile f = set.gather("model");
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].shape, Shape({4, 2}));
  expect_equal(f.load("w"), t);
  EXPECT_EQ(set.names("optimizer"), std::vector<std::string>{"exp_avg.w"});
}

TEST(FileHash, xxh64_matches_published_vectors) {
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ULL);
  const std::string s = "Nobody inspects the spammish repetition";  // 39 bytes: the 32-byte stripes too
  EXPECT_EQ(xxh64(s.data(), s.size()), 0xFBCEA83C8A378BF1ULL);
}

}  // namespace
}  // namespace nemotron::io
