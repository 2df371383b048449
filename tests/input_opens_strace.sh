#!/usr/bin/env bash
# Note [One sniffer, one open] (sim/import/input.h), seen from outside: the
# gpusim binary opens the input of replay, viz, explain and validate once
# (openat(2) of its path under strace -f), whatever number of passes the
# replay takes (bert-small: 3; main opened it 14 times, issue 28). The
# in-process counters of tests/input_opens_test.cc pin the same without
# strace. Exit 77 (ctest: skipped) where strace is not installed or cannot
# trace (a container without ptrace).
#
# Usage: tests/input_opens_strace.sh BUILD/gpusim SOURCE_DIR
set -euo pipefail
gpusim=$1
src=$2
if ! command -v strace >/dev/null || ! strace -f -e trace=openat -o /dev/null true 2>/dev/null; then
  echo "SKIP: strace is not installed or cannot trace here"; exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
# opens FILE ARGS...: how many times `gpusim ARGS` opened FILE.
opens() {
  local file=$1; shift
  # LeakSanitizer cannot run under ptrace (the sanitizer build: `make
  # test-sanitize`); leaks are checked by every other test there.
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -e trace=openat -o "$out/strace" "$gpusim" "$@" >/dev/null 2>&1 || { echo "FAIL: gpusim $*" >&2; return 1; }
  grep -c -F "\"$file\"" "$out/strace" || true
}
rec=$src/traces/recorded
for args in "replay $rec/tracelens_h100_bert-small_inference.pt.trace.json.gz" \
            "replay $rec/kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz" \
            "replay $rec/cs336_gpt_training_snapshot.pickle" \
            "replay $rec/hta_memory_timeline_raw.json.gz" \
            "explain $rec/tracelens_h100_bert-small_inference.pt.trace.json.gz" \
            "validate $rec/tracelens_h100_bert-small_inference.pt.trace.json.gz" \
            "viz $rec/tracelens_h100_bert-small_inference.pt.trace.json.gz --out $out/viz" \
            "run $src/tests/fuzz/engine_replay/alloc_free.trace"; do
  read -r -a a <<<"$args"
  if ! n=$(opens "${a[1]}" "${a[@]}"); then
    fail=1
  elif [ "$n" != 1 ]; then
    echo "FAIL: gpusim $args opened ${a[1]} $n times (want 1)"; fail=1
  else
    echo "ok: gpusim $args: 1 open"
  fi
done
exit $fail
