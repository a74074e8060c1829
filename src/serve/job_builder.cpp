#include "serve/job_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "data/prompt_encoding.h"
#include "serve/api_error.h"

namespace nemotron::serve {

namespace {

engine::SamplingParams sampling(const ServedModel& m, const SamplingFields& f, int64_t max_tokens,
                                const std::vector<int32_t>& stop_ids) {
  engine::SamplingParams p;
  for (const auto& [id, bias] : f.logit_bias)
    if (id >= m.vocab_size)
      throw bad_request(fmt::format("'logit_bias': token id {} is outside the vocabulary [0, {})", id, m.vocab_size),
                        "logit_bias");
  p.logit_bias = f.logit_bias;
  p.presence_penalty = f.presence_penalty;
  p.frequency_penalty = f.frequency_penalty;
  p.temperature = f.temperature;
  p.top_p = f.top_p;
  p.top_k = f.top_k < 0 ? 0 : f.top_k;
  p.max_new_tokens = max_tokens;
  p.stop = f.stop;
  if (!f.ignore_eos) p.stop_token_ids = stop_ids;
  if (f.seed) {
    p.seed = *f.seed;
  } else {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    p.seed = rng();
  }
  return p;
}

[[noreturn]] void too_long(const ServedModel& m, int64_t prompt, int64_t max_tokens, const char* what) {
  throw ApiError(400,
                 fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in "
                             "the {}, {} in the completion). Please reduce the length of the {} or completion.",
                             m.max_model_len, prompt + max_tokens, prompt, what, max_tokens, what),
                 "invalid_request_error", what == std::string("messages") ? "messages" : "prompt",
                 "context_length_exceeded");
}

// Refuses a prompt of `bytes` bytes that cannot fit in the context whatever its tokens, before
// the tokenizer spends seconds and gigabytes on it.
void check_prompt_bytes(const ServedModel& m, size_t bytes, const char* what) {
  if (m.max_token_bytes <= 0 || static_cast<int64_t>(bytes) <= m.max_model_len * m.max_token_bytes) return;
  throw ApiError(400,
                 fmt::format("This model's maximum context length is {} tokens. However, the {} is {} bytes, more than "
                             "{} tokens can hold (a token stands for at most {} bytes). Please reduce the length of "
                             "the {}.",
                             m.max_model_len, what, bytes, m.max_model_len, m.max_token_bytes, what),
                 "invalid_request_error", what == std::string("messages") ? "messages" : "prompt",
                 "context_length_exceeded");
}

// The conversation as the model reads it: the template with its generation prompt.
std::string render(const ServedModel& m, const data::OrderedJson& messages, const data::OrderedJson& tools,
                   bool enable_thinking, bool add_generation_prompt) {
  data::ChatRenderOptions opt;
  opt.add_generation_prompt = add_generation_prompt;
  opt.enable_thinking = enable_thinking;
  try {
    return data::render_chat(m.chat_format, messages, tools, opt);
  } catch (const data::ChatTemplateError& e) {
    throw bad_request(fmt::format("'messages': {}", e.what()), "messages");
  }
}

size_t holdback(const std::vector<std::string>& stop) {
  size_t longest = 0;
  for (const std::string& s : stop) longest = std::max(longest, s.size());
  return longest > 0 ? longest - 1 : 0;
}

}  // namespace

int64_t longest_token_bytes(const data::Tokenizer& tok) {
  int64_t most = 1;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const std::optional<std::string> s = tok.id_to_token(id);
    if (!s) continue;
    const int32_t one[] = {id};
    most = std::max<int64_t>(most, static_cast<int64_t>(std::max(s->size(), tok.decode(one).size())));
  }
  return most;
}

void check_model(const ServedModel& m, const std::string& requested) {
  if (!requested.empty() && requested != m.name)
    throw ApiError(404, fmt::format("The model '{}' does not exist (this server serves '{}').", requested, m.name),
                   "invalid_request_error", "model", "model_not_found");
}

