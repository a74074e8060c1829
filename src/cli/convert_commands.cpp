// `nemotron convert ...`: Hugging Face checkpoints in and out (the counterpart of Megatron-Bridge's
// convert_checkpoints.py import/export and its round-trip check). The work is in
// model/hf_convert.h; this file maps the command line onto it and prints progress.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "model/hf_convert.h"
#include "train/lora_export.h"

namespace nemotron::cli {

namespace {

void print_line(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

struct RoundtripOptions {
  std::string hf_model, work;
};

void run_roundtrip(const RoundtripOptions& o) {
  namespace fs = std::filesystem;
  std::string work = o.work;
  bool temporary = work.empty();
  if (temporary) {
    std::string pattern = (fs::temp_directory_path() / "nemotron-roundtrip-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error(fmt::format("{}: cannot create a temporary directory", pattern));
    work = pattern;
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{temporary ? work : ""};
  model::RoundtripReport r = model::roundtrip(o.hf_model, work, print_line);
  std::printf("\n%s", model::roundtrip_table(r).c_str());
  if (!temporary) std::printf("kept the intermediate checkpoint and export in %s\n", work.c_str());
  std::fflush(stdout);
  if (!r.lossless())
    throw Error(fmt::format("round trip of {}: {} difference{} (see the table above)", o.hf_model, r.differences,
                            r.differences == 1 ? "" : "s"));
}

}  // namespace

void add_convert_commands(CLI::App& app) {
  CLI::App* convert = app.add_subcommand("convert", "Hugging Face checkpoints in and out of native checkpoints");
  convert->require_subcommand(1);

  auto imp = std::make_shared<model::ImportOptions>();
  auto imp_shard = std::make_shared<std::string>("5GB");
  CLI::App* c_import = convert->add_subcommand(
      "import",
      "A Hugging Face nemotron_h or DeciLM (nemotron-nas: config.json with block_configs; its remote code is never "
      "run) directory (config.json + safetensors) -> a native checkpoint");
  c_import->add_option("--hf-model", imp->hf_dir, "Hugging Face model directory")->required();
  c_import->add_option("--out", imp->out, "Checkpoint directory to write")->required();
  c_import
      ->add_option("--dtype", imp->dtype,
                   "keep (each tensor as stored), bf16 or float32 (the router's correction bias stays float32)")
      ->check(CLI::IsMember({"keep", "bf16", "float32"}));
  c_import->add_option("--max-shard-size", *imp_shard, "Largest weight file (5GB, 500MB, 2GiB, ...)");
  c_import->add_flag("--force", imp->force, "Replace the checkpoint files of a non-empty --out");
  c_import->callback([imp, imp_shard] {
    imp->max_shard_bytes = model::parse_size(*imp_shard, "--max-shard-size");
    model::import_hf(*imp, print_line);
  });

  auto exp = std::make_shared<model::ExportOptions>();
  auto exp_shard = std::make_shared<std::string>("5GB");
  CLI::App* c_export = convert->add_subcommand(
      "export", "A native checkpoint -> a Hugging Face directory that transformers' from_pretrained loads");
  c_export
      ->add_option("--checkpoint", exp->checkpoint,
                   "Checkpoint: an iteration directory, or its parent with latest_checkpointed_iteration.txt")
      ->required();
  c_export->add_option("--out", exp->out, "Hugging Face directory to write")->required();
  c_export->add_option("--max-shard-size", *exp_shard, "Largest weight file (5GB, 500MB, 2GiB, ...)");
  c_export->add_flag("--force", exp->force, "Replace the model files of a non-empty --out");
  c_export->callback([exp, exp_shard] {
    exp->max_shard_bytes = model::parse_size(*exp_shard, "--max-shard-size");
    model::export_hf(*exp, print_line);
  });

  auto rt = std::make_shared<RoundtripOptions>();
  CLI::App* c_rt = convert->add_subcommand(
      "roundtrip", "Import then export, and require every tensor identical in name, dtype, shape and bytes");
  c_rt->add_option("--hf-model", rt->hf_model, "Hugging Face model directory")->required();
  c_rt->add_option("--work", rt->work,
                   "Keep the intermediate checkpoint/ and hf/ here (default: a temporary directory)");
  c_rt->callback([rt] { run_roundtrip(*rt); });

  // LoRA (train/lora_export.h): the adapters of a `sft` run with peft: folded into the base, or
  // written in PEFT's layout.
  struct LoraOptions {
    std::string adapter, base, output;
    bool force = false;
  };
  for (const bool merge : {true, false}) {
    auto lo = std::make_shared<LoraOptions>();
    CLI::App* c = convert->add_subcommand(
        merge ? "merge-lora" : "export-lora",
        merge ? "A LoRA checkpoint + its base -> a native checkpoint of the merged weights W + (alpha/r) B A"
              : "A LoRA checkpoint -> PEFT's adapter_config.json + adapter_model.safetensors");
    c->add_option("--adapter", lo->adapter,
                  "LoRA checkpoint: an iteration directory, or its parent with latest_checkpointed_iteration.txt")
        ->required();
    c->add_option("--base", lo->base,
                  "Base checkpoint (default: the checkpoint.pretrained_checkpoint the adapter's run recorded)");
    c->add_option("--output", lo->output, merge ? "Checkpoint directory to write" : "PEFT directory to write")
        ->required();
    c->add_flag("--force", lo->force, "Replace a non-empty --output");
    c->callback([lo, merge] {
      const train::AdapterCheckpoint a = train::open_adapter_checkpoint(lo->adapter, lo->base);
      if (merge)
        train::merge_lora_checkpoint(a, lo->output, lo->force, print_line);
      else
        train::export_peft_adapter(a, lo->output, lo->force, print_line);
    });
  }
}

}  // namespace nemotron::cli
