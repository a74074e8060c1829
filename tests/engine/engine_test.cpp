// The engine over the exact RecomputeStepModel on tiny random hybrid models: greedy equals the
// argmax continuation computed by hand with logits(); batched (more requests than slots) and
// one-at-a-time generation agree bit for bit; stop tokens, stop strings, max_new_tokens and
// max_seq_len end sequences; a request the model has no memory for waits in the queue; a model
// that draws where its logits are (extend_and_sample, the GPU path) gives the same results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/recompute_step_model.h"
#include "ops/sample_rows.h"
#include "model/block_configs.h"
#include "test_util.h"

namespace nemotron::engine {
namespace {

struct Tiny {
  model::ModelConfig cfg;
  model::HybridModel net;
  explicit Tiny(int64_t vocab = 23, const std::string& pattern = "M*-E")
      : cfg([&] {
          model::ModelConfig c = testing::hybrid_config(pattern);
          c.vocab_size = vocab;
          return c;
        }()),
        net(cfg, host_backend(), DType::f32) {
    net.init(11);
  }
  Context ctx() { return Context{&host_backend(), nullptr, DType::f32}; }
};

// log-softmax row t of logits [1, T, V] for the sequence `ids`.
std::vector<double> last_logprobs(Tiny& m, const std::vector<int32_t>& ids) {
  const int64_t T = static_cast<int64_t>(ids.size()), V = m.cfg.vocab_size;
  Context ctx = m.ctx();
  Tensor z = m.net.logits(ctx, Tensor::from_vector<int64_t>({1, T}, std::vector<int64_t>(ids.begin(), ids.end())))
                 .to_host(DType::f64);
  const double* row = z.data<double>() + (T - 1) * V;
  double mx = -INFINITY, s = 0;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
  for (int64_t v = 0; v < V; ++v) s += std::exp(row[v] - mx);
  std::vector<double> lp(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) lp[v] = row[v] - mx - std::log(s);
  return lp;
}

std::vector<Request> some_requests(int n, const SamplingParams& base) {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    for (int t = 0; t < 2 + (i * 3) % 5; ++t) r.prompt.push_back((i * 7 + t * 5 + 1) % 23);
    r.params = base;
    r.params.max_new_tokens = 3 + (i * 5) % 7;
    r.params.seed = 100 + static_cast<uint64_t>(i % 3);
    out.push_back(r);
  }
  return out;
}

std::vector<Result> run_all(StepModel& model, const std::vector<Request>& reqs, EngineStats* stats = nullptr) {
  Engine e(model);
  for (const Request& r : reqs) e.add(r);
  std::vector<Result> res = e.run();
  if (stats) *stats = e.stats();
  return res;
}

TEST(Engine, GreedyEqualsTheArgmaxContinuationByHand) {
  Tiny m;
  RecomputeStepModel step(m.net, m.ctx(), 2, 32);
  SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = 6;
  Request r{{3, 9, 14, 2}, p, {}};
  std::vector<Result> res = run_all(step, {r});
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].finish, FinishReason::length);
  std::vector<int32_t> seq = r.prompt;
  ASSERT_EQ(res[0].tokens.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    std::vector<double> lp = last_logprobs(m, seq);
    const int32_t best = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
    EXPECT_EQ(res[0].tokens[i], best) << "token " << i;
    EXPECT_NEAR(res[0].logprobs[i], lp[best], 1e-5);
    seq.push_back(best);
  }
}

TEST(Engine, SampledLogprobsAreThoseOfTheModelsDistribution) {
  Tiny m;
  RecomputeStepModel step(m.net, m.ctx(), 3, 32);
  SamplingParams p;
  p.temperature = 1.0;  // no processing: processed = raw = the model's log-softmax
  p.max_new_tokens = 5;
  p.seed = 9;
  Request r{{1, 2, 3}, p, {}};
  Result res = run_all(step, {r})[0];
  std::vector<int32_t> seq = r.prompt;
  for (size_t i = 0; i < res.tokens.size(); ++i) {
    std::vector<double> lp = last_logprobs(m, seq);
    EXPECT_NEAR(res.logprobs[i], lp[res.tokens[i]], 1e-5);
    EXPECT_NEAR(res.raw_logprobs[i], lp[res.tokens[i]], 1e-5);
    seq.push_back(res.tokens[i]);
  }
}

