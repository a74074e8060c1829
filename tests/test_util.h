// Small helpers shared by the test files: capture an InputError's message, write a scratch file.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"

namespace nemotron::testing {

// The repository root, for fixtures: $NEMOTRON_SOURCE_DIR when set, else the working directory when
// it holds tests/fixtures (ctest runs tests from the repository root; so does a bundle of test
// binaries run on another machine), else where CMake configured the build (__FILE__ is not an
// absolute path under compiler caches).
inline std::filesystem::path source_root() {
  if (const char* env = std::getenv("NEMOTRON_SOURCE_DIR"); env && *env) return env;
  std::error_code ec;
  if (std::filesystem::is_directory("tests/fixtures", ec)) return std::filesystem::current_path();
  return NEMOTRON_SOURCE_DIR;
}

// The InputError message of f(), or a marker that no InputError was thrown.
inline std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// Writes `text` to <tmp>/<folder>/<name> and returns the path.
inline std::string write_temp(const std::string& folder, const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / folder;
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace nemotron::testing
