#!/usr/bin/env bash
# Environment faults are never silent (issue 25 §4), as a user meets them with `nemotron <family>
# rl` and a NeMo Gym resources server on 127.0.0.1: a server that is down is one `error:` line
# naming env.url and the URL, exit 1, within seconds, nothing written; a server that answers 500
# to every rollout logs the reason once per kind in the step, stops the run with exit 1 before
# training on the step, writes an env_fault record to metrics.jsonl, and saves and publishes no
# model; with env.max_unscored_fraction 1 the same step trains nothing and the run goes on (the
# bound is what stops it; the artifact check sees a published model). The policy starts from
# random weights (no SFT chain needed).
# Usage: rl_env_fault_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
cd "$TMP"

expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir=runs/tiny/data/pretrain
expect_ok "data prep rl" 'manifest: ' "$BIN" super3 data prep rl -c tiny output_dir=runs/tiny/data/rl \
  sources.0.generator.num_examples=16 val_rows=4
recipe=$(cd "$ROOT" && pwd)/recipes/super3/rl/tiny.yaml

# A loopback port nothing listens on, and a resources server that answers 500 to every POST (its
# GET / is a 404, as a FastAPI server without that route answers: the health check passes).
down_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
cat >"$TMP/server500.py" <<'EOF'
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404); self.end_headers(); self.wfile.write(b'{"detail":"Not Found"}')
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(500); self.send_header("Content-Type", "text/plain"); self.end_headers()
        self.wfile.write(b"Internal Server Error")
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
EOF
python3 "$TMP/server500.py" "$TMP/port500" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do [[ -s "$TMP/port500" ]] && break; sleep 0.05; done
port500=$(cat "$TMP/port500")

rl=("$BIN" super3 rl -c tiny 'policy.model_name=""'
  policy.tokenizer.name=runs/tiny/data/pretrain/tokenizer/tokenizer.json
  data.train_jsonl_fpath=runs/tiny/data/rl/train.jsonl data.validation_jsonl_fpath=runs/tiny/data/rl/val.jsonl
  grpo.num_prompts_per_step=2 grpo.num_generations_per_prompt=4 policy.train_global_batch_size=8
  policy.train_micro_batch_size=4 policy.generation.max_new_tokens=8 policy.max_total_sequence_length=96
  grpo.max_num_steps=2 grpo.val_period=0 grpo.val_at_start=false checkpointing.save_period=1 policy.generation.top_k=)

# --- a server that is down: the health check, before anything is loaded or written ---------------
down="http://127.0.0.1:$down_port"
start=$(date +%s)
"${rl[@]}" "env={name: nemo_gym, url: \"$down\", max_retries: 0}" checkpointing.checkpoint_dir=runs/tiny/rl_down \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
want="error: $recipe: env.url: the NeMo Gym resources server at $down does not answer: GET /: cannot connect to $down; start it or fix the URL (checked before the first step; nothing was trained or written)"
if [[ $rc -ne 1 ]]; then fail "server down: exit $rc, expected 1: $(cat "$TMP/err")"
elif [[ "$(cat "$TMP/err")" != "$want" ]]; then fail "server down: stderr was [$(cat "$TMP/err")], expected [$want]"
elif [[ -s "$TMP/out" ]]; then fail "server down: unexpected stdout: $(head -c 300 "$TMP/out")"
else echo "ok: server down"; fi
(($(date +%s) - start <= 10)) || fail "server down: the health check took $(($(date +%s) - start)) s"
[[ -e runs/tiny/rl_down ]] && fail "server down: the refused run wrote runs/tiny/rl_down"

# --- a server that answers 500: the reason once per kind, a stop past the bound, nothing saved ----
expect_failure "server answers 500" \
  "^  step 1: 8 of 8 rows unscored \\(HTTP 500\\): POST /seed_session: HTTP 500: Internal Server Error\$" \
  "^error: step 1: the environment \"nemo_gym\" could not score 8 of 8 rows \\(100\\.0%\\), more than env\\.max_unscored_fraction 0\\.05 allows; first reason \\(HTTP 500\\)" \
  "${rl[@]}" "env={name: nemo_gym, url: \"http://127.0.0.1:$port500\", max_retries: 0}" \
  checkpointing.checkpoint_dir=runs/tiny/rl_500
[[ $(grep -c 'rows unscored' "$TMP/out") -eq 1 ]] || fail "server answers 500: the reason is not logged once: $(cat "$TMP/out")"
grep -q '^step 1/' "$TMP/out" && fail "server answers 500: step 1 was trained: $(grep '^step 1/' "$TMP/out")"
compgen -G "runs/tiny/rl_500/iter_*" >/dev/null && fail "server answers 500: a checkpoint was saved: $(ls runs/tiny/rl_500)"
grep -q '"type":"env_fault"' runs/tiny/rl_500/metrics.jsonl 2>/dev/null ||
  fail "server answers 500: no env_fault record in metrics.jsonl"
grep -q '"unscored_rows":8' runs/tiny/rl_500/metrics.jsonl 2>/dev/null || fail "server answers 500: no unscored count in metrics.jsonl"
"$BIN" artifacts list >"$TMP/artifact_list" 2>&1
grep -q "rl_500" "$TMP/artifact_list" && fail "server answers 500: a model artifact was published: $(cat "$TMP/artifact_list")"

# --- the bound is what stops it: at 1, the same server's step trains nothing, saves, publishes --
expect_ok "bound at 1" "^  step 1: no token to train on|has no token to train on" \
  "${rl[@]}" "env={name: nemo_gym, url: \"http://127.0.0.1:$port500\", max_retries: 0, max_unscored_fraction: 1}" \
  checkpointing.checkpoint_dir=runs/tiny/rl_500_allowed grpo.max_num_steps=1
grep -Eq '^step 1/1 .* 8 unscored \(not trained\)' "$TMP/out" || fail "bound at 1: no unscored count in the step line: $(cat "$TMP/out")"
"$BIN" artifacts list >"$TMP/artifact_list" 2>&1
grep -q "rl_500_allowed" "$TMP/artifact_list" || fail "bound at 1: no model artifact listed: $(cat "$TMP/artifact_list")"

finish "rl environment fault checks"
