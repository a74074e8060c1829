// `nemotron compare`: runs our model on a Hugging Face checkpoint and prints what transformers
// would report for the same input: the mean next-token loss (labels = inputs shifted by one, as
// transformers computes `loss` with labels=input_ids) and the most likely next tokens. --dump writes
// logits (and with --grads every parameter's gradient of that loss) for comparison elsewhere;
// --reference compares with such a file (e.g. written by tools/make_hf_fixtures.py) and gives a
// verdict. --prompt tokenizes with the checkpoint's tokenizer.json (special tokens added as
// transformers' tokenizer(text) does). The counterpart of Megatron-Bridge's
// compare_hf_and_megatron/compare.py.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>

#include "backend/cpu/parallel.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "io/safetensors.h"
#include "model/hf_checkpoint.h"
#include "model/hybrid_model.h"
#include "train/train_step.h"

namespace nemotron::cli {

namespace {

struct CompareOptions {
  std::string hf_model, prompt, input_ids, dump, reference, dtype = "float64";
  bool grads = false;
  std::optional<double> logits_tol, grads_tol;  // unset = the default for the dtype; 0 = exact
  int top = 5;
};

// A tolerance as the user gave it: finite and >= 0 (0 asks for an exact match). A typo such as
// "-1e-4" or "nan" must not silently become the default and print PASS.
void check_tolerance(const char* flag, const std::optional<double>& tol) {
  if (tol && !(std::isfinite(*tol) && *tol >= 0))
    throw InputError(fmt::format("{}: expected a relative error >= 0 (0 = exact match), got {}", flag, *tol));
}

std::string tolerance_text(double tol) { return tol == 0 ? "0 (exact)" : fmt::format("{:.0e}", tol); }

// input_ids [B, T] from a safetensors file (other tensors ignored), checked against the vocabulary.
Tensor read_input_ids(const std::string& path, int64_t vocab) {
  io::SafetensorsFile f = io::SafetensorsFile::open(path);
  const io::StTensorInfo* info = f.find("input_ids");
  if (!info) throw InputError(fmt::format("{}: no tensor \"input_ids\" (expected int64 input_ids [B, T])", path));
  if (info->shape.rank() != 2 || info->shape[0] < 1 || info->shape[1] < 2)
    throw InputError(
        fmt::format("{}: input_ids has shape {}, expected [B, T] with B >= 1 and T >= 2", path, info->shape.str()));
  Tensor ids = f.load("input_ids", DType::i64);  // an InputError for a float tensor
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab)
      throw InputError(fmt::format("{}: input_ids[{}, {}] = {} is outside the vocabulary [0, {})", path,
                                   i / info->shape[1], i % info->shape[1], p[i], vocab));
  return ids;
}

// The prompt's ids [1, T] with the directory's tokenizer.json.
Tensor encode_prompt(const data::Tokenizer& tok, const std::string& prompt, int64_t vocab) {
  std::vector<int32_t> ids = tok.encode(prompt, /*add_special_tokens=*/true);
  if (ids.size() < 2)
    throw InputError(fmt::format("--prompt: \"{}\" is {} token{}; the next-token loss needs at least 2", prompt,
                                 ids.size(), ids.size() == 1 ? "" : "s"));
  std::vector<int64_t> wide(ids.begin(), ids.end());
  for (int64_t id : wide)
    if (id >= vocab)
      throw InputError(
          fmt::format("--prompt: token id {} is outside the model's vocabulary [0, {}) (a tokenizer of "
                      "another model?)",
                      id, vocab));
  return Tensor::from_vector<int64_t>({1, static_cast<int64_t>(wide.size())}, wide);
}

// A token as the user reads it: its decoded text, quoted, with control characters escaped; a
// token that is part of a UTF-8 character (decoding to U+FFFD) as its vocabulary entry in <>.
std::string shown(const data::Tokenizer& tok, int64_t id) {
  const int32_t one[] = {static_cast<int32_t>(id)};
  std::string text = tok.decode(one), out = "\"";
  if (text.find("\xEF\xBF\xBD") != std::string::npos) return "<" + tok.id_to_token(one[0]).value_or("?") + ">";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c == '\n')
      out += "\\n";
    else if (c < 0x20)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

struct Diff {
  double max_abs = 0, rel = 0;
};
Diff diff(const std::vector<double>& ours, const std::vector<double>& ref) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    double e = ours[i] - ref[i];
    d.max_abs = std::max(d.max_abs, std::fabs(e));
    num += e * e;
    den += ref[i] * ref[i];
  }
  d.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

