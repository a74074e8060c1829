// Hugging Face checkpoint reading and conversion: the tensor list comes from the model code without
// allocating it, both layouts and legacy spellings resolve to Hub names, every kind of bad input is
// one InputError naming the file and the tensor, and import/export/roundtrip keep their promises
// (dtype policy, no silent overwrite, carried tokenizer and token ids, tracker resolution).
#include "test_util.h"
#include "model/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/config_tree.h"
#include "io/safetensors.h"
#include "model/hf_convert.h"
#include "model/hybrid_model.h"
#include "model/model_info.h"
#include "model/weights_io.h"

namespace nemotron::model {
namespace {

namespace fs = std::filesystem;

fs::path repo() { return nemotron::testing::source_root(); }
fs::path fixture(const std::string& name) { return repo() / "tests" / "fixtures" / "hf" / name; }

void quiet(const std::string&) {}

class HfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() /
           fmt::format("nm_hf_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // A copy of a fixture directory whose single model.safetensors is rewritten by `edit`.
  std::string edited(const std::string& name, const std::function<void(std::vector<io::NamedTensor>&)>& edit) {
    fs::path d = tmp_ / fmt::format("{}-edited{}", name, ++edits_);
    fs::copy(fixture(name), d, fs::copy_options::recursive);
    io::SafetensorsFile f = io::SafetensorsFile::open((d / "model.safetensors").string());
    std::vector<io::NamedTensor> ts;
    for (const io::StTensorInfo& t : f.tensors()) ts.push_back({t.name, f.load(t.name)});
    edit(ts);
    io::save_safetensors((d / "model.safetensors").string(), ts, {{"format", "pt"}});
    return d.string();
  }
  static void rename(std::vector<io::NamedTensor>& ts, const std::string& from, const std::string& to) {
    for (auto& t : ts)
      if (t.name == from) t.name = to;
  }
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path tmp_;
  int edits_ = 0;
};

TEST_F(HfCheckpointTest, tensor_specs_come_from_the_model_code_without_allocating_it) {
  ModelConfig nano = load_model_config((repo() / "tests/fixtures/configs/nano3-30b-a3b.json").string());
  const size_t before = host_backend().bytes_in_use();
  std::vector<TensorSpec> specs = tensor_specs(nano);
  EXPECT_EQ(host_backend().bytes_in_use(), before);
  int64_t total = 0;
  for (const TensorSpec& s : specs) total += s.shape.numel();
  EXPECT_EQ(total, 31'577'940'288);  // reference/architectures.md A.10
  EXPECT_EQ(specs.front().name, "backbone.embeddings.weight");
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  int buffers = 0;
  for (const TensorSpec& s : specs) buffers += !s.trainable;
  EXPECT_EQ(buffers, 23);  // one e_score_correction_bias per MoE layer
}

TEST_F(HfCheckpointTest, legacy_embedding_spelling_is_read_and_noted) {
  std::string d =
      edited("dense", [](auto& ts) { rename(ts, "backbone.embeddings.weight", "backbone.embedding.weight"); });
  HfCheckpoint ck = HfCheckpoint::open(d);
  EXPECT_EQ(ck.tensors().front().name, "backbone.embeddings.weight");
  EXPECT_EQ(ck.tensors().front().stored_as, "backbone.embedding.weight");
  ASSERT_EQ(ck.notes().size(), 1u);
  EXPECT_NE(ck.notes()[0].find("legacy spelling"), std::string::npos);
}

TEST_F(HfCheckpointTest, mtp_tensors_are_skipped_and_reported) {
  std::string d = edited("moe", [](auto& ts) {
    ts.push_back({"mtp.layers.0.enorm.weight", Tensor::zeros({32}, DType::f32)});
    ts.push_back({"mtp.layers.0.eh_proj.weight", Tensor::zeros({32, 64}, DType::f32)});
  });
  HfCheckpoint ck = HfCheckpoint::open(d);
  EXPECT_EQ(ck.skipped().size(), 2u);
  EXPECT_NE(ck.notes().back().find("skipped 2 mtp.* tensor(s)"), std::string::npos);
  RoundtripReport r = roundtrip(d, (tmp_ / "work").string(), quiet);
  EXPECT_FALSE(r.lossless());  // the MTP tensors are not carried: the round trip says so
  EXPECT_EQ(r.differences, 2);
}

// A config with MTP (num_nextn_predict_layers 1, inner pattern "*E" from the fixture's
// mtp_layers_block_type): the mtp.layers.* tensors of A.8.2 are part of the model, read, carried
// by the round trip, and one missing is one error naming it.
TEST_F(HfCheckpointTest, mtp_tensors_are_read_when_the_config_has_mtp) {
  auto with_mtp = [&](const std::function<void(std::vector<io::NamedTensor>&)>& drop) {
    std::string d = edited("moe", [&](std::vector<io::NamedTensor>& ts) {
      nlohmann::json cfg;
      std::ifstream(fixture("moe") / "config.json") >> cfg;
      cfg["num_nextn_predict_layers"] = 1;
      ModelConfig mc = model_config_from_json(cfg, "config.json", false);
      HybridModel net(mc, host_backend(), DType::f32);
      net.init(3);
      for (const Param* p : net.params().all())
        if (p->name.starts_with("mtp.")) ts.push_back({p->name, p->value.clone()});
      drop(ts);
    });
    nlohmann::json cfg;
    std::ifstream(fs::path(d) / "config.json") >> cfg;
    cfg["num_nextn_predict_layers"] = 1;
    std::ofstream(fs::path(d) / "config.json") << cfg.dump(2);
    return d;
  };
  std::string d = with_mtp([](auto&) {});
  HfCheckpoint ck = HfCheckpoint::open(d);
  EXPECT_TRUE(ck.skipped().empty());
  int mtp = 0;
  for (const HfTensor& t : ck.tensors()) mtp += t.name.starts_with("mtp.layers.");
  EXPECT_GT(mtp, 8);
  EXPECT_EQ(ck.tensor("mtp.layers.0.eh_proj.weight").shape, Shape({32, 64}));
  EXPECT_EQ(ck.tensor("mtp.layers.1.final_layernorm.weight").shape, Shape({32}));
  EXPECT_EQ(ck.tensor("mtp.layers.1.mixer.gate.e_score_correction_bias").shape, Shape({8}));
  RoundtripReport r = roundtrip(d, (tmp_ / "work").string(), quiet);
  EXPECT_TRUE(r.lossless()) << roundtrip_table(r);

  std::string missing = with_mtp([](std::vector<io::NamedTensor>& ts) {
    std::erase_if(ts, [](const io::NamedTensor& t) { return t.name == "mtp.layers.1.final_layernorm.weight"; });
  });
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(missing); }),
            missing + ": missing tensor \"mtp.layers.1.final_layernorm.weight\" (shape [32]) that the model of "
                      "config.json needs");
}