TEST(Engine, BatchedAndOneAtATimeAgreeExactly) {
  Tiny m;
  SamplingParams p;
  p.temperature = 0.9;
  p.top_p = 0.95;
  p.top_k = 10;
  std::vector<Request> reqs = some_requests(9, p);
  RecomputeStepModel batched(m.net, m.ctx(), 4, 24);  // more requests than slots
  EngineStats st;
  std::vector<Result> a = run_all(batched, reqs, &st);
  EXPECT_EQ(st.peak_running, 4);
  EXPECT_EQ(st.requests, 9);
  ASSERT_EQ(a.size(), 9u);
  int64_t generated = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    RecomputeStepModel alone(m.net, m.ctx(), 1, 24);
    Request r = reqs[i];
    r.id = i;  // the id the batched engine gave it
    Result b = run_all(alone, {r})[0];
    EXPECT_EQ(a[i].id, i);
    EXPECT_EQ(a[i].prompt, reqs[i].prompt);
    EXPECT_EQ(a[i].tokens, b.tokens) << "request " << i;
    EXPECT_EQ(a[i].logprobs, b.logprobs) << "request " << i;
    EXPECT_EQ(a[i].finish, FinishReason::length);
    EXPECT_EQ(static_cast<int64_t>(a[i].tokens.size()), reqs[i].params.max_new_tokens);
    generated += static_cast<int64_t>(a[i].tokens.size());
  }
  EXPECT_EQ(st.decode_tokens, generated);
}

// Draws through extend_and_sample with the CPU reference of ops::sample_rows (on a GPU the kernel
// runs there instead): only the engine's side of the device path is under test, so every result
// must equal the host path's to the bit, top-k / top-p rows falling back to it.
class DrawingStepModel : public StepModel {
 public:
  explicit DrawingStepModel(StepModel& m) : m_(m) {}
  int64_t vocab_size() const override { return m_.vocab_size(); }
  int64_t max_slots() const override { return m_.max_slots(); }
  int64_t max_seq_len() const override { return m_.max_seq_len(); }
  bool can_admit(std::span<const int64_t> totals) const override { return m_.can_admit(totals); }
  void release(int64_t slot) override { m_.release(slot); }
  std::vector<float> extend(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens) override {
    ++host_steps;
    return m_.extend(slots, tokens);
  }
  bool samples_on_device() const override { return true; }
  std::vector<ops::TokenDraw> extend_and_sample(const std::vector<int64_t>& slots,
                                                const std::vector<std::vector<int32_t>>& tokens,
                                                std::span<const ops::RowSampling> rows,
                                                std::span<const int64_t> logits_rows) override {
    ++device_steps;
    std::vector<float> z = m_.extend(slots, tokens);
    if (!logits_rows.empty()) {  // prefix sharing: several draws from one row
      std::vector<float> picked;
      for (int64_t r : logits_rows)
        picked.insert(picked.end(), z.begin() + r * vocab_size(), z.begin() + (r + 1) * vocab_size());
      z = std::move(picked);
    }
    Context ctx{&host_backend(), nullptr, DType::f32};
    return ops::sample_rows(ctx, Tensor::from_vector<float>({static_cast<int64_t>(rows.size()), vocab_size()}, z), rows);
  }
  bool can_fork() const override { return m_.can_fork(); }
  void fork(const std::vector<std::pair<int64_t, int64_t>>& pairs) override { m_.fork(pairs); }
  int host_steps = 0, device_steps = 0;

 private:
  StepModel& m_;
};

