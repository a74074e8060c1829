#!/usr/bin/env bash
# Installs what the build and the tests need on Debian 12 (bookworm), and nothing else (Open MPI:
# `mpirun -np N nemotron ...` runs data parallelism over CPU processes, and NCCL's bootstrap). Idempotent:
# when every package is already installed it touches nothing and returns at once. Runs apt as root,
# through sudo when not root. --tests adds what only the tests use (scripts/test.sh passes it):
# chromium and python3 render `nemotron report`'s page and check its screenshot
# (tests/cli/report_browser_test.sh); nodejs and npm run the official `openai` npm client against
# `nemotron serve` (tests/cli/serve_openai_js_test.sh); curl is the HTTP client of
# tests/cli/serve_test.sh (Debian's minimal base has none); slurm-wlm and munge run a real single-node
# Slurm for tests/cli/slurm_batch_test.sh (scripts/slurm-single-node.sh); building and running
# nemotron never needs them.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates libopenmpi-dev openmpi-bin
  libopenblas-openmp-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libpcre2-dev libzstd-dev libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev libtomlplusplus-dev
)
TEST_PACKAGES=(chromium python3 nodejs npm curl slurm-wlm munge)

case "${1:-}" in
  --tests) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  "") ;;
  *) echo "install-deps: unknown argument '$1' (usage: install-deps.sh [--tests])" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: this script supports Debian 12 (apt); install the equivalents of: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  # NodeSource's nodejs package bundles npm (and conflicts with Debian's): an npm on PATH will do.
  [[ "$p" == npm ]] && command -v npm >/dev/null 2>&1 && continue
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: missing ${missing[*]}; run this script as root (sudo is not available)" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
