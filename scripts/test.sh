#!/usr/bin/env bash
# Builds everything and runs every test except the CUDA ones: installs the dependencies (a no-op
# when present), configures into build/, builds, runs ctest. Exit status 0 = all tests passed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${JOBS:-$(nproc)}"
ctest --test-dir build --output-on-failure -j2 -LE cuda