TEST(Engine, DrawingWhereTheLogitsAreEqualsTheHostPath) {
  Tiny m;
  for (double temperature : {0.0, 0.8, 1.0}) {
    SamplingParams p;
    p.temperature = temperature;
    const std::vector<Request> reqs = some_requests(7, p);
    RecomputeStepModel host(m.net, m.ctx(), 3, 32), inner(m.net, m.ctx(), 3, 32);
    DrawingStepModel device(inner);
    const std::vector<Result> want = run_all(host, reqs), got = run_all(device, reqs);
    EXPECT_GT(device.device_steps, 0);
    EXPECT_EQ(device.host_steps, 0) << "greedy / temperature-only rows must all be drawn on the device";
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "temperature " << temperature << " request " << i;
      EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "temperature " << temperature << " request " << i;
      EXPECT_EQ(got[i].raw_logprobs, want[i].raw_logprobs) << "temperature " << temperature << " request " << i;
    }
  }
  // One top-p request in the batch sends its steps to the host path.
  SamplingParams p;
  std::vector<Request> reqs = some_requests(3, p);
  reqs[1].params.top_p = 0.9;
  RecomputeStepModel host(m.net, m.ctx(), 3, 32), inner(m.net, m.ctx(), 3, 32);
  DrawingStepModel device(inner);
  const std::vector<Result> want = run_all(host, reqs), got = run_all(device, reqs);
  EXPECT_GT(device.host_steps, 0);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
}

// Prefix sharing on the device path: requests with one prompt draw their first tokens from the
// leader's logits row (extend_and_sample's logits_rows), as the host path without sharing draws.
TEST(Engine, SharedPromptsDrawWhereTheLogitsAreAsTheHostPathWithout) {
  Tiny m;
  SamplingParams p;
  p.temperature = 0.8;
  std::vector<Request> reqs = some_requests(6, p);
  for (size_t i = 1; i < reqs.size(); i += 2) reqs[i].prompt = reqs[i - 1].prompt;  // pairs share a prompt
  RecomputeStepModel host(m.net, m.ctx(), 4, 32), inner(m.net, m.ctx(), 4, 32);
  DrawingStepModel device(inner);
  Engine off(host, nullptr, EngineOptions{false}), on(device);
  for (const Request& r : reqs) off.add(r), on.add(r);
  const std::vector<Result> want = off.run(), got = on.run();
  EXPECT_EQ(device.host_steps, 0);
  EXPECT_GT(on.stats().shared_prefill_tokens, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i;
  }
}

TEST(Engine, FinishedSlotsAreRefilledAtOnce) {
  Tiny m;
  RecomputeStepModel step(m.net, m.ctx(), 2, 24);
  SamplingParams p;
  p.temperature = 0;
  Engine e(step);
  for (int64_t n : {1, 6, 2, 2}) {  // slot 0 frees after 1 step, is refilled, frees again ...
    p.max_new_tokens = n;
    e.add({{1, 2}, p, {}});
  }
  std::vector<uint64_t> order;
  e.run([&](const Result& r, const EngineStats&) { order.push_back(r.id); });
  // Steps: 1 {0,1} -> 0 ends; 2 {2,1}; 3 {2,1} -> 2 ends; 4 {3,1}; 5 {3,1} -> 3 ends; 6 {1} -> 1 ends.
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 2, 3, 1}));
  EXPECT_EQ(e.stats().steps, 6);
}