PreparedRequest prepare_completion(const ServedModel& m, const CompletionRequest& r) {
  check_model(m, r.model);
  PreparedRequest out;
  out.stop_holdback = holdback(r.stop);
  const int64_t max_tokens = r.max_tokens.value_or(16);
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    std::vector<int32_t> ids;
    std::string text;
    if (const auto* s = std::get_if<std::string>(&r.prompts[i])) {
      check_prompt_bytes(m, s->size(), "prompt");
      ids = data::encode_prompt(*m.tok, *s);
      text = *s;
      if (ids.empty()) throw bad_request(fmt::format("'prompt': prompt {} encodes to no tokens", i), "prompt");
    } else {
      ids = std::get<std::vector<int32_t>>(r.prompts[i]);
      if (static_cast<int64_t>(ids.size()) > m.max_model_len) too_long(m, static_cast<int64_t>(ids.size()), max_tokens, "prompt");
      for (int32_t t : ids)
        if (t >= m.vocab_size)
          throw bad_request(fmt::format("'prompt': token id {} is outside the vocabulary [0, {})", t, m.vocab_size),
                            "prompt");
      text = m.tok->decode(ids, /*skip_special_tokens=*/false);
    }
    const auto n_prompt = static_cast<int64_t>(ids.size());
    // The engine needs one free position to generate into; echo with max_tokens 0 only scores.
    if (n_prompt + max_tokens > m.max_model_len || (max_tokens > 0 && n_prompt >= m.max_model_len))
      too_long(m, n_prompt, max_tokens, "prompt");
    out.prompt_tokens += n_prompt;
    for (int64_t j = 0; j < r.n; ++j) {
      PreparedChoice c;
      c.index = static_cast<int64_t>(i) * r.n + j;
      c.prompt_index = static_cast<int64_t>(i);
      c.prompt_text = text;
      c.job.prompt = ids;
      c.job.params = sampling(m, r, max_tokens, m.stop_token_ids);
      c.job.stream_id = static_cast<uint64_t>(j);
      c.job.top_logprobs = r.logprobs ? *r.logprobs : -1;
      c.job.score_prompt = r.echo && r.logprobs.has_value();
      out.choices.push_back(std::move(c));
    }
  }
  return out;
}

PreparedRequest prepare_chat(const ServedModel& m, const ChatRequest& r) {
  check_model(m, r.model);
  PreparedRequest out;
  out.parse_tool_calls = r.tool_choice.mode != ToolChoice::Mode::none;
  out.named_tool = r.tool_choice.mode == ToolChoice::Mode::named;
  out.max_tool_calls = r.parallel_tool_calls ? 0 : 1;
  out.tools = r.tools;
  out.forced_prefix = forced_call_prefix(r.tool_choice, r.tools);
  // Forcing writes nano3's call opening after the generation prompt: known for the built-in only
  // (a Jinja template's call syntax is whatever it renders).
  if (!out.forced_prefix.empty() && m.chat_format.builtin() != data::ChatFormat::nano3)
    throw bad_request(fmt::format("'tool_choice': forcing a call needs the built-in nano3 chat template's <tool_call> "
                                  "form; this server renders with {}",
                                  m.chat_format.name()),
                      "tool_choice");
  std::string text = render(m, r.messages, r.tools, r.enable_thinking, true);
  if (!out.forced_prefix.empty()) {
    // A call comes after the reasoning: a thinking generation prompt's <think> is closed first.
    if (r.enable_thinking) text += "</think>\n";
    text += out.forced_prefix;
    if (r.tool_choice.mode == ToolChoice::Mode::required && r.tools.size() > 1)
      for (const data::OrderedJson& t : r.tools) out.tool_names_to_choose.push_back(t["function"]["name"]);
  }
  // The rendered text, not the messages: a template may drop parts of them (earlier reasoning).
  check_prompt_bytes(m, text.size(), "messages");
  const std::vector<int32_t> ids = m.tok->encode(text, /*add_special_tokens=*/false);
  if (ids.empty()) throw bad_request("'messages': the rendered conversation encodes to no tokens", "messages");
  const auto n_prompt = static_cast<int64_t>(ids.size());
  const int64_t max_tokens = r.max_tokens.value_or(std::max<int64_t>(m.max_model_len - n_prompt, 1));
  if (n_prompt + max_tokens > m.max_model_len) too_long(m, n_prompt, max_tokens, "messages");
  out.stop_holdback = holdback(r.stop);
  out.prompt_tokens = n_prompt;
  for (int64_t j = 0; j < r.n; ++j) {
    PreparedChoice c;
    c.index = j;
    c.prompt_text = text;
    c.job.prompt = ids;
    c.job.params = sampling(m, r, max_tokens, m.chat_stop_token_ids);
    c.job.stream_id = static_cast<uint64_t>(j);
    c.job.top_logprobs = r.logprobs ? r.top_logprobs : -1;
    out.choices.push_back(std::move(c));
  }
  return out;
}

