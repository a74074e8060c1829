# Shared by the serve test scripts (after lib.sh): start_server ARGS... runs `nemotron serve ARGS
# --port 0` in the background, waits for its start line and sets SERVER_PID, PORT and
# URL=http://127.0.0.1:PORT; stop_server SIGNAL stops it and sets SERVER_RC. The server's output
# is in $TMP/server.log; a server left running is killed on exit. SERVE_LAUNCH (an array, default
# empty) goes before the binary: a launcher such as (mpirun -np 2) for a tensor-parallel server.
SERVE_LAUNCH=()
start_server() {
  rm -f "$TMP/server.log"  # else a second server's wait may read the first one's port
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "${SERVE_LAUNCH[@]}" "$BIN" serve --port 0 "$@" >"$TMP/server.log" 2>&1 &
  SERVER_PID=$!
  trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; rm -rf "$TMP"' EXIT
  local i
  for ((i = 0; i < 600; ++i)); do
    PORT=$(sed -nE 's|^serving ".*" at http://127\.0\.0\.1:([0-9]+)/v1 .*|\1|p' "$TMP/server.log" 2>/dev/null)
    [[ -n "$PORT" ]] && break
    kill -0 $SERVER_PID 2>/dev/null || { fail "the server exited: $(cat "$TMP/server.log")"; return 1; }
    sleep 0.1
  done
  [[ -n "$PORT" ]] || { fail "no start line in 60 s: $(cat "$TMP/server.log")"; return 1; }
  URL="http://127.0.0.1:$PORT"
}

stop_server() {
  kill -"$1" $SERVER_PID
  wait $SERVER_PID
  SERVER_RC=$?
}