// Requests arriving one per step while another decodes: without a delay each is prefilled at the
// step after it arrives; with admission_delay_factor (vLLM's scheduler_delay_factor) they wait
// while sequences decode — with a factor no wait reaches, until the running one ends — and are
// then prefilled together in one step.
TEST(Engine, AdmissionDelayPrefillsArrivalsTogether) {
  Tiny m;
  SamplingParams p;
  p.temperature = 0;
  auto first_token_steps = [&](double factor, std::function<bool(bool)> agree = {}) {
    RecomputeStepModel step(m.net, m.ctx(), 4, 24);
    EngineOptions o;
    o.admission_delay_factor = factor;
    o.agree_delay = agree;
    Engine e(step, nullptr, o);
    p.max_new_tokens = 6;
    e.add({{1, 2}, p, {}});
    int steps = 0;
    std::map<uint64_t, int> first;  // request id -> the step that drew its first token
    RunHooks h;
    h.before_step = [&] {
      ++steps;
      if (steps == 2 || steps == 3) {
        p.max_new_tokens = 2;
        e.add({{3, 4, 5}, p, {}});
      }
    };
    h.on_token = [&](const Result& r, std::span<const float>) {
      if (r.tokens.size() == 1) first[r.id] = steps;
      return true;
    };
    e.run({}, h);
    return first;
  };
  EXPECT_EQ(first_token_steps(0), (std::map<uint64_t, int>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(first_token_steps(1e9), (std::map<uint64_t, int>{{0, 1}, {1, 7}, {2, 7}}));
  // Lockstep (tensor parallelism): the decision agree_delay returns (rank 0's) is the one followed,
  // whatever this engine's clock says; it is asked only at steps that weigh a delay.
  int asked = 0;
  EXPECT_EQ(first_token_steps(1e9, [&](bool mine) { return ++asked, mine && false; }),
            (std::map<uint64_t, int>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(asked, 2);  // steps 2 and 3, each with one request queued
  EXPECT_EQ(first_token_steps(1e-30, [](bool) { return true; }), (std::map<uint64_t, int>{{0, 1}, {1, 7}, {2, 7}}));
}

TEST(Engine, StopTokensAndMaxSeqLen) {
  Tiny m;
  SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = 8;
  RecomputeStepModel step(m.net, m.ctx(), 2, 64);
  Result free_run = run_all(step, {{{4, 5, 6}, p, {}}})[0];
  ASSERT_EQ(free_run.tokens.size(), 8u);
  p.stop_token_ids = {free_run.tokens[2], 999};
  Result stopped = run_all(step, {{{4, 5, 6}, p, {}}})[0];
  const size_t first = std::find(free_run.tokens.begin(), free_run.tokens.end(), free_run.tokens[2]) -
                       free_run.tokens.begin();
  EXPECT_EQ(stopped.finish, FinishReason::stop_token);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + first + 1));

  p.stop_token_ids.clear();
  RecomputeStepModel short_model(m.net, m.ctx(), 2, 6);  // 3 prompt tokens: 3 generated at most
  Result cut = run_all(short_model, {{{4, 5, 6}, p, {}}})[0];
  EXPECT_EQ(cut.finish, FinishReason::max_seq_len);
  EXPECT_EQ(cut.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + 3));
}

TEST(Engine, StopStringsCutTheTextAndEndTheSequence) {
  data::Tokenizer tok = data::Tokenizer::load(
      (nemotron::testing::source_root() / "tests" / "fixtures" / "hf" / "dense" / "tokenizer.json").string());
  Tiny m(tok.vocab_size());
  RecomputeStepModel step(m.net, m.ctx(), 2, 64);
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 5;
  p.max_new_tokens = 24;
  std::vector<int32_t> prompt = tok.encode("Hello world");
  Engine free_engine(step, &tok);
  free_engine.add({prompt, p, {}});
  Result free_run = free_engine.run()[0];
  EXPECT_EQ(free_run.text, tok.decode(free_run.tokens, true));
  ASSERT_GE(free_run.text.size(), 6u) << "the random model's text is too short to cut";
  const std::string stop = free_run.text.substr(free_run.text.size() / 2, 2);
  const size_t at = free_run.text.find(stop);
  p.stop = {stop, "never-in-this-text"};
  Engine e(step, &tok);
  e.add({prompt, p, {}});
  Result r = e.run()[0];
  EXPECT_EQ(r.finish, FinishReason::stop_string);
  EXPECT_EQ(r.text, free_run.text.substr(0, at));
  ASSERT_LE(r.tokens.size(), free_run.tokens.size());
  EXPECT_EQ(r.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + r.tokens.size()));
  // The last token completed the stop string: without it the text does not hold it yet.
  std::vector<int32_t> shorter(r.tokens.begin(), r.tokens.end() - 1);
  EXPECT_EQ(tok.decode(shorter, true).find(stop), std::string::npos);
  EXPECT_NE(tok.decode(r.tokens, true).find(stop), std::string::npos);
}

