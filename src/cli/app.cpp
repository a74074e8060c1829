#include "cli/app.h"

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/version.h"

namespace nemotron::cli {

namespace {
constexpr int kUsageErrorExitCode = 2;  // the exit code of every bad input (main.cc: InputError)
}  // namespace

namespace {

void add_all_commands(CLI::App& app) {
  add_model_commands(app);
  add_data_prep_commands(app);
  add_pretrain_commands(app);
  add_sft_commands(app);
  add_rl_commands(app);
  add_convert_commands(app);
  add_compare_command(app);
  add_eval_commands(app);
  add_artifacts_commands(app);
  add_report_command(app);
  add_generate_command(app);
  add_pipeline_commands(app);
  add_serve_command(app);
}

// When the command words of argv leave the known commands (a word that is no subcommand of a
// command that has subcommands), the error naming that word and the commands there; else "".
// The walk stops at the first option, so option values are never taken for command words.
std::string unknown_command_error(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  std::string command = "nemotron";
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w.empty() || w[0] == '-') return "";
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return "";
    const CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* sub : subs) {
      if (sub->check_name(w)) next = sub;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!next)
      return fmt::format("error: `{}` has no command \"{}\" (its commands: {})\nRun `{} --help` for the options.\n", command, w,
                         names, command);
    at = next;
    command += " " + next->get_name();
  }
  return "";
}

}  // namespace

bool has_command(const std::vector<std::string>& words) {
  CLI::App app;
  add_all_commands(app);
  const CLI::App* at = &app;
  for (const std::string& w : words) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->check_name(w)) next = sub;
    if (!next) return false;
    at = next;
  }
  return true;
}

int run(int argc, char** argv) {
  CLI::App app{"nemotron: train Nemotron-family models end to end from one native binary"};
  app.set_version_flag("--version", std::string("nemotron ") + NEMOTRON_VERSION);
  app.require_subcommand(0, 1);
  add_all_commands(app);
  // A usage error reads like every other bad input ("error: ..." on stderr) and exits 2, whatever
  // code CLI11 gives it (105-109 by kind); --help and --version print and exit 0.
  app.failure_message([](const CLI::App* root, const CLI::Error& e) {
    std::string command = "nemotron";  // the subcommands parsed before the error: their --help helps
    for (const CLI::App* a = root; a && !a->get_subcommands().empty();) {
      a = a->get_subcommands().front();
      command += " " + a->get_name();
    }
    return std::string("error: ") + e.what() + "\nRun `" + command + " --help` for the options.\n";
  });
  try {
    app.parse(argc, argv);  // runs the chosen command's callback
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != static_cast<int>(CLI::ExitCodes::Success)) {
      // CLI11 says "A subcommand is required" for `nemotron super3 bogus`: name the word instead.
      if (const std::string word_error = unknown_command_error(app, argc, argv); !word_error.empty()) {
        std::fputs(word_error.c_str(), stderr);
        return kUsageErrorExitCode;
      }
    }
    const int code = app.exit(e);  // prints the help, the version or the error
    return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : kUsageErrorExitCode;
  }
  if (app.get_subcommands().empty()) std::printf("%s", app.help().c_str());
  return 0;
}

}  // namespace nemotron::cli
