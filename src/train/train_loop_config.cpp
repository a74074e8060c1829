#include "train/train_loop_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "core/error.h"

namespace nemotron::train {

using nlohmann::json;

namespace {

template <class E>
E pick_enum(ConfigReader& r, const std::string& key, E fallback,
            std::initializer_list<std::pair<const char*, E>> names) {
  if (!r.has(key)) return fallback;
  const std::string v = r.get_string(key, "");
  std::string list;
  for (const auto& [name, e] : names) {
    if (v == name) return e;
    list += list.empty() ? "" : ", ";
    list += name;
  }
  r.fail(key, fmt::format("expected one of {}, got \"{}\"", list, v));
}

void read_fsdp(ConfigReader& d, DdpSection& ddp) {
  using S = DdpSection::Sharding;
  ddp.use_megatron_fsdp = d.get_bool("use_megatron_fsdp", ddp.use_megatron_fsdp);
  ddp.data_parallel_sharding_strategy =
      pick_enum(d, "data_parallel_sharding_strategy", ddp.data_parallel_sharding_strategy,
                {{"no_shard", S::no_shard}, {"optim", S::optim}, {"optim_grads", S::optim_grads},
                 {"optim_grads_params", S::optim_grads_params}});
  if (ddp.data_parallel_sharding_strategy != S::no_shard && !ddp.use_megatron_fsdp)
    d.fail("data_parallel_sharding_strategy",
           fmt::format("\"{}\" applies under Megatron FSDP only (set ddp.use_megatron_fsdp=true)",
                       d.get_string("data_parallel_sharding_strategy", "")));
}

void read_train(ConfigReader& root, TrainLoopConfig& c) {
  ConfigReader& t = root.section("train");
  ConfigReader& v = root.section("validation");  // newer Bridge keeps eval keys here
  TrainSection& s = c.train;
  if (!t.has("train_iters")) t.fail("train_iters", "missing (the number of optimizer steps)");
  s.train_iters = t.get_positive_int("train_iters", 0);
  if (!t.has("global_batch_size")) t.fail("global_batch_size", "missing (sequences per optimizer step)");
  s.global_batch_size = t.get_positive_int("global_batch_size", 0);
  s.micro_batch_size = t.get_positive_int("micro_batch_size", s.micro_batch_size);
  for (const char* key : {"eval_interval", "eval_iters"}) {
    if (t.has(key) && v.has(key)) v.fail(key, fmt::format("given in both train: and validation: (keep one)"));
    ConfigReader& r = v.has(key) ? v : t;
    (std::string(key) == "eval_interval" ? s.eval_interval : s.eval_iters) = r.get_nonnegative_int(key, 0);
  }
  s.exit_interval = t.get_nonnegative_int("exit_interval", 0);
  if (s.global_batch_size % s.micro_batch_size != 0)
    t.fail("global_batch_size",
           fmt::format("{} is not a multiple of train.micro_batch_size {}", s.global_batch_size, s.micro_batch_size));
  if (s.eval_interval > 0 && s.eval_iters == 0)
    (v.has("eval_interval") ? v : t)
        .fail("eval_interval",
              fmt::format("{} needs eval_iters > 0 (validation steps per evaluation)", s.eval_interval));
}

void read_optimizer(ConfigReader& root, TrainLoopConfig& c) {
  ConfigReader& r = root.section("optimizer");
  OptimizerSection& o = c.optimizer;
  o.optimizer = r.get_string("optimizer", o.optimizer);
  if (o.optimizer != "adam") r.fail("optimizer", fmt::format("expected \"adam\" (AdamW), got \"{}\"", o.optimizer));
  if (!r.has("lr")) r.fail("lr", "missing (the peak learning rate)");
  o.lr = r.get_number("lr", 0);
  o.min_lr = r.get_number("min_lr", o.min_lr);
  o.weight_decay = r.get_number("weight_decay", o.weight_decay);
  o.adam_beta1 = r.get_number("adam_beta1", o.adam_beta1);
  o.adam_beta2 = r.get_number("adam_beta2", o.adam_beta2);
  o.adam_eps = r.get_number("adam_eps", o.adam_eps);
  o.clip_grad = r.get_number("clip_grad", o.clip_grad);
  auto check = [&](const char* key, double v, bool ok, const char* expected) {
    if (!ok || !std::isfinite(v)) r.fail(key, fmt::format("expected {}, got {}", expected, describe_value(v)));
  };
  check("lr", o.lr, o.lr > 0, "a positive number");
  check("min_lr", o.min_lr, o.min_lr >= 0, "a non-negative number");
  if (o.min_lr > o.lr) r.fail("min_lr", fmt::format("{} exceeds optimizer.lr {}", o.min_lr, o.lr));
  check("weight_decay", o.weight_decay, o.weight_decay >= 0, "a non-negative number");
  check("adam_beta1", o.adam_beta1, o.adam_beta1 >= 0 && o.adam_beta1 < 1, "a number in [0, 1)");
  check("adam_beta2", o.adam_beta2, o.adam_beta2 >= 0 && o.adam_beta2 < 1, "a number in [0, 1)");
  check("adam_eps", o.adam_eps, o.adam_eps > 0, "a positive number");
  check("clip_grad", o.clip_grad, o.clip_grad >= 0, "a non-negative number (0 = no clipping)");
}

void read_scheduler(ConfigReader& root, TrainLoopConfig& c) {
  ConfigReader& r = root.section("scheduler");
  SchedulerSection& s = c.scheduler;
  s.lr_decay_style = read_lr_decay_style(r, "lr_decay_style", s.lr_decay_style);
  s.lr_wsd_decay_style = pick_enum(r, "lr_wsd_decay_style", s.lr_wsd_decay_style,
                                   {{"exponential", WsdDecayStyle::exponential},
                                    {"linear", WsdDecayStyle::linear},
                                    {"cosine", WsdDecayStyle::cosine},
                                    {"minus_sqrt", WsdDecayStyle::minus_sqrt}});
  s.lr_warmup_iters = r.get_nonnegative_int("lr_warmup_iters", s.lr_warmup_iters);
  if (r.has("lr_warmup_fraction")) {
    if (r.has("lr_warmup_iters"))
      r.fail("lr_warmup_fraction", "conflicts with scheduler.lr_warmup_iters (give one of them)");
    s.lr_warmup_fraction = r.get_number("lr_warmup_fraction", 0);
    if (!(s.lr_warmup_fraction >= 0 && s.lr_warmup_fraction <= 1))
      r.fail("lr_warmup_fraction", "expected a number in [0, 1], got " + describe_value(s.lr_warmup_fraction));
  }
  s.lr_warmup_init = r.get_number("lr_warmup_init", s.lr_warmup_init);
  if (!(s.lr_warmup_init >= 0) || !std::isfinite(s.lr_warmup_init))
    r.fail("lr_warmup_init", "expected a non-negative number, got " + describe_value(s.lr_warmup_init));
  s.lr_decay_iters = r.get_nonnegative_int("lr_decay_iters", 0);
  s.lr_wsd_decay_iters = r.get_nonnegative_int("lr_wsd_decay_iters", 0);
  const int64_t decay = s.lr_decay_iters > 0 ? s.lr_decay_iters : c.train.train_iters;
  if (s.lr_wsd_decay_iters > decay)
    r.fail("lr_wsd_decay_iters", fmt::format("{} exceeds the decay of {} iterations (scheduler.lr_decay_iters, "
                                             "default train.train_iters)",
                                             s.lr_wsd_decay_iters, decay));
  if (s.lr_wsd_decay_iters > 0 && s.lr_decay_style != LrDecayStyle::wsd)
    r.fail("lr_wsd_decay_iters",
           fmt::format("is set but scheduler.lr_decay_style is {}, not WSD", lr_decay_style_name(s.lr_decay_style)));
}

void read_checkpoint(ConfigReader& root, TrainLoopConfig& c) {
  ConfigReader& r = root.section("checkpoint");
  CheckpointSection& k = c.checkpoint;
  k.save = r.get_string("save", "");
  k.save_interval = r.get_nonnegative_int("save_interval", 0);
  k.load = r.get_string("load", "");
  k.finetune = r.get_bool("finetune", false);
  k.pretrained_checkpoint = r.get_string("pretrained_checkpoint", "");
  k.most_recent_k = r.get_int("most_recent_k", -1);
  if (k.most_recent_k == 0 || k.most_recent_k < -1)
    r.fail("most_recent_k", fmt::format("expected -1 (keep all) or a positive count, got {}", k.most_recent_k));
  if (k.finetune && k.load.empty()) r.fail("finetune", "true needs checkpoint.load (the weights to start from)");
}

void read_moe(ConfigReader& root, TrainLoopConfig& c) {
  ConfigReader& r = root.section("moe");
  MoeSection& m = c.moe;
  m.moe_router_enable_expert_bias = r.get_bool("moe_router_enable_expert_bias", m.moe_router_enable_expert_bias);
  m.moe_router_bias_update_rate = r.get_number("moe_router_bias_update_rate", m.moe_router_bias_update_rate);
  if (!(m.moe_router_bias_update_rate >= 0) || !std::isfinite(m.moe_router_bias_update_rate))
    r.fail("moe_router_bias_update_rate",
           "expected a non-negative number, got " + describe_value(m.moe_router_bias_update_rate));
  m.moe_router_load_balancing_type = r.get_string("moe_router_load_balancing_type", m.moe_router_load_balancing_type);
  if (m.moe_router_load_balancing_type != "none" && m.moe_router_load_balancing_type != "seq_aux_loss")
    r.fail("moe_router_load_balancing_type",
           fmt::format("expected \"seq_aux_loss\" or \"none\" (aux_loss and sinkhorn are not implemented), got \"{}\"",
                       m.moe_router_load_balancing_type));
  m.moe_aux_loss_coeff = r.get_number("moe_aux_loss_coeff", m.moe_aux_loss_coeff);
  if (!(m.moe_aux_loss_coeff >= 0) || !std::isfinite(m.moe_aux_loss_coeff))
    r.fail("moe_aux_loss_coeff", "expected a non-negative number, got " + describe_value(m.moe_aux_loss_coeff));
  if (m.seq_aux_loss() && m.moe_aux_loss_coeff == 0)
    r.fail("moe_aux_loss_coeff", "is 0 while moe_router_load_balancing_type is seq_aux_loss (e.g. 1e-4)");
}

}  // namespace

LrSchedule TrainLoopConfig::lr_schedule() const {
  LrScheduleIters s;
  s.max_lr = optimizer.lr;
  s.min_lr = optimizer.min_lr;
  s.warmup_init = scheduler.lr_warmup_init;
  s.warmup_iters = scheduler.lr_warmup_iters;
  s.warmup_fraction = scheduler.lr_warmup_fraction;
  s.decay_iters = scheduler.lr_decay_iters;
  s.wsd_decay_iters = scheduler.lr_wsd_decay_iters;
  s.train_iters = train.train_iters;
  s.global_batch_size = train.global_batch_size;
  s.style = scheduler.lr_decay_style;
  s.wsd_style = scheduler.lr_wsd_decay_style;
  return lr_schedule_from_iters(s);
}

int cuda_device_index(const std::string& device) {
  return device.size() > 5 ? std::stoi(device.substr(5)) : 0;  // "cuda:N"; validated by read_device_keys
}

int TrainLoopConfig::cuda_index() const { return cuda_device_index(device); }

void read_device_keys(ConfigReader& root, std::string& device, std::string& mixed_precision) {
  device = root.get_string("device", "cpu");
  const bool cuda = device == "cuda" || (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
                                         device.find_first_not_of("0123456789", 5) == std::string::npos);
  if (device != "cpu" && !cuda) root.fail("device", fmt::format("expected cpu, cuda or cuda:N, got \"{}\"", device));
  if (cuda && device.size() > 9) root.fail("device", fmt::format("device index out of range in \"{}\"", device));
  std::string mp = root.get_string("mixed_precision", "");
  if (mp.empty()) mp = cuda ? "bf16_mixed" : "fp32";
  if (mp != "bf16_mixed" && mp != "fp32")
    root.fail("mixed_precision",
              fmt::format("supported: bf16_mixed (CUDA) or fp32, got \"{}\" (fp16 and fp8 recipes are not implemented)", mp));
  if (mp == "bf16_mixed" && !cuda)
    root.fail("mixed_precision", "bf16_mixed needs device: cuda (the CPU trains in fp32)");
  mixed_precision = mp;
}

void read_train_loop_config(ConfigReader& root, TrainLoopConfig& c) {
  read_train(root, c);
  read_optimizer(root, c);
  read_scheduler(root, c);
  read_checkpoint(root, c);
  ConfigReader& lg = root.section("logger");
  c.logger.log_interval = lg.get_positive_int("log_interval", c.logger.log_interval);
  c.logger.metrics_path = lg.get_string("metrics_path", "");
  // Present but null, "" or false switches TensorBoard off; absent keeps the default directory.
  const json& tb = lg.get_raw("tensorboard_dir");
  const bool tb_given = c.tree.contains("logger") && c.tree["logger"].is_object() &&
                        c.tree["logger"].contains("tensorboard_dir");
  if (tb_given && (tb.is_null() || tb == false || tb == "")) {
    c.logger.tensorboard = false;
  } else if (tb_given) {
    if (!tb.is_string())
      lg.fail("tensorboard_dir",
              "expected a directory (a string), or null to turn TensorBoard off, got " + describe_value(tb));
    c.logger.tensorboard_dir = tb.get<std::string>();
  }
  c.seed = static_cast<uint64_t>(root.section("rng").get_nonnegative_int("seed", 1234));
  read_moe(root, c);
  c.ddp.use_distributed_optimizer =
      root.section("ddp").get_bool("use_distributed_optimizer", c.ddp.use_distributed_optimizer);
  c.ddp.bucket_size = root.section("ddp").get_positive_int("bucket_size", c.ddp.bucket_size);
  read_fsdp(root.section("ddp"), c.ddp);
  read_device_keys(root, c.device, c.mixed_precision);
}

namespace {

// A number as YAML reads it back with the same type and value (shortest round-trip digits).
std::string yaml_number(const json& v) {
  if (v.is_number_integer()) return v.dump();
  double d = v.get<double>();
  if (std::isnan(d)) return ".nan";
  if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void emit(YAML::Emitter& out, const json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto it = v.begin(); it != v.end(); ++it) {
      out << YAML::Key << it.key() << YAML::Value;
      emit(out, *it);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const json& x : v) emit(out, x);
    out << YAML::EndSeq;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_boolean()) {
    out << (v.get<bool>() ? "true" : "false");
  } else if (v.is_number()) {
    out << yaml_number(v);
  } else {
    const std::string s = v.get<std::string>();
    // A string that would read back as another type ("8", "true", "") is quoted.
    if (!parse_yaml_scalar(s).is_string()) out << YAML::DoubleQuoted;
    out << s;
  }
}

}  // namespace

std::string config_to_yaml(const json& tree) {
  YAML::Emitter out;
  emit(out, tree);
  return std::string(out.c_str()) + "\n";
}

void set_data_parallel_size(TrainLoopConfig& c, int64_t dp) {
  NM_CHECK(dp >= 1, "data-parallel size {}", dp);
  const TrainSection& t = c.train;
  if (t.global_batch_size % (t.micro_batch_size * dp) != 0)
    throw_config_error(c.source, "train.global_batch_size",
                       fmt::format("{} is not a multiple of train.micro_batch_size {} x {} data-parallel ranks = {} "
                                   "(every rank runs whole micro-batches; change either, or the number of ranks)",
                                   t.global_batch_size, t.micro_batch_size, dp, t.micro_batch_size * dp));
  c.train.data_parallel_size = dp;
}

}  // namespace nemotron::train
