// Bit-for-bit parity with numpy and with Megatron's dataset code, against values they produced
// (tests/fixtures/megatron/{numpy_vectors,gpt_vectors}.json, made by
// tools/make_megatron_idx_fixture.py with numpy's RandomState and Megatron's GPTDataset,
// BlendedDataset, BlendedMegatronDatasetBuilder and compiled helpers.cpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "data/blended_dataset.h"
#include "data/data_loader.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset_builder.h"
#include "data/numpy_random.h"
#include "data_test_util.h"
#include "megatron_fixture.h"

namespace nemotron::data {
namespace {

using nlohmann::json;
namespace fx = testing::megatron;

double hex(const json& v) { return std::strtod(v.get<std::string>().c_str(), nullptr); }
std::vector<double> hexes(const json& v) {
  std::vector<double> out;
  for (const auto& x : v) out.push_back(hex(x));
  return out;
}

const json& numpy_vectors() {
  static const json j = fx::load_json("numpy_vectors.json");
  return j;
}

TEST(NumpyParity, mt19937_raw_outputs) {
  for (const auto& [seed, outputs] : numpy_vectors().at("mt19937_raw").items()) {
    Mt19937 mt(static_cast<uint32_t>(std::stoull(seed)));
    for (const auto& v : outputs) EXPECT_EQ(mt.next_u32(), v.get<uint32_t>()) << "seed " << seed;
  }
}

TEST(NumpyParity, permutations) {
  for (const json& p : numpy_vectors().at("permutations")) {
    EXPECT_EQ(NumpyRandomState(p.at("seed").get<uint32_t>()).permutation(p.at("n").get<int64_t>()),
              p.at("perm").get<std::vector<int64_t>>())
        << "seed " << p.at("seed") << " n " << p.at("n");
  }
}

TEST(NumpyParity, consecutive_shuffles_of_one_random_state) {
  const json& s = numpy_vectors().at("sequential_shuffles");
  NumpyRandomState rs(s.at("seed").get<uint32_t>());
  for (const json& step : s.at("shuffles")) {
    std::vector<int64_t> a(step.at("n").get<size_t>());
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int64_t>(i);
    rs.shuffle(std::span<int64_t>(a));
    EXPECT_EQ(a, step.at("shuffled").get<std::vector<int64_t>>()) << step.at("dtype") << " " << step.at("n");
  }
}

TEST(NumpyParity, sum_and_megatron_normalize_bit_for_bit) {
  for (const json& s : numpy_vectors().at("sums")) {
    const std::vector<double> values = hexes(s.at("values"));
    EXPECT_EQ(numpy_sum(values), hex(s.at("sum"))) << values.size() << " values";
    EXPECT_EQ(normalize_weights(values), hexes(s.at("normalized"))) << values.size() << " values";
  }
}

TEST(MegatronParity, split_strings_bookends_and_ranges) {
  for (const json& s : numpy_vectors().at("splits")) {
    const std::string text = s.at("split");
    const auto fractions = parse_split(text, "split");
    EXPECT_EQ(std::vector<double>(fractions.begin(), fractions.end()), hexes(s.at("vector"))) << text;
    const SplitBookends b = split_bookends(fractions);
    for (int i = 0; i < 3; ++i) {
      const json& m = s.at("matrix")[i];
      ASSERT_EQ(b[i].has_value(), !m.is_null()) << text << " split " << i;
      if (!b[i]) continue;
      EXPECT_EQ(b[i]->first, hex(m[0])) << text;
      EXPECT_EQ(b[i]->second, hex(m[1])) << text;
      for (const auto& [n, ranges] : s.at("ranges").items()) {
        const auto r = split_sequence_range(*b[i], std::stoll(n));
        EXPECT_EQ(r.first, ranges[i][0].get<int64_t>()) << text << " n=" << n;
        EXPECT_EQ(r.second, ranges[i][1].get<int64_t>()) << text << " n=" << n;
      }
    }
  }
}

TEST(MegatronParity, blending_indices_of_helpers_cpp) {
  for (const json& b : numpy_vectors().at("blending")) {
    const BlendingIndices ix = build_blending_indices(hexes(b.at("weights")), b.at("size").get<int64_t>());
    EXPECT_EQ(ix.dataset_index, b.at("dataset_index").get<std::vector<int16_t>>()) << b.at("weights").size();
    EXPECT_EQ(ix.dataset_sample_index, b.at("dataset_sample_index").get<std::vector<int64_t>>());
  }
  const json& e = numpy_vectors().at("exhaustive_blending");
  const BlendingIndices ix = build_exhaustive_blending_indices(e.at("sizes").get<std::vector<int64_t>>());
  EXPECT_EQ(ix.dataset_index, e.at("dataset_index").get<std::vector<int16_t>>());
  EXPECT_EQ(ix.dataset_sample_index, e.at("dataset_sample_index").get<std::vector<int64_t>>());
}

// The files the tool wrote with Megatron's builder, rewritten with ours (the formula is in spec.json).
std::string write_gpt_files(const json& files) {
  const std::string dir = testing::temp_dir();
  const auto names = files.at("names").get<std::vector<std::string>>();
  const int64_t eod = files.at("eod").get<int64_t>();
  for (size_t k = 0; k < names.size(); ++k) {
    IndexedDatasetBuilder b(dir + "/" + names[k], TokenDType::i32);
    for (int64_t i = 0; i < files.at("num_documents")[k].get<int64_t>(); ++i) {
      const int64_t n = (37 * i + 11 * static_cast<int64_t>(k + 1)) % 97;
      std::vector<int64_t> tokens;
      for (int64_t j = 0; j + 1 < n; ++j)
        tokens.push_back((131 * i + 7 * j + 1000 * static_cast<int64_t>(k)) % 50000 + 3);
      if (n > 0) tokens.push_back(eod);
      b.add_document(tokens);
    }
    b.finalize();
  }
  return dir;
}

Blend to_blend(const json& b, const std::string& dir) {
  Blend out;
  for (const auto& name : b[0]) out.prefixes.push_back(dir + "/" + name.get<std::string>());
  if (!b[1].is_null()) out.weights = b[1].get<std::vector<double>>();
  return out;
}

void expect_gpt_equal(const GptDataset& ours, const json& theirs, const std::string& what) {
  EXPECT_EQ(ours.size(), theirs.at("len").get<int64_t>()) << what;
  EXPECT_EQ(ours.indices().document_index, theirs.at("document_index").get<std::vector<int32_t>>()) << what;
  EXPECT_EQ(ours.indices().sample_index, theirs.at("sample_index").get<std::vector<int64_t>>()) << what;
  EXPECT_EQ(ours.indices().shuffle_index, theirs.at("shuffle_index").get<std::vector<int64_t>>()) << what;
}

TEST(MegatronParity, gpt_and_blended_datasets_and_their_samples) {
  const json vectors = fx::load_json("gpt_vectors.json");
  const std::string dir = write_gpt_files(vectors.at("gpt_files"));
  const int64_t eod = vectors.at("gpt_files").at("eod").get<int64_t>();
  ASSERT_FALSE(vectors.at("configs").empty());
  for (const json& rec : vectors.at("configs")) {
    const json& cfg = rec.at("config");
    const std::string name = cfg.at("name");
    ASSERT_FALSE(rec.contains("error")) << name << ": Megatron failed: " << rec.at("error").get<std::string>();
    GptDataSource src;
    if (cfg.contains("blend")) {
      src.blend = to_blend(cfg.at("blend"), dir);
      src.split = cfg.at("split").get<std::string>();
    } else {
      BlendPerSplit per_split;
      for (int i = 0; i < 3; ++i)
        if (!cfg.at("blend_per_split")[i].is_null()) per_split[i] = to_blend(cfg.at("blend_per_split")[i], dir);
      src.blend_per_split = per_split;
    }
    GptBuildConfig build;
    build.gpt.sequence_length = cfg.at("sequence_length").get<int64_t>();
    build.gpt.seed = cfg.at("seed").get<uint32_t>();
    build.gpt.add_extra_token = cfg.value("add_extra_token_to_sequence", true);
    build.gpt.drop_last_partial_validation_sequence = cfg.value("drop_last_partial_validation_sequence", true);
    SplitSizes sizes;
    for (int i = 0; i < 3; ++i)
      if (!cfg.at("sizes")[i].is_null()) sizes[i] = cfg.at("sizes")[i].get<int64_t>();
    const SplitDatasets ours = build_gpt_datasets(src, build, sizes, name);

    for (int i = 0; i < 3; ++i) {
      const json& theirs = rec.at("splits")[i];
      const std::string what = name + " " + split_name(static_cast<Split>(i));
      ASSERT_EQ(ours[i] == nullptr, theirs.is_null()) << what;
      if (!ours[i]) continue;
      EXPECT_EQ(ours[i]->size(), theirs.at("len").get<int64_t>()) << what;
      if (theirs.at("type") == "BlendedDataset") {
        auto blend = std::dynamic_pointer_cast<const BlendedDataset>(ours[i]);
        ASSERT_TRUE(blend) << what << ": ours is not a blend";
        const auto their_weights = hexes(theirs.at("weights"));
        ASSERT_EQ(blend->datasets().size(), their_weights.size()) << what;
        for (size_t k = 0; k < their_weights.size(); ++k) {
          // Megatron keeps raw sizes as the weights of an exhaustive blend; ours are normalized.
          const double want = theirs.at("size").is_null() ? static_cast<double>(blend->datasets()[k]->size())
                                                          : blend->weights()[k];
          EXPECT_EQ(want, their_weights[k]) << what << " weight " << k;
        }
        EXPECT_EQ(blend->indices().dataset_index, theirs.at("dataset_index").get<std::vector<int16_t>>()) << what;
        EXPECT_EQ(blend->indices().dataset_sample_index,
                  theirs.at("dataset_sample_index").get<std::vector<int64_t>>())
            << what;
        for (size_t k = 0; k < blend->datasets().size(); ++k) {
          auto member = std::dynamic_pointer_cast<const GptDataset>(blend->datasets()[k]);
          ASSERT_TRUE(member);
          expect_gpt_equal(*member, theirs.at("members")[k], what + " member " + std::to_string(k));
        }
      } else {
        auto gpt = std::dynamic_pointer_cast<const GptDataset>(ours[i]);
        ASSERT_TRUE(gpt) << what << ": ours is not a GPTDataset";
        expect_gpt_equal(*gpt, theirs.at("gpt"), what);
      }
      // The training tensors of the samples Megatron returned.
      LoaderConfig lc;
      lc.eod_mask_loss = cfg.value("eod_mask_loss", false);
      lc.eod_id = eod;
      DataLoader loader(ours[i], lc);
      for (const json& s : theirs.at("samples")) {
        const int64_t idx = s.at("idx").get<int64_t>();
        const Batch b = loader.batch_at(idx);
        const auto tokens = s.at("tokens").get<std::vector<int64_t>>();
        const auto labels = s.at("labels").get<std::vector<int64_t>>();
        const auto mask = s.at("loss_mask").get<std::vector<float>>();
        ASSERT_EQ(b.input_ids.numel(), static_cast<int64_t>(tokens.size())) << what;
        for (size_t t = 0; t < tokens.size(); ++t) {
          EXPECT_EQ(b.input_ids.data<int32_t>()[t], tokens[t]) << what << " sample " << idx << " token " << t;
          EXPECT_EQ(b.loss_mask.data<float>()[t], mask[t]) << what << " sample " << idx << " token " << t;
          if (mask[t] != 0) {
            EXPECT_EQ(b.labels.data<int32_t>()[t], labels[t]) << what << " sample " << idx;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nemotron::data