TEST_F(HfCheckpointTest, bad_directories_are_one_clear_error) {
  EXPECT_EQ(error_of([&] { HfCheckpoint::open((tmp_ / "nope").string()); }),
            (tmp_ / "nope").string() + ": no such directory");
  EXPECT_EQ(
      error_of([&] { HfCheckpoint::open(tmp_.string()); }),
      tmp_.string() + ": no config.json (expected a Hugging Face model directory with config.json and *.safetensors)");
  fs::copy_file(fixture("dense") / "config.json", tmp_ / "config.json");
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(tmp_.string()); }),
            tmp_.string() + ": no weights (expected model.safetensors or model.safetensors.index.json)");
  std::ofstream(tmp_ / "pytorch_model.bin") << "x";
  EXPECT_NE(error_of([&] { HfCheckpoint::open(tmp_.string()); }).find("pytorch_model.bin (pickle)"), std::string::npos);
}

TEST_F(HfCheckpointTest, a_tensor_of_the_wrong_shape_names_file_tensor_and_both_shapes) {
  std::string d = edited("dense", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "backbone.layers.0.mixer.in_proj.weight") t.tensor = Tensor::zeros({10, 32}, DType::f32);
  });
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(d); }),
            d + "/model.safetensors: tensor \"backbone.layers.0.mixer.in_proj.weight\" has shape [10, 32], expected "
                "[100, 32] from config.json (pattern \"M-*M-\", hidden_size 32, vocab_size 288)");
}

