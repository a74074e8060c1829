#!/usr/bin/env bash
# The report as a browser shows it: `nemotron report` of a tiny run rendered by headless Chromium,
# whose screenshot must not be blank (non-white pixels, and chart-blue pixels from the SVG curves,
# counted by tests/cli/png_pixels.py) and whose console must stay silent (the page runs no script
# and its Content-Security-Policy blocks any fetch, so any console line is a fault). Two controls
# prove the checks can fail: a blank page reads as blank, and a page that tries to load an image
# from the network logs a console line. Exit 77 (skipped, with the reason) without chromium or
# python3: `bash scripts/install-deps.sh --tests` installs both. Usage: report_browser_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$CHROMIUM" ]] || ! command -v python3 >/dev/null; then
  echo "skipped: needs chromium and python3 (bash scripts/install-deps.sh --tests installs them)"
  exit 77
fi

# shot HTML PNG: renders HTML to PNG; the browser's log goes to $TMP/console.log.
shot() {
  local flags=(--headless --disable-gpu --disable-dev-shm-usage --hide-scrollbars --no-first-run --enable-logging=stderr --v=0
    --user-data-dir="$TMP/chrome" --window-size=1200,1600 --screenshot="$2")
  [[ $(id -u) -eq 0 ]] && flags+=(--no-sandbox)  # Chromium refuses to run as root with its sandbox
  rm -f "$2"
  HOME="$TMP/home" timeout 120 "$CHROMIUM" "${flags[@]}" "file://$1" >/dev/null 2>"$TMP/console.log"
  local rc=$?
  [[ $rc -eq 0 && -s "$2" ]] || { fail "chromium on $1: exit $rc, no screenshot: $(grep -v dbus "$TMP/console.log" | tail -5)"; return 1; }
}
console_lines() { grep -c ':CONSOLE' "$TMP/console.log"; }

run="$TMP/run"
expect_ok "tiny pretrain" '^training done' "$BIN" super3 pretrain -c tiny dataset.mock=true dataset.seq_length=32 \
  train.global_batch_size=4 train.micro_batch_size=2 train.eval_interval=2 scheduler.lr_warmup_iters=1 \
  scheduler.lr_wsd_decay_iters=2 train.train_iters=4 checkpoint.save="$run/pretrain"
expect_ok "report" "^report: $run/report.html " "$BIN" report "$run"

if shot "$run/report.html" "$TMP/report.png"; then
  read -r w h nonwhite blue < <(python3 "$ROOT/tests/cli/png_pixels.py" "$TMP/report.png")
  if ((nonwhite * 100 > w * h && blue > 500)); then
    echo "ok: the rendered report is not blank ($nonwhite of $((w * h)) pixels not white, $blue chart-blue)"
  else
    fail "the rendered report looks blank: $nonwhite of $((w * h)) pixels not white, $blue chart-blue"
  fi
  [[ $(console_lines) -eq 0 ]] && echo "ok: the console stays silent" ||
    fail "console messages: $(grep ':CONSOLE' "$TMP/console.log" | head -3)"
fi

# Controls: the same checks on pages that must fail them.
printf '<!DOCTYPE html><html><body></body></html>' >"$TMP/blank.html"
if shot "$TMP/blank.html" "$TMP/blank.png"; then
  read -r w h nonwhite blue < <(python3 "$ROOT/tests/cli/png_pixels.py" "$TMP/blank.png")
  [[ $nonwhite -eq 0 ]] && echo "ok: control: a blank page reads as blank" || fail "control: blank page has $nonwhite non-white pixels"
fi
sed 's|<body>|<body><img src="http://127.0.0.1:9/x.png" alt="">|' "$run/report.html" >"$TMP/fetching.html"
if shot "$TMP/fetching.html" "$TMP/fetching.png"; then
  [[ $(console_lines) -gt 0 ]] && echo "ok: control: a page that fetches logs to the console" ||
    fail "control: the blocked fetch left no console line (is console capture working?)"
fi

finish "report browser checks"
