#include "eval/task_scoring.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "train/continuation_scoring.h"

namespace nemotron::eval {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Log-likelihoods only: greedy is not read here, and counting it would copy every scored row's logits.
std::vector<train::ContinuationScore> score_requests(const LoglikelihoodModel& m,
                                                     const std::vector<train::ContinuationRequest>& reqs) {
  return train::score_continuations(*m.net, reqs, {m.row_tokens, m.rows_per_forward, m.pad_id, false}, m.stats);
}

}  // namespace

train::ContinuationRequest continuation_request(const LoglikelihoodModel& m, const std::string& context,
                                                const std::string& continuation) {
  train::ContinuationRequest r;
  if (m.bos) r.tokens.push_back(*m.bos);
  std::vector<int32_t> ctx = m.tok->encode(context);
  const std::vector<int32_t> whole = m.tok->encode(context + continuation);
  std::vector<int32_t> cont;
  if (whole.size() > ctx.size() && std::equal(ctx.begin(), ctx.end(), whole.begin())) {
    cont.assign(whole.begin() + static_cast<std::ptrdiff_t>(ctx.size()), whole.end());
  } else {
    cont = m.tok->encode(continuation);
  }
  if (cont.empty()) throw InputError(fmt::format("the continuation \"{}\" encodes to no tokens", continuation));
  // Keep the end: the longest context that fits a row with the continuation (lm-eval truncates left).
  const int64_t room = m.row_tokens + 1 - static_cast<int64_t>(cont.size()) - static_cast<int64_t>(r.tokens.size());
  if (room < 1)
    throw InputError(fmt::format("a continuation of {} tokens does not fit rows of {} tokens (eval.row_tokens)",
                                 cont.size(), m.row_tokens));
  if (static_cast<int64_t>(ctx.size()) > room) ctx.erase(ctx.begin(), ctx.end() - room);
  r.tokens.insert(r.tokens.end(), ctx.begin(), ctx.end());
  if (r.tokens.empty()) r.tokens.push_back(cont.front()), cont.erase(cont.begin());  // no context and no bos
  r.prompt_tokens = static_cast<int64_t>(r.tokens.size());
  r.tokens.insert(r.tokens.end(), cont.begin(), cont.end());
  if (r.prompt_tokens >= static_cast<int64_t>(r.tokens.size()))
    throw InputError(fmt::format("the continuation \"{}\" is a single token with no context and no bos token to "
                                 "predict it from",
                                 continuation));
  return r;
}

const MetricValue* TaskResult::metric(const std::string& n) const {
  for (const MetricValue& m : metrics)
    if (m.name == n) return &m;
  return nullptr;
}

std::pair<double, double> mean_and_stderr(const std::vector<double>& x) {
  if (x.empty()) return {0.0, 0.0};
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  if (x.size() < 2) return {mean, 0.0};
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double n = static_cast<double>(x.size());
  return {mean, std::sqrt(ss / (n - 1) / n)};
}

TaskResult score_tokenized_choices(const LoglikelihoodModel& m, const std::string& name,
                                   const std::vector<TokenizedChoiceItem>& items, int64_t num_fewshot) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<train::ContinuationRequest> reqs;
  std::vector<size_t> first(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    NM_CHECK(items[i].choice_bytes.size() == items[i].choices.size(), "item {}: {} lengths for {} choices", i,
             items[i].choice_bytes.size(), items[i].choices.size());
    first[i] = reqs.size();
    reqs.insert(reqs.end(), items[i].choices.begin(), items[i].choices.end());
  }
  const std::vector<train::ContinuationScore> scores = score_requests(m, reqs);
  std::vector<double> acc, acc_norm;
  for (size_t i = 0; i < items.size(); ++i) {
    int64_t best = 0, best_norm = 0;
    double best_ll = -INFINITY, best_ll_norm = -INFINITY;
    for (size_t c = 0; c < items[i].choices.size(); ++c) {
      const double ll = scores[first[i] + c].logprob;
      const double norm = ll / std::max(1.0, items[i].choice_bytes[c]);
      if (ll > best_ll) best_ll = ll, best = static_cast<int64_t>(c);
      if (norm > best_ll_norm) best_ll_norm = norm, best_norm = static_cast<int64_t>(c);
    }
    acc.push_back(best == items[i].gold ? 1.0 : 0.0);
    acc_norm.push_back(best_norm == items[i].gold ? 1.0 : 0.0);
  }
  TaskResult r{name, TaskType::multiple_choice, static_cast<int64_t>(items.size()), num_fewshot, {}, 0};
  auto [a, as] = mean_and_stderr(acc);
  auto [an, ans] = mean_and_stderr(acc_norm);
  r.metrics = {{"acc", a, as, true}, {"acc_norm", an, ans, true}};
  r.seconds = seconds_since(t0);
  return r;
}

