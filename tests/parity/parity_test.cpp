// Parity with transformers: every fixture of tests/fixtures/hf (tools/make_hf_fixtures.py, run with
// transformers 5.17 / PyTorch 2.11) is imported in both weight layouts and run in float64; the
// logits, the mean next-token loss and the gradient of every parameter must match what transformers
// computed (logits relative error < 1e-4, each gradient < 1e-3, Frobenius norms), and every
// fixture directory, the bfloat16 one included, must survive import + export byte for byte.
// The measured errors are printed so a run shows how close, not only that it passed.
#include "test_util.h"
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/safetensors.h"
#include "model/hf_checkpoint.h"
#include "model/hf_convert.h"
#include "model/hybrid_model.h"
#include "train/train_step.h"

namespace nemotron::model {
namespace {

namespace fs = std::filesystem;

fs::path fixture_root() { return nemotron::testing::source_root() / "tests" / "fixtures" / "hf"; }

// Read once; a reference, so `for (x : manifest()["fixtures"])` does not iterate a dead temporary.
const nlohmann::json& manifest() {
  static const nlohmann::json m = [] {
    std::ifstream in(fixture_root() / "manifest.json");
    return nlohmann::json::parse(in);
  }();
  return m;
}

struct FixtureDir {
  std::string fixture, layout, dir, reference;
};

void PrintTo(const FixtureDir& f, std::ostream* os) { *os << f.dir; }

std::vector<FixtureDir> fixture_dirs() {
  std::vector<FixtureDir> out;
  for (const auto& f : manifest()["fixtures"])
    for (const auto& [layout, dir] : f["dirs"].items())
      out.push_back({f["name"].get<std::string>(), layout, dir.get<std::string>(), f["reference"].get<std::string>()});
  return out;
}

double rel_err(const std::vector<double>& ours, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ours.size(); ++i) num += (ours[i] - ref[i]) * (ours[i] - ref[i]), den += ref[i] * ref[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<int64_t> next_token_labels(const Tensor& ids) {
  const int64_t B = ids.dim(0), T = ids.dim(1);
  std::vector<int64_t> labels(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) labels[b * T + t] = t + 1 < T ? ids.data<int64_t>()[b * T + t + 1] : -100;
  return labels;
}

class Parity : public ::testing::TestWithParam<FixtureDir> {};

TEST_P(Parity, logits_loss_and_every_gradient_match_transformers_in_float64) {
  const FixtureDir& f = GetParam();
  HfCheckpoint ck = HfCheckpoint::open((fixture_root() / f.dir).string());
  io::SafetensorsFile ref = io::SafetensorsFile::open((fixture_root() / f.reference).string());
  HybridModel net(ck.config(), host_backend(), DType::f64);
  ck.load_into(net.params());
  Context ctx{&host_backend(), nullptr, DType::f64};
  Tensor ids = ref.load("input_ids", DType::i64);
  const int64_t B = ids.dim(0), T = ids.dim(1);

  Tensor logits = net.logits(ctx, ids);
  ASSERT_EQ(logits.shape(), ref.find("logits")->shape);
  const double e_logits = rel_err(logits.to_f64_vector(), ref.load("logits", DType::f64).to_f64_vector());
  EXPECT_LT(e_logits, 1e-4);

  Batch batch{ids, Tensor::from_vector<int64_t>({B, T}, next_token_labels(ids)), Tensor()};
  net.params().zero_grads();
  train::LossSum loss = train::cross_entropy_backward(ctx, net, batch, 1.0 / static_cast<double>(B * (T - 1)));
  const double ref_loss = ref.load("loss", DType::f64).to_f64_vector()[0];
  const double e_loss = std::fabs(loss.mean() - ref_loss) / std::fabs(ref_loss);
  EXPECT_LT(e_loss, 1e-6) << "ours " << loss.mean() << ", transformers " << ref_loss;

  double worst = 0;
  std::string worst_name;
  int compared = 0;
  for (const Param* p : net.params().all()) {
    const std::string key = "grad." + p->name;
    if (!p->requires_grad) {  // the router's correction bias: a buffer, no gradient on either side
      EXPECT_EQ(ref.find(key), nullptr) << key;
      EXPECT_FALSE(p->grad.defined()) << p->name;
      continue;
    }
    ASSERT_NE(ref.find(key), nullptr) << "the reference has no " << key;
    ASSERT_EQ(ref.find(key)->shape, p->grad.shape()) << key;
    const double e = rel_err(p->grad.to_f64_vector(), ref.load(key, DType::f64).to_f64_vector());
    EXPECT_LT(e, 1e-3) << key;
    if (e > worst) worst = e, worst_name = p->name;
    ++compared;
  }
  int ref_grads = 0;
  for (const io::StTensorInfo& t : ref.tensors()) ref_grads += t.name.rfind("grad.", 0) == 0;
  EXPECT_EQ(compared, ref_grads) << "the reference has gradients of tensors the model does not have";
  std::printf("[parity] %-8s %-5s logits %.2e  loss %.2e  gradients: %d, worst %.2e (%s)\n", f.fixture.c_str(),
              f.layout.c_str(), e_logits, e_loss, compared, worst, worst_name.c_str());
}

TEST_P(Parity, float32_compute_stays_within_float32_rounding_of_transformers) {
  const FixtureDir& f = GetParam();
  HfCheckpoint ck = HfCheckpoint::open((fixture_root() / f.dir).string());
  io::SafetensorsFile ref = io::SafetensorsFile::open((fixture_root() / f.reference).string());
  HybridModel net(ck.config(), host_backend(), DType::f32);
  ck.load_into(net.params());
  Context ctx{&host_backend(), nullptr, DType::f32};
  Tensor logits = net.logits(ctx, ref.load("input_ids", DType::i64));
  const double e = rel_err(logits.to_f64_vector(), ref.load("logits", DType::f64).to_f64_vector());
  EXPECT_LT(e, 1e-4);
  std::printf("[parity] %-8s %-5s float32 logits %.2e\n", f.fixture.c_str(), f.layout.c_str(), e);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity, ::testing::ValuesIn(fixture_dirs()),
                         [](const ::testing::TestParamInfo<FixtureDir>& i) {
                           return i.param.fixture + "_" + i.param.layout;
                         });

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, import_then_export_is_lossless) {
  const fs::path work = fs::temp_directory_path() / fmt::format("nm_parity_rt_{}_{}", ::getpid(), GetParam());
  fs::remove_all(work);
  RoundtripReport r = roundtrip((fixture_root() / GetParam()).string(), work.string(), [](const std::string&) {});
  EXPECT_TRUE(r.lossless()) << roundtrip_table(r);
  EXPECT_GT(r.rows.size(), 0u);
  fs::remove_all(work);
}

std::vector<std::string> all_dirs() {
  std::vector<std::string> out;
  for (const FixtureDir& f : fixture_dirs()) out.push_back(f.dir);
  out.push_back(manifest()["bf16"]["dir"].get<std::string>());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RoundTrip, ::testing::ValuesIn(all_dirs()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(ParityLayouts, hub_and_fused_directories_hold_the_same_tensors_byte_for_byte) {
  for (const auto& f : manifest()["fixtures"]) {
    HfCheckpoint hub = HfCheckpoint::open((fixture_root() / f["dirs"]["hub"].get<std::string>()).string());
    HfCheckpoint fused = HfCheckpoint::open((fixture_root() / f["dirs"]["fused"].get<std::string>()).string());
    EXPECT_EQ(hub.layout(), HfLayout::hub);
    EXPECT_EQ(fused.layout(), HfLayout::fused);
    ASSERT_EQ(hub.tensors().size(), fused.tensors().size());
    for (size_t i = 0; i < hub.tensors().size(); ++i) {
      const HfTensor &a = hub.tensors()[i], &b = fused.tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape) << a.name;
      EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end())) << a.name;
    }
  }
}

TEST(ParityLayouts, the_bf16_fixture_keeps_the_router_bias_in_float32) {
  HfCheckpoint ck = HfCheckpoint::open((fixture_root() / manifest()["bf16"]["dir"].get<std::string>()).string());
  int f32 = 0;
  for (const HfTensor& t : ck.tensors()) {
    bool bias = t.name.find("e_score_correction_bias") != std::string::npos;
    EXPECT_EQ(t.dtype, bias ? io::StDtype::F32 : io::StDtype::BF16) << t.name;
    f32 += bias;
  }
  EXPECT_EQ(f32, 2);
  std::set<std::string> files;
  for (const HfTensor& t : ck.tensors()) files.insert(t.file);
  EXPECT_GT(files.size(), 1u) << "the bf16 fixture is sharded, so the index is read";
}

}  // namespace
}  // namespace nemotron::model
