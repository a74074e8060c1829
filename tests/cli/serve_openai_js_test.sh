#!/usr/bin/env bash
# `nemotron serve` under the official `openai` npm package (v4), run with node: the client no one
# here wrote (tests/serve_js/client_test.mjs). The package is installed with npm into CACHE (a
# directory in the build tree, kept between runs). Without node or npm, or when npm cannot install
# the package: in CI (CI=true) a failure, elsewhere a skip (exit 77) that says why; nothing passes
# silently. Usage: serve_openai_js_test.sh path/to/nemotron CACHE_DIR
set -uo pipefail

CACHE=${2:?usage: $(basename "$0") path/to/nemotron CACHE_DIR}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$1"
source "$ROOT/tests/cli/serve_lib.sh"

cannot() {
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: $1 (CI=true: the OpenAI client test must run; bash scripts/install-deps.sh --tests installs node and npm)"
    exit 1
  fi
  echo "SKIPPED: $1 (bash scripts/install-deps.sh --tests installs node and npm; the npm registry must be reachable)"
  exit 77
}
command -v node >/dev/null && command -v npm >/dev/null || cannot "node and npm are not installed"
if [[ ! -f "$CACHE/node_modules/openai/package.json" ]]; then
  mkdir -p "$CACHE"
  npm install --prefix "$CACHE" --no-audit --no-fund --loglevel=error openai@4 >"$TMP/npm.log" 2>&1 ||
    cannot "npm install openai@4 failed: $(tail -3 "$TMP/npm.log")"
fi
echo "ok: openai $(node -p "require('$CACHE/node_modules/openai/package.json').version") with node $(node --version)"

# 2048: the nano3 template's tool instructions alone are ~1100 tokens of this tiny tokenizer.
start_server --checkpoint tests/fixtures/hf/dense --served-model-name tiny --max-seq-len 2048 || finish "openai client checks"
# Node resolves bare imports from the script's folder up, not NODE_PATH: run a copy inside CACHE.
cp "$ROOT/tests/serve_js/client_test.mjs" "$CACHE/client_test.mjs"
node "$CACHE/client_test.mjs" "$URL/v1" >"$TMP/node.log" 2>&1
rc=$?
cat "$TMP/node.log"
[[ $rc -eq 0 ]] || fail "the openai client checks failed (exit $rc)"
grep -q '^all openai client checks passed$' "$TMP/node.log" || fail "the client did not finish"
stop_server TERM
[[ $SERVER_RC -eq 143 ]] && echo "ok: SIGTERM stops the server (exit 143)" || fail "SIGTERM: exit $SERVER_RC"
finish "openai client checks"
