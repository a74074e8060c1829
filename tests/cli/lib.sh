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

# sft_setup PRETRAIN_STEPS EXAMPLES HELDOUT: what the SFT tests fine-tune, made here: the tiny
# pretraining data and its tokenizer in $TMP/prep, PRETRAIN_STEPS steps of pretraining on it in
# $TMP/pre (the base; 0: none) and an SFT set of EXAMPLES conversations with HELDOUT held-out
# prompts in $TMP/sft. Sets the array `sft_data`: the SFT command's data set and base.
sft_setup() {
  local steps=$1 examples=$2 heldout=$3
  expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/prep"
  sft_data=(dataset.dataset_root="$TMP/sft" checkpoint.pretrained_checkpoint=)
  if ((steps > 0)); then
    expect_ok "pretrain $steps step(s): the SFT base" "^ iteration +$steps/ +$steps " "$BIN" super3 pretrain -c tiny \
      dataset.per_split_data_args_path="$TMP/prep/blend.json" train.train_iters="$steps" train.eval_iters=0 \
      train.eval_interval=0 scheduler.lr_warmup_iters=$((steps > 1 ? 1 : 0)) scheduler.lr_wsd_decay_iters=1 \
      checkpoint.save="$TMP/pre" logger.tensorboard_dir=null
    sft_data[1]=checkpoint.pretrained_checkpoint="$TMP/pre"
  fi
  expect_ok "data prep sft" 'efficiency' "$BIN" super3 data prep sft -c tiny output_dir="$TMP/sft" \
    tokenizer.model="$TMP/prep/tokenizer/tokenizer.json" sources.0.generator.num_examples="$examples" \
    heldout_examples="$heldout"
}

# finish WHAT: the script's exit status and last line.
finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "all $1 passed"
}
