#!/usr/bin/env bash
# Compares every `gpusim replay` output of two gpusim binaries, byte for
# byte: stdout, stderr and the exit status, text and --format json, with the
# default options, --cold-start and --allocator bfc, on every shipped
# recorded trace (traces/recorded, validation/*/kineto, tests/data, the fuzz
# corpora's Kineto and memory-timeline seeds) and on any further traces
# given (e.g. the benchmark's synthetic ones). A change to how a trace is
# read or replayed that must not change a result is checked with it:
#   tools/replay_diff.sh OLD/gpusim NEW/gpusim [MORE_TRACES...]
# Prints one line per difference and the count compared; exits 1 on any.
set -u
old=$1 new=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
traces=()
for f in "$root"/traces/recorded/*.json.gz "$root"/traces/recorded/*.pickle "$root"/validation/*/kineto/*.gz \
         "$root"/tests/data/kernel_classes_h200/*.gz "$root"/tests/fuzz/kineto/* \
         "$root"/tests/fuzz/regressions/kineto/* "$root"/tests/fuzz/memory_timeline/* "$@"; do
  [[ -f $f ]] && traces+=("$f")
done
compared=0 differ=0
for t in "${traces[@]}"; do
  for opts in "" "--cold-start" "--allocator bfc"; do
    for fmt in text json; do
      # shellcheck disable=SC2086
      "$old" replay "$t" $opts --format "$fmt" >"$work/old.out" 2>"$work/old.err"
      echo "rc $?" >>"$work/old.err"
      # shellcheck disable=SC2086
      "$new" replay "$t" $opts --format "$fmt" >"$work/new.out" 2>"$work/new.err"
      echo "rc $?" >>"$work/new.err"
      compared=$((compared + 1))
      if ! cmp -s "$work/old.out" "$work/new.out" || ! cmp -s "$work/old.err" "$work/new.err"; then
        differ=$((differ + 1))
        echo "DIFFERS: $t $opts --format $fmt"
      fi
    done
  done
done
echo "$compared outputs compared on ${#traces[@]} traces, $differ differ"
[[ $differ -eq 0 ]]
