// Eval tasks: row formats (native, lm-eval multiple choice, GSM8K) and their errors, few-shot
// prompts, standard errors, and the log-likelihood scorers against a brute-force computation with
// the model's full logits, one request at a time (which proves the packing changes nothing).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "eval/eval_task.h"
#include "eval/task_scoring.h"
#include "model/hf_checkpoint.h"
#include "test_util.h"

using namespace nemotron;
using namespace nemotron::eval;
using nlohmann::json;

namespace {

const std::string kFixture = nemotron::testing::source_root().string() + "/tests/fixtures/hf/dense";

std::string error_of(const json& row, TaskType type, RowFormat f) {
  try {
    parse_row(row, type, f, "t.jsonl:3");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// log p(tokens[prompt..] | prefix) by the model's logits over the request alone.
double brute_logprob(model::HybridModel& net, const std::vector<int32_t>& toks, int64_t prompt, bool* greedy) {
  Context ctx{&net.params().backend(), nullptr, net.params().dtype()};
  const int64_t T = static_cast<int64_t>(toks.size()) - 1, V = net.config().vocab_size;
  std::vector<int32_t> in(toks.begin(), toks.end() - 1);
  const std::vector<double> z = net.logits(ctx, Tensor::from_vector<int32_t>({1, T}, in)).to_f64_vector();
  double lp = 0;
  *greedy = true;
  for (int64_t j = prompt - 1; j < T; ++j) {
    const double* r = z.data() + j * V;
    double m = *std::max_element(r, r + V), s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(r[v] - m);
    lp += r[toks[static_cast<size_t>(j + 1)]] - m - std::log(s);
    *greedy = *greedy && (std::max_element(r, r + V) - r) == toks[static_cast<size_t>(j + 1)];
  }
  return lp;
}

}  // namespace

TEST(EvalRows, ReadsNativeLmEvalAndGsm8kRows) {
  EvalItem a = parse_row({{"context", "2+2="}, {"choices", {"3", "4"}}, {"gold", 1}}, TaskType::multiple_choice,
                         RowFormat::automatic, "t");
  EXPECT_EQ(a.gold, 1);
  EXPECT_EQ(a.shot_target, "4");
  EvalItem arc = parse_row({{"question", "Sky?"}, {"choices", {{"text", {"green", "blue"}}, {"label", {"A", "B"}}}},
                            {"answerKey", "B"}},
                           TaskType::multiple_choice, RowFormat::automatic, "t");
  EXPECT_EQ(arc.context, "Question: Sky?\nAnswer:");
  EXPECT_EQ(arc.gold, 1);
  EvalItem hs = parse_row({{"ctx", "He"}, {"endings", {"ran", "sat", "ate"}}, {"label", "2"}}, TaskType::multiple_choice,
                          RowFormat::lm_eval_mc, "t");
  EXPECT_EQ(hs.gold, 2);
  EvalItem g = parse_row({{"question", "1+1?"}, {"answer", "One and one.\n#### 2"}}, TaskType::generate,
                         RowFormat::automatic, "t");
  EXPECT_EQ(g.answer, "2");
  EXPECT_EQ(g.context, "Question: 1+1?\nAnswer:");

  EXPECT_EQ(error_of({{"context", "x"}, {"choices", {"a"}}, {"gold", 3}}, TaskType::multiple_choice, RowFormat::native),
            "t.jsonl:3: gold: expected an index of the 1 choices, got 3");
  EXPECT_EQ(error_of({{"question", "x"}, {"answer", "no marker"}}, TaskType::generate, RowFormat::gsm8k),
            "t.jsonl:3: answer: no \"#### N\" final answer");
  EXPECT_EQ(error_of({{"foo", 1}}, TaskType::multiple_choice, RowFormat::automatic),
            "t.jsonl:3: not an lm-eval multiple-choice row (ARC: question/choices/answerKey; HellaSwag: ctx/endings/label; "
            "or query/choices/gold)");
  EXPECT_EQ(error_of({{"text", ""}}, TaskType::perplexity, RowFormat::native), "t.jsonl:3: text: empty");
  EXPECT_EQ(error_of(json::array(), TaskType::perplexity, RowFormat::native), "t.jsonl:3: expected a JSON object");
}

TEST(EvalFewShot, DrawsSolvedExamplesNeverTheItemAndTheSameEveryTime) {
  std::vector<EvalItem> pool;
  for (int i = 0; i < 5; ++i) {
    EvalItem it;
    it.context = "Q" + std::to_string(i);
    it.shot_target = "A" + std::to_string(i);
    pool.push_back(it);
  }
  FewShot shots{3, " ", "\n\n", 7};
  for (int64_t i = 0; i < 5; ++i) {
    const std::string p = fewshot_context(pool[static_cast<size_t>(i)], i, pool, true, shots);
    EXPECT_EQ(p, fewshot_context(pool[static_cast<size_t>(i)], i, pool, true, shots));
    EXPECT_TRUE(p.ends_with("\n\nQ" + std::to_string(i))) << p;
    EXPECT_EQ(p.find("Q" + std::to_string(i) + " A"), std::string::npos) << "the item itself as a shot: " << p;
    size_t shots_seen = 0;
    for (size_t at = 0; (at = p.find(" A", at)) != std::string::npos; ++at) ++shots_seen;
    EXPECT_EQ(shots_seen, 3u) << p;
  }
  shots.num_fewshot = 5;
  EXPECT_THROW(fewshot_context(pool[0], 0, pool, true, shots), InputError);
  shots.num_fewshot = 0;
  EXPECT_EQ(fewshot_context(pool[2], 2, pool, true, shots), "Q2");
}

TEST(EvalStderr, IsTheSampleStandardDeviationOverSqrtN) {
  auto [m, se] = mean_and_stderr({1, 0, 1, 1});
  EXPECT_DOUBLE_EQ(m, 0.75);
  EXPECT_NEAR(se, std::sqrt((3 * 0.0625 + 0.5625) / 3.0 / 4.0), 1e-15);
  EXPECT_EQ(mean_and_stderr({1}).second, 0.0);
}

TEST(EvalScoring, MultipleChoiceAndPerplexityMatchOneRequestAtATime) {
  model::HfCheckpoint ck = model::HfCheckpoint::open(kFixture);
  model::HybridModel net(ck.config(), host_backend(), DType::f64);
  net.init(42);
  const data::Tokenizer tok = data::Tokenizer::load(kFixture + "/tokenizer.json");
  LoglikelihoodModel m{&net, &tok, 64, 0, std::nullopt};

  std::vector<EvalItem> items;
  for (const auto& [ctx, choices, gold] : std::vector<std::tuple<std::string, std::vector<std::string>, int>>{
           {"the cat sat on the", {"mat", "dog", "moon"}, 0}, {"one two three", {"four", "five"}, 0},
           {"hello", {"world", "there", "you", "again"}, 2}}) {
    EvalItem it;
    it.context = ctx, it.choices = choices, it.gold = gold, it.shot_target = choices[static_cast<size_t>(gold)];
    items.push_back(it);
  }
  const TaskResult r = score_multiple_choice(m, "mc", items, nullptr, FewShot{});
  std::vector<double> acc, acc_norm;
  for (const EvalItem& it : items) {
    double best = -1e300, best_n = -1e300;
    int64_t arg = 0, arg_n = 0;
    const std::vector<int32_t> ctx = tok.encode(it.context);
    for (size_t c = 0; c < it.choices.size(); ++c) {
      std::vector<int32_t> whole = tok.encode(it.context + " " + it.choices[c]);
      ASSERT_TRUE(std::equal(ctx.begin(), ctx.end(), whole.begin()));
      bool greedy = false;
      const double lp = brute_logprob(net, whole, static_cast<int64_t>(ctx.size()), &greedy);
      const double n = lp / static_cast<double>(it.choices[c].size() + 1);
      if (lp > best) best = lp, arg = static_cast<int64_t>(c);
      if (n > best_n) best_n = n, arg_n = static_cast<int64_t>(c);
    }
    acc.push_back(arg == it.gold), acc_norm.push_back(arg_n == it.gold);
  }
  EXPECT_EQ(r.items, 3);
  EXPECT_DOUBLE_EQ(r.metric("acc")->value, mean_and_stderr(acc).first);
  EXPECT_DOUBLE_EQ(r.metric("acc_norm")->value, mean_and_stderr(acc_norm).first);
  EXPECT_DOUBLE_EQ(r.metric("acc")->stderr_, mean_and_stderr(acc).second);

  // Perplexity: a text longer than a row is cut into overlapping windows; the total equals the
  // one-window computation on a model whose rows hold it all.
  std::vector<EvalItem> docs(2);
  docs[0].text = "the quick brown fox jumps over the lazy dog and keeps running far away";
  docs[1].text = "a b c";
  const TaskResult small = score_perplexity(m, "ppl", docs);
  double nll = 0, tokens = 0;
  for (const EvalItem& d : docs) {
    const std::vector<int32_t> t = tok.encode(d.text);
    if (static_cast<int64_t>(t.size()) - 1 <= m.row_tokens) {
      bool g;
      nll -= brute_logprob(net, t, 1, &g);
      tokens += static_cast<double>(t.size() - 1);
    }
  }
  const std::vector<int32_t> t0 = tok.encode(docs[0].text);
  ASSERT_LE(static_cast<int64_t>(t0.size()) - 1, m.row_tokens) << "make the fixture text shorter";
  EXPECT_NEAR(small.metric("token_perplexity")->value, std::exp(nll / tokens), 1e-9 * std::exp(nll / tokens));
  // Rows of 5: the first text in windows of 6 tokens overlapping by one, each scored alone.
  LoglikelihoodModel narrow = m;
  narrow.row_tokens = 5;
  double wnll = 0, wtokens = 0;
  for (const EvalItem& d : docs) {
    const std::vector<int32_t> t = tok.encode(d.text);
    for (size_t st = 0; st + 1 < t.size(); st += 5) {
      const std::vector<int32_t> w(t.begin() + static_cast<std::ptrdiff_t>(st),
                                   t.begin() + static_cast<std::ptrdiff_t>(std::min(t.size(), st + 6)));
      bool g;
      wnll -= brute_logprob(net, w, 1, &g);
      wtokens += static_cast<double>(w.size() - 1);
    }
  }
  EXPECT_NEAR(score_perplexity(narrow, "ppl", docs).metric("token_perplexity")->value, std::exp(wnll / wtokens),
              1e-9 * std::exp(wnll / wtokens));
}

// Several packed rows per forward score each request as if alone: every request's log-likelihood
// and greedy flag equal the one-request-at-a-time computation, for 1, 2 and 8 rows per forward
// (the last forward partly filled), and the stats count the forwards and rows.
TEST(EvalScoring, RowsPerForwardScoreEachRequestAsAlone) {
  model::HfCheckpoint ck = model::HfCheckpoint::open(kFixture);
  model::HybridModel net(ck.config(), host_backend(), DType::f64);
  net.init(42);
  const int64_t V = net.config().vocab_size;
  std::vector<train::ContinuationRequest> reqs;
  for (int i = 0; i < 9; ++i) {
    train::ContinuationRequest r;
    const int n = 5 + (i * 3) % 7;
    for (int j = 0; j < n; ++j) r.tokens.push_back(static_cast<int32_t>((i * 31 + j * 17 + 3) % V));
    r.prompt_tokens = 1 + i % (n - 1);
    reqs.push_back(r);
  }
  // Greedy is all-or-nothing per request: make one request its own argmax path so the count is
  // not trivially zero.
  {
    train::ContinuationRequest g{{5}, 1};
    Context ctx{&net.params().backend(), nullptr, net.params().dtype()};
    for (int j = 0; j < 4; ++j) {
      const int64_t T = static_cast<int64_t>(g.tokens.size());
      const std::vector<double> z = net.logits(ctx, Tensor::from_vector<int32_t>({1, T}, g.tokens)).to_f64_vector();
      g.tokens.push_back(static_cast<int32_t>(std::max_element(z.end() - V, z.end()) - (z.end() - V)));
    }
    reqs.push_back(g);
  }
  std::vector<double> want;
  std::vector<bool> want_greedy;
  for (const auto& r : reqs) {
    bool g = false;
    want.push_back(brute_logprob(net, r.tokens, r.prompt_tokens, &g));
    want_greedy.push_back(g);
  }
  ASSERT_TRUE(want_greedy.back());
  for (int64_t b : {1, 2, 8}) {
    train::ContinuationStats st;
    const auto got = train::score_continuations(net, reqs, {16, b, 0, true}, &st);
    ASSERT_EQ(got.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_NEAR(got[i].logprob, want[i], 1e-10) << "rows_per_forward " << b << " request " << i;
      EXPECT_EQ(got[i].greedy(), want_greedy[i]) << "rows_per_forward " << b << " request " << i;
      EXPECT_EQ(got[i].tokens, static_cast<int64_t>(reqs[i].tokens.size()) - reqs[i].prompt_tokens);
    }
    EXPECT_EQ(st.forwards, (st.rows + b - 1) / b) << b;
    EXPECT_GE(st.rows, 4);  // 10 requests of up to 11 inputs in rows of 16
    int64_t fed = 0, scored = 0;
    for (const auto& r : reqs) fed += static_cast<int64_t>(r.tokens.size()) - 1, scored += static_cast<int64_t>(r.tokens.size()) - r.prompt_tokens;
    EXPECT_EQ(st.tokens, fed);
    EXPECT_EQ(st.scored_tokens, scored);
    // Without greedy counting the log-likelihoods are the same and greedy_tokens is 0.
    const auto lite = train::score_continuations(net, reqs, {16, b, 0, false});
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(lite[i].logprob, got[i].logprob);
      EXPECT_EQ(lite[i].greedy_tokens, 0);
    }
  }
}
