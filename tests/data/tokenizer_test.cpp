// Tokenizer behaviour on hand-built tokenizer.json files: BPE merge order, ignore_merges, byte
// fallback / unk, the Llama-3 pre-tokenizer regex, Split behaviours, ByteLevel, added tokens and
// their flags, decoding, post-processing, bos/eos, save/load, batch encoding, long words.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "data/bpe_trainer.h"
#include "data/pretokenizer.h"
#include "tokenizer_test_util.h"

namespace nemotron::data {
namespace {

using namespace testing;
using Ids = std::vector<int32_t>;

std::vector<std::string> words_of(const PreTokenizer& p, const std::string& text) {
  PretokScratch s;
  std::vector<std::string_view> w;
  p.run(text, s, w);
  return {w.begin(), w.end()};
}

PreTokenizer pretok(const json& spec) {
  static const std::string src = "tok.json";
  return PreTokenizer::from_json(spec, JsonAt{src, "pre_tokenizer"});
}

// ---- BPE model -----------------------------------------------------------------------------------

TEST(TokenizerBpe, merges_apply_lowest_rank_first) {
  const std::vector<std::string> toks = {"a", "b", "c", "ab", "bc", "abc"};
  EXPECT_EQ(make(tokenizer_json(bpe_model(toks, {"b c", "a b"}))).encode("abc"), (Ids{0, 4}));
  EXPECT_EQ(make(tokenizer_json(bpe_model(toks, {"a b", "b c"}))).encode("abc"), (Ids{3, 2}));
  EXPECT_EQ(make(tokenizer_json(bpe_model(toks, {"b c", "a bc"}))).encode("abc"), (Ids{5}));
  // the ["a","b"] pair form means the same as "a b"
  json m = bpe_model(toks, {});
  m["merges"] = json::array({json::array({"b", "c"}), json::array({"a", "bc"})});
  EXPECT_EQ(make(tokenizer_json(m)).encode("abc"), (Ids{5}));
}

TEST(TokenizerBpe, equal_ranks_merge_leftmost_first) {
  const Tokenizer t = make(tokenizer_json(bpe_model({"a", "aa"}, {"a a"})));
  EXPECT_EQ(t.encode("aaa"), (Ids{1, 0}));
  EXPECT_EQ(t.encode("aaaa"), (Ids{1, 1}));
}

TEST(TokenizerBpe, ignore_merges_takes_a_whole_word_from_the_vocabulary) {
  const std::vector<std::string> toks = {"a", "b", "c", "ab", "abc"};  // "abc" unreachable by merges
  EXPECT_EQ(make(tokenizer_json(bpe_model(toks, {"a b"}, false))).encode("abc"), (Ids{3, 2}));
  EXPECT_EQ(make(tokenizer_json(bpe_model(toks, {"a b"}, true))).encode("abc"), (Ids{4}));
  EXPECT_EQ(make(tokenizer_json(bpe_model(toks, {"a b"}, true))).encode("abcab"), (Ids{3, 2, 3}));
}

TEST(TokenizerBpe, byte_fallback_unk_and_fuse_unk) {
  json m = bpe_model({"a", "<0xC3>", "<0xA9>", "<unk>"}, {});
  m["unk_token"] = "<unk>";
  m["byte_fallback"] = true;
  EXPECT_EQ(make(tokenizer_json(m)).encode("a\xC3\xA9"), (Ids{0, 1, 2}));  // "aé": é = C3 A9
  EXPECT_EQ(make(tokenizer_json(m)).encode("a\xC3\xA8"), (Ids{0, 3}));     // "è": no <0xA8> -> unk
  m["byte_fallback"] = false;
  EXPECT_EQ(make(tokenizer_json(m)).encode("a\xC3\xA9"), (Ids{0, 3}));
  EXPECT_EQ(make(tokenizer_json(m)).encode("\xC3\xA9\xC3\xA9"), (Ids{3, 3}));
  m["fuse_unk"] = true;
  EXPECT_EQ(make(tokenizer_json(m)).encode("\xC3\xA9\xC3\xA9" "a\xC3\xA9"), (Ids{3, 0, 3}));
  m["unk_token"] = nullptr;  // no unk token: HF drops the character
  EXPECT_EQ(make(tokenizer_json(m)).encode("a\xC3\xA9" "a"), (Ids{0, 0}));
}

TEST(TokenizerBpe, continuing_subword_prefix_and_suffix) {
  // HF: non-first characters carry the prefix, the last one the suffix
  json m = bpe_model({"a", "##b", "##c</w>", "ab", "abc</w>"}, {"a ##b", "ab ##c</w>"});
  m["continuing_subword_prefix"] = "##";
  m["end_of_word_suffix"] = "</w>";
  EXPECT_EQ(make(tokenizer_json(m)).encode("abc"), (Ids{4}));
}

// The heap-based merge loop against the obvious quadratic one (lowest rank, leftmost first) on
// random words and a random merge table whose merge results are all distinct.
TEST(TokenizerBpe, merge_loop_matches_naive_reference_on_random_words) {
  std::mt19937 rng(7);
  std::vector<std::string> toks = {"a", "b", "c", "d"};
  std::vector<std::pair<int, int>> merges;
  std::map<std::pair<int, int>, std::pair<int, int>> rank_of;  // pair -> (rank, new id)
  while (merges.size() < 60) {
    const int l = rng() % toks.size(), r = rng() % toks.size();
    const std::string m = toks[l] + toks[r];
    if (m.size() > 6 || std::find(toks.begin(), toks.end(), m) != toks.end()) continue;
    rank_of[{l, r}] = {static_cast<int>(merges.size()), static_cast<int>(toks.size())};
    merges.emplace_back(l, r);
    toks.push_back(m);
  }
  std::vector<std::string> merge_strs;
  for (auto [l, r] : merges) merge_strs.push_back(toks[l] + " " + toks[r]);
  const Tokenizer t = make(tokenizer_json(bpe_model(toks, merge_strs)));
  for (int trial = 0; trial < 300; ++trial) {
    std::string word;
    const int len = 1 + rng() % 40;
    for (int i = 0; i < len; ++i) word += static_cast<char>('a' + rng() % 4);
    Ids ref;
    for (char c : word) ref.push_back(c - 'a');
    while (true) {
      int best = -1, best_rank = 1 << 30;
      for (size_t i = 0; i + 1 < ref.size(); ++i) {
        auto it = rank_of.find({ref[i], ref[i + 1]});
        if (it != rank_of.end() && it->second.first < best_rank) {
          best_rank = it->second.first;
          best = static_cast<int>(i);
        }
      }
      if (best < 0) break;
      ref[best] = rank_of[{ref[best], ref[best + 1]}].second;
      ref.erase(ref.begin() + best + 1);
    }
    EXPECT_EQ(t.encode(word), ref) << word;
  }
}

TEST(TokenizerBpe, long_word_without_quadratic_time) {
  const Tokenizer t = make(tokenizer_json(bpe_model({"a", "aa", "aaaa"}, {"a a", "aa aa"})));
  const Ids ids = t.encode(std::string(400001, 'a'));  // a quadratic loop would take minutes
  ASSERT_EQ(ids.size(), 100001u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 100000);
  EXPECT_EQ(ids.back(), 0);
}

// ---- pre-tokenizers ------------------------------------------------------------------------------

TEST(TokenizerPretok, llama3_regex_splits_words_digits_contractions_and_whitespace) {
  const PreTokenizer p = pretok(split_pretokenizer(kLlama3Pattern));
  using W = std::vector<std::string>;
  EXPECT_EQ(words_of(p, "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(words_of(p, "don't"), (W{"don", "'t"}));
  EXPECT_EQ(words_of(p, "I'LL GO, they're"), (W{"I", "'LL", " GO", ",", " they", "'re"}));
  EXPECT_EQ(words_of(p, "12345 3.14"), (W{"123", "45", " ", "3", ".", "14"}));
  EXPECT_EQ(words_of(p, "a   b"), (W{"a", "  ", " b"}));
  EXPECT_EQ(words_of(p, "  hi"), (W{" ", " hi"}));
  EXPECT_EQ(words_of(p, "a\n\nb"), (W{"a", "\n\n", "b"}));
  EXPECT_EQ(words_of(p, "x\r\n y"), (W{"x", "\r\n", " y"}));
  EXPECT_EQ(words_of(p, "x  \n"), (W{"x", "  \n"}));
  EXPECT_EQ(words_of(p, "tab\there"), (W{"tab", "\there"}));
  EXPECT_EQ(words_of(p, "end  "), (W{"end", "  "}));
  EXPECT_EQ(words_of(p, "emoji \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!"), (W{"emoji", " \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!"}));
  EXPECT_EQ(words_of(p, "\xC3\xBC" "ber \xE6\x97\xA5\xE6\x9C\xAC"), (W{"\xC3\xBC" "ber", " \xE6\x97\xA5\xE6\x9C\xAC"}));
  EXPECT_EQ(words_of(p, "x.\n\ny"), (W{"x", ".\n\n", "y"}));
  // (?i:'s) follows Unicode case folding: U+017F LATIN SMALL LETTER LONG S matches 's'
  EXPECT_EQ(words_of(p, "it'\xC5\xBF"), (W{"it", "'\xC5\xBF"}));
}

TEST(TokenizerPretok, whitespace_means_unicode_white_space_like_oniguruma) {
  const PreTokenizer p = pretok(split_pretokenizer(R"(\s+|\S+)"));
  using W = std::vector<std::string>;
  // U+180E is not White_Space (PCRE2's own \s would take it); U+3000 and U+00A0 are
  EXPECT_EQ(words_of(p, "a\xE1\xA0\x8E" "b"), (W{"a\xE1\xA0\x8E" "b"}));
  EXPECT_EQ(words_of(p, "a\xE3\x80\x80" "b\xC2\xA0" "c"), (W{"a", "\xE3\x80\x80", "b", "\xC2\xA0", "c"}));
  EXPECT_EQ(pcre2_onig_compatible(R"([^\s\p{L}]\Q\s\E\S)"),
            R"([^\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\p{L}]\Q\s\E)"
            R"([^\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}])");
}

TEST(TokenizerPretok, split_behaviours_match_hf_documentation) {
  using W = std::vector<std::string>;
  auto run = [](const std::string& behavior, bool invert = false) {
    json s = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
    return words_of(pretok(s), "the-final--countdown");
  };
  EXPECT_EQ(run("Removed"), (W{"the", "final", "countdown"}));
  EXPECT_EQ(run("Isolated"), (W{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run("MergedWithPrevious"), (W{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run("MergedWithNext"), (W{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run("Contiguous"), (W{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(run("Removed", true), (W{"-", "-", "-"}));
  // a literal pattern is not a regex
  json dot = {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Removed"}, {"invert", false}};
  EXPECT_EQ(words_of(pretok(dot), "a.b+c"), (W{"a", "b+c"}));
}

TEST(TokenizerPretok, byte_level_maps_bytes_and_optionally_splits_and_prefixes) {
  using W = std::vector<std::string>;
  EXPECT_EQ(words_of(pretok(byte_level_pretokenizer(true, true)), "Hello world"),
            (W{"\xC4\xA0" "Hello", "\xC4\xA0" "world"}));  // "ĠHello", "Ġworld"
  EXPECT_EQ(words_of(pretok(byte_level_pretokenizer(true, true)), " Hi"), (W{"\xC4\xA0" "Hi"}));
  EXPECT_EQ(words_of(pretok(byte_level_pretokenizer(false, false)), "a b\n"), (W{"a\xC4\xA0" "b\xC4\x8A"}));
  json seq = {{"type", "Sequence"},
              {"pretokenizers", json::array({split_pretokenizer(kLlama3Pattern), byte_level_pretokenizer()})}};
  EXPECT_EQ(words_of(pretok(seq), "caf\xC3\xA9 42"), (W{"caf\xC3\x83\xC2\xA9", "\xC4\xA0", "42"}));
}

// ---- byte-level tokenizer with added tokens --------------------------------------------------------

// Bytes (ids 0..255), "Ġt" 256, "he" 257, "Ġthe" 258, "34" 259; Llama-3 split + ByteLevel.
json llama_like(const json& added = json::array()) {
  json pre = {{"type", "Sequence"},
              {"pretokenizers", json::array({split_pretokenizer(kLlama3Pattern), byte_level_pretokenizer()})}};
  json dec = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  return tokenizer_json(bpe_model(byte_level_tokens({bl(" t"), "he", bl(" the"), "34"}),
                                  {bl(" ") + " t", "h e", bl(" t") + " he", "3 4"}),
                        pre, added, dec);
}

TEST(TokenizerEncode, byte_level_words_merge_within_words_only) {
  const Tokenizer t = make(llama_like());
  EXPECT_EQ(t.encode(" the then"), (Ids{258, 258, 'n'}));
  EXPECT_EQ(t.encode("12345"), (Ids{'1', '2', '3', '4', '5'}));  // "123" | "45": no "34" across words
  EXPECT_EQ(t.encode("345"), (Ids{259, '5'}));
  EXPECT_EQ(t.encode(""), (Ids{}));
  EXPECT_EQ(t.encode("\xC3\xA9"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(t.encode("\xF0\x9F\x98\x80"), (Ids{0xF0, 0x9F, 0x98, 0x80}));
}

TEST(TokenizerEncode, special_tokens_in_text_are_matched_first_and_never_split) {
  const Tokenizer t = make(llama_like(json::array({added_token(260, "<s>", true), added_token(261, "</s>", true),
                                                   added_token(262, "<|im_start|>", true)})));
  EXPECT_EQ(t.encode("<s>he</s>"), (Ids{260, 257, 261}));
  EXPECT_EQ(t.encode("x<|im_start|>the"), (Ids{'x', 262, 't', 257}));
  EXPECT_EQ(t.encode("<s"), (Ids{'<', 's'}));
  EXPECT_EQ(t.encode("<s><s>"), (Ids{260, 260}));
  EXPECT_EQ(t.encode(" <s> the"), (Ids{' ', 260, 258}));
}

TEST(TokenizerEncode, added_tokens_longest_match_and_hf_id_assignment) {
  // JSON ids 500/501 are not what HF assigns: it counts on from the model's vocabulary size (260)
  const Tokenizer t = make(llama_like(json::array({added_token(500, "<s>", true), added_token(501, "<s>x", true)})));
  EXPECT_EQ(t.token_to_id("<s>"), 260);
  EXPECT_EQ(t.token_to_id("<s>x"), 261);
  EXPECT_EQ(t.encode("<s>x<s>y"), (Ids{261, 260, 'y'}));
  EXPECT_EQ(t.vocab_size(), 262);
  // an added token that is already in the model vocabulary keeps the model's id
  const Tokenizer u = make(llama_like(json::array({added_token(7, "he", false)})));
  EXPECT_EQ(u.token_to_id("he"), 257);
  EXPECT_EQ(u.encode("the"), (Ids{'t', 257}));
}

TEST(TokenizerEncode, lstrip_rstrip_and_single_word) {
  const Tokenizer t = make(llama_like(json::array(
      {added_token(260, "<mask>", true, /*lstrip=*/true), added_token(261, "<r>", true, false, /*rstrip=*/true),
       added_token(262, "hi", false, false, false, /*single_word=*/true), added_token(263, "<m>", true)})));
  EXPECT_EQ(t.encode("a <mask>"), (Ids{'a', 260}));
  EXPECT_EQ(t.encode("a \t<mask>b"), (Ids{'a', 260, 'b'}));
  EXPECT_EQ(t.encode("a <m>"), (Ids{'a', ' ', 263}));
  EXPECT_EQ(t.encode("<r>  b"), (Ids{261, 'b'}));
  EXPECT_EQ(t.encode("hi there"), (Ids{262, 258, 'r', 'e'}));
  EXPECT_EQ(t.encode("this"), (Ids{'t', 'h', 'i', 's'}));
  EXPECT_EQ(t.encode("(hi)"), (Ids{'(', 262, ')'}));
}

TEST(TokenizerEncode, raw_added_tokens_are_matched_before_normalized_ones) {
  const Tokenizer t = make(llama_like(json::array(
      {added_token(260, "ab", false, false, false, false, /*normalized=*/false),
       added_token(261, "abc", false, false, false, false, /*normalized=*/true)})));
  EXPECT_EQ(t.encode("abc"), (Ids{260, 'c'}));
  EXPECT_EQ(t.encode("xabcx"), (Ids{'x', 260, 'c', 'x'}));
}

TEST(TokenizerEncode, invalid_utf8_is_an_input_error) {
  const Tokenizer t = make(llama_like());
  EXPECT_EQ(input_error([&] { t.encode("ab\xC3("); }), "encode: text is not valid UTF-8 (byte 2 of 4)");
  EXPECT_EQ(input_error([&] { t.encode("\xED\xA0\x80"); }), "encode: text is not valid UTF-8 (byte 0 of 3)");
}

// ---- decode ---------------------------------------------------------------------------------------

TEST(TokenizerDecode, byte_level_decode_repairs_nothing_but_invalid_utf8) {
  const Tokenizer t = make(llama_like(json::array({added_token(260, "<s>", true), added_token(261, "<t>", false)})));
  EXPECT_EQ(t.decode(Ids{258, 258, 'n'}), " the then");
  EXPECT_EQ(t.decode(Ids{0xE2, 0x82}), "\xEF\xBF\xBD");  // a cut-off 3-byte sequence: one U+FFFD
  EXPECT_EQ(t.decode(Ids{0xC3, 'a', 0xFF}), "\xEF\xBF\xBD" "a\xEF\xBF\xBD");
  EXPECT_EQ(t.decode(Ids{260, 'a', 261}), "<s>a<t>");
  EXPECT_EQ(t.decode(Ids{260, 'a', 261}, true), "a<t>");
  EXPECT_EQ(t.decode(Ids{-1, 99999, 'a'}), "a");  // unknown ids are skipped, as in HF
}

TEST(TokenizerDecode, without_decoder_tokens_are_joined_by_spaces) {
  const Tokenizer t = make(tokenizer_json(bpe_model({"a", "b", "ab"}, {"a b"})));
  EXPECT_EQ(t.decode(Ids{2, 0, 1}), "ab a b");
}

TEST(TokenizerDecode, round_trips_tricky_strings_through_a_trained_tokenizer) {
  BpeTrainConfig cfg;
  cfg.vocab_size = 400;
  cfg.special_tokens = {"<s>", "</s>"};
  const Tokenizer t = train_bpe({"the quick brown fox jumps over the lazy dog 1234567 don't", "caf\xC3\xA9 na\xC3\xAFve"}, cfg);
  for (const std::string s :
       {"", " ", "  leading", "trailing  ", "tabs\t\tand\nnewlines\r\n\r\n", "digits 1234567890 3.14159",
        "it's they're WE'LL I'd", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
        "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
        "e\xCC\x81\xCC\x82 combining", "<s>special</s> inside", "\xE1\xA0\x8E\xE3\x80\x80\xC2\xA0"}) {
    EXPECT_EQ(t.decode(t.encode(s)), s) << s;
  }
}

// ---- post-processing, bos / eos -------------------------------------------------------------------------

TEST(TokenizerPostProcess, template_adds_tokens_only_when_asked) {
  json j = llama_like(json::array({added_token(260, "<s>", true), added_token(261, "</s>", true)}));
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
                    {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                             {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
                     {"pair", "<s> $A </s> $B:1"},
                     {"special_tokens",
                      {{"<s>", {{"id", "<s>"}, {"ids", {260}}, {"tokens", {"<s>"}}}},
                       {"</s>", {{"id", "</s>"}, {"ids", {261}}, {"tokens", {"</s>"}}}}}}}})}};
  Tokenizer t = make(j);
  EXPECT_EQ(t.encode("he"), (Ids{257}));
  EXPECT_EQ(t.encode("he", true), (Ids{260, 257, 261}));
  EXPECT_EQ(t.encode("", true), (Ids{260, 261}));
  EXPECT_EQ(t.bos_token_id(), 260);
  EXPECT_EQ(t.eos_token_id(), 261);
  t.set_eos_token("he");
  EXPECT_EQ(t.eos_token_id(), 257);
  EXPECT_EQ(input_error([&] { t.set_bos_token("<nope>"); }), "bos token \"<nope>\" is not in the tokenizer's vocabulary");
}

TEST(TokenizerPostProcess, bert_template_and_conventional_eos_names) {
  json j = llama_like(json::array({added_token(260, "[CLS]", true), added_token(261, "[SEP]", true),
                                   added_token(262, "<|end_of_text|>", true)}));
  j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 261}}, {"cls", {"[CLS]", 260}}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("he", true), (Ids{260, 257, 261}));
  const Tokenizer u = make(llama_like(json::array({added_token(260, "<|end_of_text|>", true)})));
  EXPECT_EQ(u.eos_token_id(), 260);
  EXPECT_EQ(u.bos_token_id(), std::nullopt);
}

// ---- save / load, batch ----------------------------------------------------------------------------

TEST(TokenizerSave, save_then_load_is_identical) {
  const Tokenizer t = make(llama_like(json::array({added_token(260, "<s>", true), added_token(261, "<mask>", true, true)})));
  const std::string path = ::testing::TempDir() + "tokenizer_save_test.json";
  t.save(path);
  const Tokenizer u = Tokenizer::load(path);
  EXPECT_EQ(u.to_json_text(), t.to_json_text());
  for (const std::string s : {"<s> the then <mask> 12345", "caf\xC3\xA9 \xF0\x9F\x98\x80"}) EXPECT_EQ(u.encode(s), t.encode(s));
  EXPECT_EQ(u.vocab_size(), t.vocab_size());
  EXPECT_EQ(u.id_to_token(258), bl(" the"));
  std::filesystem::remove(path);
}

TEST(TokenizerBatch, encode_batch_equals_encode) {
  const Tokenizer t = make(llama_like(json::array({added_token(260, "<s>", true)})));
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) texts.push_back("<s> the " + std::to_string(i * 7919) + std::string(i % 5, ' ') + "he");
  const auto batch = t.encode_batch(texts, true);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], t.encode(texts[i], true)) << i;
  texts[17] = "bad \xFF";
  EXPECT_EQ(input_error([&] { t.encode_batch(texts); }), "encode: text is not valid UTF-8 (byte 4 of 5)");
}

}  // namespace
}  // namespace nemotron::data
