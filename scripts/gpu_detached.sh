#!/usr/bin/env bash
# Runs one command past a device call's 10-minute limit, in calls that each wait part of it.
#   bash scripts/gpu_detached.sh DIR WAIT [-- COMMAND ...]
# With a COMMAND (the first call), it starts COMMAND in its own process session, which a device machine keeps running
# after the call returns while the machine stays warm (a plain background job is killed with the call), its output
# in DIR/log.txt; then, with or without one, it waits up to WAIT seconds for the command to end. It prints the log's
# last lines and exits with the command's status once it has ended, 75 while it still runs, 2 when nothing was
# started in DIR. A later call with the same DIR and no COMMAND waits again: make it at once, since an idle machine
# goes back within a minute (docs/gpu.md, "Running the GPU check").
set -uo pipefail
dir="${1:?usage: gpu_detached.sh DIR WAIT [-- COMMAND ...]}"
wait_seconds="${2:?usage: gpu_detached.sh DIR WAIT [-- COMMAND ...]}"
shift 2
mkdir -p "$dir"
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] && shift
  if [ -f "$dir/pid" ]; then
    echo "gpu_detached.sh: a command was already started in $dir (pid $(cat "$dir/pid")): waiting for it"
  else
    # The status goes to exit.tmp first, so that a waiter never reads a half-written file.
    setsid bash -c '"$@"; echo $? >"$0/exit.tmp"; mv "$0/exit.tmp" "$0/exit"' "$dir" "$@" \
      >"$dir/log.txt" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    echo "gpu_detached.sh: started pid $(cat "$dir/pid"): $*"
  fi
fi
if [ ! -f "$dir/pid" ]; then
  echo "gpu_detached.sh: nothing was started in $dir" >&2
  exit 2
fi
end=$(( SECONDS + wait_seconds ))
while [ ! -f "$dir/exit" ] && [ "$SECONDS" -lt "$end" ]; do sleep 1; done
tail -n 25 "$dir/log.txt"
if [ -f "$dir/exit" ]; then
  echo "gpu_detached.sh: ended with status $(cat "$dir/exit")"
  exit "$(cat "$dir/exit")"
fi
echo "gpu_detached.sh: still running after $wait_seconds s (pid $(cat "$dir/pid"))"
exit 75
