# Shared by the CLI test scripts: run the built `nemotron` as a user would and check exit codes,
# stdout and the one-line `error:` messages. Source it with the binary's path as the argument:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
# It sets BIN (absolute), ROOT (the repository, also the working directory) and TMP (removed on
# exit), and NEMOTRON_ARTIFACTS_ROOT=$TMP/artifacts. End the script with `finish "what was checked"`.
BIN=${1:?usage: $(basename "$0") path/to/nemotron}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")  # absolute: the scripts change directory
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT"
# Stages publish artifacts (cli/artifact_publish.h) to ./runs/artifacts by default: a test's go
# to its own store, not the repository's.
export NEMOTRON_ARTIFACTS_ROOT="$TMP/artifacts"

failures=0
fail() {
  echo "FAIL: $1"
  failures=$((failures + 1))
}

# expect_ok NAME PATTERN CMD...: exit 0 and stdout matches the extended regex PATTERN.
expect_ok() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 0 ]]; then fail "$name: exit $rc: $(cat "$TMP/err")"; return; fi
  grep -Eq -- "$pattern" "$TMP/out" || { fail "$name: stdout does not match /$pattern/: $(tail -5 "$TMP/out")"; return; }
  echo "ok: $name"
}

# expect_error NAME MESSAGE CMD...: exit 2, nothing on stdout, exactly "error: MESSAGE" on stderr.
expect_error() {
  local name=$1 message=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit $rc, expected 2 (stderr: $(cat "$TMP/err"))"; return; fi
  [[ -s "$TMP/out" ]] && { fail "$name: unexpected stdout: $(head -c 300 "$TMP/out")"; return; }
  local got
  got=$(cat "$TMP/err")
  [[ "$got" == "error: $message" ]] || { fail "$name: stderr was [$got], expected [error: $message]"; return; }
  echo "ok: $name"
}

# expect_usage_error NAME PATTERN CMD...: the command line is rejected with exit 2 (bad input, the
# same code as every other bad input), stderr matches.
expect_usage_error() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit $rc, expected 2 (a usage error)"; return; fi
  grep -Eq -- "$pattern" "$TMP/err" || { fail "$name: stderr does not match /$pattern/: $(cat "$TMP/err")"; return; }
  echo "ok: $name"
}

# expect_failure NAME PATTERN MESSAGE_PATTERN CMD...: exit 1, stdout matches PATTERN, stderr MESSAGE_PATTERN.
expect_failure() {
  local name=$1 pattern=$2 message=$3
  shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 1 ]]; then fail "$name: exit $rc, expected 1 (stderr: $(cat "$TMP/err"))"; return; fi
  grep -Eq -- "$pattern" "$TMP/out" || { fail "$name: stdout does not match /$pattern/"; return; }
  grep -Eq -- "$message" "$TMP/err" || { fail "$name: stderr does not match /$message/: $(cat "$TMP/err")"; return; }
  echo "ok: $name"
}

# finish WHAT: the script's exit status and last line.
finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "all $1 passed"
}