TEST_F(HfCheckpointTest, missing_unexpected_duplicated_and_integer_tensors_are_errors) {
  std::string missing = edited("dense", [](auto& ts) {
    std::erase_if(ts, [](const io::NamedTensor& t) { return t.name == "backbone.layers.3.mixer.A_log"; });
  });
  EXPECT_EQ(
      error_of([&] { HfCheckpoint::open(missing); }),
      missing + ": missing tensor \"backbone.layers.3.mixer.A_log\" (shape [4]) that the model of config.json needs");

  std::string extra = edited("dense", [](auto& ts) {
    ts.push_back({"backbone.layers.9.norm.weight", Tensor::zeros({32}, DType::f32)});
  });
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(extra); }),
            extra +
                "/model.safetensors: tensor \"backbone.layers.9.norm.weight\" is not part of the model config.json "
                "describes (pattern \"M-*M-\", hidden_size 32, vocab_size 288)");

  std::string twice = edited("dense", [](auto& ts) {
    ts.push_back({"backbone.embedding.weight", Tensor::zeros({288, 32}, DType::f32)});
  });
  EXPECT_NE(error_of([&] { HfCheckpoint::open(twice); }).find("tensor \"backbone.embeddings.weight\" is stored twice"),
            std::string::npos);

  std::string mixed = edited("dense", [](auto& ts) { rename(ts, "backbone.norm_f.weight", "model.norm_f.weight"); });
  EXPECT_NE(error_of([&] { HfCheckpoint::open(mixed); }).find("mixes the Hub layout"), std::string::npos);

  std::string ints = edited("dense", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "backbone.norm_f.weight") t.tensor = Tensor::zeros({32}, DType::i64);
  });
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(ints); }),
            ints + "/model.safetensors: tensor \"backbone.norm_f.weight\" is I64, expected a floating-point weight");
}

TEST_F(HfCheckpointTest, fused_experts_with_the_wrong_expert_count_are_an_error) {
  std::string d = edited("moe-fused", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "model.layers.1.mixer.experts.up_proj") t.tensor = Tensor::zeros({7, 24, 16}, DType::f32);
  });
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(d); }),
            d + "/model.safetensors: tensor \"model.layers.1.mixer.experts.up_proj\" has shape [7, 24, 16], expected "
                "[8, ...]: n_routed_experts 8 experts stacked (transformers' fused layout)");
  std::string t = edited("moe-fused", [](auto& ts) {  // transposed experts: [E, d, F] where [E, F, d] belongs
    for (auto& x : ts)
      if (x.name == "model.layers.1.mixer.experts.up_proj") x.tensor = Tensor::zeros({8, 16, 24}, DType::f32);
  });
  EXPECT_EQ(error_of([&] { HfCheckpoint::open(t); }),
            t + "/model.safetensors: tensor \"model.layers.1.mixer.experts.up_proj\" has shape [8, 16, 24], expected "
                "[8, 24, 16] from config.json");
}

TEST_F(HfCheckpointTest, a_tied_config_with_a_head_keeps_it_only_when_it_differs) {
  // Same bytes as the embedding: the copy is dropped.
  std::string same = edited("tied", [](auto& ts) {
    Tensor emb;
    for (auto& t : ts)
      if (t.name == "backbone.embeddings.weight") emb = t.tensor;
    ts.push_back({"lm_head.weight", emb.clone()});
  });
  HfCheckpoint a = HfCheckpoint::open(same);
  EXPECT_TRUE(a.config().tie_word_embeddings);
  EXPECT_EQ(a.tensors().size(), 19u);
  // Different bytes: transformers computes with lm_head.weight, so the import unties.
  std::string other = edited("tied", [](auto& ts) {
    ts.push_back({"lm_head.weight", Tensor::zeros({96, 32}, DType::f32)});
  });
  HfCheckpoint b = HfCheckpoint::open(other);
  EXPECT_FALSE(b.config().tie_word_embeddings);
  EXPECT_EQ(b.tensors().size(), 20u);
  EXPECT_NE(b.notes().back().find("tie_word_embeddings = false"), std::string::npos);
}

TEST_F(HfCheckpointTest, config_yaml_reads_back_as_the_same_model_config) {
  std::vector<std::string> sources;
  for (const char* f : {"nano3-30b-a3b.json", "super3-120b-a12b.json", "nemotron-h-8b.json"})
    sources.push_back((repo() / "tests/fixtures/configs" / f).string());
  for (const char* f : {"dense", "moe", "moe_flat", "tied", "ragged"})
    sources.push_back((fixture(f) / "config.json").string());
  for (const std::string& src : sources) {
    ModelConfig c = load_model_config(src);
    c.time_step_limit_max = 7.5;  // a finite bound survives too
    std::string yaml =
        checkpoint_config_yaml(c, {{"path", "/x/\"quoted\" dir"}, {"hf_config", {{"eos_token_id", {2, 11}}}}});
    fs::path p = tmp_ / "config.yaml";
    std::ofstream(p) << yaml;
    ModelConfig back = load_model_config(p.string());
    EXPECT_EQ(model_config_to_hf_json(back), model_config_to_hf_json(c)) << src;
    EXPECT_EQ(back.layer_norm_epsilon, c.layer_norm_epsilon) << src;
    EXPECT_EQ(back.time_step_limit_max, 7.5);
    nlohmann::json tree = load_config_file(p.string());
    EXPECT_EQ(tree["source"]["path"], "/x/\"quoted\" dir");
    EXPECT_EQ(tree["source"]["hf_config"]["eos_token_id"], nlohmann::json({2, 11}));
  }
}

