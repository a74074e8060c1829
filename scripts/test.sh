#!/usr/bin/env bash
# Builds everything and runs every test except the CUDA ones: installs the dependencies, with the
# test-only ones (a no-op when present), runs the safetensors fuzz test under AddressSanitizer +
# UBSan for a bounded time, then configures into build/, builds, and runs ctest (last, so its
# summary closes the output).
# Exit status 0 = all tests passed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh --tests

# Fuzzing under AddressSanitizer + UBSan (tests/io/safetensors_fuzz.cpp): build-asan/ builds only
# that target (it links just the io and core libraries; -O1 with line tables keeps the build near a
# minute on 2 cores), then runs each fuzz test for NEMOTRON_FUZZ_SECONDS (default 30). Any sanitizer
# report aborts the run. NEMOTRON_SKIP_ASAN_FUZZ=1 skips this step.
if [[ "${NEMOTRON_SKIP_ASAN_FUZZ:-0}" != 1 ]]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=-O1 -g1" \
    -DNEMOTRON_SANITIZE=ON -DNEMOTRON_BENCH=OFF
  cmake --build build-asan -j "${JOBS:-$(nproc)}" --target test_fuzz
  NEMOTRON_FUZZ_SECONDS="${NEMOTRON_FUZZ_SECONDS:-30}" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 build-asan/tests/test_fuzz
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${JOBS:-$(nproc)}"
ctest --test-dir build --output-on-failure -j2 -LE cuda
