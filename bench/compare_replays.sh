#!/usr/bin/env bash
# Byte-for-byte comparison of `gpusim replay` between two binaries (a
# baseline, e.g. main's build, and a candidate) on every shipped trace the
# replay reads: Kineto JSON(.gz), memory snapshots (.pickle / JSON) and
# memory timelines under traces/, validation/ and tests/. Each trace runs
# under several settings (text and JSON output, cold start, address check,
# the pytorch_caching options that take other paths: expandable segments,
# max_split_size + roundup_power2_divisions, a memory fraction with garbage
# collection) and, once, with --snapshot (the written pickle is compared
# too). stdout, stderr (with the binaries' paths and the temporary folder
# masked) and the exit status must all match; traces the replay rejects
# count too (their error must be the same).
#
#   bench/compare_replays.sh BASELINE_GPUSIM CANDIDATE_GPUSIM [JOBS]
#
# Prints each difference and a summary: the number of (trace, setting)
# runs compared, how many exited 0, and how many differ; exits 1 on any
# difference.
set -u
base=${1:?baseline gpusim binary}
cand=${2:?candidate gpusim binary}
jobs=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/compare_replays.XXXXXX)
trap 'rm -rf "$work"' EXIT

settings=(
  ""
  "--format json"
  "--cold-start --format json"
  "--check-addresses --format json"
  "--set allocator.expandable_segments=true --format json"
  "--set allocator.max_split_size_mb=128 --set allocator.roundup_power2_divisions=4 --format json"
  "--set allocator.per_process_memory_fraction=0.5 --set allocator.garbage_collection_threshold=0.6 --format json"
  "--set allocator.max_split_size_mb=64 --set allocator.expandable_segments=true --cold-start"
  "SNAPSHOT"
)

cd "$root"
mapfile -t traces < <(find traces/ validation/ tests/ \( -name '*.json*' -o -name '*.pickle*' \) -type f | sort)

one() {  # one BINARY TAG TRACE SETTING_INDEX
  local bin=$1 tag=$2 trace=$3 k=$4
  local setting=${settings[$k]}
  local key out
  key=$(printf '%s' "$trace" | tr '/' '_').$k
  out=$work/$tag/$key
  mkdir -p "$out"
  if [ "$setting" = SNAPSHOT ]; then
    timeout 600 "$bin" replay "$trace" --snapshot "$out/snap.pickle" >"$out/stdout" 2>"$out/stderr"
  else
    # shellcheck disable=SC2086
    timeout 600 "$bin" replay "$trace" $setting >"$out/stdout" 2>"$out/stderr"
  fi
  echo $? >"$out/rc"
  sed -i -e "s#$bin#GPUSIM#g" -e "s#$work/$tag#WORK#g" "$out/stdout" "$out/stderr"
}
export -f one
export work
tasks=$work/tasks
: >"$tasks"
for t in "${traces[@]}"; do
  for k in "${!settings[@]}"; do
    echo "$base base $t $k" >>"$tasks"
    echo "$cand cand $t $k" >>"$tasks"
  done
done
# Interleaved: each baseline run next to its candidate run.
# shellcheck disable=SC2016
SETTINGS=$(declare -p settings) xargs -P "$jobs" -L 1 bash -c 'eval "$SETTINGS"; one "$@"' _ <"$tasks"

# shellcheck source=bench/compare_common.sh
. "$root/bench/compare_common.sh"
for d in "$work"/base/*; do
  compare_run "$d" "$work/cand/$(basename "$d")" "$(basename "$d")"
done
echo "traces: ${#traces[@]}; settings: ${#settings[@]}; runs compared: $compared (exit 0 in both: $ok); differing: $differ"
[ "$differ" = 0 ]
