# Sourced by the benchmark and end-to-end scripts that start servers (tachyon
# serve, mock_upstream, anything whose first stdout line is "listening on URL").
# Needs $work (a scratch folder) and the array pids=() in the caller; every
# server started is stopped by stop_servers (run it from an EXIT trap).

# start NAME [CPU] -- COMMAND...: starts COMMAND (pinned to CPU with taskset when
# given), waits for its "listening on" line; sets $url and ${NAME}_pid.
start() {
  local name=$1 cpu=
  shift
  if [ "$1" != "--" ]; then cpu=$1; shift; fi
  shift  # --
  if [ -n "$cpu" ]; then
    taskset -c "$cpu" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  else
    "$@" >"$work/$name.out" 2>"$work/$name.err" &
  fi
  pids+=($!)
  eval "${name}_pid=$!"
  for _ in $(seq 600); do
    url=$(sed -n 's/^listening on //p' "$work/$name.out" | head -1)
    [ -n "$url" ] && return 0
    kill -0 "$!" 2>/dev/null || break
    sleep 0.05
  done
  echo "$name did not start: $*"; cat "$work/$name.err"; exit 1
}

stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