// A model whose launch_and_sample only records the step and whose collect_draws computes it (as a
// GPU step is done only when collected): async scheduling must not read a step's draws early.
class LaunchingStepModel : public DrawingStepModel {
 public:
  using DrawingStepModel::DrawingStepModel;
  void launch_and_sample(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                         std::span<const ops::RowSampling> rows, std::span<const int64_t> logits_rows) override {
    EXPECT_FALSE(in_flight) << "a step launched while another is in flight";
    in_flight = true;
    slots_ = slots, tokens_ = tokens;
    rows_.assign(rows.begin(), rows.end()), logits_rows_.assign(logits_rows.begin(), logits_rows.end());
  }
  std::vector<ops::TokenDraw> collect_draws() override {
    EXPECT_TRUE(in_flight) << "collect without a launch";
    in_flight = false;
    return extend_and_sample(slots_, tokens_, rows_, logits_rows_);
  }
  bool in_flight = false;

 private:
  std::vector<int64_t> slots_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<ops::RowSampling> rows_;
  std::vector<int64_t> logits_rows_;
};

// Async scheduling (the hooks of a step's tokens run while the next step is in flight) gives the
// results, texts and on_token calls of the engine that runs them at once: with refills, stop
// strings, shared prompts, a request cancelled from on_token (it ends with the tokens its hooks
// saw) and one that wants its logits row (a host step).
TEST(Engine, AsyncSchedulingGivesTheResultsAndHookCallsOfTheSyncEngine) {
  data::Tokenizer tok = data::Tokenizer::load(
      (nemotron::testing::source_root() / "tests" / "fixtures" / "hf" / "dense" / "tokenizer.json").string());
  Tiny m(tok.vocab_size());
  SamplingParams p;
  p.temperature = 1.0;
  std::vector<Request> reqs;
  for (int i = 0; i < 9; ++i) {
    Request r;
    r.prompt = tok.encode(i % 3 == 2 ? "Hello world" : "The answer is " + std::to_string(i));
    r.params = p;
    r.params.seed = 7 + static_cast<uint64_t>(i);
    r.params.max_new_tokens = 4 + (i * 5) % 9;
    r.wants_logits = i == 7;
    reqs.push_back(r);
  }
  {  // request 4 stops at two characters from the middle of its text without a stop string
    RecomputeStepModel step(m.net, m.ctx(), 3, 64);
    Engine e(step, &tok);
    for (const Request& r : reqs) e.add(r);
    const std::string text = e.run()[4].text;
    ASSERT_GE(text.size(), 6u) << "the random model's text is too short to cut";
    reqs[4].params.stop = {text.substr(text.size() / 2, 2)};
  }
  struct Seen {
    std::vector<std::string> texts;  // per on_token call of the request
    std::vector<bool> rows;          // whether it got a logits row
  };
  struct Run {
    std::vector<Result> results;
    std::map<uint64_t, Seen> seen;
    std::vector<uint64_t> finished;
    int overlapped = 0;  // on_token calls made while a step was in flight
  };
  auto run = [&](bool async) {
    RecomputeStepModel inner(m.net, m.ctx(), 3, 64);
    LaunchingStepModel model(inner);
    EngineOptions o;
    o.async_scheduling = async;
    Engine e(model, &tok, o);
    for (const Request& r : reqs) e.add(r);
    Run out;
    RunHooks h;
    h.on_token = [&](const Result& r, std::span<const float> row) {
      Seen& s = out.seen[r.id];
      s.texts.push_back(r.text);
      s.rows.push_back(!row.empty());
      out.overlapped += model.in_flight;
      return !(r.id == 1 && r.tokens.size() == 3);  // the client of request 1 leaves at its third token
    };
    out.results = e.run([&](const Result& r, const EngineStats&) { out.finished.push_back(r.id); }, h);
    EXPECT_GT(model.host_steps, 0) << "request 7 wants its logits: its steps bring them back";
    EXPECT_GT(e.stats().hook_seconds, 0);
    EXPECT_EQ(inner.max_slots(), 3);
    return out;
  };
  const Run sync = run(false), async = run(true);
  EXPECT_EQ(sync.overlapped, 0);
  EXPECT_GT(async.overlapped, 20) << "the hooks must run while the next step is in flight";
  ASSERT_EQ(sync.results.size(), reqs.size());
  ASSERT_EQ(async.results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Result &a = sync.results[i], &b = async.results[i];
    EXPECT_EQ(a.tokens, b.tokens) << "request " << i;
    EXPECT_EQ(a.logprobs, b.logprobs) << "request " << i;
    EXPECT_EQ(a.text, b.text) << "request " << i;
    EXPECT_EQ(a.finish, b.finish) << "request " << i;
    EXPECT_EQ(sync.seen.at(i).rows, async.seen.at(i).rows) << "request " << i;
    EXPECT_EQ(sync.seen.at(i).texts, async.seen.at(i).texts) << "request " << i;
    EXPECT_EQ(sync.seen.at(i).texts.size(), a.tokens.size()) << "request " << i << ": one on_token per token";
    EXPECT_EQ(async.seen.at(i).texts.size(), b.tokens.size()) << "request " << i << ": one on_token per token";
    EXPECT_EQ(async.seen.at(i).texts.back(), b.text) << "request " << i << ": the last call sees the final text";
  }
  EXPECT_EQ(sync.results[1].finish, FinishReason::cancelled);
  EXPECT_EQ(sync.results[1].tokens.size(), 3u);
  EXPECT_EQ(sync.results[4].finish, FinishReason::stop_string);
  EXPECT_EQ(sync.seen.at(7).rows, std::vector<bool>(sync.results[7].tokens.size(), true));
  std::vector<uint64_t> a = sync.finished, b = async.finished;
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), reqs.size());
}

