// The pretraining config: every shipped recipe reads and validates; typos, wrong types and
// conflicts are one InputError naming the dotted key; config.yaml round-trips the tree.
#include "test_util.h"
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "train_fixtures.h"

namespace nemotron::testing {
namespace {

using train::PretrainConfig;

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    tiny_train_config(overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PretrainConfig, reads_sections_with_megatron_names_and_defaults) {
  PretrainConfig c = tiny_train_config();
  EXPECT_EQ(c.train.global_batch_size, 4);
  EXPECT_EQ(c.train.accumulation_steps(), 2);
  EXPECT_EQ(c.optimizer.adam_beta1, 0.9);  // Megatron default
  EXPECT_EQ(c.optimizer.adam_beta2, 0.95);
  EXPECT_EQ(c.optimizer.adam_eps, 1e-8);
  EXPECT_EQ(c.scheduler.lr_decay_style, train::LrDecayStyle::wsd);
  EXPECT_EQ(c.checkpoint.most_recent_k, -1);
  EXPECT_EQ(c.seed, 1234u);
  EXPECT_TRUE(c.moe.seq_aux_loss());
  train::LrSchedule s = c.lr_schedule();
  EXPECT_EQ(s.decay_steps, 6 * 4);  // lr_decay_iters defaults to train_iters
  EXPECT_EQ(s.wsd_decay_steps, 3 * 4);
  EXPECT_EQ(s.warmup_steps, 2 * 4);
  EXPECT_EQ(c.tokens_per_step(), 64);
}

TEST(PretrainConfig, every_shipped_recipe_validates) {
  const auto root = nemotron::testing::source_root();
  for (const char* family : {"super3", "nano3"})
    for (const char* name : {"tiny", "default"}) {
      const std::string path = (root / "recipes" / family / "pretrain" / (std::string(name) + ".yaml")).string();
      SCOPED_TRACE(path);
      PretrainConfig c = train::load_pretrain_config(path, {});
      EXPECT_GT(c.train.train_iters, 0);
      EXPECT_EQ(c.model.vocab_size, std::string(name) == "tiny" ? c.model.vocab_size : 131072);
    }
}

TEST(PretrainConfig, unknown_keys_suggest_the_nearest_valid_one) {
  EXPECT_EQ(error_of({"train.global_batch_sze=8"}),
            "tiny_train.yaml: train.global_batch_sze: unknown key (did you mean \"global_batch_size\"?)");
  EXPECT_EQ(error_of({"optimizer.adam_beta=0.9"}),
            "tiny_train.yaml: optimizer.adam_beta: unknown key (did you mean \"adam_beta1\"?)");
  EXPECT_EQ(error_of({"schedular.lr_warmup_iters=3"}),
            "tiny_train.yaml: schedular: unknown key (did you mean \"scheduler\"?)");
  EXPECT_EQ(error_of({"model.hiden_size=3"}),
            "tiny_train.yaml: model.hiden_size: unknown key (did you mean \"hidden_size\"?)");
}

TEST(PretrainConfig, wrong_types_name_key_expected_type_and_value) {
  EXPECT_EQ(error_of({"train.global_batch_size=eight"}),
            "tiny_train.yaml: train.global_batch_size: expected a positive integer, got \"eight\"");
  EXPECT_EQ(error_of({"optimizer.lr=fast"}), "tiny_train.yaml: optimizer.lr: expected a number, got \"fast\"");
  EXPECT_EQ(error_of({"dataset.mock=yes please"}),
            "tiny_train.yaml: dataset.mock: expected true or false, got \"yes please\"");
  EXPECT_EQ(error_of({"scheduler.lr_decay_style=exp"}),
            "tiny_train.yaml: scheduler.lr_decay_style: expected one of constant, linear, cosine, "
            "inverse-square-root, WSD, got \"exp\"");
  EXPECT_EQ(error_of({"checkpoint.most_recent_k=0"}),
            "tiny_train.yaml: checkpoint.most_recent_k: expected -1 (keep all) or a positive count, got 0");
}

TEST(PretrainConfig, conflicts_name_both_keys) {
  EXPECT_EQ(error_of({"train.global_batch_size=6", "train.micro_batch_size=4"}),
            "tiny_train.yaml: train.global_batch_size: 6 is not a multiple of train.micro_batch_size 4");
  EXPECT_EQ(error_of({"optimizer.min_lr=0.1"}), "tiny_train.yaml: optimizer.min_lr: 0.1 exceeds optimizer.lr 0.003");
  EXPECT_EQ(
      error_of({"scheduler.lr_warmup_fraction=0.1"}),
      "tiny_train.yaml: scheduler.lr_warmup_fraction: conflicts with scheduler.lr_warmup_iters (give one of them)");
  EXPECT_EQ(error_of({"scheduler.lr_wsd_decay_iters=7"}),
            "tiny_train.yaml: scheduler.lr_wsd_decay_iters: 7 exceeds the decay of 6 iterations "
            "(scheduler.lr_decay_iters, default train.train_iters)");
  EXPECT_EQ(error_of({"data.seq_length=8"}),
            "tiny_train.yaml: data.seq_length: given in both dataset: and data: (keep one)");
  EXPECT_EQ(error_of({"dataset.mock=false"}),
            "tiny_train.yaml: dataset.mock: no training data: set dataset.mock=true, dataset.blend or "
            "dataset.per_split_data_args_path");
  EXPECT_TRUE(tiny_train_config({"data.per_split_data_args_path=/x/blend.json"}).dataset.mock);  // mock wins
  EXPECT_EQ(error_of({"train.eval_iters=0"}),
            "tiny_train.yaml: train.eval_interval: 3 needs eval_iters > 0 (validation steps per evaluation)");
  EXPECT_EQ(error_of({"checkpoint.finetune=true"}),
            "tiny_train.yaml: checkpoint.finetune: true needs checkpoint.load (the weights to start from)");
  EXPECT_EQ(error_of({"moe.moe_router_load_balancing_type=aux_loss"}),
            "tiny_train.yaml: moe.moe_router_load_balancing_type: expected \"seq_aux_loss\" or \"none\" (aux_loss and "
            "sinkhorn are not implemented), got \"aux_loss\"");
  EXPECT_EQ(error_of({"dataset.seq_length=65"}),
            "tiny_train.yaml: dataset.seq_length: 65 exceeds model.max_position_embeddings 64");
  EXPECT_EQ(error_of({"dataset.split=\"-5,1\""}),
            "tiny_train.yaml: dataset.split: expected up to 3 non-negative numbers such as \"99,1,0\", got \"-5,1\" "
            "(negative numbers are not allowed)");
  EXPECT_EQ(error_of({"dataset.mock=false", "dataset.per_split_data_args_path=/b.json", "dataset.split=99,1,0"}),
            "tiny_train.yaml: dataset.split: conflicts with dataset.per_split_data_args_path (a blend.json has a blend "
            "per split)");
  EXPECT_EQ(error_of({"validation.eval_iters=2"}),
            "tiny_train.yaml: validation.eval_iters: given in both train: and validation: (keep one)");
}

TEST(PretrainConfig, run_lengths_that_overflow_name_their_key) {
  // 2^59 iterations x 4 sequences x 17 tokens overflowed downstream ("check failed", exit 1).
  EXPECT_EQ(error_of({"train.train_iters=576460752303423488"}),
            "tiny_train.yaml: train.train_iters: 576460752303423488 iterations x global batch 4 x 17 tokens is more "
            "than 2^62 tokens (a 64-bit count); expected a realistic run length");
  EXPECT_EQ(error_of({"train.eval_iters=9223372036854775807"}),
            "tiny_train.yaml: train.eval_iters: 9223372036854775807 iterations x global batch 4 x 17 tokens is more "
            "than 2^62 tokens (a 64-bit count); expected a realistic run length");
  EXPECT_EQ(error_of({"scheduler.lr_decay_iters=1000000000000000000"}),
            "tiny_train.yaml: scheduler.lr_decay_iters: 1000000000000000000 iterations x global batch 4 x 17 tokens "
            "is more than 2^62 tokens (a 64-bit count); expected a realistic run length");
  EXPECT_EQ(tiny_train_config({"train.train_iters=1000000000000"}).train.train_iters, 1000000000000);
}

TEST(PretrainConfig, seq_length_below_two_is_refused_for_every_data_source) {
  // --dry-run read the same config and accepted 1, which only the .bin/.idx dataset refused later.
  EXPECT_EQ(error_of({"dataset.seq_length=1"}), "tiny_train.yaml: dataset.seq_length: expected an integer >= 2, got 1");
  EXPECT_EQ(error_of({"dataset.seq_length=1", "dataset.mock=false", "dataset.blend=[a]"}),
            "tiny_train.yaml: dataset.seq_length: expected an integer >= 2, got 1");
}

TEST(PretrainConfig, blend_is_kept_as_given_for_the_data_layer) {
  PretrainConfig c = tiny_train_config({"dataset.mock=false", "dataset.blend=[0.3, /data/a, 0.7, /data/b]"});
  EXPECT_EQ(c.dataset.blend, nlohmann::json::parse(R"([0.3, "/data/a", 0.7, "/data/b"])"));
  EXPECT_EQ(error_of({"dataset.mock=false", "dataset.blend={a: 1}"}),
            "tiny_train.yaml: dataset.blend: expected a list [weight, prefix, ...] or [prefix, ...], or one string, "
            "got {\"a\":1}");
}

TEST(PretrainConfig, validation_section_is_accepted_as_in_newer_bridge) {
  PretrainConfig c = tiny_train_config(
      {"train.eval_interval=", "train.eval_iters=", "validation.eval_interval=2", "validation.eval_iters=5"});
  EXPECT_EQ(c.train.eval_interval, 2);
  EXPECT_EQ(c.train.eval_iters, 5);
}

TEST(PretrainConfig, tensorboard_dir_defaults_on_moves_and_turns_off) {
  PretrainConfig c = tiny_train_config();
  EXPECT_TRUE(c.logger.tensorboard);  // on, in <checkpoint.save>/tb_logs
  EXPECT_EQ(c.logger.tensorboard_dir, "");
  c = tiny_train_config({"logger.tensorboard_dir=/tmp/tb"});
  EXPECT_TRUE(c.logger.tensorboard);
  EXPECT_EQ(c.logger.tensorboard_dir, "/tmp/tb");
  for (const char* off : {"logger.tensorboard_dir=", "logger.tensorboard_dir=null", "logger.tensorboard_dir=\"\"",
                          "logger.tensorboard_dir=false"})
    EXPECT_FALSE(tiny_train_config({off}).logger.tensorboard) << off;
  EXPECT_NE(error_of({"logger.tensorboard_dir=5"})
                .find("logger.tensorboard_dir: expected a directory (a string), or null to turn TensorBoard off, got 5"),
            std::string::npos)
      << error_of({"logger.tensorboard_dir=5"});
}

TEST(PretrainConfig, config_yaml_round_trips_types_and_values) {
  PretrainConfig c = tiny_train_config({"checkpoint.save=\"8\"", "logger.metrics_path=/tmp/a b.jsonl",
                                        "optimizer.lr=1e-3", "rng.seed=7", "dataset.split=\"969,30,1\""});
  nlohmann::json back = parse_yaml_text(train::config_to_yaml(c.tree), "config.yaml");
  EXPECT_EQ(back, c.tree);
  EXPECT_TRUE(back["checkpoint"]["save"].is_string());
  EXPECT_TRUE(back["optimizer"]["lr"].is_number_float());
  EXPECT_EQ(back["model"]["hybrid_override_pattern"], "M*-E");
}

}  // namespace
}  // namespace nemotron::testing
