// One function per command group; each lives in its own file (model_commands.cpp, ...) and adds
// its subcommands, options and callbacks to the root app. app.cpp calls them all in the order the
// groups appear in `nemotron --help`. A callback reports bad input by throwing InputError (main
// prints "error: ..." and exits 2) and failures by throwing Error (exit 1).
#pragma once

namespace CLI {
class App;
}

namespace nemotron::cli {

// nemotron model info -c FILE [--seq-len T] [--json] [key=value ...]
void add_model_commands(CLI::App& app);
// nemotron model demo -c FILE [--steps N] ...  (registered by add_model_commands)
void add_model_demo_command(CLI::App& model);
// nemotron super3|nano3 data prep pretrain [-c tiny|default|PATH] [--sample N] [--force] [key=value ...]
void add_data_prep_commands(CLI::App& app);
// nemotron super3|nano3 pretrain [-c tiny|default|PATH] [--dry-run] [key=value ...]  (pretrain_command.cpp)
void add_pretrain_commands(CLI::App& app);
// nemotron <family> sft [-c NAME|PATH] [--dry-run] [key=value ...]
void add_sft_commands(CLI::App& app);
// nemotron <family> rl [-c NAME|PATH] [--dry-run] [key=value ...]
void add_rl_commands(CLI::App& app);
// nemotron convert import|export|roundtrip: Hugging Face checkpoints in and out
void add_convert_commands(CLI::App& app);
// nemotron compare --hf-model DIR --input-ids FILE [--dump OUT] [--grads] [--reference FILE]
void add_compare_command(CLI::App& app);
// nemotron super3|nano3 eval [-c tiny|default|PATH] [key=value ...]  (eval_command.cpp)
void add_eval_commands(CLI::App& app);
// nemotron artifacts list|show|lineage [--root DIR]
void add_artifacts_commands(CLI::App& app);
// nemotron report RUN_DIR [--output FILE]: the run's self-contained HTML report (report_command.cpp)
void add_report_command(CLI::App& app);
// nemotron generate --checkpoint DIR --prompt TEXT | --chat TEXT | --input FILE --output FILE
void add_generate_command(CLI::App& app);
// nemotron super3|nano3 pipeline [-c tiny|PATH] [--force] [--from STAGE] [--only STAGE,...]
// (pipeline_command.cpp): every stage in-process through run(), each one as if typed
void add_pipeline_commands(CLI::App& app);
// nemotron serve --checkpoint DIR [--host H] [--port N]: OpenAI-compatible server (serve_command.cpp)
void add_serve_command(CLI::App& app);

}  // namespace nemotron::cli
