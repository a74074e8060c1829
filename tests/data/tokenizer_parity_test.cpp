// Parity with Hugging Face `tokenizers`, against fixtures made by tools/make_tokenizer_fixtures.py:
//   hf_tokenizer.json  trained by HF on corpus.json (Llama-3 Split regex + ByteLevel, specials, added
//                      tokens with lstrip / single_word, template post-processor);
//   ours_tokenizer.json trained on the same corpus by our train_bpe and written by our save();
//   expected.json      HF's ids and decodes of tricky and random strings under both files, and
//                      hashes of HF's ids for every corpus document;
//   pretok.json        the pieces HF pre-tokenizers (several regexes, every Split behaviour,
//                      ByteLevel) cut strings into, with HF's own JSON for each pre-tokenizer.
// So: we encode/decode like HF (a), our trainer matches HF's (b), and HF loads our saved file and
// encodes with it exactly as we do (c).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/config_tree.h"
#include "data/bpe_trainer.h"
#include "data/pretokenizer.h"
#include "tokenizer_test_util.h"

namespace nemotron::data {
namespace {

using namespace testing;
using Ids = std::vector<int32_t>;

json read_json(const std::string& name) {
  std::ifstream f(fixture_path(name), std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing fixture " << fixture_path(name);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json_text(ss.str(), fixture_path(name));
}

const json& expected() {
  static const json e = read_json("expected.json");
  return e;
}

std::string fnv1a_ids(const Ids& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  return fmt::format("{:016x}", h);
}

BpeTrainConfig train_config() {
  const json c = read_json("train_config.json");
  BpeTrainConfig cfg;
  cfg.vocab_size = c.at("vocab_size").get<int32_t>();
  cfg.min_frequency = c.at("min_frequency").get<int64_t>();
  cfg.special_tokens = c.at("special_tokens").get<std::vector<std::string>>();
  cfg.pattern = c.at("pattern").get<std::string>();
  cfg.ignore_merges = c.at("ignore_merges").get<bool>();
  cfg.bos_token = c.at("bos_token").get<std::string>();
  return cfg;
}

const Tokenizer& ours_trained() {
  static const Tokenizer t = train_bpe(read_json("corpus.json").get<std::vector<std::string>>(), train_config());
  return t;
}

std::string show(const std::string& s) { return json(s).dump(); }

// Compares `t` with HF's expectations under key `who` ("hf" or "ours"); reports at most a few
// mismatches in full so that a regression is readable.
void check_tricky(const Tokenizer& t, const std::string& who) {
  int shown = 0, bad = 0;
  for (const json& c : expected().at("tricky")) {
    const std::string text = c.at("text").get<std::string>();
    const json& e = c.at(who);
    const Ids ids = t.encode(text), ids_special = t.encode(text, true);
    const bool ok = ids == e.at("ids").get<Ids>() && ids_special == e.at("ids_special").get<Ids>() &&
                    t.decode(ids) == e.at("decode").get<std::string>() &&
                    t.decode(ids_special, true) == e.at("decode_skip").get<std::string>();
    if (!ok && shown++ < 8)
      ADD_FAILURE() << who << " " << show(text) << "\n  ours: " << json(ids).dump() << " / " << json(ids_special).dump()
                    << " / " << show(t.decode(ids)) << "\n  HF:   " << e.at("ids").dump() << " / "
                    << e.at("ids_special").dump() << " / " << e.at("decode").dump();
    bad += !ok;
  }
  EXPECT_EQ(bad, 0) << "of " << expected().at("tricky").size() << " tricky strings";
}

// `round_trip`: also decode(encode(x)) == x (not with HF's tokenizer: its lstrip <mask> eats spaces).
void check_stress(const Tokenizer& t, const std::string& who, bool round_trip) {
  int shown = 0, bad = 0;
  const json& cases = expected().at("stress");
  std::vector<std::string> texts;
  for (const json& c : cases) texts.push_back(c.at("text").get<std::string>());
  const auto batch = t.encode_batch(texts);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids want = cases[i].at(who).get<Ids>();
    if (batch[i] != want && shown++ < 8)
      ADD_FAILURE() << who << " " << show(texts[i]) << "\n  ours: " << json(batch[i]).dump() << "\n  HF:   "
                    << json(want).dump();
    bad += batch[i] != want;
    if (round_trip && t.decode(batch[i]) != texts[i] && shown++ < 8)
      ADD_FAILURE() << "decode(encode(x)) != x for " << show(texts[i]);
  }
  EXPECT_EQ(bad, 0) << "of " << cases.size() << " random strings";
}

TEST(TokenizerParity, hf_trained_tokenizer_encodes_tricky_strings_like_hf) {
  check_tricky(Tokenizer::load(fixture_path("hf_tokenizer.json")), "hf");
}

TEST(TokenizerParity, hf_trained_tokenizer_encodes_random_strings_like_hf) {
  check_stress(Tokenizer::load(fixture_path("hf_tokenizer.json")), "hf", false);
}

TEST(TokenizerParity, hf_trained_tokenizer_encodes_corpus_documents_like_hf) {
  const Tokenizer t = Tokenizer::load(fixture_path("hf_tokenizer.json"));
  const auto docs = read_json("corpus.json").get<std::vector<std::string>>();
  const json& want = expected().at("corpus").at("hf");
  ASSERT_EQ(want.size(), docs.size());
  const auto batch = t.encode_batch(docs);
  int bad = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const bool ok = want[i][0].get<size_t>() == batch[i].size() && want[i][1].get<std::string>() == fnv1a_ids(batch[i]);
    if (!ok && bad < 3) ADD_FAILURE() << "document " << i << ": " << batch[i].size() << " ids, HF " << want[i][0];
    bad += !ok;
  }
  EXPECT_EQ(bad, 0) << "of " << docs.size() << " documents";
}

// The regex engine and the Split / ByteLevel semantics on their own, piece by piece.
TEST(TokenizerParity, pre_tokenizers_split_like_hf) {
  const json p = read_json("pretok.json");
  const auto texts = p.at("texts").get<std::vector<std::string>>();
  const std::string src = "pretok.json";
  for (const json& cfg : p.at("configs")) {
    const std::string name = cfg.at("name").get<std::string>();
    const PreTokenizer pt = PreTokenizer::from_json(cfg.at("pre_tokenizer"), JsonAt{src, name});
    const json& pieces = cfg.at("pieces");
    ASSERT_EQ(pieces.size(), texts.size()) << name;
    int bad = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      PretokScratch scratch;
      std::vector<std::string_view> words;
      pt.run(texts[i], scratch, words);
      const std::vector<std::string> got(words.begin(), words.end());
      if (got != pieces[i].get<std::vector<std::string>>() && bad++ < 3)
        ADD_FAILURE() << name << " " << show(texts[i]) << "\n  ours: " << json(got).dump() << "\n  HF:   "
                      << pieces[i].dump();
    }
    EXPECT_EQ(bad, 0) << name << ": of " << texts.size() << " strings";
  }
}