TEST(Engine, RequestsWithoutMemoryWaitInTheQueue) {
  Tiny m;
  SamplingParams p;
  p.temperature = 0.7;
  p.max_new_tokens = 4;
  std::vector<Request> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back({{i + 1, 2 * i + 1, 3, 4}, p, {}});  // 8 tokens each at most
  RecomputeStepModel roomy(m.net, m.ctx(), 3, 24);
  std::vector<Result> want = run_all(roomy, reqs);
  // The recompute model counts the tokens its slots hold: room for one such sequence at a time,
  // though three slots are free.
  RecomputeStepModel tight(m.net, m.ctx(), 3, 24, /*max_total_tokens=*/8);
  EngineStats st;
  std::vector<Result> got = run_all(tight, reqs, &st);
  EXPECT_EQ(st.peak_running, 1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens);
    EXPECT_EQ(got[i].logprobs, want[i].logprobs);
  }
  // A request that can never fit is an error, not a hang.
  RecomputeStepModel tiny_pool(m.net, m.ctx(), 3, 24, 4);
  Engine e(tiny_pool);
  e.add({{1, 2, 3}, p, {}});
  EXPECT_THROW(e.run(), InputError);
}

TEST(Engine, BadRequestsAreInputErrors) {
  Tiny m;
  RecomputeStepModel step(m.net, m.ctx(), 2, 8);
  Engine e(step);
  SamplingParams p;
  EXPECT_THROW(e.add({{}, p, {}}), InputError);                         // empty prompt
  EXPECT_THROW(e.add({{1, 23}, p, {}}), InputError);                    // outside the vocabulary
  EXPECT_THROW(e.add({{1, 2, 3, 4, 5, 6, 7, 8}, p, {}}), InputError);   // no room below max_seq_len
  p.max_new_tokens = 0;
  EXPECT_THROW(e.add({{1}, p, {}}), InputError);
  p.max_new_tokens = 2;
  p.stop = {"x"};
  EXPECT_THROW(e.add({{1}, p, {}}), InputError);  // stop strings without a tokenizer
}

}  // namespace
}  // namespace nemotron::engine