void force_likeliest_tool(EngineWorker& worker, const ServedModel& m, PreparedRequest& p) {
  if (p.tool_names_to_choose.empty() || p.choices.empty()) return;
  const std::string& text = p.choices[0].prompt_text;  // every choice has the same prompt
  const std::vector<int32_t>& base = p.choices[0].job.prompt;
  std::vector<std::shared_ptr<Generation>> scored;
  std::vector<std::vector<int32_t>> candidates;
  for (const std::string& name : p.tool_names_to_choose) {
    GenerationJob job;
    job.prompt = m.tok->encode(text + name + ">\n", /*add_special_tokens=*/false);
    job.params.max_new_tokens = 0;  // only score the prompt
    job.top_logprobs = 0;
    job.score_prompt = true;
    candidates.push_back(job.prompt);
    scored.push_back(worker.submit(std::move(job)));
  }
  size_t best = 0;
  double best_logprob = -INFINITY;
  for (size_t i = 0; i < scored.size(); ++i) {
    GenerationState st = scored[i]->wait(0);
    while (!st.finished) st = scored[i]->wait(0);
    if (!st.error.empty()) throw ApiError(st.error_status, st.error, "server_error");
    // The name's tokens: those after the longest common prefix with the prompt (a merge across
    // the boundary re-tokenizes the prompt's last token; it is then scored with the name).
    size_t common = 0;
    while (common < base.size() && common < candidates[i].size() && base[common] == candidates[i][common]) ++common;
    double logprob = 0;
    for (size_t t = std::max<size_t>(common, 1); t < st.prompt_logprobs.size(); ++t)
      logprob += st.prompt_logprobs[t].logprob;
    if (logprob > best_logprob) best = i, best_logprob = logprob;
  }
  const std::string suffix = p.tool_names_to_choose[best] + ">\n";
  const auto n_prompt = static_cast<int64_t>(candidates[best].size());
  if (n_prompt >= m.max_model_len) too_long(m, n_prompt, 1, "messages");
  p.forced_prefix += suffix;
  p.prompt_tokens = n_prompt;
  for (PreparedChoice& c : p.choices) {
    c.prompt_text += suffix;
    c.job.prompt = candidates[best];
    c.job.params.max_new_tokens = std::min(c.job.params.max_new_tokens, m.max_model_len - n_prompt);
  }
  p.tool_names_to_choose.clear();
}

std::vector<int32_t> tokenize(const ServedModel& m, const TokenizeRequest& r) {
  check_model(m, r.model);
  if (!r.chat) {
    check_prompt_bytes(m, r.prompt.size(), "prompt");
    return r.add_special_tokens ? data::encode_prompt(*m.tok, r.prompt) : m.tok->encode(r.prompt);
  }
  const std::string text = render(m, r.messages, r.tools, r.enable_thinking, r.add_generation_prompt);
  check_prompt_bytes(m, text.size(), "messages");
  return m.tok->encode(text, /*add_special_tokens=*/false);
}

}  // namespace nemotron::serve