TEST(TokenizerParity, hf_special_and_added_tokens_are_loaded) {
  const Tokenizer t = Tokenizer::load(fixture_path("hf_tokenizer.json"));
  EXPECT_EQ(t.token_to_id("<s>"), 0);
  EXPECT_EQ(t.bos_token_id(), 0);
  EXPECT_EQ(t.eos_token_id(), 1);  // "</s>" by name: the template only adds <s>
  EXPECT_TRUE(t.is_special(3));
  ASSERT_TRUE(t.token_to_id("<think>"));
  EXPECT_FALSE(t.is_special(*t.token_to_id("<think>")));
  EXPECT_TRUE(t.is_special(*t.token_to_id("<mask>")));
}

// (b) Same corpus, same settings: our trainer makes HF's vocabulary and merges.
TEST(TokenizerParity, our_trainer_reproduces_hf_trainer) {
  const json hf = read_json("hf_tokenizer.json").at("model");
  const json ours = json::parse(ours_trained().to_json_text()).at("model");
  EXPECT_EQ(ours.at("vocab").size(), hf.at("vocab").size());
  EXPECT_TRUE(ours.at("vocab") == hf.at("vocab"));
  const json& hm = hf.at("merges");
  const json& om = ours.at("merges");
  EXPECT_EQ(om.size(), hm.size());
  for (size_t i = 0; i < std::min(om.size(), hm.size()); ++i) {
    if (om[i] != hm[i]) {
      ADD_FAILURE() << "first different merge: #" << i << " ours " << om[i].dump() << ", HF " << hm[i].dump();
      break;
    }
  }
}

// Deterministic training; the committed file is what our trainer makes (and, below, what HF was
// given). NEMOTRON_TOKENIZER_FIXTURE_OUT=path writes a fresh one when the trainer changes.
TEST(TokenizerParity, our_trained_tokenizer_is_the_committed_fixture) {
  const std::string text = ours_trained().to_json_text();
  if (const char* out = std::getenv("NEMOTRON_TOKENIZER_FIXTURE_OUT")) ours_trained().save(out);
  std::ifstream f(fixture_path("ours_tokenizer.json"), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_TRUE(ss.str() == text) << "ours_tokenizer.json differs from what train_bpe makes now";
}

// (c) HF loaded the file our save() wrote and encodes with it exactly as we do.
TEST(TokenizerParity, hf_encodes_with_our_saved_tokenizer_like_we_do) {
  const Tokenizer t = Tokenizer::load(fixture_path("ours_tokenizer.json"));
  check_tricky(t, "ours");
  check_stress(t, "ours", true);
  const auto docs = read_json("corpus.json").get<std::vector<std::string>>();
  const json& want = expected().at("corpus").at("ours");
  ASSERT_EQ(want.size(), docs.size());
  const auto batch = t.encode_batch(docs);
  int bad = 0;
  for (size_t i = 0; i < docs.size(); ++i)
    bad += !(want[i][0].get<size_t>() == batch[i].size() && want[i][1].get<std::string>() == fnv1a_ids(batch[i]));
  EXPECT_EQ(bad, 0) << "of " << docs.size() << " documents";
  EXPECT_EQ(expected().at("transformers_agrees_on_ours"), true);
}

}  // namespace
}  // namespace nemotron::data
