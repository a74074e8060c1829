// The data-parallel gradient reduction's buckets (train/data_parallel.h), seen through a recording
// communicator of two members: they cover the flat gradient buffer exactly once; in a step whose
// last backward runs the layer hook, each bucket is queued only after the trunk finished every
// layer it holds, the embedding's bucket only at finish(), and finish() waits for them all; the
// summed gradients are what the step then uses (the recorder doubles them, as a sum over two
// identical ranks would). The same for the distributed optimizer's buckets, each reduce-scattered
// into the rank's slice of it from the layer hook.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/hybrid_model.h"
#include "train/data_parallel.h"
#include "train/train_fixtures.h"
#include "train/train_step.h"

namespace nemotron::train {
namespace {

// Two members whose other member holds the same tensors: a sum doubles them. Records each
// queued range (as element offsets of the gradient buffer) and the last layer finished then.
class RecordingPair final : public parallel::Communicator {
 public:
  struct Call {
    int64_t begin, end, after_layer;
    bool async;
  };
  const Tensor* buffer = nullptr;
  int64_t last_layer_done = 1 << 20;  // none yet
  std::vector<Call> calls;
  int waits = 0;

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string kind() const override { return "recording"; }
  void all_reduce(Tensor& t, parallel::ReduceOp) override { record(t, false); }
  void all_reduce_async(Tensor& t, parallel::ReduceOp) override { record(t, true); }
  void wait_pending() override { ++waits; }
  void reduce_scatter(const Tensor&, Tensor&, parallel::ReduceOp) override { FAIL(); }
  // Member 0 receives the sum of the first half: twice its own.
  void reduce_scatter_async(const Tensor& in, Tensor& out, parallel::ReduceOp) override {
    ASSERT_EQ(in.numel(), 2 * out.numel());
    record_range(in, true);
    const float* a = in.data<float>();
    float* b = out.data<float>();
    for (int64_t i = 0; i < out.numel(); ++i) b[i] = 2 * a[i];
  }
  void all_gather(const Tensor&, Tensor&) override { FAIL(); }
  void all_to_all_v(const Tensor&, const std::vector<int64_t>&, Tensor&, const std::vector<int64_t>&) override {
    FAIL();
  }
  void broadcast(Tensor&, int) override { FAIL(); }
  void barrier() override {}
  void all_reduce_host(std::vector<double>& v, parallel::ReduceOp) override {
    for (double& x : v) x *= 2;
  }

