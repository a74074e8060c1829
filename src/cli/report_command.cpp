// `nemotron report RUN_DIR [--output FILE]`: the run's self-contained HTML report
// (report/run_report.h), written to a temporary name and renamed, by default RUN_DIR/report.html.
#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "report/run_report.h"

namespace nemotron::cli {

void add_report_command(CLI::App& app) {
  struct Options {
    std::string run_dir, output;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write a self-contained HTML report of a run: curves, configs and evaluation results per stage");
  cmd->add_option("run_dir", opts->run_dir, "the run directory (e.g. runs/super3/tiny, or one stage of it)")->required();
  cmd->add_option("-o,--output", opts->output, "where to write the page (default: RUN_DIR/report.html)");
  cmd->callback([opts] {
    const report::RunData run = report::load_run(opts->run_dir);
    const std::string out =
        opts->output.empty() ? (std::filesystem::path(opts->run_dir) / "report.html").string() : opts->output;
    const auto now = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
    const std::string page = report::render_report(run, fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", now));
    const std::filesystem::path parent = std::filesystem::path(out).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create the report's directory: {}", out, ec.message()));
    io::write_file_atomically(out, page.data(), page.size());
    std::string names;
    for (const report::StageRun& s : run.stages) names += (names.empty() ? "" : ", ") + s.name;
    std::printf("report: %s (%zu stage(s)%s%s; %zu results.json; %.1f KiB)\n", out.c_str(), run.stages.size(),
                names.empty() ? "" : ": ", names.c_str(), run.evals.size(), static_cast<double>(page.size()) / 1024);
  });
}

}  // namespace nemotron::cli