void run_compare(const CompareOptions& o) {
  if (o.prompt.empty() == o.input_ids.empty())
    throw InputError("compare: give exactly one of --prompt TEXT and --input-ids FILE");
  check_tolerance("--logits-tol", o.logits_tol);
  check_tolerance("--grads-tol", o.grads_tol);
  const DType dt = o.dtype == "float32" ? DType::f32 : DType::f64;
  model::HfCheckpoint ck = model::HfCheckpoint::open(o.hf_model);
  const model::ModelConfig& cfg = ck.config();
  const std::string tok_path = o.hf_model + "/tokenizer.json";
  std::optional<data::Tokenizer> tok;
  if (std::filesystem::exists(tok_path)) {
    tok = data::Tokenizer::load(tok_path);
  } else if (!o.prompt.empty()) {
    throw InputError(
        fmt::format("{}: no tokenizer.json to encode --prompt with; pass --input-ids FILE (safetensors "
                    "with int64 input_ids [B, T])",
                    o.hf_model));
  }
  Tensor ids =
      o.prompt.empty() ? read_input_ids(o.input_ids, cfg.vocab_size) : encode_prompt(*tok, o.prompt, cfg.vocab_size);
  const int64_t B = ids.dim(0), T = ids.dim(1), V = cfg.vocab_size;

  model::HybridModel net(cfg, host_backend(), dt);
  ck.load_into(net.params());
  std::printf("model: %s (%s layout, %s), %lld layers \"%s\", %lld parameters; computing in %s on %d CPU threads\n",
              o.hf_model.c_str(), model::hf_layout_name(ck.layout()), ck.dtype_summary().c_str(),
              static_cast<long long>(cfg.num_layers()), cfg.hybrid_override_pattern.c_str(),
              static_cast<long long>(net.params().numel()), dtype_name(dt), cpu::num_threads());
  for (const std::string& n : ck.notes()) std::printf("note: %s\n", n.c_str());
  if (o.prompt.empty()) {
    std::printf("input: %s: input_ids [%lld, %lld]\n", o.input_ids.c_str(), static_cast<long long>(B),
                static_cast<long long>(T));
  } else {
    std::string list;
    for (int64_t t = 0; t < T; ++t) list += fmt::format("{}{}", t ? ", " : "", ids.data<int64_t>()[t]);
    std::printf("prompt: %lld tokens (%s): [%s]\n", static_cast<long long>(T), tok_path.c_str(), list.c_str());
  }

  Context ctx{&host_backend(), nullptr, dt};
  Tensor logits = net.logits(ctx, ids);
  std::vector<int64_t> labels(static_cast<size_t>(B * T));
  const int64_t* id = ids.data<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) labels[b * T + t] = t + 1 < T ? id[b * T + t + 1] : -100;
  model::Batch batch{ids, Tensor::from_vector<int64_t>({B, T}, labels), Tensor()};
  const double count = static_cast<double>(B * (T - 1));
  train::LossSum loss = o.grads ? train::cross_entropy_backward(ctx, net, batch, 1.0 / count)
                                : train::cross_entropy_loss(ctx, net, batch);
  std::printf("mean next-token loss: %.6f over %lld tokens (perplexity %.3f)\n", loss.mean(),
              static_cast<long long>(loss.token_count), std::exp(loss.mean()));

  // The most likely next tokens after the last position of each sequence (the first four shown).
  std::vector<double> lg = logits.to_f64_vector();
  for (int64_t b = 0; b < std::min<int64_t>(B, 4); ++b) {
    const double* row = lg.data() + (b * T + T - 1) * V;
    double mx = *std::max_element(row, row + V), z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    int k = std::min<int>(o.top, static_cast<int>(V));
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t c) { return row[a] > row[c]; });
    std::printf("next token after position %lld of sequence %lld:", static_cast<long long>(T - 1),
                static_cast<long long>(b));
    std::printf("\n");
    for (int i = 0; i < k; ++i)
      std::printf("  %d. %6lld  p = %.4f  %s\n", i + 1, static_cast<long long>(order[i]),
                  std::exp(row[order[i]] - mx) / z, tok ? shown(*tok, order[i]).c_str() : "");
  }

  if (!o.dump.empty()) {
    std::vector<io::NamedTensor> out = {{"input_ids", ids},
                                        {"logits", logits.to_host(DType::f32)},
                                        {"loss", Tensor::from_vector<double>({}, {loss.mean()})}};
    if (o.grads)
      for (const model::Param* p : net.params().all())
        if (p->requires_grad) out.push_back({"grad." + p->name, p->grad});
    io::save_safetensors(o.dump, out, {{"format", "pt"}});
    std::printf("wrote %s: logits float32 [%lld, %lld, %lld]%s\n", o.dump.c_str(), static_cast<long long>(B),
                static_cast<long long>(T), static_cast<long long>(V),
                o.grads ? fmt::format(" and the gradients (grad.<name>, {})", dtype_name(dt)).c_str() : "");
  }

  if (o.reference.empty()) return;
  io::SafetensorsFile ref = io::SafetensorsFile::open(o.reference);
  const double tol_logits = o.logits_tol.value_or(dt == DType::f64 ? 1e-4 : 1e-3);
  const double tol_grads = o.grads_tol.value_or(dt == DType::f64 ? 1e-3 : 1e-2);
  int failures = 0, compared = 0, missing = 0;  // failures counts compared tensors only
  std::printf("\ncomparison with %s (relative error = ||ours - ref||_F / ||ref||_F):\n", o.reference.c_str());
  std::printf("%-60s  %-16s  %10s  %10s  %8s\n", "tensor", "shape", "max abs", "relative", "");
  auto row = [&](const std::string& name, const Tensor& ours, double tol) {
    const io::StTensorInfo* info = ref.find(name);
    if (!info) return false;
    std::string verdict;
    Diff d;
    if (info->shape != ours.shape()) {
      verdict = fmt::format("FAIL: reference shape {}", info->shape.str());
      ++failures;
    } else {
      d = diff(ours.to_f64_vector(), ref.load(name, DType::f64).to_f64_vector());
      bool ok = d.rel <= tol;  // <=: a tolerance of 0 passes an exact match; NaN never passes
      verdict = ok ? "ok" : fmt::format("FAIL (tolerance {})", tolerance_text(tol));
      failures += !ok;
    }
    ++compared;
    std::printf("%-60s  %-16s  %10.3e  %10.3e  %s\n", name.c_str(), ours.shape().str().c_str(), d.max_abs, d.rel,
                verdict.c_str());
    return true;
  };
  if (!row("logits", logits, tol_logits)) {
    std::printf("%-60s  the reference has no logits\n", "logits");
    ++missing;
  }
  row("loss", Tensor::from_vector<double>({}, {loss.mean()}), tol_logits);
  if (o.grads) {
    int missing_grads = 0;
    for (const model::Param* p : net.params().all())
      if (p->requires_grad && !row("grad." + p->name, p->grad, tol_grads)) ++missing_grads;
    if (missing_grads) std::printf("%d gradient(s) have no reference\n", missing_grads);
    missing += missing_grads;
  }
  const bool pass = failures == 0 && missing == 0;
  std::printf("verdict: %s (%d tensors compared, %d failed%s; tolerances: logits %s, gradients %s)\n",
              pass ? "PASS" : "FAIL", compared, failures,
              missing ? fmt::format(", {} missing from the reference", missing).c_str() : "",
              tolerance_text(tol_logits).c_str(), tolerance_text(tol_grads).c_str());
  std::fflush(stdout);
  if (!pass)
    throw Error(fmt::format("compare: {} of {} tensors differ from {}{}", failures, compared, o.reference,
                            missing ? fmt::format("; {} have no reference", missing) : ""));
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* c = app.add_subcommand(
      "compare", "Run our model on a Hugging Face checkpoint: loss, top next tokens, dumps and a reference check");
  c->add_option("--hf-model", o->hf_model, "Hugging Face model directory")->required();
  c->add_option("--prompt", o->prompt, "Text to run (tokenized with the model's tokenizer.json)");
  c->add_option("--input-ids", o->input_ids, "Safetensors file with int64 input_ids [B, T] (other tensors ignored)");
  c->add_option("--dump", o->dump, "Write logits (float32 [B, T, V]), loss and input_ids here (safetensors)");
  c->add_flag("--grads", o->grads, "Also compute (and dump / compare) every parameter's gradient of the mean loss");
  c->add_option("--dtype", o->dtype, "Compute dtype")->check(CLI::IsMember({"float64", "float32"}));
  c->add_option("--reference", o->reference, "Compare with a dump of the same form (e.g. from transformers)");
  c->add_option("--logits-tol", o->logits_tol,
                "Relative error allowed for logits and loss, >= 0 (default 1e-4 in float64, 1e-3 in float32; "
                "0 = exact)");
  c->add_option("--grads-tol", o->grads_tol,
                "Relative error allowed per gradient, >= 0 (default 1e-3 in float64, 1e-2 in float32; 0 = exact)");
  c->add_option("--top", o->top, "How many next tokens to show")->check(CLI::PositiveNumber);
  c->callback([o] { run_compare(*o); });
}

}  // namespace nemotron::cli
