// The pieces a captured decode step stands on (engine/decode_graphs.h): CudaBackend's private
// pools hand out the same addresses after a rewind and never give their memory to the caching
// allocator, and a CudaGraph replays what it captured on new inputs copied into the same buffers;
// a capture that waits for the stream fails with an error and leaves the stream usable.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_graph.h"
#include "core/error.h"
#include "ops/elementwise.h"

namespace nemotron {
namespace {

TEST(CudaPool, rewound_pool_repeats_its_addresses_and_keeps_its_memory) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  const int64_t pool = gpu.make_pool();
  std::vector<void*> first, second;
  for (int pass = 0; pass < 2; ++pass) {
    gpu.rewind_pool(pool);
    gpu.activate_pool(pool);
    std::vector<void*>& got = pass == 0 ? first : second;
    for (size_t bytes : {size_t{100}, size_t{5} << 20, size_t{3000}, size_t{9} << 20}) {
      Tensor t = Tensor::empty({static_cast<int64_t>(bytes / 4)}, DType::i32, gpu);
      got.push_back(t.raw());
    }  // each freed at once: a pool keeps it
    gpu.activate_pool(-1);
  }
  EXPECT_EQ(first, second);
  for (size_t i = 1; i < first.size(); ++i) EXPECT_NE(first[i], first[i - 1]) << "a bump arena never reuses within a pass";
  const size_t held = gpu.bytes_in_use();
  EXPECT_GE(held, gpu.pool_bytes(pool));
  // The caching allocator never hands out pool memory, however the sizes match.
  for (size_t bytes : {size_t{100}, size_t{5} << 20, size_t{3000}}) {
    Tensor t = Tensor::empty({static_cast<int64_t>(bytes / 4)}, DType::i32, gpu);
    for (void* p : first) EXPECT_NE(t.raw(), p);
  }
  const size_t pool_bytes = gpu.pool_bytes(pool);
  gpu.free_pool(pool);
  EXPECT_EQ(gpu.bytes_in_use(), held - pool_bytes);
}

TEST(CudaGraph, replays_on_new_inputs_and_refuses_a_sync_inside) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::f32};
  Tensor a = Tensor::empty({1000}, DType::f32, gpu), b = Tensor::empty({1000}, DType::f32, gpu);
  Tensor out = Tensor::empty({1000}, DType::f32, gpu);
  cuda::CudaGraph graph(gpu);
  graph.capture([&] { ops::add(ctx, a, b, out); });
  ASSERT_TRUE(graph.captured());
  EXPECT_GE(graph.nodes(), 1u);
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> ha(1000), hb(1000);
    for (int i = 0; i < 1000; ++i) ha[i] = static_cast<float>(i * step), hb[i] = static_cast<float>(step);
    a.copy_from(Tensor::from_vector<float>({1000}, ha));
    b.copy_from(Tensor::from_vector<float>({1000}, hb));
    graph.launch();
    const std::vector<double> got = out.to_f64_vector();
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[i], i * step + step) << "step " << step << " element " << i;
  }
  cuda::CudaGraph bad(gpu);
  EXPECT_THROW(bad.capture([&] {
    ops::add(ctx, a, b, out);
    gpu.synchronize();
  }), Error);
  EXPECT_FALSE(bad.captured());
  ops::add(ctx, a, a, out);  // the stream works after the failed capture
  EXPECT_EQ(out.to_f64_vector()[7], 42.0);  // a[7] = 7 * 3 from the last step
}

}  // namespace
}  // namespace nemotron