TEST_F(HfCheckpointTest, parse_size_reads_decimal_and_binary_units) {
  EXPECT_EQ(parse_size("5GB", "--max-shard-size"), 5'000'000'000u);
  EXPECT_EQ(parse_size("20KB", "x"), 20'000u);
  EXPECT_EQ(parse_size("2GiB", "x"), size_t{2} << 30);
  EXPECT_EQ(parse_size("1.5mb", "x"), 1'500'000u);
  EXPECT_EQ(parse_size("4096", "x"), 4096u);
  EXPECT_EQ(error_of([] { parse_size("five", "--max-shard-size"); }),
            "--max-shard-size: expected a size such as 5GB, 500MB or 2GiB, got \"five\"");
  EXPECT_THROW(parse_size("0B", "x"), InputError);
}

TEST_F(HfCheckpointTest, import_dtype_policy_keeps_the_router_bias_in_float32) {
  import_hf({fixture("moe").string(), (tmp_ / "bf16").string(), "bf16"}, quiet);
  io::SafetensorsSet bf16 = io::SafetensorsSet::open((tmp_ / "bf16").string());
  for (const std::string& n : bf16.names())
    EXPECT_EQ(bf16.info(n).dtype,
              n.find("e_score_correction_bias") != std::string::npos ? io::StDtype::F32 : io::StDtype::BF16)
        << n;
  import_hf({fixture("moe-bf16").string(), (tmp_ / "f32").string(), "float32"}, quiet);
  io::SafetensorsSet f32 = io::SafetensorsSet::open((tmp_ / "f32").string());
  for (const std::string& n : f32.names()) EXPECT_EQ(f32.info(n).dtype, io::StDtype::F32) << n;
  // bf16 -> float32 is exact: the values are the bf16 values.
  HfCheckpoint src = HfCheckpoint::open(fixture("moe-bf16").string());
  for (const HfTensor& t : src.tensors())
    EXPECT_EQ(src.load(t, DType::f32).to_f64_vector(), f32.load(t.name).to_f64_vector()) << t.name;
  EXPECT_EQ(error_of([&] {
              import_hf({fixture("moe").string(), (tmp_ / "x").string(), "fp16"}, quiet);
            }),
            "--dtype: expected keep, bf16 or float32, got \"fp16\"");
}

TEST_F(HfCheckpointTest, import_refuses_a_non_empty_out_and_force_replaces_only_our_files) {
  const std::string out = (tmp_ / "ckpt").string();
  fs::create_directories(out);
  std::ofstream(out + "/notes.txt") << "mine";
  std::ofstream(out + "/model-00009-of-00009.safetensors") << "stale shard";
  EXPECT_EQ(error_of([&] {
              import_hf({fixture("dense").string(), out}, quiet);
            }),
            out + ": exists and is not empty (pass --force to replace the checkpoint files in it)");
  ImportOptions o{fixture("dense").string(), out};
  o.force = true;
  import_hf(o, quiet);
  EXPECT_TRUE(fs::exists(out + "/notes.txt"));
  EXPECT_FALSE(fs::exists(out + "/model-00009-of-00009.safetensors"));
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(out + "/tokenizer/tokenizer.json"));
  EXPECT_EQ(error_of([&] {
              import_hf({fixture("dense").string(), fixture("dense").string(), "keep", true}, quiet);
            }),
            fixture("dense").string() + ": is the source itself; choose another --out");
}

TEST_F(HfCheckpointTest, export_carries_dtype_token_ids_and_tokenizer_and_shards_with_an_index) {
  import_hf({fixture("dense").string(), (tmp_ / "ckpt").string()}, quiet);
  ExportOptions o{(tmp_ / "ckpt").string(), (tmp_ / "hf").string()};
  o.max_shard_bytes = 40'000;
  export_hf(o, quiet);
  nlohmann::json cfg = load_config_file((tmp_ / "hf/config.json").string());
  EXPECT_EQ(cfg["dtype"], "float32");
  EXPECT_EQ(cfg["torch_dtype"], "float32");
  EXPECT_EQ(cfg["eos_token_id"], 2);
  EXPECT_EQ(cfg["hybrid_override_pattern"], "M-*M-");
  EXPECT_TRUE(fs::exists(tmp_ / "hf/tokenizer.json"));
  EXPECT_TRUE(fs::exists(tmp_ / "hf/model.safetensors.index.json"));
  int shards = 0;
  for (const auto& e : fs::directory_iterator(tmp_ / "hf"))
    shards += e.path().filename().string().rfind("model-0", 0) == 0;
  EXPECT_GT(shards, 1);
  EXPECT_TRUE(compare_hf_dirs(fixture("dense").string(), (tmp_ / "hf").string()).lossless());
}

TEST_F(HfCheckpointTest, export_finds_the_newest_iteration_and_checks_its_weights) {
  import_hf({fixture("ragged").string(), (tmp_ / "run/iter_0000200").string()}, quiet);
  std::ofstream(tmp_ / "run/latest_checkpointed_iteration.txt") << "200\n";
  EXPECT_EQ(resolve_checkpoint_dir((tmp_ / "run").string()), (tmp_ / "run/iter_0000200").string());
  export_hf({(tmp_ / "run").string(), (tmp_ / "hf").string()}, quiet);
  EXPECT_TRUE(compare_hf_dirs(fixture("ragged").string(), (tmp_ / "hf").string()).lossless());

  std::ofstream(tmp_ / "run/latest_checkpointed_iteration.txt") << "300\n";
  EXPECT_EQ(error_of([&] { resolve_checkpoint_dir((tmp_ / "run").string()); }),
            (tmp_ / "run/latest_checkpointed_iteration.txt").string() + ": names iteration 300, but " +
                (tmp_ / "run/iter_0000300").string() + " has no config.yaml");
  EXPECT_EQ(error_of([&] { resolve_checkpoint_dir(tmp_.string()); }),
            tmp_.string() +
                ": not a checkpoint (expected config.yaml, or latest_checkpointed_iteration.txt naming an iteration)");

  // A checkpoint whose weights do not fit its config.yaml.
  const std::string it = (tmp_ / "run/iter_0000200").string();
  io::SafetensorsFile f = io::SafetensorsFile::open(it + "/model.safetensors");
  std::vector<io::NamedTensor> ts;
  for (const io::StTensorInfo& t : f.tensors())
    ts.push_back({t.name, t.name == "backbone.norm_f.weight" ? Tensor::zeros({31}, DType::f32) : f.load(t.name)});
  io::save_safetensors(it + "/model.safetensors", ts);
  EXPECT_EQ(error_of([&] {
              export_hf({it, (tmp_ / "hf2").string()}, quiet);
            }),
            it + "/model.safetensors: tensor \"backbone.norm_f.weight\" has shape [31], expected [32] from config.yaml "
                 "(pattern \"MM*-M\", hidden_size 32, vocab_size 96)");
}

TEST_F(HfCheckpointTest, native_checkpoints_are_the_training_format_both_ways) {
  // An import loads with model::load_weights (what training resumes from) to the values an HF load gives.
  import_hf({fixture("moe").string(), (tmp_ / "imported").string()}, quiet);
  ModelConfig cfg = load_model_config((tmp_ / "imported/config.yaml").string());
  HybridModel a(cfg, host_backend(), DType::f64), b(cfg, host_backend(), DType::f64);
  load_weights(io::SafetensorsSet::open((tmp_ / "imported").string()), a.params(), "imported");
  HfCheckpoint::open(fixture("moe").string()).load_into(b.params());
  for (const Param* p : a.params().all())
    EXPECT_EQ(p->value.to_f64_vector(), b.params().get(p->name).value.to_f64_vector()) << p->name;
  // What training writes (model::save_weights + config.yaml) exports to the original bytes.
  HybridModel c(cfg, host_backend(), DType::f32);
  HfCheckpoint::open(fixture("moe").string()).load_into(c.params());
  fs::create_directories(tmp_ / "run/iter_0000010");
  save_weights((tmp_ / "run/iter_0000010").string(), c.params(), 20'000);
  std::ofstream(tmp_ / "run/iter_0000010/config.yaml") << checkpoint_config_yaml(cfg, {});
  std::ofstream(tmp_ / "run/latest_checkpointed_iteration.txt") << "10\n";
  export_hf({(tmp_ / "run").string(), (tmp_ / "hf").string()}, quiet);
  EXPECT_TRUE(compare_hf_dirs(fixture("moe").string(), (tmp_ / "hf").string()).lossless());
}

}  // namespace
}  // namespace nemotron::model