TaskResult score_multiple_choice(const LoglikelihoodModel& m, const std::string& name, const std::vector<EvalItem>& items,
                                 const std::vector<EvalItem>* fewshot_pool, const FewShot& shots) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TokenizedChoiceItem> tokenized(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string ctx = fewshot_context(items[i], static_cast<int64_t>(i), fewshot_pool ? *fewshot_pool : items,
                                            fewshot_pool == nullptr, shots);
    tokenized[i].gold = items[i].gold;
    for (const std::string& c : items[i].choices) {
      const std::string continuation = shots.target_delimiter + c;
      tokenized[i].choices.push_back(continuation_request(m, ctx, continuation));
      // acc_norm divides by the choice's length in bytes (lm-eval: len(choice), characters).
      tokenized[i].choice_bytes.push_back(static_cast<double>(continuation.size()));
    }
  }
  TaskResult r = score_tokenized_choices(m, name, tokenized, shots.num_fewshot);
  r.seconds = seconds_since(t0);
  return r;
}

TaskResult score_perplexity(const LoglikelihoodModel& m, const std::string& name, const std::vector<EvalItem>& items) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<train::ContinuationRequest> reqs;
  std::vector<size_t> doc_of;
  std::vector<double> bytes, words;
  for (size_t d = 0; d < items.size(); ++d) {
    std::vector<int32_t> toks;
    if (m.bos) toks.push_back(*m.bos);
    const std::vector<int32_t> body = m.tok->encode(items[d].text);
    toks.insert(toks.end(), body.begin(), body.end());
    if (toks.size() < 2) throw InputError(fmt::format("{}: document {} has fewer than two tokens", name, d));
    // Windows of row_tokens + 1 tokens overlapping by one: each token after the first predicted once.
    for (size_t s = 0; s + 1 < toks.size(); s += static_cast<size_t>(m.row_tokens)) {
      const size_t e = std::min(toks.size(), s + static_cast<size_t>(m.row_tokens) + 1);
      reqs.push_back({std::vector<int32_t>(toks.begin() + static_cast<std::ptrdiff_t>(s), toks.begin() + static_cast<std::ptrdiff_t>(e)), 1});
      doc_of.push_back(d);
    }
    bytes.push_back(static_cast<double>(items[d].text.size()));
    int64_t w = 0;
    bool in_word = false;
    for (char c : items[d].text) {
      const bool space = std::isspace(static_cast<unsigned char>(c));
      w += !space && !in_word;
      in_word = !space;
    }
    words.push_back(static_cast<double>(std::max<int64_t>(w, 1)));
  }
  const std::vector<train::ContinuationScore> scores = score_requests(m, reqs);
  std::vector<double> nll(items.size(), 0.0), tokens(items.size(), 0.0);
  for (size_t i = 0; i < scores.size(); ++i) nll[doc_of[i]] -= scores[i].logprob, tokens[doc_of[i]] += static_cast<double>(scores[i].tokens);
  // Ratio estimators sum(nll) / sum(units) and their delta-method standard errors.
  auto ratio = [&](const std::vector<double>& units) {
    double sn = 0, su = 0;
    for (size_t d = 0; d < nll.size(); ++d) sn += nll[d], su += units[d];
    const double R = sn / su, n = static_cast<double>(nll.size());
    double ss = 0;
    for (size_t d = 0; d < nll.size(); ++d) ss += (nll[d] - R * units[d]) * (nll[d] - R * units[d]);
    const double se = n > 1 ? std::sqrt(ss / (n - 1) / n) / (su / n) : 0.0;
    return std::pair{R, se};
  };
  const auto [per_token, se_token] = ratio(tokens);
  const auto [per_byte, se_byte] = ratio(bytes);
  const auto [per_word, se_word] = ratio(words);
  TaskResult r{name, TaskType::perplexity, static_cast<int64_t>(items.size()), 0, {}, 0};
  r.metrics = {{"token_perplexity", std::exp(per_token), std::exp(per_token) * se_token, false},
               {"bits_per_byte", per_byte / std::log(2.0), se_byte / std::log(2.0), false},
               {"word_perplexity", std::exp(per_word), std::exp(per_word) * se_word, false}};
  r.seconds = seconds_since(t0);
  return r;
}

TaskResult score_generation(const GenerateFn& generate, const VerifyFn& verify, const std::string& name,
                            const std::vector<EvalItem>& items, const std::vector<EvalItem>* fewshot_pool,
                            const FewShot& shots, int64_t samples) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> prompts;
  for (size_t i = 0; i < items.size(); ++i)
    prompts.push_back(fewshot_context(items[i], static_cast<int64_t>(i), fewshot_pool ? *fewshot_pool : items,
                                      fewshot_pool == nullptr, shots));
  const std::vector<std::vector<std::string>> out = generate(prompts, samples);
  NM_CHECK(out.size() == items.size(), "generation returned {} answers for {} prompts", out.size(), items.size());
  std::vector<double> pass;
  for (size_t i = 0; i < items.size(); ++i) {
    NM_CHECK(static_cast<int64_t>(out[i].size()) == samples, "prompt {}: {} samples, expected {}", i, out[i].size(), samples);
    double right = 0;
    for (const std::string& c : out[i]) right += verify(c, items[i]) ? 1.0 : 0.0;
    pass.push_back(right / static_cast<double>(samples));
  }
  TaskResult r{name, TaskType::generate, static_cast<int64_t>(items.size()), shots.num_fewshot, {}, 0};
  auto [p, ps] = mean_and_stderr(pass);
  r.metrics = {{"pass@1", p, ps, true}};
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace nemotron::eval
