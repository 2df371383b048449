#!/usr/bin/env bash
# Whole-process time of `gpusim run configs/llama7b.yaml` paired against its
# yardstick, `gpusim --version` (process start-up alone: the loader, the
# shared libraries, the static initialisers, CLI11's parse), issue 35's
# "run within 2x of --version". Each round runs every binary's two commands
# once, alternating, so that load from other processes falls on all of
# them alike; prints each command's median and the run/--version ratio.
# A second binary (e.g. main's build) is measured in the same rounds.
#
#   bench/compare_startup.sh GPUSIM [BASELINE_GPUSIM] [ROUNDS (default 41)]
#
# Times are wall clock from bash's $EPOCHREALTIME around each command
# (fork and exec included, output to /dev/null).
set -u
bins=("${1:?gpusim binary}")
rounds=41
if [ $# -ge 2 ]; then
  if [[ $2 =~ ^[0-9]+$ ]]; then rounds=$2; else bins+=("$2"); fi
fi
[ $# -ge 3 ] && rounds=$3
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
for b in "${bins[@]}"; do
  "$b" --version >/dev/null || { echo "compare_startup: $b --version failed" >&2; exit 1; }
  "$b" run configs/llama7b.yaml >/dev/null || { echo "compare_startup: $b run failed" >&2; exit 1; }
done

# Microseconds of one run of "$@".
elapsed_us() {
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  local t1=$EPOCHREALTIME
  echo $(( (${t1/./} - ${t0/./}) ))
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

work=$(mktemp -d /tmp/compare_startup.XXXXXX)
trap 'rm -rf "$work"' EXIT
for ((r = 0; r < rounds; ++r)); do
  for k in "${!bins[@]}"; do
    elapsed_us "${bins[$k]}" --version >>"$work/version.$k"
    elapsed_us "${bins[$k]}" run configs/llama7b.yaml >>"$work/run.$k"
  done
done
echo "rounds: $rounds (medians, wall clock)"
for k in "${!bins[@]}"; do
  v=$(median <"$work/version.$k")
  s=$(median <"$work/run.$k")
  awk -v b="${bins[$k]}" -v v="$v" -v s="$s" 'BEGIN {
    printf "%s\n  --version                   %8.2f ms\n  run configs/llama7b.yaml    %8.2f ms\n  ratio run / --version       %8.2f\n",
           b, v / 1000, s / 1000, s / v }'
done
