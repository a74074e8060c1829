#include "data/dataset_builder.h"

#include <map>

#include "core/error.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"

namespace nemotron::data {

namespace {

class Builder {
 public:
  Builder(const GptBuildConfig& cfg, std::string where) : cfg_(cfg), where_(std::move(where)) {}

  std::shared_ptr<const TokenSource> open(const std::string& prefix) {
    auto it = sources_.find(prefix);
    if (it == sources_.end())
      it = sources_.emplace(prefix, std::make_shared<IndexedDataset>(IndexedDataset::open(prefix))).first;
    return it->second;
  }

  std::shared_ptr<const SampleDataset> gpt(const std::shared_ptr<const TokenSource>& src,
                                           std::pair<double, double> bookends, std::optional<int64_t> n,
                                           Split split) {
    auto [begin, end] = split_sequence_range(bookends, src->num_sequences());
    return std::make_shared<GptDataset>(src, begin, end, n, split, cfg_.gpt);
  }

  // One split of a multi-dataset blend (or a single weighted prefix), each member cut by `bookends`.
  std::shared_ptr<const SampleDataset> blended(const Blend& blend, std::pair<double, double> bookends,
                                               std::optional<int64_t> size, Split split) {
    std::vector<std::shared_ptr<const SampleDataset>> members;
    std::vector<double> weights;
    std::optional<int64_t> blend_size;
    if (blend.weights) {
      if (!size)
        throw InputError(fmt::format("{}: the {} blend has weights, so it needs a sample count (train_iters x "
                                     "global_batch_size, or the eval sizes)", where_, split_name(split)));
      weights = normalize_weights(*blend.weights);
      const auto target = samples_per_dataset(weights, *size, 0.0);
      const auto buffer = samples_per_dataset(weights, *size, cfg_.mid_level_dataset_surplus);
      int64_t total = 0;
      for (size_t k = 0; k < blend.prefixes.size(); ++k) {
        members.push_back(gpt(open(blend.prefixes[k]), bookends, buffer[k], split));
        total += target[k];
      }
      blend_size = total;
    } else {
      int64_t total = 0;
      for (const auto& prefix : blend.prefixes) {
        members.push_back(gpt(open(prefix), bookends, std::nullopt, split));
        weights.push_back(static_cast<double>(members.back()->size()));
        total += members.back()->size();
      }
      if (size) blend_size = std::min(*size, total);
    }
    return std::make_shared<BlendedDataset>(std::move(members), std::move(weights), blend_size);
  }

 private:
  const GptBuildConfig& cfg_;
  std::string where_;
  std::map<std::string, std::shared_ptr<const TokenSource>> sources_;
};

}  // namespace

SplitDatasets build_gpt_datasets(const GptDataSource& source, const GptBuildConfig& cfg, const SplitSizes& sizes,
                                 const std::string& where) {
  cfg.gpt.validate(where);
  const int given = (source.blend ? 1 : 0) + (source.blend_per_split ? 1 : 0) + (source.mock ? 1 : 0);
  if (given != 1)
    throw InputError(fmt::format("{}: give exactly one data source (a blend with a split, a blend per split, or "
                                 "mock data), got {}", where, given));
  if (!(cfg.mid_level_dataset_surplus >= 0))
    throw InputError(fmt::format("{}: mid_level_dataset_surplus: expected a number >= 0, got {}", where,
                                 cfg.mid_level_dataset_surplus));
  for (Split s : kSplits)
    if (sizes[static_cast<int>(s)] && *sizes[static_cast<int>(s)] < 0)
      throw InputError(fmt::format("{}: {} samples: expected a count >= 0, got {}", where, split_name(s),
                                   *sizes[static_cast<int>(s)]));
  Builder b(cfg, where);
  SplitDatasets out;

  if (source.blend_per_split) {
    if (source.split)
      throw InputError(fmt::format("{}: split \"{}\" cannot be combined with a blend per split (each split has its "
                                   "own blend); remove the split", where, *source.split));
    for (Split s : kSplits) {
      const int i = static_cast<int>(s);
      const auto& blend = (*source.blend_per_split)[i];
      if (!blend) continue;
      if (blend->prefixes.size() == 1)
        out[i] = b.gpt(b.open(blend->prefixes[0]), {0.0, 1.0}, sizes[i], s);
      else
        out[i] = b.blended(*blend, {0.0, 1.0}, sizes[i], s);
    }
    return out;
  }

  if (source.mock) {
    const auto fractions = parse_split(source.split.value_or("1,1,1"), where + ": split");
    const SplitBookends bookends = split_bookends(fractions);
    auto src = std::make_shared<MockTokenSource>(*source.mock);
    for (Split s : kSplits) {
      const int i = static_cast<int>(s);
      if (bookends[i]) out[i] = b.gpt(src, *bookends[i], sizes[i], s);
    }
    return out;
  }

  const Blend& blend = *source.blend;
  if (!source.split)
    throw InputError(fmt::format("{}: split: required with a single blend (for example \"99,1,0\")", where));
  const SplitBookends bookends = split_bookends(parse_split(*source.split, where + ": split"));
  if (blend.weights)
    for (Split s : kSplits)
      if (!sizes[static_cast<int>(s)])
        throw InputError(fmt::format("{}: the blend has weights, so every split needs a sample count; the {} split "
                                     "has none", where, split_name(s)));
  for (Split s : kSplits) {
    const int i = static_cast<int>(s);
    if (!bookends[i]) continue;
    if (blend.prefixes.size() == 1 && !blend.weights)
      out[i] = b.gpt(b.open(blend.prefixes[0]), *bookends[i], sizes[i], s);
    else
      out[i] = b.blended(blend, *bookends[i], sizes[i], s);
  }
  return out;
}

}  // namespace nemotron::data
