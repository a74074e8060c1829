#include "train/train_config.h"

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/split.h"

namespace nemotron::train {

using nlohmann::json;

namespace {

// `dataset:` is Bridge's name, `data:` the one the super3 recipes use; both are accepted, and a key
// given in both is a conflict.
class DatasetReader {
 public:
  explicit DatasetReader(ConfigReader& root) : a_(root.section("dataset")), b_(root.section("data")) {}
  ConfigReader& at(const std::string& key) {
    const bool in_a = a_.has(key), in_b = b_.has(key);
    if (in_a && in_b) b_.fail(key, fmt::format("given in both dataset: and data: (keep one)"));
    return in_b ? b_ : a_;
  }
  std::string key_path(const std::string& key) { return at(key).key_path(key); }

 private:
  ConfigReader &a_, &b_;
};

void read_dataset(ConfigReader& root, PretrainConfig& c) {
  DatasetReader d(root);
  DatasetSection& s = c.dataset;
  if (!d.at("seq_length").has("seq_length"))
    root.section("dataset").fail("seq_length", "missing (tokens per training sequence)");
  s.seq_length = d.at("seq_length").get_positive_int("seq_length", 0);
  if (s.seq_length < 2)  // what Megatron's GPTDataset (data/gpt_dataset.cpp) needs; the same for mock data
    d.at("seq_length").fail("seq_length", fmt::format("expected an integer >= 2, got {}", s.seq_length));
  s.mock = d.at("mock").get_bool("mock", false);
  s.blend = d.at("blend").get_raw("blend");
  if (s.has_blend()) {  // the data layer parses it strictly; here only its shape
    bool ok = s.blend.is_string() || (s.blend.is_array() && !s.blend.empty());
    for (const json& e : s.blend.is_array() ? s.blend : json::array()) ok = ok && (e.is_string() || e.is_number());
    if (!ok)
      d.at("blend").fail("blend", "expected a list [weight, prefix, ...] or [prefix, ...], or one string, got " +
                                      describe_value(s.blend));
  }
  s.per_split_data_args_path = d.at("per_split_data_args_path").get_string("per_split_data_args_path", "");
  s.split = d.at("split").get_string("split", s.split);
  if (!s.split.empty()) data::parse_split(s.split, d.at("split").source() + ": " + d.key_path("split"));
  s.random_seed = static_cast<uint64_t>(d.at("random_seed").get_nonnegative_int("random_seed", 1234));
  if (s.seq_length > c.model.max_position_embeddings)
    d.at("seq_length")
        .fail("seq_length", fmt::format("{} exceeds model.max_position_embeddings {}", s.seq_length,
                                        c.model.max_position_embeddings));
  const bool has_files = s.has_blend() || !s.per_split_data_args_path.empty();
  if (!s.mock && !has_files)
    d.at("mock").fail("mock",
                      "no training data: set dataset.mock=true, dataset.blend or "
                      "dataset.per_split_data_args_path");
  if (s.has_blend() && !s.per_split_data_args_path.empty())
    d.at("blend").fail("blend", "conflicts with per_split_data_args_path (give one of them)");
  if (!s.split.empty() && !s.per_split_data_args_path.empty())
    d.at("split").fail("split", fmt::format("conflicts with {} (a blend.json has a blend per split)",
                                            d.key_path("per_split_data_args_path")));
}

// Counts of iterations become counts of samples (x global batch) and of tokens (x seq_length + 1)
// in the schedule, the data indices and the plan; a count whose tokens do not fit comfortably in
// 64 bits is refused here, naming its key, instead of overflowing somewhere downstream.
void check_run_lengths(ConfigReader& root, const PretrainConfig& c) {
  constexpr int64_t kMaxTokens = int64_t{1} << 62;
  const int64_t G = c.train.global_batch_size, L = c.dataset.seq_length;
  auto check = [&](ConfigReader& r, const char* key, int64_t iters) {
    int64_t samples = 0, tokens = 0;
    if (!__builtin_mul_overflow(iters, G, &samples) && !__builtin_mul_overflow(samples, L + 1, &tokens) &&
        tokens <= kMaxTokens)
      return;
    r.fail(key, fmt::format("{} iterations x global batch {} x {} tokens is more than 2^62 tokens (a 64-bit "
                            "count); expected a realistic run length",
                            iters, G, L + 1));
  };
  // The keys G and L themselves are bounded by the first check (train_iters >= 1).
  ConfigReader& t = root.section("train");
  check(t, "train_iters", c.train.train_iters);
  ConfigReader& v = root.section("validation");
  check(v.has("eval_iters") ? v : t, "eval_iters", c.train.eval_iters);
  ConfigReader& s = root.section("scheduler");
  check(s, "lr_warmup_iters", c.scheduler.lr_warmup_iters);
  check(s, "lr_decay_iters", c.scheduler.lr_decay_iters);
  check(s, "lr_wsd_decay_iters", c.scheduler.lr_wsd_decay_iters);
}

}  // namespace

PretrainConfig read_pretrain_config(const json& tree, const std::string& source) {
  PretrainConfig c;
  c.source = source;
  c.tree = tree;
  ConfigReader root(c.tree, source);
  root.ignore("run");
  root.ignore("recipe");
  if (!root.has("model")) root.fail("model", "missing (a recipe holds the model's shape in its model: section)");
  ConfigReader& m = root.section("model");
  c.model = model::read_model_config(m);
  read_train_loop_config(root, c);
  read_dataset(root, c);
  c.seq_length = c.dataset.seq_length;
  c.data_seed = c.dataset.random_seed;
  check_run_lengths(root, c);
  root.check_unknown_keys();
  model::validate(c.model, source, "model");
  return c;
}

PretrainConfig load_pretrain_config(const std::string& path, const std::vector<std::string>& overrides,
                                    const ConfigTreeHook& resolve) {
  json tree = load_config_file(path);
  if (!tree.is_object() && !tree.is_null()) throw_config_error(path, "", "expected a mapping of sections");
  apply_overrides(tree, overrides, path);
  if (resolve) resolve(tree, path);
  return read_pretrain_config(tree, path);
}

}  // namespace nemotron::train
