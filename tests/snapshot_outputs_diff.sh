#!/usr/bin/env bash
# Byte-for-byte comparison of two gpusim binaries on every snapshot pickle in
# the checkout (issue 35: the native pickle reader against the
# tools/snapshot_to_json.py converter it replaced). For each file under
# traces/, validation/ and tests/ named *.pickle*: `replay`, `explain` and
# `replay --format json`: stdout, stderr and exit code must be the same, or
# both must refuse the file (exit 1; the messages are the new reader's own).
# Not a ctest (it needs the old binary); docs/replay.md gives the last run.
# Usage: tests/snapshot_outputs_diff.sh OLD_GPUSIM NEW_GPUSIM [SOURCE_DIR]
set -u
old=$1
new=$2
src=${3:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=0 same=0 refused=0 differ=0
cd "$src" || exit 2
while IFS= read -r f; do
  files=$((files + 1))
  verdict=same
  for args in "replay $f" "explain $f" "replay $f --format json"; do
    # shellcheck disable=SC2086
    "$old" $args >"$tmp/old.out" 2>"$tmp/old.err"
    old_rc=$?
    # shellcheck disable=SC2086
    "$new" $args >"$tmp/new.out" 2>"$tmp/new.err"
    new_rc=$?
    if [ "$old_rc" = "$new_rc" ] && cmp -s "$tmp/old.out" "$tmp/new.out" && cmp -s "$tmp/old.err" "$tmp/new.err"; then
      continue
    fi
    # A pickle both refuse (exit 1, nothing on stdout): the messages are the
    # reader's own (byte offset, opcode) where the converter's were Python's.
    if [ "$old_rc" = 1 ] && [ "$new_rc" = 1 ] && [ ! -s "$tmp/old.out" ] && [ ! -s "$tmp/new.out" ]; then
      [ "$verdict" = same ] && verdict=refused
      echo "both refuse: gpusim $args"
      echo "  old: $(head -c 300 "$tmp/old.err")"
      echo "  new: $(head -c 300 "$tmp/new.err")"
      continue
    fi
    verdict=differ
    echo "DIFFERS: gpusim $args (exit $old_rc -> $new_rc)"
    diff "$tmp/old.err" "$tmp/new.err" | head -5
    diff "$tmp/old.out" "$tmp/new.out" | head -5
  done
  case $verdict in
    same) same=$((same + 1)) ;;
    refused) refused=$((refused + 1)) ;;
    *) differ=$((differ + 1)) ;;
  esac
done < <(find traces/ validation/ tests/ -name '*.pickle*' | sort)
echo "$files pickles: $same byte-identical in all 3 commands, $refused refused by both, $differ differ"
[ "$differ" = 0 ]
