// Compatibility with Megatron's own .bin/.idx code, through files it wrote and what it read back
// (tests/fixtures/megatron, made by tools/make_megatron_idx_fixture.py):
//   megatron_{int32,uint16}.{bin,idx}: Megatron's IndexedDatasetBuilder writing spec.json;
//   ours_{int32,uint16}.{bin,idx}: our builder writing spec.json;
//   verdict.json: what Megatron's IndexedDataset read from ours, and its add_index check.
// Set NEMOTRON_REGENERATE_MEGATRON_FIXTURE=1 to rewrite the ours_* files (then rerun the tool).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data/indexed_dataset.h"
#include "data/indexed_dataset_builder.h"
#include "data_test_util.h"
#include "megatron_fixture.h"

namespace nemotron::data {
namespace {

using nlohmann::json;
using testing::read_bytes;
namespace fx = testing::megatron;

struct Variant {
  const char* name;
  TokenDType dtype;
};
constexpr Variant kVariants[] = {{"int32", TokenDType::i32}, {"uint16", TokenDType::u16}};

TEST(MegatronFixture, our_builder_reproduces_the_committed_ours_files) {
  const json spec = fx::spec();
  const std::string dir = testing::temp_dir();
  const bool regenerate = std::getenv("NEMOTRON_REGENERATE_MEGATRON_FIXTURE") != nullptr;
  for (const Variant& v : kVariants) {
    const auto docs = fx::documents(spec[v.name]);
    const std::string committed = fx::path(std::string("ours_") + v.name);
    fx::write_ours(regenerate ? committed : dir + "/" + v.name, v.dtype, docs);
    if (regenerate) continue;
    for (const char* ext : {".bin", ".idx"})
      EXPECT_EQ(read_bytes(dir + "/" + v.name + ext), read_bytes(committed + ext)) << v.name << ext;
  }
}

TEST(MegatronFixture, our_builder_writes_the_bytes_megatrons_builder_wrote) {
  const json spec = fx::spec();
  const std::string dir = testing::temp_dir();
  for (const Variant& v : kVariants) {
    fx::write_ours(dir + "/" + v.name, v.dtype, fx::documents(spec[v.name]));
    const std::string megatron = fx::path(std::string("megatron_") + v.name);
    for (const char* ext : {".bin", ".idx"}) {
      const auto theirs = read_bytes(megatron + ext);
      ASSERT_FALSE(theirs.empty()) << megatron << ext << " is missing";
      EXPECT_EQ(read_bytes(dir + "/" + v.name + ext), theirs) << v.name << ext;
    }
  }
}

TEST(MegatronFixture, our_reader_reads_megatron_written_files_exactly) {
  const json spec = fx::spec();
  for (const Variant& v : kVariants) {
    const auto docs = fx::documents(spec[v.name]);
    const fx::Expected want = fx::expected(docs);
    IndexedDataset ds = IndexedDataset::open(fx::path(std::string("megatron_") + v.name));
    EXPECT_EQ(ds.dtype(), v.dtype);
    EXPECT_EQ(ds.num_documents(), static_cast<int64_t>(docs.size()));
    EXPECT_EQ(ds.sequence_lengths(), want.lengths) << v.name;
    EXPECT_EQ(ds.document_indices(), want.document_indices) << v.name;
    for (int64_t i = 0; i < ds.num_sequences(); ++i) {
      std::vector<int64_t> got(static_cast<size_t>(ds.sequence_length(i)));
      ds.get(i, 0, -1, got.data());
      EXPECT_EQ(got, want.sequences[i]) << v.name << " sequence " << i;
      if (got.size() >= 3) {  // a partial read from the middle
        std::vector<int64_t> part(got.size() - 2);
        ds.get(i, 1, static_cast<int64_t>(part.size()), part.data());
        EXPECT_EQ(part, std::vector<int64_t>(got.begin() + 1, got.end() - 1));
      }
    }
  }
}

TEST(MegatronFixture, megatron_read_our_files_with_the_same_content) {
  const json spec = fx::spec();
  const json verdict = fx::load_json("verdict.json");
  EXPECT_EQ(verdict.at("errors"), json::object()) << verdict.at("errors").dump(1);
  EXPECT_TRUE(verdict.at("ok").get<bool>());
  for (const Variant& v : kVariants) {
    const json& entry = verdict.at("index_files").at(v.name);
    // The verdict is about the very files committed here.
    for (const char* ext : {"bin", "idx"}) {
      const auto bytes = read_bytes(fx::path(std::string("ours_") + v.name) + "." + ext);
      EXPECT_EQ(entry.at("ours_files").at(ext).at("fnv1a64").get<std::string>(), fx::fnv1a64_hex(bytes)) << v.name;
      EXPECT_EQ(entry.at("ours_files").at(ext).at("bytes").get<size_t>(), bytes.size());
    }
    const fx::Expected want = fx::expected(fx::documents(spec[v.name]));
    const json& read = entry.at("megatron_reads_ours");
    EXPECT_EQ(read.at("dtype").get<std::string>(), v.name);
    EXPECT_EQ(read.at("sequence_lengths").get<std::vector<int32_t>>(), want.lengths);
    EXPECT_EQ(read.at("document_indices").get<std::vector<int64_t>>(), want.document_indices);
    EXPECT_EQ(read.at("sequences").get<std::vector<std::vector<int64_t>>>(), want.sequences);
    for (const json& p : read.at("partial")) {
      const auto& seq = want.sequences.at(p.at("i").get<size_t>());
      const auto off = p.at("offset").get<size_t>(), len = p.at("length").get<size_t>();
      EXPECT_EQ(p.at("tokens").get<std::vector<int64_t>>(),
                std::vector<int64_t>(seq.begin() + static_cast<long>(off), seq.begin() + static_cast<long>(off + len)));
    }
    EXPECT_TRUE(entry.at("megatron_reads_ours_problems").empty()) << entry.at("megatron_reads_ours_problems").dump();
    EXPECT_TRUE(entry.at("ours_bytes_equal_megatron").get<bool>());
  }
}

TEST(MegatronFixture, add_index_of_shards_equals_megatrons_single_write) {
  const json spec = fx::spec();
  const json verdict = fx::load_json("verdict.json");
  const std::string dir = testing::temp_dir();
  for (const Variant& v : kVariants) {
    EXPECT_TRUE(verdict.at("index_files").at(v.name).at("megatron_add_index_equals_direct").get<bool>());
    const auto docs = fx::documents(spec[v.name]);
    const auto split_at = spec[v.name].at("split_at").get<size_t>();
    fx::write_ours(dir + "/a", v.dtype, {docs.begin(), docs.begin() + static_cast<long>(split_at)});
    fx::write_ours(dir + "/b", v.dtype, {docs.begin() + static_cast<long>(split_at), docs.end()});
    {
      IndexedDatasetBuilder merged(dir + "/merged", v.dtype);
      merged.add_index(dir + "/a");
      merged.add_index(dir + "/b");
      merged.finalize();
    }
    for (const char* ext : {".bin", ".idx"})
      EXPECT_EQ(read_bytes(dir + "/merged" + ext), read_bytes(fx::path(std::string("megatron_") + v.name) + ext))
          << v.name << ext;
  }
}

}  // namespace
}  // namespace nemotron::data
