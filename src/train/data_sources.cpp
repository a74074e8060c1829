#include "train/data_sources.h"

#include <fmt/format.h>

#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/blend.h"
#include "data/dataset_builder.h"

namespace nemotron::train {

using nlohmann::json;

LoaderBatchSource::LoaderBatchSource(std::shared_ptr<const data::SampleDataset> dataset, int64_t micro_batch_size,
                                     std::string split, int64_t vocab_size)
    : dataset_(dataset),
      loader_(std::move(dataset), data::LoaderConfig{micro_batch_size}),
      split_(std::move(split)),
      vocab_size_(vocab_size) {}

model::Batch LoaderBatchSource::next() {
  data::Batch b = loader_.next();
  const int64_t T = b.input_ids.dim(1);
  for (const Tensor* t : {&b.input_ids, &b.labels}) {
    const int32_t* ids = t->data<int32_t>();
    for (int64_t i = 0; i < t->numel(); ++i)
      if (ids[i] >= vocab_size_ || (ids[i] < 0 && ids[i] != data::kIgnoreLabel))
        throw InputError(
            fmt::format("data ({} split): sample {} holds token id {}, outside the model's vocabulary "
                        "[0, {}) (model.vocab_size; was the data tokenized for this model?)",
                        split_, b.first_sample + i / T, ids[i], vocab_size_));
  }
  return {std::move(b.input_ids), std::move(b.labels), std::move(b.loss_mask)};
}

json LoaderBatchSource::state() const {
  json s = loader_.state();
  s["kind"] = "gpt";
  s["split"] = split_;
  return s;
}

void LoaderBatchSource::restore(const json& s) {
  const std::string where = fmt::format("train_state.json: data.{}", split_);
  if (!s.is_object() || s.value("kind", "") != "gpt")
    throw InputError(fmt::format("{}: the checkpoint's data state is not from .bin/.idx data (got {})", where,
                                 describe_value(s.is_object() ? s.value("kind", json()) : s)));
  loader_.load_state(s, where);
}

std::string LoaderBatchSource::describe() const {
  std::string what = dataset_->description();
  if (what.size() > 100) what = what.substr(0, 97) + "...";
  return fmt::format("{} split: {} samples of {}", split_, dataset_->size(), what);
}

namespace {

// dataset.blend as the data layer reads it: a list of strings (numbers become Python-style
// floats) or one whitespace-separated string.
std::vector<std::string> blend_entries(const json& blend) {
  std::vector<std::string> out;
  if (blend.is_string()) {
    std::istringstream in(blend.get<std::string>());
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  }
  for (const json& e : blend)
    out.push_back(e.is_string() ? e.get<std::string>() : data::python_float_str(e.get<double>()));
  return out;
}

}  // namespace

DataSources make_data_sources(const PretrainConfig& cfg) {
  const DatasetSection& d = cfg.dataset;
  const TrainSection& t = cfg.train;
  DataSources out;
  if (d.mock) {
    out.train =
        std::make_unique<MockBatchSource>(cfg.model.vocab_size, d.seq_length, t.micro_batch_size, d.random_seed, 0);
    if (t.eval_iters > 0)
      out.valid =
          std::make_unique<MockBatchSource>(cfg.model.vocab_size, d.seq_length, t.micro_batch_size, d.random_seed, 1);
    return out;
  }
  const std::string where = cfg.source + ": dataset";
  data::GptDataSource source;
  if (d.has_blend()) {
    source.blend = data::parse_blend_list(blend_entries(d.blend), where + ".blend");
    source.split = d.split.empty() ? std::string("969,30,1") : d.split;
  } else {
    source.blend_per_split = data::load_blend_json(d.per_split_data_args_path);
  }
  data::GptBuildConfig build;
  build.gpt.sequence_length = d.seq_length;
  build.gpt.seed = static_cast<uint32_t>(d.random_seed);
  const int64_t eval_samples = t.eval_iters * t.global_batch_size;
  data::SplitSizes sizes = {t.train_iters * t.global_batch_size, eval_samples, eval_samples};
  data::SplitDatasets sets = data::build_gpt_datasets(source, build, sizes, where);
  if (!sets[0]) throw InputError(fmt::format("{}: the data has no train split", where));
  const int64_t V = cfg.model.vocab_size;
  out.train = std::make_unique<LoaderBatchSource>(sets[0], t.micro_batch_size, "train", V);
  if (t.eval_iters > 0 && sets[1])
    out.valid = std::make_unique<LoaderBatchSource>(sets[1], t.micro_batch_size, "valid", V);
  return out;
}

}  // namespace nemotron::train