 private:
  void record_range(const Tensor& t, bool async) {
    const int64_t es = static_cast<int64_t>(dtype_size(t.dtype()));
    const int64_t begin = (static_cast<const char*>(t.raw()) - static_cast<const char*>(buffer->raw())) / es;
    calls.push_back({begin, begin + t.numel(), last_layer_done, async});
  }
  void record(Tensor& t, bool async) {
    record_range(t, async);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 2;
  }
};

// One step's last backward: the hook sees layers 3, 2, 1, 0, then finish().
void run_last_backward(GradReducer& reducer, RecordingPair& pair) {
  const std::function<void(int64_t)>* hook = reducer.layer_hook();
  ASSERT_NE(hook, nullptr);
  for (int64_t layer = 3; layer >= 0; --layer) {
    pair.last_layer_done = layer;
    (*hook)(layer);
  }
  pair.last_layer_done = -1;
  reducer.finish();
  EXPECT_EQ(pair.waits, 1);
  EXPECT_GT(reducer.overlapped_buckets(), 0);
}

void expect_buckets_once_after_their_layers(model::HybridModel& net, RecordingPair& pair) {
  // Every element once.
  std::vector<RecordingPair::Call> by_offset = pair.calls;
  std::sort(by_offset.begin(), by_offset.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  int64_t at = 0;
  for (const auto& c : by_offset) {
    EXPECT_EQ(c.begin, at);
    at = c.end;
  }
  EXPECT_EQ(at, net.params().grad_buffer().numel());

  // Each parameter's range was queued only once its layer was done; the embedding's at finish().
  const Tensor& buf = net.params().grad_buffer();
  for (const model::Param* p : net.params().all()) {
    if (!net.params().in_grad_buffer(*p)) continue;
    const int64_t off = (static_cast<const char*>(p->grad.raw()) - static_cast<const char*>(buf.raw())) / 4;
    const auto call = std::find_if(pair.calls.begin(), pair.calls.end(),
                                   [&](auto& c) { return c.begin <= off && off < c.end; });
    ASSERT_NE(call, pair.calls.end()) << p->name;
    const size_t at_layer = p->name.find("layers.");
    if (p == &net.embedding()) {
      EXPECT_EQ(call->after_layer, -1) << p->name << " was queued before the backward ended";
    } else if (at_layer != std::string::npos) {
      const int64_t layer = std::stoll(p->name.substr(at_layer + 7));
      EXPECT_LE(call->after_layer, layer) << p->name << " queued after layer " << call->after_layer;
    }
  }
}

TEST(GradReducer, BucketsCoverTheBufferOnceAndWaitForTheirLayers) {
  const PretrainConfig cfg = testing::tiny_train_config();
  model::HybridModel net(cfg.model, host_backend(), DType::f32);
  net.init(7);
  RecordingPair pair;
  // Small buckets so the 4-layer trunk spans several.
  GradReducer reducer(net, pair, 2000);
  pair.buffer = &net.params().grad_buffer();
  ASSERT_GT(reducer.bucket_count(), 3);

  run_last_backward(reducer, pair);
  expect_buckets_once_after_their_layers(net, pair);
  // A second step starts over: nothing stays marked queued.
  pair.calls.clear();
  reducer.finish();
  EXPECT_EQ(static_cast<int64_t>(pair.calls.size()), reducer.bucket_count());
}

TEST(GradReducer, ShardedBucketsReduceScatterDuringTheBackward) {
  const PretrainConfig cfg = testing::tiny_train_config();
  model::HybridModel net(cfg.model, host_backend(), DType::f32);
  net.init(7);
  RecordingPair pair;
  AdamW opt(net.params(), {}, &pair, nullptr, nullptr, 2000);  // each bucket sharded over the pair
  GradReducer reducer(net, pair, 2000, &opt);
  pair.buffer = &net.params().grad_buffer();
  ASSERT_GT(reducer.bucket_count(), 3);
  ASSERT_EQ(reducer.bucket_count(), static_cast<int64_t>(opt.shard_buckets().size()));
  Tensor grads = net.params().grad_buffer();
  std::vector<float> before(static_cast<size_t>(grads.numel()));
  for (size_t i = 0; i < before.size(); ++i) before[i] = static_cast<float>(i % 97) - 48.0f;
  std::copy(before.begin(), before.end(), grads.data<float>());

  run_last_backward(reducer, pair);
  expect_buckets_once_after_their_layers(net, pair);
  for (const RecordingPair::Call& c : pair.calls) EXPECT_TRUE(c.async);
  // Rank 0's slice of every bucket holds the sum (twice the local gradient), at its shard_at.
  const float* got = opt.shard_grads().data<float>();
  for (const GradBucket& b : opt.shard_buckets())
    for (int64_t i = 0; i < (b.end - b.begin) / 2; ++i)
      ASSERT_EQ(got[b.shard_at + i], 2 * before[static_cast<size_t>(b.begin + i)]) << "bucket at " << b.begin;
}

TEST(GradReducer, TheStepReducesThroughTheLayerHook) {
  // The training step with a data group of two identical members: every gradient doubled, the
  // normaliser doubled, so the update is the single process's; the hook queued buckets early.
  PretrainConfig cfg = testing::tiny_train_config();
  model::HybridModel net(cfg.model, host_backend(), DType::f32);
  net.init(7);
  auto pair = std::make_shared<RecordingPair>();
  auto groups = std::make_shared<parallel::ProcessGroups>();
  groups->world = groups->data = groups->data_context = groups->expert = groups->expert_data = pair;
  // The model is whole (not split over a tensor group): its tensor and context groups are of one.
  groups->tensor = groups->context = std::make_shared<parallel::SelfCommunicator>();
  AdamW opt(net.params(), {});
  TrainStep step(net, opt, StepConfig{1.0, cfg.moe, cfg.seed, groups, 2000});
  pair->buffer = &net.params().grad_buffer();
  // The hook is called by the trunk's backward; the last layer it reports is recorded per call.
  MockBatchSource src(cfg.model.vocab_size, 16, 2, 3, 0);
  MaskedCrossEntropy ce;
  const StepResult r = step.run({src.next(), src.next()}, ce, 1e-3, 1);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_GT(step.grad_reducer().overlapped_buckets(), 0);
  EXPECT_EQ(static_cast<int64_t>(pair->calls.size()), step.grad_reducer().bucket_count());
}

}  // namespace
}  // namespace nemotron::train
