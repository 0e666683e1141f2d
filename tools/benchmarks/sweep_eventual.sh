#!/usr/bin/env bash
# Sweep the wait-primitive benchmark over waiter counts and write one .dat file.
#
# Usage: sweep_eventual.sh [-d SECONDS] [-i INTERVAL_MS] [-m block|spin] [-o FILE.dat] BINARY [WAITERS...]
#   BINARY   the benchmark command, e.g. .venv/bin/recbench-eventual-bench (it may be a launcher
#            plus the binary in one quoted word: "taskset -c 0 .venv/bin/recbench-eventual-bench")
#   WAITERS  waiter counts to run (default 100 200 ... 1000)
# Defaults: -d 5 -i 1 -m block, -o sweep-eventual-bench.<pid>.dat in the current directory.
# The .dat starts with the benchmark's '#' header line, then one row per waiter count;
# tools/benchmarks/plot_eventual.py FILE.dat draws FILE.dat.rate.png and FILE.dat.cpu.png.
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

duration=5 interval=1 mode=block out=""
while getopts "d:i:m:o:h" opt; do
    case "$opt" in
        d) duration=$OPTARG ;;
        i) interval=$OPTARG ;;
        m) mode=$OPTARG ;;
        o) out=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
binary=$1
shift
case "$mode" in block|spin) ;; *) echo "sweep_eventual.sh: -m $mode is neither block nor spin" >&2; exit 2 ;; esac
waiters=("$@")
[ ${#waiters[@]} -gt 0 ] || waiters=(100 200 300 400 500 600 700 800 900 1000)
for n in "${waiters[@]}"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "sweep_eventual.sh: waiter count '$n' is not a positive integer" >&2; exit 2; }
done
[ -n "$out" ] || out="sweep-eventual-bench.$$.dat"

echo "writing results to $out"
: > "$out"
header_done=0
for n in "${waiters[@]}"; do
    echo "... running benchmark with $n waiters ($mode)"
    # shellcheck disable=SC2086  # BINARY may carry a launcher prefix
    result=$($binary -d "$duration" -i "$interval" -n "$n" --wait-mode "$mode")
    if [ $header_done -eq 0 ]; then
        grep '^#' <<<"$result" >> "$out"
        header_done=1
    fi
    grep -v '^#' <<<"$result" >> "$out"
done
echo "results are in $out"
