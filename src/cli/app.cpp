#include "cli/app.h"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/version.h"

namespace nemotron::cli {

int run(int argc, char** argv) {
  CLI::App app{"nemotron: train Nemotron-family models end to end from one native binary"};
  app.set_version_flag("--version", std::string("nemotron ") + NEMOTRON_VERSION);
  app.require_subcommand(0, 1);
  add_model_commands(app);
  add_data_prep_commands(app);
  add_pretrain_commands(app);
  add_convert_commands(app);
  add_compare_command(app);
  try {
    app.parse(argc, argv);  // runs the chosen command's callback
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.get_subcommands().empty()) std::printf("%s", app.help().c_str());
  return 0;
}

}  // namespace nemotron::cli
