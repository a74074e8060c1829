// Parity with transformers: every fixture of tests/fixtures/hf (tools/make_hf_fixtures.py, run with
// transformers 5.17 / PyTorch 2.11) is imported in both weight layouts and run in float64; the
// logits, the mean next-token loss and the gradient of every parameter must match what transformers
// computed (logits relative error < 1e-4, each gradient < 1e-3, Frobenius norms), and every
// fixture directory, the bfloat16 one included, must survive import + export byte for byte.
// The measured errors are printed so a run shows how close, not only that it passed.
#include "test_util.h"
#include "parity/parity_check.h"
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/safetensors.h"
#include "model/hf_checkpoint.h"
#include "model/hf_convert.h"
#include "model/hybrid_model.h"

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

class Parity : public ::testing::TestWithParam<FixtureDir> {};

TEST_P(Parity, logits_loss_and_every_gradient_match_transformers_in_float64) {
  const FixtureDir& f = GetParam();
  testing::ParityErrors e;
  testing::check_f64_parity((fixture_root() / f.dir).string(), (fixture_root() / f.reference).string(), &e);
  if (HasFatalFailure()) return;
  std::printf("[parity] %-8s %-5s logits %.2e  loss %.2e  gradients: %d, worst %.2e (%s)\n", f.fixture.c_str(),
              f.layout.c_str(), e.logits, e.loss, e.gradients, e.worst_grad, e.worst_grad_name.c_str());
}

TEST_P(Parity, float32_compute_stays_within_float32_rounding_of_transformers) {
  const FixtureDir& f = GetParam();
  HfCheckpoint ck = HfCheckpoint::open((fixture_root() / f.dir).string());
  io::SafetensorsFile ref = io::SafetensorsFile::open((fixture_root() / f.reference).string());
  HybridModel net(ck.config(), host_backend(), DType::f32);
  ck.load_into(net.params());
  Context ctx{&host_backend(), nullptr, DType::f32};
  Tensor logits = net.logits(ctx, ref.load("input_ids", DType::i64));
  const double e = testing::rel_err(logits.to_f64_vector(), ref.load("logits", DType::f64).to_f64_vector());
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
